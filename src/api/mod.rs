//! The tonic services, behind one door.
//!
//! Every public RPC is admitted by one tower layer after the auth layer
//! ([`AdmissionLayer`]): operation, per-caller slot, audit record, in one
//! order. Each handler is then a shim: [`admit`], an `inner_*` function
//! that returns the crate's [`crate::Error`], [`Admitted::finish`] (the
//! one conversion to a `Status`). The work lives in plain async functions
//! that tests can call directly.
//!
//! - [`rpc`]: the public RPCs' table (operation, audit name, stream).
//! - [`admission`]: the door; [`admitted`]: what a handler holds.
//! - [`validate`]: every request -> a validated, named type, before any
//!   upstream call; `[limits]` ([`LimitsConfig`]) bounds what it accepts.
//! - [`JourneyApi`], [`LivenessApi`], [`DocumentApi`]: the public API.
//! - [`access`]: whose journey a call names ([`JourneyAccess`]): issued
//!   here or foreign, and owned by the caller or not, in one lookup of the
//!   journey's record.
//! - [`slots`]: per-caller limits on calls in flight and watch streams.
//! - `revocation`: open `WatchJourney` streams ended (`CALLER_REVOKED`)
//!   or narrowed when a reload removes or narrows their caller.
//! - [`view`]: the part of a result each caller's `result_view` allows.
//! - [`admin`]: `ChannelAdminService`, behind a bearer token, served on
//!   the admin listener only; `[admin]` ([`AdminConfig`]).
//! - [`figures`]: the proto form of the channels' vendor figures.

mod access;
pub mod admin;
pub mod admission;
mod admitted;
mod document;
pub mod figures;
mod journey;
mod limits;
mod liveness;
mod request_bytes;
mod revocation;
pub mod rpc;
mod slots;
pub mod validate;
pub mod view;

pub use crate::telemetry::audit::AUDIT_TARGET;
pub use access::{Issued, JourneyAccess};
pub use admin::{AdminConfig, AdminServer, ChannelAdmin, admin_auth_interceptor, admin_service};
pub use admission::AdmissionLayer;
pub use admitted::{Admitted, admit};
pub use document::DocumentApi;
pub use journey::JourneyApi;
pub use limits::LimitsConfig;
pub use liveness::LivenessApi;
pub use request_bytes::RequestBytes;

#[cfg(test)]
mod tests;
