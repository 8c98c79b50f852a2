//! Behaviour of the router, with an in-memory transport that records every
//! call and answers as each channel is told to. This tests routing, breaker
//! and binding logic, not HTTP.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

use super::*;
use crate::{
    Error,
    channels::{BreakerConfig, CircuitState},
    domain::{Appkey, Operation, SessionToken},
    proto::v1::LivenessVerdict,
    upstream::ChannelEndpoint,
};

/// How a channel answers `/3d/session-token`.
#[derive(Clone)]
enum Start {
    Grant {
        contingency: bool,
    },
    Status(u16),
    /// Answers the status once, then grants.
    StatusOnce(u16),
    Connect,
    /// Never answers: the router's timeout must cut it.
    Hang,
    /// Answers a grant once `release` is notified.
    Hold(Arc<Notify>),
}

/// How a channel answers `/3d/liveness`.
#[derive(Clone)]
enum Verify {
    Verdict,
    Status(u16),
    Transport,
    Hang,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    op: &'static str,
    channel: String,
    base_url: String,
}

#[derive(Default)]
struct Double {
    start: Mutex<HashMap<String, Start>>,
    verify: Mutex<HashMap<String, Verify>>,
    calls: Mutex<Vec<Call>>,
    entered: Notify,
}

impl Double {
    fn on_start(&self, channel: &str, s: Start) {
        self.start.lock().unwrap().insert(channel.to_owned(), s);
    }

    fn on_verify(&self, channel: &str, v: Verify) {
        self.verify.lock().unwrap().insert(channel.to_owned(), v);
    }

    fn calls(&self) -> Vec<(&'static str, String)> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| (c.op, c.channel.clone()))
            .collect()
    }

    fn clear(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn record(&self, op: &'static str, channel: &ChannelEndpoint) {
        self.calls.lock().unwrap().push(Call {
            op,
            channel: channel.name().to_owned(),
            base_url: channel.base_url().to_owned(),
        });
        self.entered.notify_one();
    }
}

#[tonic::async_trait]
impl Liveness3DTransport for Double {
    async fn session_token(
        &self,
        channel: &ChannelEndpoint,
        _appkey: &Appkey,
        _user_agent: &str,
        _ctx: &CallContext,
    ) -> Result<SessionGrant, UpstreamError> {
        self.record("session", channel);
        let behaviour = {
            let mut start = self.start.lock().unwrap();
            let behaviour = start
                .get(channel.name())
                .cloned()
                .unwrap_or(Start::Grant { contingency: false });
            if let Start::StatusOnce(_) = behaviour {
                start.insert(
                    channel.name().to_owned(),
                    Start::Grant { contingency: false },
                );
            }
            behaviour
        };
        let op = Operation::SessionToken3D;
        let contingency = match behaviour {
            Start::Grant { contingency } => contingency,
            Start::Status(status) | Start::StatusOnce(status) => {
                return Err(UpstreamError::Status { op, status });
            }
            Start::Connect => return Err(UpstreamError::Connect { op }),
            Start::Hang => std::future::pending().await,
            Start::Hold(release) => {
                release.notified().await;
                false
            }
        };
        Ok(SessionGrant {
            token: SessionToken::new(format!("token-{}", channel.name())),
            vendor: format!("vendor-{}", channel.name()),
            vendor_url: format!("{}/sdk", channel.base_url()),
            contingency,
        })
    }

