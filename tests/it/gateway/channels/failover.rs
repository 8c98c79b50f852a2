//! Failover: a healthy primary takes the sessions; one that refuses
//! connections, answers 5xx or is too slow is passed over for the
//! alternative, counted with its fault's class, and when no channel is
//! left, or a channel is named that does not exist, the caller is told
//! with the right status and `RetryInfo` or none.

use idgate::testing::GatewayParts as _;
use idgate::{
    domain::Operation,
    proto::v1::{self, RoutingMode},
    sandbox::FaultAction,
};
use tonic::Code;

use super::{VENDOR_A, VENDOR_B, session_fault};
use crate::support::{
    gateway::*,
    metrics,
    net::{RefusingPort, addr_of},
};

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
