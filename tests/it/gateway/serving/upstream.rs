//! The upstream path under pressure: a full channel bulkhead is refused in
//! a forced mode and passed over in auto, a full upstream bulkhead is
//! refused and counted, and a forced mode retries a transient 503 on its
//! own channel.

use idgate::{
    domain::Operation,
    proto::v1::{self, RoutingMode},
    sandbox::{FaultAction, FaultRule},
};
use tonic::Code;

use super::GatedUpstream;
use crate::support::{gateway::*, metrics, net::gated_proxy, wait::Gate};

#[tokio::test]
async fn a_full_channel_bulkhead_refuses_in_a_forced_mode_and_fails_over_in_auto() {
    let gw = TestGateway::start().await;
    let mut appkeys = Vec::new();
    for _ in 0..4 {
        appkeys.push(gw.create_journey().await);
    }
    let gate = Gate::closed();
    let proxy = gated_proxy(&gw.sandbox_channel_specs()[0].base_url, gate.clone()).await;
    gw.reload_channels(|channels| {
        channels[0].base_url = proxy;
        channels[0].max_concurrent_requests = 2;
    });
    gw.set_mode(RoutingMode::ForcePrimary).await;
    let held: Vec<_> = appkeys[..2]
        .iter()
        .map(|appkey| {
            let mut liveness = gw.liveness();
            let appkey = appkey.clone();
            tokio::spawn(async move {
                liveness
                    .start_session3_d(v1::StartSession3DRequest {
                        appkey,
                        user_agent: "test".into(),
                    })
                    .await
            })
        })
        .collect();
    gate.arrivals(2).await;

    let err = gw.start_3d(&appkeys[2]).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));
    // In auto mode the full primary is passed over for the alternative.
    gw.set_mode(RoutingMode::Auto).await;
    let s = gw.start_3d(&appkeys[3]).await.expect("session elsewhere");
    assert_eq!(s.channel, "alternative");
    assert_eq!(gate.arrived(), 2, "nothing more reached the full channel");
    assert!(held.iter().all(|h| !h.is_finished()));
    let metrics = gw.metrics_text().await;
    assert_eq!(
        metrics::sum(
            &metrics,
            "idgate_upstream_rejected_total",
            &[("channel", "primary")]
        ),
        2.0,
        "{metrics}"
    );

    gate.open();
    for h in held {
        let s = h.await.expect("task").expect("held session").into_inner();
        assert_eq!(s.channel, "primary");
    }
    assert_eq!(gate.peak(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_full_upstream_bulkhead_refuses_overloaded_and_counts_the_rejection() {
    let up = GatedUpstream::start(|u| u.max_concurrent_requests = 2, |_| {}).await;
    let (gw, gate) = (&up.gw, &up.gate);
    let before = gate.arrived();
    let held: Vec<_> = (0..2)
        .map(|_| {
            let mut client = gw.journeys();
            tokio::spawn(async move { client.create_journey(happy_person()).await })
        })
        .collect();
    gate.arrivals(before + 2).await;

    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));
    assert_eq!(gate.arrived(), before + 2);
    let metrics = gw.metrics_text().await;
    assert_eq!(
        metrics::sum(&metrics, "idgate_upstream_rejected_total", &[]),
        1.0,
        "{metrics}"
    );

    gate.open();
    for h in held {
        h.await.expect("task").expect("held call succeeds");
    }
    assert_eq!(gate.peak(), 2);
    up.gw.stop().await;
}

#[tokio::test]
async fn a_forced_mode_retries_the_session_token_on_its_channel_after_a_transient_503() {
    let gw = TestGateway::start().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::SessionToken3D)
                .channel("primary")
                .times(1),
        )
        .expect("fault");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("the retry succeeds");
    assert_eq!(s.channel, "primary");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}
