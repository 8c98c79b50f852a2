//! The tonic services, behind one door.
//!
//! Every public RPC passes one door, in two halves that follow its row
//! of the RPC table ([`rpc`]). The tower layer after the auth layer
//! ([`AdmissionLayer`]) admits the call before its message is read:
//! operation, per-caller slot, request bytes, audit record.
//! [`ApiContext::enter`] finishes once the message is decoded: the whole
//! request validated, its journey found (issued here? the caller's?) or
//! made, billed, put on the span and the audit record, the upstream
//! operation marked. Each handler is then a shim: `enter`, an `inner_*`
//! function that translates and returns the crate's [`crate::Error`],
//! [`Admitted::finish`] (the one conversion to a `Status`).
//!
//! ```text
//! AuthLayer -> AdmissionLayer (row: permission, slot, bytes, audit)
//!           -> handler: ApiContext::enter (validate; row: journey naming, billing, upstream op)
//!                       -> inner_* (translation: JourneyCore, ChannelRouter, JourneyWatches)
//!                       -> Admitted::finish
//! ```
//!
//! - [`rpc`]: the public RPCs' table.
//! - [`admission`]: the door's tower half; [`context`]: its message
//!   half and the context the three services share; [`requests`]: each
//!   request message as the door admits it; [`admitted`]: what a handler
//!   holds.
//! - [`validate`]: every request -> a validated, named type, before any
//!   upstream call; `[limits]` ([`LimitsConfig`]) bounds what it accepts.
//! - [`JourneyApi`], [`LivenessApi`], [`DocumentApi`]: the public API.
//! - [`slots`]: per-caller limits on calls in flight and watch streams.
//! - `revocation`: open `WatchJourney` streams ended (`CALLER_REVOKED`)
//!   or narrowed when a reload removes or narrows their caller.
//! - [`view`]: the part of a result each caller's `result_view` allows.
//! - [`admin`]: `ChannelAdminService`, behind a bearer token, served on
//!   the admin listener only; `[admin]` ([`AdminConfig`]).
//! - [`figures`]: the proto form of the channels' vendor figures.

pub mod admin;
pub mod admission;
mod admitted;
mod context;
mod document;
pub mod figures;
mod journey;
mod limits;
mod liveness;
mod request_bytes;
mod requests;
mod revocation;
pub mod rpc;
mod slots;
pub mod validate;
pub mod view;

pub use crate::telemetry::audit::AUDIT_TARGET;
pub use admin::{AdminConfig, AdminServer, ChannelAdmin, admin_auth_interceptor, admin_service};
pub use admission::AdmissionLayer;
pub use admitted::{Admitted, admit};
pub use context::{ApiContext, Named, Target};
pub use document::DocumentApi;
pub use journey::JourneyApi;
pub use limits::LimitsConfig;
pub use liveness::LivenessApi;
pub use request_bytes::RequestBytes;

#[cfg(test)]
mod tests;
