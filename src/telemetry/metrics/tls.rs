//! TLS handshakes the listeners refused, by listener and cause (a fixed
//! word: `expired`, `revoked`, `not_client_auth`, ...): never a name or
//! anything else read from a certificate.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct HandshakeLabels {
    pub(super) listener: &'static str,
    pub(super) cause: &'static str,
}

/// The TLS series.
pub(super) struct TlsSeries {
    pub(super) handshake_failures: Family<HandshakeLabels, Counter>,
}

impl TlsSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            handshake_failures: Family::default(),
        };
        registry.register(
            "idgate_tls_handshake_failures",
            "TLS handshakes refused, by listener and cause (expired, not_yet_valid, revoked, unknown_issuer, not_client_auth, bad_certificate, no_certificate, timeout, protocol)",
            series.handshake_failures.clone(),
        );
        series
    }
}

impl Metrics {
    /// Counts one refused handshake on `listener` (fixed words only).
    pub fn record_tls_handshake_failure(&self, listener: &'static str, cause: &'static str) {
        self.inner
            .tls
            .handshake_failures
            .get_or_create(&HandshakeLabels { listener, cause })
            .inc();
    }
}
