//! The per-channel figures `idgate channels compare` reads: summed over
//! the replicas with the pass rates and latencies set up per channel, the
//! same verifications in `/metrics`, a window within the retention, and
//! the admin token required.

use std::collections::HashMap;

use futures_util::{StreamExt as _, stream};
use idgate::{
    channels::{RoutingMode as Mode, WeightedSplit},
    cli::{channels::AdminTarget, compare},
    domain::{JourneyRef, Operation},
    proto::v1,
    sandbox::{FaultAction, FaultRule, samples},
};
use serde_json::Value;
use tonic::Code;

use crate::support::{gateway::*, metrics};

/// What a test journey was set up to get.
struct Planned {
    on: usize,
    channel: String,
    valid: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_compare_sums_the_replicas_and_shows_the_pass_rates_and_latencies_set_up_per_channel()
 {
    let gw = TestGateway::start().await;
    let sibling = gw.sibling().await;
    let replicas = [&gw, &sibling];
    let split: &[(&str, u32)] = &[("primary", 50), ("alternative", 50)];
    for r in replicas {
        r.set_weighted(split).await.expect("weighted mode");
    }
    let Mode::Weighted(weighted) = "weighted:primary=50,alternative=50"
        .parse::<Mode>()
        .unwrap()
    else {
        unreachable!()
    };
    // The alternative answers slowly, and `invalid` for the CPFs of
    // REGISTRY_NEGATIVE; the primary answers `valid` for everyone.
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Delay)
                .on(Operation::Liveness3D)
                .channel("alternative")
                .latency_ms(300),
        )
        .expect("latency on the alternative");

    let planned: Vec<Planned> = stream::iter(0..60)
        .map(|i| run_journey(&replicas, &weighted, i))
        .buffer_unordered(8)
        .collect()
        .await;
    let tally = |channel: &str, valid: bool, on: Option<usize>| {
        planned
            .iter()
            .filter(|p| p.channel == channel && p.valid == valid && on.is_none_or(|o| o == p.on))
            .count() as u64
    };
    let alt_invalid = tally("alternative", false, None);
    let alt_valid = tally("alternative", true, None);
    assert!(alt_invalid > 0 && alt_valid > 0, "both outcomes set up");
    assert_eq!(tally("primary", false, None), 0);

    // Both replicas, summed by the CLI.
    let targets = || {
        replicas
            .iter()
            .map(|r| AdminTarget::from(&r.admin_addr()))
            .collect::<Vec<_>>()
    };
    let json = compare::compare(targets(), &admin_token(), 3_600, true)
        .await
        .expect("compare --json");
    let figures: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(figures["gateways"], 2);
    let row = |name: &str| {
        figures["channels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["channel"] == name)
            .unwrap_or_else(|| panic!("{name} in {figures}"))
            .clone()
    };
    let (alt, primary) = (row("alternative"), row("primary"));
    assert_eq!(alt["sessions"], alt_valid + alt_invalid);
    assert_eq!(alt["valid"], alt_valid);
    assert_eq!(alt["invalid"], alt_invalid);
    let want = alt_valid as f64 / (alt_valid + alt_invalid) as f64;
    assert!((alt["pass_rate"].as_f64().unwrap() - want).abs() < 1e-9);
    let [lo, hi] = [0, 1].map(|i| alt["pass_rate_ci95"][i].as_f64().unwrap());
    assert!(lo < want && want < hi, "{lo} < {want} < {hi}");
    assert_eq!(primary["pass_rate"], 1.0);
    assert_eq!(primary["sessions"], tally("primary", true, None));
    assert_eq!(alt["error_rate"], 0.0);
    assert_eq!(alt["contingency_rate"], 0.0);
    // The injected 300 ms is at least what the alternative's liveness shows.
    for q in ["liveness_p50_seconds", "liveness_p95_seconds"] {
        assert!(alt[q].as_f64().unwrap() >= 0.25, "{q}: {alt}");
    }
    assert!(alt["session_p50_seconds"].as_f64().is_some());

    let table = compare::compare(targets(), &admin_token(), 3_600, false)
        .await
        .expect("compare");
    assert!(table.contains("summed over 2 gateway(s)"), "{table}");
    let alt_row = table
        .lines()
        .find(|l| l.starts_with("alternative"))
        .unwrap();
    assert!(
        alt_row.contains(&format!("{:.1}%", want * 100.0)),
        "{alt_row}"
    );

    // One replica alone answers for the calls it sent (named twice, asked once).
    let one = compare::compare(
        vec![
            AdminTarget::from(&gw.admin_addr()),
            AdminTarget::from(&gw.admin_addr()),
        ],
        &admin_token(),
        3_600,
        true,
    )
    .await
    .unwrap();
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["gateways"], 1);
    let alt_one = one["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "alternative")
        .unwrap()
        .clone();
    assert_eq!(alt_one["invalid"], tally("alternative", false, Some(0)));

    // The same verifications in /metrics, by channel and outcome.
    let metrics = gw.metrics_text().await;
    let counted = metrics::value(
        &metrics,
        "idgate_channel_verifications_total",
        &[("channel", "alternative"), ("outcome", "invalid")],
    );
    assert_eq!(
        counted,
        tally("alternative", false, Some(0)) as f64,
        "{metrics}"
    );
    // Each of them timed too, under the same labels.
    assert_eq!(
        metrics::value(
            &metrics,
            "idgate_channel_verification_duration_seconds_count",
            &[("channel", "alternative"), ("outcome", "invalid")],
        ),
        counted,
        "{metrics}"
    );
    sibling.stop().await;
    gw.stop().await;
}

