//! The conformance probe of a channel (`ProbeChannel`, `idgate channels
//! probe`): synthetic calls on the embedded sandbox that consume nothing
//! by default, a report per check, and no weight for a channel that
//! failed it unless forced.

use idgate::{
    channels::probe::ProbePerson,
    cli::rollout as cli,
    config::Config,
    domain::Operation,
    proto::v1::{self, RolloutState},
    sandbox::{FaultAction, FaultRule, samples},
};
use tonic::Code;

use crate::{
    gateway::rollout::quick_rollouts,
    support::{gateway::*, rollout::start_request, telemetry::quiet_telemetry},
};

/// Quick rollouts and one probe person (the sandbox's happy person).
pub(crate) fn with_probe_person(c: &mut Config) {
    quick_rollouts(c);
    let p = samples::HAPPY_PERSON;
    let parts: Vec<&str> = p.birth_date.split('/').collect();
    c.probe.persons = vec![ProbePerson {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
    }];
}

impl TestGateway {
    async fn probe(
        &self,
        name: &str,
        consume: bool,
    ) -> Result<v1::ProbeChannelResponse, tonic::Status> {
        self.admin()
            .await
            .probe_channel(v1::ProbeChannelRequest {
                name: name.into(),
                consume,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn try_weighted(&self, split: &[(&str, u32)], force: bool) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(v1::SetRoutingModeRequest {
                mode: v1::RoutingMode::Weighted as i32,
                channel: String::new(),
                weights: weights(split),
                force,
            })
            .await
            .map(|_| ())
    }
}

#[tokio::test]
async fn the_probe_marks_a_channel_whose_session_token_answers_the_wrong_shape_non_conforming_and_refuses_it_weight()
 {
    let gw = TestGateway::start_with(with_probe_person).await;
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::WrongShape)
                .on(Operation::SessionToken3D)
                .channel("alternative"),
        )
        .expect("fault");
    let report = gw.probe("alternative", false).await.expect("probe");
    assert!(!report.conforming, "{report:?}");
    let check = &report.checks[0];
    assert_eq!(
        (check.name.as_str(), check.passed, check.http_status),
        ("session_token", false, 200)
    );
    let found: Vec<(&str, &str, bool)> = check
        .fields
        .iter()
        .map(|f| (f.field.as_str(), f.found.as_str(), f.passed))
        .collect();
    assert_eq!(
        found,
        [
            ("isContingency", "string", false),
            ("token", "number", false),
            ("vendor", "null", false),
            ("url", "missing", false)
        ]
    );
    assert!(
        !check.problem.contains("42"),
        "no value of the answer: {}",
        check.problem
    );
    assert_eq!(report.checks.len(), 1, "no verification without --consume");
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);

    // No weight for it, by a split or a rollout, unless forced.
    let refused = gw
        .try_weighted(&[("primary", 50), ("alternative", 50)], false)
        .await
        .expect_err("refused");
    assert_error(&refused, Code::FailedPrecondition, "CHANNEL_NOT_CONFORMING");
    assert_eq!(bad_fields(&refused), ["weights[1].channel"]);
    let refused = gw
        .start_rollout(start_request(&[50, 100], 10))
        .await
        .expect_err("refused");
    assert_error(&refused, Code::FailedPrecondition, "CHANNEL_NOT_CONFORMING");
    assert_eq!(bad_fields(&refused), ["to"]);
    assert!(gw.rollout().await.is_none());
    assert_eq!(gw.list_channels().await.mode(), v1::RoutingMode::Auto);
    // A split that gives it no weight is fine; force overrides.
    gw.try_weighted(&[("primary", 100), ("alternative", 0)], false)
        .await
        .expect("no weight to it");
    gw.try_weighted(&[("primary", 50), ("alternative", 50)], true)
        .await
        .expect("forced");
    let forced = gw
        .start_rollout(v1::StartRolloutRequest {
            force: true,
            ..start_request(&[50, 100], 10)
        })
        .await
        .expect("forced rollout");
    assert_eq!(forced.state(), RolloutState::Running);

    // The CLI prints the same verdict.
    let text = cli::probe(&gw.admin_addr(), &admin_token(), "alternative", false)
        .await
        .expect("idgate channels probe");
    assert!(
        text.contains("channel alternative: NOT CONFORMING"),
        "{text}"
    );
    assert!(text.contains("token"), "{text}");
    gw.stop().await;
}