    async fn liveness(
        &self,
        channel: &ChannelEndpoint,
        _appkey: &Appkey,
        _token: &SessionToken,
        _ctx: &CallContext,
    ) -> Result<LivenessVerdict, UpstreamError> {
        self.record("liveness", channel);
        let behaviour = self
            .verify
            .lock()
            .unwrap()
            .get(channel.name())
            .cloned()
            .unwrap_or(Verify::Verdict);
        let op = Operation::Liveness3D;
        match behaviour {
            Verify::Verdict => Ok(LivenessVerdict {
                valid: true,
                raw_code: "200.1".into(),
                ..Default::default()
            }),
            Verify::Status(status) => Err(UpstreamError::Status { op, status }),
            Verify::Transport => Err(UpstreamError::Transport { op }),
            Verify::Hang => std::future::pending().await,
        }
    }
}

fn spec(name: &str, priority: i32, threshold: u32) -> ChannelSpec {
    ChannelSpec {
        breaker: BreakerConfig {
            failure_threshold: threshold,
            base_ejection_ms: 1000,
            max_ejection_ms: 8000,
        },
        ..ChannelSpec::new(name, format!("http://{name}.test"), priority)
    }
}

fn two_channels() -> Vec<ChannelSpec> {
    vec![spec("primary", 0, 3), spec("alternative", 1, 3)]
}

fn router_with(
    specs: Vec<ChannelSpec>,
    routing: RoutingConfig,
) -> (Arc<ChannelRouter>, Arc<Double>) {
    let double = Arc::new(Double::default());
    let router = ChannelRouter::new(specs, &routing, double.clone()).expect("valid channels");
    (Arc::new(router), double)
}

fn router() -> (Arc<ChannelRouter>, Arc<Double>) {
    router_with(two_channels(), RoutingConfig::default())
}

fn key(n: u32) -> Appkey {
    Appkey::new(format!("appkey-{n}"))
}

fn token() -> SessionToken {
    SessionToken::new("token")
}

async fn start(router: &ChannelRouter, n: u32) -> Result<StartedSession, Error> {
    router
        .start_session(&CallContext::unbounded(), &key(n), "ua")
        .await
}

fn channel<'a>(s: &'a RouterSnapshot, name: &str) -> &'a ChannelSnapshot {
    s.channels.iter().find(|c| c.name == name).expect("listed")
}

fn session(name: &str) -> (&'static str, String) {
    ("session", name.to_owned())
}

fn liveness(name: &str) -> (&'static str, String) {
    ("liveness", name.to_owned())
}

#[tokio::test(start_paused = true)]
async fn a_healthy_primary_serves_new_sessions() {
    let (router, double) = router();
    let started = start(&router, 1).await.unwrap();
    assert_eq!(started.channel, "primary");
    assert_eq!(started.grant.vendor, "vendor-primary");
    assert_eq!(double.calls(), vec![session("primary")]);
    assert_eq!(channel(&router.snapshot(), "primary").sessions_started, 1);
}