/// Journey `i` on replica `i % 2`: its channel is the split's pick for its
/// journey reference; on the alternative, a REGISTRY_NEGATIVE person gets
/// `invalid`. Starts and verifies the session; says what was set up.
async fn run_journey(replicas: &[&TestGateway; 2], split: &WeightedSplit, i: usize) -> Planned {
    let on = i % 2;
    let gw = replicas[on];
    let negative = i % 3 == 0;
    let p = if negative {
        samples::REGISTRY_NEGATIVE[i % 5]
    } else {
        samples::REGISTRY_POSITIVE[i % 5]
    };
    let created = gw.journey(i, p).await;
    let journey = JourneyRef::parse(&created.journey_ref).expect("journey ref");
    let channel = split.pick(&journey, |_| true).expect("a pick").to_owned();
    let valid = !(negative && channel == "alternative");
    let user_agent = if valid {
        "test".to_owned()
    } else {
        samples::USER_AGENT_INVALID.to_owned()
    };
    let s = gw
        .start_3d_as(&created.appkey, &user_agent)
        .await
        .expect("session");
    assert_eq!(s.channel, channel, "the gateway picks what the split says");
    let verdict = gw
        .verify_3d(&created.appkey, &s.session_token, &s.channel)
        .await
        .expect("verdict");
    assert_eq!(verdict.valid, valid);
    Planned { on, channel, valid }
}

#[tokio::test]
async fn compare_refuses_a_window_beyond_the_retention_naming_the_field() {
    let gw = TestGateway::start_with(|c| c.routing.figures_retention_minutes = 60).await;
    let err = gw
        .admin()
        .await
        .get_channel_figures(v1::GetChannelFiguresRequest {
            window: Some(prost_types::Duration {
                seconds: 2 * 3_600,
                nanos: 0,
            }),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_REQUEST");
    assert_eq!(bad_fields(&err), ["window"]);
    let ok = gw
        .admin()
        .await
        .get_channel_figures(v1::GetChannelFiguresRequest { window: None })
        .await
        .expect("default window")
        .into_inner();
    assert_eq!(ok.window.map(|w| w.seconds), Some(3_600));
    let names: HashMap<String, u64> = ok
        .channels
        .iter()
        .map(|c| (c.name.clone(), c.sessions_started))
        .collect();
    assert_eq!(
        names,
        HashMap::from([("primary".into(), 0), ("alternative".into(), 0)])
    );
    gw.stop().await;
}

#[tokio::test]
async fn channel_figures_need_the_admin_token() {
    let gw = TestGateway::start().await;
    let mut client = v1::channel_admin_service_client::ChannelAdminServiceClient::connect(format!(
        "http://{}",
        gw.admin_addr()
    ))
    .await
    .expect("connect");
    let err = client
        .get_channel_figures(v1::GetChannelFiguresRequest { window: None })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    let err = compare::compare(
        vec![AdminTarget::from(&gw.admin_addr())],
        &idgate::domain::AdminToken::new("not-the-admin-token").unwrap(),
        60,
        false,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("ADMIN_TOKEN_INVALID"), "{err}");
    gw.stop().await;
}
