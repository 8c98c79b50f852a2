//! 3D liveness vendor channels through the gateway: failover, circuit
//! breaker, run-time routing modes, contingency, sticky and single-shot
//! verification, admin authentication, configuration reload and the
//! `idgate channels` commands. Each test runs its own gateway on its own
//! embedded sandbox; waits are bounded polls on observable state.

use std::time::Duration;

use idgate::{
    channels::{BreakerConfig, ChannelSpec},
    cli::channels::{self as cli, CliError},
    config::Config,
    domain::Operation,
    proto::v1::{
        self, CircuitState, RoutingMode, channel_admin_service_client::ChannelAdminServiceClient,
    },
    sandbox::{FaultAction, FaultRule},
};
use tonic::{Code, Request};

use crate::support::{
    gateway::*,
    metrics,
    net::{RefusingPort, addr_of, gated_proxy},
    process::ServeProcess,
    wait::{EVENT_WAIT, Gate, eventually},
};

const VENDOR_A: &str = "sandbox-vendor-a";
const VENDOR_B: &str = "sandbox-vendor-b";

fn session_fault(action: FaultAction, channel: &str) -> FaultRule {
    FaultRule::new(action)
        .on(Operation::SessionToken3D)
        .channel(channel)
}

fn liveness_fault(action: FaultAction, channel: &str) -> FaultRule {
    FaultRule::new(action)
        .on(Operation::Liveness3D)
        .channel(channel)
}

/// Asserts the failover away from the primary is counted by
/// `ListChannels` and by `/metrics`, with the class of the fault.
async fn assert_one_failover_from_primary(gw: &TestGateway, error_class: &str) {
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.failovers, 1, "{primary:?}");
    assert_eq!(primary.sessions_started, 0, "{primary:?}");
    assert_eq!(primary.last_error_class, error_class, "{primary:?}");
    let alternative = gw.channel_status("alternative").await;
    assert_eq!(
        (alternative.sessions_started, alternative.failovers),
        (1, 0),
        "{alternative:?}"
    );
    let metrics = gw.metrics_text().await;
    let failovers = |channel| {
        metrics::value(
            &metrics,
            "idgate_channel_failovers_total",
            &[("channel", channel)],
        )
    };
    assert_eq!(failovers("primary"), 1.0, "{metrics}");
    assert_eq!(failovers("alternative"), 0.0, "{metrics}");
}

#[tokio::test]
async fn sessions_start_on_the_primary_while_it_is_healthy() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert!(!s.contingency);
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    let primary = gw.channel_status("primary").await;
    assert_eq!(
        (primary.sessions_started, primary.failovers),
        (1, 0),
        "{primary:?}"
    );
    assert_eq!(primary.last_vendor, VENDOR_A);
    gw.stop().await;
}

#[tokio::test]
async fn a_primary_refusing_connections_fails_over_to_the_alternative() {
    let mut gw = TestGateway::start().await;
    gw.gateway
        .sandbox_mut()
        .expect("embedded sandbox")
        .stop_channel("primary")
        .await
        .expect("stop the primary's listener");
    // Hold the freed port, so that no parallel test's server answers there.
    let _held = RefusingPort::take_over(addr_of(&gw.sandbox().channels()[0].base_url)).await;
    let appkey = gw.create_journey().await;
    let s = gw
        .start_3d(&appkey)
        .await
        .expect("session on the alternative");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("alternative", VENDOR_B)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 0);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        1
    );
    assert_one_failover_from_primary(&gw, "connect").await;
    // The session verifies on the channel that issued it.
    let verdict = gw
        .verify_3d(&appkey, &s.session_token, &s.channel)
        .await
        .expect("verify");
    assert!(verdict.valid);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_primary_answering_5xx_fails_over_to_the_alternative() {
    for status in [500, 503] {
        let gw = TestGateway::start().await;
        gw.sandbox()
            .add_fault(session_fault(FaultAction::Status { status }, "primary"))
            .expect("fault");
        let appkey = gw.create_journey().await;
        let s = gw
            .start_3d(&appkey)
            .await
            .expect("session on the alternative");
        assert_eq!(
            (s.channel.as_str(), s.vendor.as_str()),
            ("alternative", VENDOR_B),
            "{status}"
        );
        assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
        assert_eq!(
            gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
            1
        );
        assert_one_failover_from_primary(&gw, "http_5xx").await;
        gw.stop().await;
    }
}

