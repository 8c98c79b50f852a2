//! Authentication's series: whether callers are authenticated at all,
//! refusals by reason and cause (and how many cost no signature check),
//! connections told to go away for refused calls, failed JWKS fetches,
//! and the admin listener's refused calls by cause. Labels are
//! fixed words (`CALLER_UNAUTHENTICATED`, `expired`, ...): never a caller,
//! a subject or a token.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RefusalLabels {
    pub(super) reason: &'static str,
    pub(super) cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AdminRefusalLabels {
    pub(super) cause: &'static str,
}

/// Why an admin call was refused, the bounded `cause` label values of
/// `idgate_admin_refusals_total`, each present at 0 from the start.
pub const ADMIN_REFUSAL_CAUSES: [&str; 3] = ["no_credential", "malformed", "wrong_token"];

/// Authentication's series.
pub(super) struct AuthSeries {
    pub(super) enabled: Gauge,
    pub(super) refusals: Family<RefusalLabels, Counter>,
    pub(super) jwks_fetch_failures: Counter,
    pub(super) refused_from_memory: Counter,
    pub(super) connections_closed: Counter,
    pub(super) admin_refusals: Family<AdminRefusalLabels, Counter>,
}

impl AuthSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            enabled: Gauge::default(),
            refusals: Family::default(),
            jwks_fetch_failures: Counter::default(),
            refused_from_memory: Counter::default(),
            connections_closed: Counter::default(),
            admin_refusals: Family::default(),
        };
        for cause in ADMIN_REFUSAL_CAUSES {
            drop(
                series
                    .admin_refusals
                    .get_or_create(&AdminRefusalLabels { cause }),
            );
        }
        registry.register(
            "idgate_auth_enabled",
            "1 when the public listener authenticates callers ([auth] mode jwt, mtls or jwt_or_mtls), 0 when it runs open (mode none, the embedded sandbox)",
            series.enabled.clone(),
        );
        registry.register(
            "idgate_auth_refusals",
            "Public calls refused by caller policy, by reason (CALLER_UNAUTHENTICATED, CALLER_UNKNOWN, OPERATION_NOT_ALLOWED, PROFILE_NOT_ALLOWED) and cause (no_credential, malformed, expired, not_yet_valid, audience, issuer, signature, algorithm, unknown_key, missing_claim, no_certificate_identity, spiffe_not_single_uri, no_caller_entry, or the operation refused)",
            series.refusals.clone(),
        );
        registry.register(
            "idgate_auth_jwks_fetch_failures",
            "JWKS fetches or file reads that failed; the last good keys stay in use",
            series.jwks_fetch_failures.clone(),
        );
        registry.register(
            "idgate_auth_refused_from_memory",
            "Bearer tokens refused again from the memory of refused tokens (60 s, by SHA-256), without a signature check; also counted in idgate_auth_refusals",
            series.refused_from_memory.clone(),
        );
        registry.register(
            "idgate_auth_connections_closed",
            "Public connections told to go away (HTTP/2 GOAWAY) after 20 calls in a row were refused authentication",
            series.connections_closed.clone(),
        );
        registry.register(
            "idgate_admin_refusals",
            "Admin listener calls refused for their bearer token, by cause (no_credential, malformed, wrong_token)",
            series.admin_refusals.clone(),
        );
        series
    }
}

impl Metrics {
    /// Sets whether callers are authenticated.
    pub fn set_auth_enabled(&self, enabled: bool) {
        self.inner.auth.enabled.set(i64::from(enabled));
    }

    /// Counts one refused call (fixed words only).
    pub fn record_auth_refusal(&self, reason: &'static str, cause: &'static str) {
        self.inner
            .auth
            .refusals
            .get_or_create(&RefusalLabels { reason, cause })
            .inc();
    }

    /// Counts one refused admin call, `cause` one of
    /// [`ADMIN_REFUSAL_CAUSES`] (another is ignored: labels stay bounded).
    pub fn record_admin_refusal(&self, cause: &str) {
        if let Some(cause) = ADMIN_REFUSAL_CAUSES.into_iter().find(|c| *c == cause) {
            self.inner
                .auth
                .admin_refusals
                .get_or_create(&AdminRefusalLabels { cause })
                .inc();
        }
    }

    /// Counts one failed JWKS fetch or read.
    pub fn record_jwks_fetch_failure(&self) {
        self.inner.auth.jwks_fetch_failures.inc();
    }

    /// Counts one token refused from memory.
    pub fn record_auth_refused_from_memory(&self) {
        self.inner.auth.refused_from_memory.inc();
    }

    /// Counts one connection told to go away for refused calls.
    pub fn record_auth_connection_closed(&self) {
        self.inner.auth.connections_closed.inc();
    }

    /// How many JWKS fetches failed so far.
    pub fn jwks_fetch_failures(&self) -> u64 {
        self.inner.auth.jwks_fetch_failures.get()
    }
}
