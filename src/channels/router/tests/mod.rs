//! Behaviour of the router, with an in-memory transport that records every
//! call and answers as each channel is told to. This tests routing, breaker
//! and binding logic, not HTTP.
//!
//! This module holds the shared fixtures (the transport double, channel
//! specs, a router over them, and call shorthands) so that each submodule
//! is left with the behaviour it proves.

mod control;
mod failover;
mod panic;
mod reload;
mod surface;
mod verification;
mod weighted;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::Notify;

use super::*;
use crate::{
    Error,
    channels::BreakerConfig,
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
        // `threshold` faults in a row open the circuit: every call failed.
        breaker: BreakerConfig {
            failure_threshold: threshold,
            minimum_calls: threshold,
            failure_rate_percent: 100,
            base_ejection_ms: 1000,
            max_ejection_ms: 8000,
            half_open_trials: 1,
            ..BreakerConfig::default()
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
