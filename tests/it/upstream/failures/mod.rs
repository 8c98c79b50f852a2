//! Every failure maps to the intended `UpstreamError` and gRPC status,
//! operations that consume the appkey are sent exactly once, and the
//! body bound holds. The helpers shared by the concerns below live here.
//!
//! - `answers`: a 200 whose body cannot be trusted (malformed, oversize);
//! - `statuses`: refusals by HTTP status and the reason callers read;
//! - `retries`: what is retried and what is sent exactly once;
//! - `deadlines`: timeouts and the caller's deadline.

mod answers;
mod deadlines;
mod retries;
mod statuses;

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use idgate::domain::Appkey;
use idgate::{
    context::CallContext,
    upstream::{ChannelEndpoint, UpstreamError},
};

use crate::support::upstream::{Counter, LIVENESS_3D, SESSION_3D};

/// A route answering `status` with `body`, counting hits.
fn answering(path: &'static str, status: u16, body: &'static str, count: Counter) -> Router {
    Router::new().route(
        path,
        post(move || {
            count.hit();
            async move { (StatusCode::from_u16(status).expect("status"), body) }
        }),
    )
}

/// The core upstream's 3D paths as a channel, as the router's channels
/// are built.
fn core_channel(addr: std::net::SocketAddr) -> ChannelEndpoint {
    ChannelEndpoint::new(
        format!("http://{addr}"),
        SESSION_3D,
        LIVENESS_3D,
        Duration::from_secs(10),
    )
}

fn ctx() -> CallContext {
    CallContext::unbounded()
}

fn ak() -> Appkey {
    Appkey::new("canary-appkey-0001")
}

/// No error message may carry the appkey, the answer, or personal data.
fn assert_clean(err: &UpstreamError) {
    let text = format!("{err} {err:?}");
    for needle in ["canary", "MARIA", "52998224725", "Silva"] {
        assert!(!text.contains(needle), "{text}");
    }
}
