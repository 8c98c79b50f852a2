//! Who calls the public gRPC listener: identities from mTLS client
//! certificates (SPIFFE IDs) and JWT bearer tokens, resolved to a
//! [`Caller`](crate::domain::Caller) of the `[[callers]]` table.
//!
//! Layered between `telemetry`/`domain` and `api`: the [`AuthLayer`] goes on
//! the public listener, authenticates every call but health probes, and
//! hands the handlers an `Arc<Caller>` (and the [`Identity`] it came
//! from) in the request's extensions; the handlers check each call
//! against it, and an open `WatchJourney` stream re-checks it when a
//! reload replaces the table ([`Policy::subscribe`]). Nothing here
//! imports the server, the API or the composed configuration.
//!
//! - [`config`]: `[auth]`, `[auth.jwt]`, `[[callers]]`;
//! - [`jwks`]: the keys (file or URL, cached, refreshed);
//! - [`jwt`]: token verification, the algorithm pinned by the key;
//! - `memory`: the tokens it accepted and refused, by digest, bounded;
//! - [`mtls`]: the identity of a client certificate;
//! - [`policy`]: the caller table, swapped whole on SIGHUP, and its
//!   updates for open streams;
//! - [`layer`]: the tower layer and the [`Authenticator`] it asks.
//!
//! No error, log line, span or metric label holds a token, a claim value
//! or a certificate name: refusals are counted by reason and cause only.

use std::sync::Arc;

pub mod config;
pub mod jwks;
pub mod jwt;
pub mod layer;
mod memory;
pub mod mtls;
pub mod policy;

pub use config::{AuthConfig, AuthMode, CallerConfig, JwtConfig, validate_callers};
pub use layer::{AuthLayer, AuthSetupError, Authenticator, CallersReload, Refusal};
pub use policy::{CallerTable, CallerUpdates, Identity, Policy, Shares};

/// What the auth module reports for metrics: implemented by the
/// gateway's metrics, by a counter in tests. Labels are fixed names.
pub trait AuthEvents: Send + Sync + 'static {
    /// A call was refused: `reason` is the `ErrorInfo` reason
    /// (`CALLER_UNAUTHENTICATED`, ...), `cause` a fixed word
    /// (`expired`, `no_credential`, ...).
    fn refused(&self, reason: &'static str, cause: &'static str);
    /// A JWKS fetch or read failed (the last good keys stay).
    fn jwks_fetch_failed(&self);
    /// A token was refused from memory, without a signature check (the
    /// refusal itself is also counted by [`AuthEvents::refused`]).
    fn refused_from_memory(&self);
    /// A connection was told to go away after
    /// [`MAX_REFUSALS_IN_A_ROW`](layer::MAX_REFUSALS_IN_A_ROW) refused calls.
    fn connection_closed_for_refusals(&self);
}

/// The refusal counter, left by the layer in each request's extensions
/// beside the `Arc<Caller>`, so the handlers' refusals are counted with
/// the layer's.
#[derive(Clone)]
pub struct Refusals(pub Arc<dyn AuthEvents>);

/// Events that go nowhere (tools and tests that count nothing).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl AuthEvents for NoEvents {
    fn refused(&self, _: &'static str, _: &'static str) {}
    fn jwks_fetch_failed(&self) {}
    fn refused_from_memory(&self) {}
    fn connection_closed_for_refusals(&self) {}
}

/// The gateway's metrics count what authentication reports.
impl AuthEvents for crate::telemetry::Metrics {
    fn refused(&self, reason: &'static str, cause: &'static str) {
        self.record_auth_refusal(reason, cause);
    }

    fn jwks_fetch_failed(&self) {
        self.record_jwks_fetch_failure();
    }

    fn refused_from_memory(&self) {
        self.record_auth_refused_from_memory();
    }

    fn connection_closed_for_refusals(&self) {
        self.record_auth_connection_closed();
    }
}
