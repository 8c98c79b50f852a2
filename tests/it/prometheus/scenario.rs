//! The traffic the live test runs so that every series the rules and
//! panels read has data: a gateway with faults in place, rounds of
//! journeys, refused input and webhooks, a rolled-back rollout, and a
//! refused configuration reload.

use idgate::{
    channels::{BreakerConfig, rollout::RolloutConfig},
    domain::Operation,
    proto::v1,
    sandbox::{FaultAction, FaultRule, samples},
};

use super::*;
use crate::support::gateway::{TestGateway, secret_file};

const WEBHOOK_USER: &str = "vendor";

/// The gateway of the scenario: the shared test gateway, with no
/// completion notices (watches fall back to polling, quickly), a webhook
/// receiver for the refused notices, and a primary whose breaker opens at
/// the third fault and stays open.
pub(super) async fn start_gateway() -> TestGateway {
    TestGateway::start_with(|config| {
        config.sandbox.webhook.enabled = false;
        config.webhook.basic_user = Some(WEBHOOK_USER.into());
        config.webhook.basic_password_file =
            Some(secret_file("webhook-password-for-prometheus-test"));
        config.embedded_channels.breaker = BreakerConfig {
            failure_threshold: 3,
            minimum_calls: 3,
            failure_rate_percent: 100,
            base_ejection_ms: 600_000,
            max_ejection_ms: 600_000,
            ..BreakerConfig::default()
        };
        config.rollout = RolloutConfig {
            tick_ms: 50,
            lease_ms: 500,
            min_step_secs: 0,
        };
    })
    .await
}

/// A configuration reload refused (two channels of one name): it changes
/// nothing and is counted `refused`, with no reload applied.
pub(super) fn refused_reload(gw: &TestGateway) {
    let config = idgate::config::Config {
        channels: vec![gw.sandbox_channel_specs()[0].clone(); 2],
        ..Default::default()
    };
    gw.gateway.reload_from(&config).expect_err("refused");
}

/// A guarded rollout to the primary, whose breaker the rounds left open:
/// the driver rolls it back at once (`circuit_open`).
pub(super) async fn rolled_back_rollout(gw: &TestGateway) {
    let mut admin = gw.admin().await;
    admin
        .start_rollout(v1::StartRolloutRequest {
            to: "primary".into(),
            from: "alternative".into(),
            steps: vec![50, 100],
            step_duration: Some(prost_types::Duration {
                seconds: 0,
                nanos: 0,
            }),
            min_sessions: Some(1),
            max_error_rate: None,
            max_pass_rate_drop: None,
            force: false,
        })
        .await
        .expect("start rollout");
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        let rollout = admin
            .get_rollout(v1::GetRolloutRequest {})
            .await
            .expect("get rollout")
            .into_inner()
            .rollout
            .expect("the rollout");
        if rollout.state() == v1::RolloutState::RolledBack {
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "not rolled back: {rollout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(gw: &TestGateway) -> v1::CreateJourneyResponse {
    gw.journeys()
        .create_journey(person())
        .await
        .expect("create journey")
        .into_inner()
}

async fn watch(gw: &TestGateway, journey_ref: &str) -> tonic::Streaming<v1::WatchJourneyResponse> {
    gw.journeys()
        .watch_journey(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                journey_ref.into(),
            )),
        })
        .await
        .expect("watch journey")
        .into_inner()
}

fn person() -> v1::CreateJourneyRequest {
    let p = samples::HAPPY_PERSON;
    let parts: Vec<&str> = p.birth_date.split('/').collect();
    v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
        customer_reference: "PROMTEST".into(),
        operator_profile: String::new(),
        request_id: String::new(),
    }
}

/// Reads a watch stream to its end; true when it delivered a final result.
async fn drain(mut stream: tonic::Streaming<v1::WatchJourneyResponse>) -> bool {
    tokio::time::timeout(WAIT, async {
        let mut complete = false;
        loop {
            match stream.message().await {
                Ok(Some(item)) => complete |= item.result.is_some(),
                Ok(None) => return complete,
                Err(status) => panic!("watch failed: {status:?}"),
            }
        }
    })
    .await
    .expect("the watch ends in time")
}

/// One round of traffic. The faults stay in place across rounds (the
/// primary answers 503 to session starts; the alternative answers in
/// contingency); each round makes every failure series grow, so rates over
/// the rounds are non-zero:
/// - two journeys watched and completed (watches fall back to polling:
///   the sandbox sends no webhook), their 3D sessions failing over from
///   the primary (its breaker opens in the second round);
/// - one refused CreateJourney (INVALID_ARGUMENT);
/// - one 3D verification answered 500 on the alternative (OUTCOME_UNKNOWN);
/// - in the second round, one verification slower than 2.5 s;
/// - result reads failing twice (503) under GetJourneyResult;
/// - two webhook notices with wrong credentials.
pub(super) async fn scenario_round(gw: &TestGateway, round: u32) {
    // Refused input.
    let mut bad = person();
    bad.cpf = "123".into();
    let err = gw.journeys().create_journey(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

    // Two watched journeys to completion.
    let a = create(gw).await;
    let b = create(gw).await;
    let (watch_a, watch_b) = (
        watch(gw, &a.journey_ref).await,
        watch(gw, &b.journey_ref).await,
    );
    if round == 1 {
        gw.sandbox()
            .add_fault(
                FaultRule::new(FaultAction::Delay)
                    .on(Operation::Liveness3D)
                    .channel("alternative")
                    .latency_ms(3_000)
                    .times(1),
            )
            .expect("slow verification fault");
    }
    for created in [&a, &b] {
        let verdict = gw
            .run_3d(&created.appkey, "prometheus-test")
            .await
            .expect("3D proof");
        assert!(verdict.valid, "{verdict:?}");
        gw.submit_rg(&created.appkey).await;
    }
    gw.clock.advance(Duration::from_secs(3));
    let (done_a, done_b) = tokio::join!(drain(watch_a), drain(watch_b));
    assert!(done_a && done_b, "both watches delivered a result");

    // A verification that fails on the alternative.
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 500 })
                .on(Operation::Liveness3D)
                .channel("alternative")
                .times(1),
        )
        .expect("verification fault");
    let failing = create(gw).await;
    let err = gw
        .run_3d(&failing.appkey, "prometheus-test")
        .await
        .unwrap_err();
    assert_ne!(err.code(), tonic::Code::Ok);

    // Result reads failing (the read is retried; the RPC may succeed).
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::Result)
                .times(2),
        )
        .expect("result fault");
    let _ = gw
        .journeys()
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: a.appkey.clone(),
        })
        .await;

    // Forged notices.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    for _ in 0..2 {
        let response = http
            .post(format!(
                "http://{}/webhooks/journey",
                gw.gateway.http_addr()
            ))
            .basic_auth(WEBHOOK_USER, Some("not-the-password"))
            .header("content-type", "application/json")
            .body(r#"{"Status":"Completo","Appkey":"forged"}"#)
            .send()
            .await
            .expect("post webhook");
        assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
    }
}