#[tokio::test(start_paused = true)]
async fn connect_timeout_and_5xx_on_the_primary_fail_over_to_the_alternative() {
    for (fault, class) in [
        (Start::Connect, "connect"),
        (Start::Hang, "timeout"),
        (Start::Status(500), "http_5xx"),
        (Start::Status(503), "http_5xx"),
    ] {
        let (router, double) = router();
        double.on_start("primary", fault);
        let t0 = Instant::now();
        let started = start(&router, 1).await.unwrap();
        assert_eq!(started.channel, "alternative", "{class}");
        assert_eq!(
            double.calls(),
            vec![session("primary"), session("alternative")]
        );
        let snap = router.snapshot();
        let p = channel(&snap, "primary");
        assert_eq!(
            (p.failovers, p.session_failures, p.last_error_class),
            (1, 1, class)
        );
        assert_eq!(p.consecutive_failures, 1);
        assert_eq!(channel(&snap, "alternative").sessions_started, 1);
        if class == "timeout" {
            // The primary's own budget (timeout_ms), not the test, ended the call.
            assert_eq!(t0.elapsed(), Duration::from_millis(10_000));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_4xx_on_start_is_returned_at_once_without_failover() {
    let (router, double) = router();
    double.on_start("primary", Start::Status(401));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert_eq!(double.calls(), vec![session("primary")]);
    let p = router.snapshot().channels[0].clone();
    assert_eq!(
        (p.consecutive_failures, p.failovers),
        (0, 0),
        "a 4xx is not a fault"
    );
    assert_eq!(p.last_error_class, "http_4xx");
}

#[tokio::test(start_paused = true)]
async fn failover_stops_at_the_callers_deadline_without_blaming_the_channel() {
    let (router, double) = router();
    double.on_start("primary", Start::Hang);
    let deadline = Instant::now() + Duration::from_secs(3);
    let err = router
        .start_session(&CallContext::from_deadline(Some(deadline)), &key(1), "ua")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "DEADLINE_EXCEEDED");
    assert_eq!(Instant::now(), deadline);
    assert_eq!(double.calls(), vec![session("primary")]);
    assert_eq!(router.snapshot().channels[0].consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_skips_the_primary_unasked_then_probes_and_closes() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 2), spec("alternative", 1, 2)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Connect);
    for n in 0..2 {
        assert_eq!(start(&router, n).await.unwrap().channel, "alternative");
    }
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!((p.circuit, p.times_opened), (CircuitState::Open, 1));

    double.clear();
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    assert_eq!(
        double.calls(),
        vec![session("alternative")],
        "primary not called while open"
    );
    assert_eq!(channel(&router.snapshot(), "primary").rejected_open, 1);

    // Still open just before the back-off ends.
    tokio::time::advance(Duration::from_millis(999)).await;
    double.clear();
    start(&router, 3).await.unwrap();
    assert_eq!(double.calls(), vec![session("alternative")]);

    // After the back-off one probe goes; the primary has recovered.
    tokio::time::advance(Duration::from_millis(1)).await;
    double.on_start("primary", Start::Grant { contingency: false });
    double.clear();
    assert_eq!(start(&router, 4).await.unwrap().channel, "primary");
    assert_eq!(double.calls(), vec![session("primary")]);
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!(
        (p.circuit, p.consecutive_failures, p.ejections),
        (CircuitState::Closed, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_for_twice_as_long() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Status(502));
    start(&router, 0).await.unwrap();
    tokio::time::advance(Duration::from_millis(1000)).await;
    double.clear();
    start(&router, 1).await.unwrap();
    assert_eq!(
        double.calls(),
        vec![session("primary"), session("alternative")],
        "the probe"
    );
    tokio::time::advance(Duration::from_millis(1999)).await;
    double.clear();
    start(&router, 2).await.unwrap();
    assert_eq!(
        double.calls(),
        vec![session("alternative")],
        "re-opened for 2 s"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    double.clear();
    start(&router, 3).await.unwrap();
    assert_eq!(double.calls()[0], session("primary"));
}

#[tokio::test(start_paused = true)]
async fn forced_modes_apply_to_the_next_call_and_verification_stays_with_the_issuer() {
    let (router, double) = router();
    assert_eq!(start(&router, 1).await.unwrap().channel, "primary");

    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();

    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await
        .unwrap();

    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    assert_eq!(start(&router, 4).await.unwrap().channel, "alternative");

    assert_eq!(
        double.calls(),
        vec![
            session("primary"),
            session("alternative"),
            liveness("primary"),
            session("primary"),
            liveness("alternative"),
            session("alternative"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_forced_channel_is_retried_in_place_and_never_failed_over() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    double.on_start("alternative", Start::Status(503));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "UPSTREAM_UNAVAILABLE");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("alternative")],
        "session-token consumes nothing: retried on the forced channel, never elsewhere"
    );
    double.clear();

    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    router.drain("primary").unwrap();
    let err = start(&router, 2).await.unwrap_err();
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    assert!(err.to_string().contains("primary: drained"), "{err}");
    assert!(
        double.calls().is_empty(),
        "nothing sent to a drained forced channel"
    );
}

#[tokio::test(start_paused = true)]
async fn a_transient_fault_on_a_forced_channel_is_absorbed_by_the_retry() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    double.on_start("primary", Start::StatusOnce(503));
    let started = start(&router, 1).await.expect("the retry succeeds");
    assert_eq!(started.channel, "primary");
    assert_eq!(double.calls(), vec![session("primary"), session("primary")]);
}

#[tokio::test(start_paused = true)]
async fn a_forced_channel_is_not_retried_on_a_client_error() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    double.on_start("primary", Start::Status(401));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert_eq!(double.calls(), vec![session("primary")]);
}

#[tokio::test(start_paused = true)]
async fn drained_channels_are_skipped_and_all_drained_means_unavailable() {
    let (router, double) = router();
    router.drain("primary").unwrap();
    assert_eq!(start(&router, 1).await.unwrap().channel, "alternative");
    router.drain("alternative").unwrap();
    let err = start(&router, 2).await.unwrap_err();
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    router.undrain("primary").unwrap();
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("primary")]
    );
    assert!(matches!(
        router.drain("ghost"),
        Err(Error::ChannelUnknown(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn contingency_answers_are_returned_recorded_and_reported() {
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: true });
    let started = start(&router, 1).await.unwrap();
    assert!(started.grant.contingency);
    assert_eq!(started.channel, "primary");
    double.on_start("primary", Start::Grant { contingency: false });
    start(&router, 2).await.unwrap();
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!(p.contingency_answers, 1);
    assert!(!p.last_contingency, "the last answer was not contingency");
    assert_eq!(p.last_vendor, "vendor-primary");
    // Without a hold configured, routing did not change.
    assert!(!router.snapshot().contingency_hold_active);
}

#[tokio::test(start_paused = true)]
async fn a_contingency_hold_prefers_the_alternative_for_its_duration() {
    let routing = RoutingConfig {
        contingency_hold_secs: 60,
        ..RoutingConfig::default()
    };
    let (router, double) = router_with(two_channels(), routing);
    double.on_start("primary", Start::Grant { contingency: true });
    assert_eq!(start(&router, 1).await.unwrap().channel, "primary");
    assert!(router.snapshot().contingency_hold_active);
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    // The primary remains a fallback during the hold.
    double.on_start("alternative", Start::Connect);
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    double.on_start("alternative", Start::Grant { contingency: false });
    double.on_start("primary", Start::Grant { contingency: false });
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(start(&router, 4).await.unwrap().channel, "primary");
}

#[tokio::test(start_paused = true)]
async fn a_failed_verification_is_sent_once_and_never_elsewhere() {
    for (fault, reason) in [
        (Verify::Status(500), "OUTCOME_UNKNOWN"),
        (Verify::Transport, "OUTCOME_UNKNOWN"),
        (Verify::Hang, "OUTCOME_UNKNOWN"),
    ] {
        let (router, double) = router();
        start(&router, 1).await.unwrap();
        double.on_verify("primary", fault);
        double.clear();
        let err = router
            .verify(&CallContext::unbounded(), &key(1), &token(), None)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), reason);
        assert_eq!(double.calls(), vec![liveness("primary")]);
        let p = channel(&router.snapshot(), "primary").clone();
        assert_eq!((p.verifications, p.verification_failures), (1, 1));
        assert_eq!(
            p.consecutive_failures, 1,
            "the fault counts for the breaker"
        );
        // The binding survives an ambiguous failure: a retry goes to the same channel.
        double.clear();
        let _ = router
            .verify(&CallContext::unbounded(), &key(1), &token(), None)
            .await;
        assert_eq!(double.calls(), vec![liveness("primary")]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_definite_verdict_or_4xx_ends_the_binding() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    let verdict = router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert!(verdict.valid);
    let err = router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SessionUnknown));

    start(&router, 2).await.unwrap();
    double.on_verify("primary", Verify::Status(401));
    let err = router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert!(matches!(
        router
            .verify(&CallContext::unbounded(), &key(2), &token(), None)
            .await,
        Err(Error::SessionUnknown)
    ));
    assert_eq!(router.snapshot().bindings, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_session_without_a_channel_is_refused_before_sending() {
    let (router, double) = router();
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "SESSION_UNKNOWN");
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), Some(""))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "SESSION_UNKNOWN", "an empty name is no name");
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), Some("ghost"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "CHANNEL_UNKNOWN");
    assert!(double.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_named_channel_routes_a_verification_this_instance_did_not_start() {
    let (router, double) = router();
    router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("alternative")]);
}

