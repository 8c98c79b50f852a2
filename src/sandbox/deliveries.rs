//! The sandbox's webhook delivery counters: a leaf the app state holds
//! and the delivery driver updates.

/// Delivery counters, observable through a watch channel so tests can
/// await them instead of sleeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WebhookStats {
    /// Notices queued (one per finished journey).
    pub queued: u64,
    /// HTTP attempts made.
    pub attempts: u64,
    /// Notices answered with a 2xx.
    pub delivered: u64,
    /// Notices given up after the last attempt.
    pub abandoned: u64,
    /// The clock (Unix seconds) of the driver's last look for finished
    /// journeys: once it has reached a time and every queued notice is
    /// delivered or abandoned, nothing up to that time is left to send, so
    /// a test proves that nothing more goes out from these counters rather
    /// than by listening for a while.
    pub swept_to: i64,
}

impl WebhookStats {
    /// Every queued notice is delivered or abandoned: no attempt runs or
    /// waits to run.
    pub fn idle(&self) -> bool {
        self.queued == self.delivered + self.abandoned
    }
}
