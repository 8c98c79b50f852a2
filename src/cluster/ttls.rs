//! How long each kind of entry lives and how many one process holds, in
//! every tier: the configuration of the concern that owns it, gathered
//! for [`Shared`](super::Shared).

use std::time::Duration;

/// How long shared entries live: the same as the in-memory tables'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttls {
    /// Journey records (`[journeys] retention_hours`).
    pub journey: Duration,
    /// Most journey records one process holds (`[journeys] max_entries`).
    pub journey_max_entries: usize,
    /// How long a replica remembers that Redis holds no record of a
    /// journey (`[journeys] unknown_ttl_secs`).
    pub journey_unknown: Duration,
    /// 3D session bindings (`[routing] binding_ttl_secs`).
    pub binding: Duration,
    /// Most 3D session bindings a replica holds (`[routing] max_bindings`).
    pub binding_max_entries: usize,
    /// Webhook deliveries remembered for dedupe (`[webhook] dedupe_ttl_secs`).
    pub dedupe: Duration,
    /// Most deliveries remembered in memory.
    pub dedupe_max_entries: usize,
    /// Completed idempotency records (`[idempotency] ttl_secs`).
    pub idempotency: Duration,
    /// Most idempotency records held in memory
    /// (`[idempotency] max_entries`).
    pub idempotency_max_entries: usize,
    /// Vendor figures' per-minute buckets
    /// (`[routing] figures_retention_minutes`).
    pub figures: Duration,
    /// The charge-back report's counts (`[usage] retention_days`).
    pub usage: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Self {
            journey: Duration::from_secs(86_400),
            journey_max_entries: 100_000,
            journey_unknown: Duration::from_secs(30),
            binding: Duration::from_secs(600),
            binding_max_entries: 100_000,
            dedupe: Duration::from_secs(900),
            dedupe_max_entries: 100_000,
            idempotency: Duration::from_secs(86_400),
            idempotency_max_entries: 100_000,
            // A day: `[routing] figures_retention_minutes`' default.
            figures: Duration::from_secs(86_400),
            // `[usage] retention_days`' default.
            usage: Duration::from_secs(93 * 86_400),
        }
    }
}