#[tokio::test]
async fn no_channel_available_is_unavailable_with_retry_info_when_every_channel_fails_or_is_drained()
 {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;

    // Every channel fails: each is tried once, then the caller may retry.
    for (channel, status) in [("primary", 500), ("alternative", 503)] {
        gw.sandbox()
            .add_fault(session_fault(FaultAction::Status { status }, channel))
            .expect("fault");
    }
    let err = gw.start_3d(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unavailable, "NO_CHANNEL_AVAILABLE");
    assert!(retryable(&err), "{err:?}: RetryInfo");
    assert!(!err.message().contains(&appkey));
    for channel in ["primary", "alternative"] {
        assert_eq!(
            gw.sandbox_calls(Operation::SessionToken3D, channel),
            1,
            "{channel}"
        );
    }
    gw.sandbox().clear_faults();
    gw.sandbox().reset_calls();

    // Every channel drained: nothing is sent.
    let mut admin = gw.admin().await;
    for name in ["primary", "alternative"] {
        admin
            .drain_channel(v1::DrainChannelRequest { name: name.into() })
            .await
            .expect("drain");
    }
    let err = gw.start_3d(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unavailable, "NO_CHANNEL_AVAILABLE");
    assert!(retryable(&err), "{err:?}: RetryInfo");
    assert_eq!(gw.total_calls(), 0, "no channel was called");
    gw.stop().await;
}

#[tokio::test]
async fn a_session_token_500_without_failover_is_internal_without_retry_info() {
    let gw = TestGateway::start().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    gw.sandbox()
        .add_fault(session_fault(
            FaultAction::Status { status: 500 },
            "primary",
        ))
        .expect("fault");
    let appkey = gw.create_journey().await;
    let err = gw.start_3d(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_INTERNAL");
    assert!(!retryable(&err));
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_channel_name_is_invalid_argument_without_retry_info_on_every_call_naming_one() {
    let gw = TestGateway::start().await;
    let mut admin = gw.admin().await;
    let refusals = [
        (
            "SetRoutingMode",
            admin
                .set_routing_mode(v1::SetRoutingModeRequest {
                    mode: RoutingMode::NamedChannel as i32,
                    channel: "ghost".into(),
                    weights: Vec::new(),
                    force: false,
                })
                .await
                .map(drop),
        ),
        (
            "DrainChannel",
            admin
                .drain_channel(v1::DrainChannelRequest {
                    name: "ghost".into(),
                })
                .await
                .map(drop),
        ),
        (
            "UndrainChannel",
            admin
                .undrain_channel(v1::UndrainChannelRequest {
                    name: "ghost".into(),
                })
                .await
                .map(drop),
        ),
    ];
    for (call, result) in refusals {
        let err = result.expect_err(call);
        assert_error(&err, Code::InvalidArgument, "CHANNEL_UNKNOWN");
        assert!(!retryable(&err), "{call}: no RetryInfo");
    }
    assert_eq!(gw.list_channels().await.mode(), RoutingMode::Auto);

    // A verification naming a channel this gateway does not have (and no
    // binding): refused before anything is sent.
    let appkey = gw.create_journey().await;
    let err = gw
        .verify_3d(&appkey, "a-session-token", "ghost")
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "CHANNEL_UNKNOWN");
    assert!(!retryable(&err));
    for channel in ["primary", "alternative"] {
        assert_eq!(gw.sandbox_calls(Operation::Liveness3D, channel), 0);
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_primary_slower_than_its_timeout_fails_over_to_the_alternative() {
    // Only the primary has a short budget: the alternative, which must
    // answer, keeps the default timeout.
    let gw = TestGateway::start().await;
    gw.reload_channels(|channels| channels[0].timeout_ms = 400);
    gw.sandbox()
        .add_fault(session_fault(FaultAction::Delay, "primary").latency_ms(3_000))
        .expect("fault");
    let appkey = gw.create_journey().await;
    let s = gw
        .start_3d(&appkey)
        .await
        .expect("session on the alternative");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("alternative", VENDOR_B)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
    assert_one_failover_from_primary(&gw, "timeout").await;
    gw.stop().await;
}

/// A gateway whose primary's breaker opens after two faults and stays
/// open for `ejection_ms`, with the primary answering 503 to session
/// requests (the fault's id returned) after two sessions that failed
/// over opened its breaker; and the journey's appkey.
async fn primary_ejected_for(ejection_ms: u64) -> (TestGateway, u64, String) {
    let gw = TestGateway::start_with(|c| {
        c.embedded_channels.breaker = BreakerConfig {
            failure_threshold: 2,
            base_ejection_ms: ejection_ms,
            max_ejection_ms: ejection_ms,
        };
    })
    .await;
    let fault = gw
        .sandbox()
        .add_fault(session_fault(
            FaultAction::Status { status: 503 },
            "primary",
        ))
        .expect("fault");
    // An appkey may open many sessions until a proof binds it.
    let appkey = gw.create_journey().await;
    for _ in 0..2 {
        let s = gw.start_3d(&appkey).await.expect("session");
        assert_eq!(s.channel, "alternative");
    }
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    // Open, or already half-open after a short ejection: not asserted here.
    assert_eq!(gw.channel_status("primary").await.consecutive_failures, 2);
    (gw, fault, appkey)
}

#[tokio::test]
async fn an_open_breaker_skips_the_primary_without_calling_it() {
    // Ejected for an hour: the next session falls in it however slow the
    // machine, so no elapsed time decides the test.
    let (gw, _fault, appkey) = primary_ejected_for(3_600_000).await;
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Open, "{primary:?}");
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "alternative");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Open, "{primary:?}");
    assert_eq!(primary.failovers, 2, "a skip is not a failover");
    gw.stop().await;
}