#[tokio::test(start_paused = true)]
async fn a_channel_name_contradicting_the_binding_is_refused_before_sending() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    double.clear();
    let err = router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "CHANNEL_MISMATCH");
    assert!(double.calls().is_empty());
    // The matching name is fine.
    router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("primary"),
        )
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn verification_ignores_drain_and_open_circuit_of_the_issuer() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    start(&router, 1).await.unwrap();
    double.on_start("primary", Start::Connect);
    start(&router, 2).await.unwrap();
    router.drain("primary").unwrap();
    assert_eq!(
        channel(&router.snapshot(), "primary").circuit,
        CircuitState::Open
    );
    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("primary")]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_deadline_sends_no_verification() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    double.clear();
    let err = router
        .verify(
            &CallContext::from_deadline(Some(Instant::now())),
            &key(1),
            &token(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "DEADLINE_EXCEEDED");
    assert!(double.calls().is_empty());
}

#[tokio::test]
async fn a_reload_adds_a_channel_and_a_drain_keeps_the_call_in_flight() {
    let (router, double) = router();
    let release = Arc::new(Notify::new());
    double.on_start("primary", Start::Hold(release.clone()));
    let in_flight = tokio::spawn({
        let router = router.clone();
        async move { start(&router, 1).await }
    });
    double.entered.notified().await;

    let mut specs = two_channels();
    specs.push(spec("third", 2, 3));
    let summary = router.reload(specs).unwrap();
    assert_eq!(summary.added, vec!["third".to_owned()]);
    assert!(summary.removed.is_empty() && summary.changed.is_empty());
    router.drain("primary").unwrap();
    release.notify_one();

    let started = in_flight.await.unwrap().unwrap();
    assert_eq!(started.channel, "primary");
    let snap = router.snapshot();
    let names: Vec<_> = snap.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["primary", "alternative", "third"]);
    let p = channel(&snap, "primary");
    assert!(p.drained, "the drain survives on the reloaded set");
    assert_eq!(
        p.sessions_started, 1,
        "the in-flight call counted on the same channel"
    );

    router.drain("alternative").unwrap();
    assert_eq!(start(&router, 2).await.unwrap().channel, "third");
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls().last().unwrap(), &liveness("primary"));
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_removes_or_moves_a_channel_keeps_its_bound_verifications() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    start(&router, 2).await.unwrap();
    router.set_mode(RoutingMode::Auto).unwrap();

    // `primary` is gone; `alternative` moved to a new base URL.
    let mut moved = spec("alternative", 1, 3);
    moved.base_url = "http://moved.test".into();
    let summary = router.reload(vec![moved, spec("third", 2, 3)]).unwrap();
    assert_eq!(summary.removed, vec!["primary".to_owned()]);
    assert_eq!(summary.changed, vec!["alternative".to_owned()]);

    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    // Named or not, the binding pins the generation that issued the session.
    router
        .verify(
            &CallContext::unbounded(),
            &key(2),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap();
    let urls: Vec<_> = double
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.base_url.clone())
        .collect();
    assert_eq!(urls, ["http://primary.test", "http://alternative.test"]);
    // Counters of the changed channel carried over the reload.
    assert_eq!(
        channel(&router.snapshot(), "alternative").sessions_started,
        1
    );
    // A new session uses the new URL.
    assert_eq!(start(&router, 3).await.unwrap().channel, "alternative");
    assert_eq!(
        double.calls.lock().unwrap().last().unwrap().base_url,
        "http://moved.test"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_breaker_of_an_unchanged_channel() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Connect);
    start(&router, 1).await.unwrap();
    router
        .reload(vec![
            spec("primary", 0, 1),
            spec("alternative", 1, 1),
            spec("third", 2, 1),
        ])
        .unwrap();
    assert_eq!(
        channel(&router.snapshot(), "primary").circuit,
        CircuitState::Open
    );
}

