//! `idgate_plaintext_hops`: the network legs the gateway sends over
//! without TLS to another machine, by kind. Set once at start; the label
//! values are the fixed [`PLAINTEXT_HOP_KINDS`], never a URL or host.

use super::*;

/// The kinds of plaintext hop, each present at 0 until set.
pub const PLAINTEXT_HOP_KINDS: [&str; 6] = [
    "upstream",
    "channel",
    "redis",
    "otlp",
    "grpc_tokens",
    "admin_token",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct HopLabels {
    pub(super) hop: &'static str,
}

/// Registers the family with every kind at 0.
pub(super) fn register(registry: &mut Registry) -> Family<HopLabels, Gauge> {
    let family = Family::<HopLabels, Gauge>::default();
    for hop in PLAINTEXT_HOP_KINDS {
        drop(family.get_or_create(&HopLabels { hop }));
    }
    registry.register(
        "idgate_plaintext_hops",
        "Configured hops sent without TLS to a host other than loopback, by kind (upstream, channel, redis, otlp, grpc_tokens, admin_token); set at start",
        family.clone(),
    );
    family
}

impl Metrics {
    /// Sets the number of plaintext hops of `hop`, one of
    /// [`PLAINTEXT_HOP_KINDS`] (another kind is ignored: labels stay
    /// bounded).
    pub fn set_plaintext_hops(&self, hop: &str, count: usize) {
        if let Some(hop) = PLAINTEXT_HOP_KINDS.into_iter().find(|k| *k == hop) {
            let count = i64::try_from(count).unwrap_or(i64::MAX);
            self.inner
                .plaintext_hops
                .get_or_create(&HopLabels { hop })
                .set(count);
        }
    }
}