#[tokio::test]
async fn a_recovered_primary_is_probed_once_after_its_ejection_and_closes_the_breaker() {
    let (gw, fault, appkey) = primary_ejected_for(200).await;
    // The primary recovers; once the back-off ends (waited on, whenever it
    // ends) one probe closes the breaker.
    assert!(gw.sandbox().remove_fault(fault));
    eventually("the primary's breaker half-opens", EVENT_WAIT, async || {
        gw.channel_status("primary").await.circuit_state() == CircuitState::HalfOpen
    })
    .await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 3);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Closed, "{primary:?}");
    assert_eq!(primary.consecutive_failures, 0);
    gw.stop().await;
}

#[tokio::test]
async fn routing_modes_apply_to_the_next_session_and_never_move_a_started_one() {
    let gw = TestGateway::start().await;
    let before = gw.create_journey().await;
    let during = gw.create_journey().await;
    let after = gw.create_journey().await;

    let b = gw.start_3d(&before).await.expect("session");
    assert_eq!(b.channel, "primary");

    gw.set_mode(RoutingMode::ForceAlternative).await;
    assert_eq!(
        gw.list_channels().await.mode(),
        RoutingMode::ForceAlternative
    );
    let d = gw.start_3d(&during).await.expect("session");
    assert_eq!(
        (d.channel.as_str(), d.vendor.as_str()),
        ("alternative", VENDOR_B)
    );
    // Started before the switch: verified on its issuing channel, with no
    // channel named by the caller.
    assert!(
        gw.verify_3d(&before, &b.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);

    gw.set_mode(RoutingMode::ForcePrimary).await;
    let a = gw.start_3d(&after).await.expect("session");
    assert_eq!(
        (a.channel.as_str(), a.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert!(
        gw.verify_3d(&during, &d.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        1
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_forced_mode_does_not_fail_over() {
    let gw = TestGateway::start().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    gw.sandbox()
        .add_fault(session_fault(
            FaultAction::Status { status: 503 },
            "primary",
        ))
        .expect("fault");
    let appkey = gw.create_journey().await;
    let err = gw.start_3d(&appkey).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_contingency_answer_is_reported_to_the_caller_and_listed() {
    let gw = TestGateway::start().await;
    gw.sandbox()
        .set_contingency("primary", true)
        .expect("contingency on");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert!(s.contingency);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.contingency_answers, 1, "{primary:?}");
    assert!(primary.last_contingency);
    let alternative = gw.channel_status("alternative").await;
    assert_eq!(alternative.contingency_answers, 0);

    gw.sandbox()
        .set_contingency("primary", false)
        .expect("contingency off");
    let s = gw.start_3d(&appkey).await.expect("session");
    assert!(!s.contingency);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.contingency_answers, 1);
    assert!(!primary.last_contingency);
    gw.stop().await;
}

/// A verification whose answer is lost is sent once, reported as
/// `OUTCOME_UNKNOWN` without `RetryInfo`, and never sent elsewhere.
async fn an_ambiguous_verification_is_sent_once(action: FaultAction) {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "primary");
    gw.sandbox()
        .add_fault(liveness_fault(action, "primary"))
        .expect("fault");
    let err = gw
        .verify_3d(&appkey, &s.session_token, &s.channel)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unknown, "{err:?}");
    assert_eq!(reason(&err), "OUTCOME_UNKNOWN");
    assert!(!retryable(&err));
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_verification_answered_500_is_sent_once_and_its_outcome_unknown() {
    an_ambiguous_verification_is_sent_once(FaultAction::Status { status: 500 }).await;
}

#[tokio::test]
async fn a_verification_whose_connection_drops_is_sent_once_and_its_outcome_unknown() {
    an_ambiguous_verification_is_sent_once(FaultAction::Drop).await;
}

#[tokio::test]
async fn a_verification_without_binding_or_channel_is_refused_as_session_unknown() {
    let gw = TestGateway::start().await;
    let other = gw.sibling().await;
    gw.set_mode(RoutingMode::ForceAlternative).await;
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "alternative");

    // The other instance never saw the session, and the caller names no channel.
    let err = other
        .verify_3d(&appkey, &s.session_token, "")
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "SESSION_UNKNOWN");
    assert!(!retryable(&err), "{err:?}: no RetryInfo");
    for channel in ["primary", "alternative"] {
        assert_eq!(gw.sandbox_calls(Operation::Liveness3D, channel), 0);
    }

    // With the channel StartSession3D returned, it routes the call there.
    let verdict = other
        .verify_3d(&appkey, &s.session_token, &s.channel)
        .await
        .expect("verify on the named channel");
    assert!(verdict.valid);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 0);
    other.stop().await;
    gw.stop().await;
}

#[tokio::test]
async fn the_admin_service_refuses_missing_or_wrong_tokens() {
    let gw = TestGateway::start().await;
    let mut client = ChannelAdminServiceClient::connect(format!("http://{}", gw.admin_addr()))
        .await
        .expect("connect");
    for header in [None, Some("Bearer not-the-token"), Some(ADMIN_TOKEN)] {
        let mut request = Request::new(v1::ListChannelsRequest {});
        if let Some(h) = header {
            request
                .metadata_mut()
                .insert("authorization", h.parse().unwrap());
        }
        let err = client.list_channels(request).await.unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
        assert!(!retryable(&err), "{header:?}: no RetryInfo");
        assert!(!err.message().contains(ADMIN_TOKEN));
    }
    // A refused SetRoutingMode changes nothing.
    let err = client
        .set_routing_mode(v1::SetRoutingModeRequest {
            mode: RoutingMode::ForceAlternative as i32,
            channel: String::new(),
            weights: Vec::new(),
            force: false,
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert_eq!(gw.list_channels().await.mode(), RoutingMode::Auto);
    // So do a refused drain and undrain.
    let err = client
        .drain_channel(v1::DrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert!(!gw.channel_status("primary").await.drained);
    gw.admin()
        .await
        .drain_channel(v1::DrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .expect("drain with the token");
    let err = client
        .undrain_channel(v1::UndrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert!(gw.channel_status("primary").await.drained);
    gw.stop().await;
}

#[tokio::test]
async fn the_admin_service_is_not_served_on_the_public_listener() {
    let gw = TestGateway::start().await;
    let mut client = ChannelAdminServiceClient::connect(gw.gateway.grpc_url())
        .await
        .expect("connect");
    let mut request = Request::new(v1::ListChannelsRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN_TOKEN}").parse().unwrap(),
    );
    let err = client.list_channels(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    gw.stop().await;
}

/// The reload configuration: the primary removed, the alternative
/// unchanged, and a third channel on the sandbox's core listener, on the
/// path pair of its alternative vendor.
fn reloaded_channels(gw: &TestGateway) -> Config {
    let sandbox = gw.sandbox();
    let alternative = sandbox
        .channels()
        .into_iter()
        .find(|c| c.name == "alternative")
        .expect("alternative");
    let mut config = test_config();
    config.channels = vec![
        ChannelSpec::new("alternative", alternative.base_url, 1),
        ChannelSpec {
            session_token_path: "/3d/session-token".into(),
            liveness_path: "/3d/liveness".into(),
            ..ChannelSpec::new("third", sandbox.channel_path_url("alternative"), 2)
        },
    ];
    config
}

#[tokio::test]
async fn a_reload_adds_and_removes_channels_without_dropping_a_call_in_flight() {
    let gw = TestGateway::start().await;
    let held = gw.create_journey().await;
    let later = gw.create_journey().await;

    // The primary's listener behind a gate: a session start sent there
    // stays in flight until the test opens it.
    let gate = Gate::closed();
    let proxy = gated_proxy(&gw.sandbox_channel_specs()[0].base_url, gate.clone()).await;
    gw.reload_channels(|channels| channels[0].base_url = proxy);
    let mut liveness = gw.liveness();
    let held_key = held.clone();
    let in_flight = tokio::spawn(async move {
        liveness
            .start_session3_d(v1::StartSession3DRequest {
                appkey: held_key,
                user_agent: "test".into(),
            })
            .await
    });
    gate.arrivals(1).await;

    gw.gateway
        .reload_from(&reloaded_channels(&gw))
        .expect("reload");
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["alternative", "third"]);
    // Drain the alternative: new sessions go to the third channel.
    let drained = gw
        .admin()
        .await
        .drain_channel(v1::DrainChannelRequest {
            name: "alternative".into(),
        })
        .await
        .expect("drain")
        .into_inner()
        .channel
        .expect("channel");
    assert!(drained.drained);
    let s = gw.start_3d(&later).await.expect("session");
    assert_eq!((s.channel.as_str(), s.vendor.as_str()), ("third", VENDOR_B));
    assert!(!in_flight.is_finished(), "the held call is still in flight");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 0);

    // The call in flight on the removed channel completes.
    gate.open();
    let h = in_flight
        .await
        .expect("task")
        .expect("held session start")
        .into_inner();
    assert_eq!(
        (h.channel.as_str(), h.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
    // Its verification still reaches the channel that issued it.
    assert!(
        gw.verify_3d(&held, &h.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert!(
        gw.verify_3d(&later, &s.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_reload_refused_for_the_routing_mode_changes_nothing() {
    let gw = TestGateway::start().await;
    gw.admin()
        .await
        .set_routing_mode(v1::SetRoutingModeRequest {
            mode: RoutingMode::NamedChannel as i32,
            channel: "primary".into(),
            weights: Vec::new(),
            force: false,
        })
        .await
        .expect("set mode");
    assert!(gw.gateway.reload_from(&reloaded_channels(&gw)).is_err());
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["primary", "alternative"]);
    gw.stop().await;
}

#[tokio::test]
async fn a_reload_rereads_the_configuration_file() {
    let dir = crate::support::temp::dir("config");
    let file = dir.path().join("idgate.toml");
    std::fs::write(&file, "").expect("write config");
    let gw = TestGateway::start_reloadable(&file).await;
    let alternative = gw.sandbox().channels()[1].base_url.clone();
    let primary = gw.sandbox().channels()[0].base_url.clone();
    std::fs::write(
        &file,
        format!(
            "[[channels]]\nname = \"backup\"\nbase_url = \"{alternative}\"\npriority = 0\n\
             [[channels]]\nname = \"primary\"\nbase_url = \"{primary}\"\npriority = 1\n"
        ),
    )
    .expect("write config");
    gw.gateway.reload().await.expect("reload");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("backup", VENDOR_B)
    );

    // A file the gateway cannot use is refused and changes nothing.
    std::fs::write(
        &file,
        "[[channels]]\nname = \"x\"\nbase_url = \"http://a\"\n\
         [[channels]]\nname = \"x\"\nbase_url = \"http://b\"\n",
    )
    .expect("write config");
    assert!(gw.gateway.reload().await.is_err());
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["backup", "primary"]);
    gw.stop().await;
}

#[tokio::test]
async fn the_channels_commands_list_set_the_mode_drain_and_undrain() {
    let gw = TestGateway::start().await;
    let addr = gw.admin_addr();
    let token = admin_token();
    let appkey = gw.create_journey().await;

    let text = cli::list(&addr, &token).await.expect("list");
    assert!(text.starts_with("routing mode: auto\n"), "{text}");
    for name in ["primary", "alternative"] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name}: {text}");
    }

    let text = cli::set_mode(&addr, &token, "force_alternative")
        .await
        .expect("mode");
    assert_eq!(text, "routing mode: force_alternative\n");
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "alternative");
    let text = cli::set_mode(&addr, &token, "auto").await.expect("mode");
    assert_eq!(text, "routing mode: auto\n");

    let text = cli::drain(&addr, &token, "primary").await.expect("drain");
    assert!(text.starts_with("drained primary"), "{text}");
    assert!(gw.channel_status("primary").await.drained);
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "alternative");
    let text = cli::undrain(&addr, &token, "primary")
        .await
        .expect("undrain");
    assert!(text.starts_with("undrained primary"), "{text}");
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "primary");

    let text = cli::list(&addr, &token).await.expect("list");
    let row = text.lines().find(|l| l.starts_with("primary")).unwrap();
    assert!(row.contains(VENDOR_A) && row.contains(" no "), "{row}");
    gw.stop().await;
}

#[tokio::test]
async fn the_channels_commands_report_errors_clearly() {
    let gw = TestGateway::start().await;
    let addr = gw.admin_addr();
    let token = admin_token();

    let err = cli::set_mode(&addr, &token, "sometimes").await.unwrap_err();
    assert!(matches!(err, CliError::Mode { .. }), "{err:?}");
    // The CLI quotes the operator's own input back, and names the forms.
    assert!(err.to_string().contains("`sometimes`"), "{err}");
    assert!(err.to_string().contains("routing mode must be"), "{err}");

    let err = cli::drain(&addr, &token, "ghost").await.unwrap_err();
    assert!(
        matches!(&err, CliError::Refused { code: Code::InvalidArgument, reason: Some(r), .. } if r == "CHANNEL_UNKNOWN"),
        "{err:?}"
    );

    let wrong = idgate::domain::AdminToken::new("wrong-token-1234").unwrap();
    let err = cli::list(&addr, &wrong).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CliError::Refused {
                code: Code::Unauthenticated,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("wrong-token-1234"), "{err}");
    assert!(!format!("{err:?}").contains("wrong-token-1234"), "{err:?}");

    // Nothing listens on the public listener's admin service: the error
    // says the call was not served there.
    let err = cli::list(&gw.gateway.grpc_addr().to_string(), &token)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CliError::Refused {
                code: Code::Unimplemented,
                ..
            }
        ),
        "{err:?}"
    );
    gw.stop().await;
    // Hold the freed port, so that no parallel test's server answers there.
    let _held = RefusingPort::take_over(addr.parse().expect("admin address")).await;

    // A stopped gateway: the address is named, the token is not.
    let err = cli::list(&addr, &token).await.unwrap_err();
    assert!(matches!(err, CliError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&addr), "{err}");
    assert!(!err.to_string().contains(ADMIN_TOKEN));
}

#[tokio::test]
async fn idgate_serve_reloads_its_channels_on_sighup_and_obeys_the_channels_commands() {
    let dir = crate::support::temp::dir("serve");
    let config = dir.path().join("idgate.toml");
    let listen =
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    std::fs::write(&config, listen).expect("write config");

    let serve = ServeProcess::start(&config);
    let base_url = serve.field("gateway upstream is the embedded sandbox", "base_url");
    let admin = serve
        .field("idgate listening", "admin")
        .trim_start_matches("Some(")
        .trim_end_matches(')')
        .to_owned();
    let token = admin_token();

    let text = cli::list(&admin, &token).await.expect("list");
    assert!(text.lines().any(|l| l.starts_with("alternative")), "{text}");
    let text = cli::drain(&admin, &token, "alternative")
        .await
        .expect("drain");
    assert!(text.starts_with("drained alternative"), "{text}");

    // SIGHUP: the file now names a channel on the sandbox's core listener.
    std::fs::write(
        &config,
        format!(
            "{listen}[[channels]]\nname = \"core-alt\"\n\
             base_url = \"{base_url}/service/captcha/channels/alternative\"\n\
             session_token_path = \"/3d/session-token\"\nliveness_path = \"/3d/liveness\"\n"
        ),
    )
    .expect("write config");
    serve.signal("HUP");
    eventually(
        "SIGHUP applies the new channel set",
        Duration::from_secs(10),
        async || {
            let text = cli::list(&admin, &token).await.expect("list");
            text.lines().any(|l| l.starts_with("core-alt"))
                && !text.lines().any(|l| l.starts_with("alternative"))
        },
    )
    .await;
    let text = cli::set_mode(&admin, &token, "channel:core-alt")
        .await
        .expect("mode");
    assert_eq!(text, "routing mode: channel:core-alt\n");

    // A file that does not load changes nothing; the gateway keeps serving.
    std::fs::write(&config, "garbage = [").expect("write config");
    serve.signal("HUP");
    let _ = serve.field("configuration reload failed", "error");
    let text = cli::list(&admin, &token).await.expect("list");
    assert!(
        text.starts_with("routing mode: channel:core-alt\n"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("core-alt")), "{text}");
    drop(serve);
}