#[tokio::test(start_paused = true)]
async fn mode_changes_and_reloads_that_cannot_apply_are_refused() {
    let (router, _double) = router();
    assert!(matches!(
        router.set_mode(RoutingMode::Channel("ghost".into())),
        Err(Error::ChannelUnknown(_))
    ));
    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    let err = router.reload(vec![spec("primary", 0, 3)]).unwrap_err();
    assert!(err.0.contains("alternative"), "{err}");
    assert_eq!(router.snapshot().channels.len(), 2, "nothing changed");
    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    assert!(router.reload(vec![spec("primary", 0, 3)]).is_err());
    let dup = vec![spec("a", 0, 3), spec("a", 1, 3)];
    assert!(router.reload(dup).is_err());

    let (single, _) = router_with(vec![spec("only", 0, 3)], RoutingConfig::default());
    assert_eq!(
        single
            .set_mode(RoutingMode::ForceAlternative)
            .unwrap_err()
            .reason(),
        "INVALID_REQUEST"
    );
}

#[tokio::test(start_paused = true)]
async fn no_appkey_or_token_appears_in_errors_or_snapshots() {
    let (router, double) = router();
    double.on_start("primary", Start::Connect);
    double.on_start("alternative", Start::Status(500));
    let err = start(&router, 77).await.unwrap_err();
    let shown = format!("{err} {err:?} {:?}", router.snapshot());
    assert!(!shown.contains("appkey-77"), "{shown}");
    assert!(!shown.contains("token-"), "{shown}");
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    assert!(shown.contains("primary: connect") && shown.contains("alternative: http_5xx"));
}

