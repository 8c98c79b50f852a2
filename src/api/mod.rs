//! The tonic services: thin shims that validate, call the journey core or
//! the channel router, and convert. The work lives in plain async
//! functions that tests can call directly.

pub mod deadline;
mod document;
mod journey;
mod liveness;
pub mod validate;

pub use document::DocumentApi;
pub use journey::JourneyApi;
pub use liveness::LivenessApi;

use crate::{
    domain::{Appkey, JourneyRef},
    telemetry::{self, ServerSpan},
};

/// The RPC's server span (opened by the telemetry layer), if any.
fn server_span<T>(request: &tonic::Request<T>) -> Option<tracing::Span> {
    request
        .extensions()
        .get::<ServerSpan>()
        .map(|s| s.0.clone())
}

/// Puts the journey reference of `appkey` on the RPC's server span and
/// on the handler's span, so every span of the journey can be found by it.
fn record_journey(server: &Option<tracing::Span>, appkey: &Appkey) -> JourneyRef {
    let journey = JourneyRef::from_appkey(appkey);
    if let Some(span) = server {
        telemetry::record_journey(span, &journey);
    }
    telemetry::record_journey(&tracing::Span::current(), &journey);
    journey
}
