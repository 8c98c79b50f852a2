//! Breakers under partial faults: a vendor failing one session start in
//! ten keeps its circuit closed however many calls are in flight; a
//! channel that answers nothing opens on the fast path; when every circuit
//! is open, session starts go to the channel open longest (panic routing)
//! instead of being refused, so the first start after the vendors recover
//! is served. Default breaker settings throughout.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use idgate::testing::GatewayParts as _;
use idgate::{
    channels::{CircuitState, RouterSnapshot},
    domain::Operation,
    sandbox::FaultAction,
};

use super::session_fault;
use crate::support::{
    gateway::*,
    metrics,
    net::{RefusingPort, addr_of},
    wait::{EVENT_WAIT, eventually},
};

fn snapshot_of<'a>(s: &'a RouterSnapshot, name: &str) -> &'a idgate::channels::ChannelSnapshot {
    s.channels.iter().find(|c| c.name == name).expect("channel")
}

/// Stops `name`'s listener and holds its port refusing connections.
async fn refuse_connections(gw: &mut TestGateway, name: &str) -> RefusingPort {
    let at = gw
        .sandbox()
        .channels()
        .iter()
        .find(|c| c.name == name)
        .expect("channel")
        .base_url
        .clone();
    gw.gateway
        .sandbox_mut()
        .expect("embedded sandbox")
        .stop_channel(name)
        .await
        .expect("stop the listener");
    RefusingPort::take_over(addr_of(&at)).await
}

#[tokio::test]
async fn a_channel_failing_one_session_start_in_ten_at_64_in_flight_stays_closed() {
    let gw = Arc::new(TestGateway::start().await);
    let mut appkeys = Vec::new();
    for _ in 0..64 {
        appkeys.push(gw.create_journey().await);
    }
    // Every 50th start, the primary's next five session starts fail (a
    // hiccup that every call in flight sees): one in ten, in runs of five.
    let started = Arc::new(AtomicU64::new(0));
    let mut callers = tokio::task::JoinSet::new();
    for appkey in appkeys {
        let (gw, started) = (gw.clone(), started.clone());
        callers.spawn(async move {
            for _ in 0..10 {
                if started.fetch_add(1, Ordering::Relaxed) % 50 == 0 {
                    gw.sandbox()
                        .add_fault(
                            session_fault(FaultAction::Status { status: 503 }, "primary").times(5),
                        )
                        .expect("fault");
                }
                gw.start_3d(&appkey).await.expect("served on some channel");
            }
        });
    }
    while let Some(done) = callers.join_next().await {
        done.expect("caller");
    }
    let snap = gw.gateway.router().snapshot();
    let primary = snapshot_of(&snap, "primary");
    assert!(
        primary.session_failures >= 50,
        "the faults landed: {primary:?}"
    );
    assert_eq!(
        (primary.times_opened, primary.circuit),
        (0, CircuitState::Closed),
        "{primary:?}"
    );
}

#[tokio::test]
async fn a_channel_refusing_connections_opens_on_its_fast_path() {
    let mut gw = TestGateway::start().await;
    let _held = refuse_connections(&mut gw, "primary").await;
    let appkey = gw.create_journey().await;
    // The default fast path: five unanswered calls in a row, long before
    // the window holds its minimum of twenty.
    for n in 1..=5 {
        let s = gw.start_3d(&appkey).await.expect("served");
        assert_eq!(s.channel, "alternative");
        let snap = gw.gateway.router().snapshot();
        let expected = if n < 5 { 0 } else { 1 };
        assert_eq!(
            snapshot_of(&snap, "primary").times_opened,
            expected,
            "after {n}"
        );
    }
    let s = gw.start_3d(&appkey).await.expect("served");
    assert_eq!(s.channel, "alternative");
    let snap = gw.gateway.router().snapshot();
    assert_eq!(
        snapshot_of(&snap, "primary").rejected_open,
        1,
        "skipped unasked"
    );
}

#[tokio::test]
async fn with_every_circuit_open_starts_go_to_the_channel_open_longest() {
    let mut gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let _primary = refuse_connections(&mut gw, "primary").await;
    for _ in 0..5 {
        gw.start_3d(&appkey)
            .await
            .expect("served on the alternative");
    }
    let _alternative = refuse_connections(&mut gw, "alternative").await;
    for _ in 0..5 {
        gw.start_3d(&appkey).await.expect_err("nothing answers");
    }
    let snap = gw.gateway.router().snapshot();
    for name in ["primary", "alternative"] {
        assert_eq!(
            snapshot_of(&snap, name).circuit,
            CircuitState::Open,
            "{name}"
        );
    }
    let status = gw.start_3d(&appkey).await.expect_err("nothing answers");
    assert_error(&status, tonic::Code::Unavailable, "NO_CHANNEL_AVAILABLE");
    assert!(
        status.message().contains("primary (panic-routed)"),
        "{status:?}"
    );
    let text = gw.metrics_text().await;
    metrics::assert_sample(&text, r#"idgate_channel_panic_total{channel="primary"} 1"#);
    assert_eq!(
        metrics::counted(
            &text,
            r#"idgate_channel_panic_total{channel="alternative"}"#
        ),
        0.0
    );
}

#[tokio::test]
async fn sessions_are_served_again_as_soon_as_both_channels_recover() {
    let gw = Arc::new(TestGateway::start().await);
    let faults: Vec<u64> = ["primary", "alternative"]
        .into_iter()
        .map(|name| {
            gw.sandbox()
                .add_fault(session_fault(FaultAction::Status { status: 503 }, name))
                .expect("fault")
        })
        .collect();
    // Sixteen callers keep starting sessions through the outage.
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU64::new(0));
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (gw, stop, asked) = (gw.clone(), stop.clone(), asked.clone());
        let appkey = gw.create_journey().await;
        callers.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                asked.fetch_add(1, Ordering::Relaxed);
                if let Err(status) = gw.start_3d(&appkey).await {
                    assert_error(&status, tonic::Code::Unavailable, "NO_CHANNEL_AVAILABLE");
                    // Never refused untried: some channel was called (a
                    // note other than an open circuit's).
                    let m = status.message();
                    let notes = m.split_once('(').map_or(m, |(_, n)| n);
                    assert!(
                        notes.split(", ").any(|n| !n.contains("circuit open")),
                        "{m}"
                    );
                }
            }
        });
    }
    eventually(
        "both circuits open and starts panic-routed",
        EVENT_WAIT,
        async || {
            let snap = gw.gateway.router().snapshot();
            let open = ["primary", "alternative"]
                .iter()
                .all(|n| snapshot_of(&snap, n).times_opened > 0);
            let text = gw.metrics_text().await;
            open && metrics::sum(&text, "idgate_channel_panic_total", &[]) >= 10.0
        },
    )
    .await;

    // The vendors recover: the first start asked afterwards is served.
    for id in faults {
        assert!(gw.sandbox().remove_fault(id));
    }
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("served at once");
    assert!(["primary", "alternative"].contains(&s.channel.as_str()));

    stop.store(true, Ordering::Relaxed);
    while let Some(done) = callers.join_next().await {
        done.expect("caller");
    }
    // Every start asked reached a channel.
    let received = gw.sandbox_calls(Operation::SessionToken3D, "primary")
        + gw.sandbox_calls(Operation::SessionToken3D, "alternative");
    let asked = asked.load(Ordering::Relaxed) + 1;
    assert!(received >= asked, "{received} received for {asked} asked");
}