#[tokio::test(start_paused = true)]
async fn router_futures_are_send_so_tonic_handlers_can_await_them() {
    fn is_send<T: Send>(_: &T) {}
    let (router, double) = router();
    let (k, t) = (key(1), token());
    let ctx = CallContext::unbounded();
    let start = router.start_session(&ctx, &k, "ua");
    is_send(&start);
    let verify = router.verify(&ctx, &k, &t, None);
    is_send(&verify);
    // Dropping a session start before it is polled sends nothing.
    drop((start, verify));
    assert!(double.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_fleets_control_state_applies_whole_and_skips_what_does_not_fit() {
    use crate::cluster::ControlState;
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: false });
    double.on_start("alternative", Start::Grant { contingency: false });
    assert!(!router.snapshot().fleet_control);

    router.apply_control(&ControlState {
        mode: Some("force_alternative".into()),
        drained: ["primary".to_owned(), "elsewhere".to_owned()].into(),
        hold: None,
    });
    let snap = router.snapshot();
    assert!(snap.fleet_control);
    assert_eq!(snap.mode, RoutingMode::ForceAlternative);
    assert!(channel(&snap, "primary").drained);
    assert!(!channel(&snap, "alternative").drained);

    // A mode naming a channel not configured here is kept out; drains
    // follow the fleet both ways.
    router.apply_control(&ControlState {
        mode: Some("channel:ghost".into()),
        drained: Default::default(),
        hold: Some(Duration::from_secs(30)),
    });
    let snap = router.snapshot();
    assert_eq!(snap.mode, RoutingMode::ForceAlternative);
    assert!(!channel(&snap, "primary").drained);
    assert!(
        snap.contingency_hold_active,
        "the fleet's hold applies here"
    );
    assert_eq!(
        router.control_state().mode.as_deref(),
        Some("force_alternative")
    );
}

#[tokio::test(start_paused = true)]
async fn in_one_process_admin_changes_apply_at_once() {
    let (router, _) = router();
    router.change_drain("primary", true).await.unwrap();
    assert!(channel(&router.snapshot(), "primary").drained);
    assert_eq!(
        router
            .change_drain("ghost", true)
            .await
            .unwrap_err()
            .reason(),
        crate::error::Reason::ChannelUnknown
    );
    router
        .change_mode(RoutingMode::ForceAlternative)
        .await
        .unwrap();
    assert_eq!(router.mode(), RoutingMode::ForceAlternative);
    assert!(!router.snapshot().fleet_control);
}