#[tokio::test]
async fn the_probe_of_a_healthy_channel_passes_and_verifies_only_when_asked_to_consume() {
    let gw = TestGateway::start_with(with_probe_person).await;
    let report = gw.probe("alternative", false).await.expect("probe");
    assert!(report.conforming, "{report:?}");
    assert_eq!(report.checks.len(), 1);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        1
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);

    let consumed = gw.probe("alternative", true).await.expect("probe");
    assert!(consumed.conforming, "{consumed:?}");
    let names: Vec<&str> = consumed.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["session_token", "liveness"]);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);

    let unknown = gw.probe("ghost", false).await.expect_err("unknown");
    assert_error(&unknown, Code::InvalidArgument, "CHANNEL_UNKNOWN");
    gw.stop().await;
}

#[tokio::test]
async fn without_probe_persons_the_probe_names_the_setting_to_configure() {
    // An external upstream: only the operator can name its test persons.
    let external = ExternalGateway::start(|_| {}).await;
    let gw = &external.gw;
    let err = gw.probe("alternative", false).await.expect_err("refused");
    assert_error(&err, Code::FailedPrecondition, "PROBE_NOT_CONFIGURED");
    assert!(err.message().contains("[probe] persons"), "{err:?}");
    assert!(bad_fields(&err).is_empty(), "not the request's fault");
    // The CLI prints what is missing in full.
    let refused = cli::probe(&gw.admin_addr(), &admin_token(), "alternative", false)
        .await
        .expect_err("idgate channels probe");
    let text = refused.to_string();
    assert!(
        text.starts_with("FailedPrecondition [PROBE_NOT_CONFIGURED]"),
        "{text}"
    );
    assert!(
        text.ends_with("\n  [probe] persons: no probe persons are configured"),
        "{text}"
    );
    external.patient.stop().await;
    external.gw.stop().await;
    external.sandbox.shutdown().await;
}

#[tokio::test]
async fn on_the_embedded_sandbox_the_probe_passes_with_no_configuration_then_a_rollout_starts() {
    // The README's first command: no [probe] section, no [upstream].
    let gw = TestGateway::start().await;
    let text = cli::probe(&gw.admin_addr(), &admin_token(), "alternative", false)
        .await
        .expect("idgate channels probe alternative");
    assert!(text.contains("channel alternative: conforming"), "{text}");
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        1
    );
    let started = cli::start(
        &gw.admin_addr(),
        &admin_token(),
        &cli::StartOptions {
            to: "alternative".into(),
            from: None,
            steps: None,
            step_minutes: None,
            min_sessions: None,
            max_error_rate: None,
            max_pass_rate_drop: None,
            force: false,
        },
    )
    .await
    .expect("idgate channels rollout start --to alternative");
    assert!(started.contains("running"), "{started}");
    assert_eq!(
        gw.rollout().await.expect("a rollout").state(),
        RolloutState::Running
    );
    gw.stop().await;
}

#[tokio::test]
async fn each_probe_leaves_one_audit_record_by_the_admin_naming_the_channel_and_no_person_value() {
    // At WARN: audit records are kept whatever the level.
    let (logs, _default) = quiet_telemetry();
    let gw = TestGateway::start_with(with_probe_person).await;
    gw.probe("alternative", true).await.expect("probe");
    gw.probe("ghost", false).await.expect_err("unknown channel");
    gw.stop().await;

    let text = logs.contents();
    let records: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "idgate::audit")
        .collect();
    let summary: Vec<[&str; 5]> = records
        .iter()
        .map(|r| {
            ["caller", "identity", "operation", "channel", "outcome"]
                .map(|k| r[k].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        summary,
        [
            ["admin", "admin_token", "probe_channel", "alternative", "ok"],
            // Not a configured channel: its name is not recorded.
            [
                "admin",
                "admin_token",
                "probe_channel",
                "",
                "CHANNEL_UNKNOWN"
            ],
        ],
        "{text}"
    );
    let person = samples::HAPPY_PERSON;
    let iso: Vec<&str> = person.birth_date.split('/').rev().collect();
    for value in [person.cpf, person.name, person.birth_date, &iso.join("-")] {
        assert!(!text.contains(value), "{value} in the logs: {text}");
    }
}
