//! The tonic services: thin shims that validate, call the journey core,
//! the channel router or the event hub, and convert. The work lives in
//! plain async functions that tests can call directly.
//!
//! - [`validate`]: every request -> a validated, named type, before any
//!   upstream call; `[limits]` ([`LimitsConfig`]) bounds what it accepts.
//! - [`JourneyApi`], [`LivenessApi`], [`DocumentApi`]: the public API.
//! - [`access`]: whose journey a call names ([`JourneyAccess`]): issued
//!   here or foreign, and owned by the caller or not, in one lookup.
//! - [`authorize`]: each RPC against its caller's policy; [`caller_of`]
//!   gives any handler the `Arc<Caller>` the auth layer found.
//! - [`audit`]: one record per call that submits or releases personal
//!   data, on the log target `idgate::audit`.
//! - [`slots`]: per-caller limits on calls in flight and watch streams.
//! - [`view`]: the part of a result each caller's `result_view` allows.
//! - [`admin`]: `ChannelAdminService`, behind a bearer token, served on
//!   the admin listener only; `[admin]` ([`AdminConfig`]).
//! - [`figures`]: the proto form of the channels' vendor figures.

mod access;
pub mod admin;
mod audit;
mod authorize;
mod document;
pub mod figures;
mod journey;
mod limits;
mod liveness;
mod slots;
pub mod validate;
pub mod view;

pub use access::{Issued, JourneyAccess, owner_of};
pub use admin::{AdminConfig, AdminServer, ChannelAdmin, admin_auth_interceptor, admin_service};
pub use audit::{AUDIT_TARGET, Audit};
pub use authorize::{authorize, authorize_profile, caller_of};
pub use document::DocumentApi;
pub use journey::JourneyApi;
pub use limits::LimitsConfig;
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

/// Puts the journey reference of `appkey` on the RPC's server span (the
/// current span when the handler runs without the server layer), so every
/// span of the journey can be found by it. Handlers open no span of their
/// own: the server span is the call's, and the client spans are its
/// children.
fn record_journey(server: &Option<tracing::Span>, appkey: &Appkey) -> JourneyRef {
    let journey = JourneyRef::from_appkey(appkey);
    match server {
        Some(span) => telemetry::record_journey(span, &journey),
        None => telemetry::record_journey(&tracing::Span::current(), &journey),
    }
    journey
}