fn weighted(text: &str) -> RoutingMode {
    text.parse().expect("a weighted mode")
}

/// Sessions of journeys `0..n` per channel.
async fn split_of(router: &ChannelRouter, n: u32) -> HashMap<String, u32> {
    let mut by = HashMap::new();
    for i in 0..n {
        *by.entry(start(router, i).await.unwrap().channel)
            .or_default() += 1;
    }
    by
}

#[tokio::test(start_paused = true)]
async fn a_weighted_split_sends_about_its_share_and_a_journey_always_to_the_same_channel() {
    let (router, _) = router();
    router
        .set_mode(weighted("weighted:primary=90,alternative=10"))
        .unwrap();
    let by = split_of(&router, 2_000).await;
    let primary = by["primary"];
    assert!((1_700..=1_900).contains(&primary), "{by:?}");
    assert_eq!(primary + by["alternative"], 2_000);
    for i in 0..200 {
        let first = start(&router, i).await.unwrap().channel;
        assert_eq!(
            start(&router, i).await.unwrap().channel,
            first,
            "journey {i}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_drained_or_open_circuit_channel_drops_out_of_the_split() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=50,alternative=50"))
        .unwrap();
    router.drain("alternative").unwrap();
    assert_eq!(split_of(&router, 300).await["primary"], 300);
    assert!(!double.calls().contains(&session("alternative")));

    // An open circuit: its share goes to the rest without a call to it.
    router.undrain("alternative").unwrap();
    double.on_start("alternative", Start::Status(503));
    for i in 1_000..1_100 {
        start(&router, i).await.unwrap();
    }
    assert_eq!(
        channel(&router.snapshot(), "alternative").circuit,
        CircuitState::Open
    );
    double.clear();
    assert_eq!(split_of(&router, 300).await["primary"], 300);
    assert!(!double.calls().contains(&session("alternative")));
}

#[tokio::test(start_paused = true)]
async fn a_weighted_pick_that_fails_fails_over_as_in_auto() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=0,alternative=1"))
        .unwrap();
    double.on_start("alternative", Start::Status(500));
    let started = start(&router, 1).await.unwrap();
    assert_eq!(started.channel, "primary");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("primary")]
    );
    assert_eq!(channel(&router.snapshot(), "alternative").failovers, 1);
}

#[tokio::test(start_paused = true)]
async fn changing_the_weights_moves_new_sessions_but_never_a_started_one() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=0,alternative=1"))
        .unwrap();
    let started = start(&router, 500).await.unwrap();
    assert_eq!(started.channel, "alternative");
    router
        .set_mode(weighted("weighted:primary=1,alternative=0"))
        .unwrap();
    assert_eq!(split_of(&router, 50).await["primary"], 50);
    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(500), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("alternative")]);
}

#[tokio::test(start_paused = true)]
async fn a_weighted_mode_naming_an_unknown_channel_is_refused() {
    let (router, _) = router();
    let err = router
        .set_mode(weighted("weighted:primary=9,ghost=1"))
        .unwrap_err();
    assert!(
        matches!(err, Error::ChannelUnknown(ref n) if n == "ghost"),
        "{err:?}"
    );
    assert_eq!(router.mode(), RoutingMode::Auto);
}

#[tokio::test(start_paused = true)]
async fn figures_count_sessions_outcomes_errors_and_latency_per_channel() {
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: true });
    start(&router, 1).await.unwrap();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    double.on_verify("primary", Verify::Status(503));
    start(&router, 2).await.unwrap();
    let _ = router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await;
    let figures = router.figures().window(60);
    let p = figures["primary"];
    assert_eq!((p.sessions_started, p.contingency_answers), (2, 2));
    assert_eq!(p.verifications(), 2);
    assert_eq!(
        p.verification_errors.classes().collect::<Vec<_>>(),
        [("http_5xx", 1)]
    );
    assert_eq!(p.session_latency.count(), 2);
    assert_eq!(p.liveness_latency.count(), 2);
    assert!(!figures.contains_key("alternative"), "nothing sent there");
}
