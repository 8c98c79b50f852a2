//! The breaker's sliding window: calls and failures over the last
//! `window_secs` seconds, in one-second buckets, so a rate reflects now
//! and not the channel's whole life. Fixed size, allocated once: recording
//! a call allocates nothing.

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The second (since the window's origin) this bucket counts.
    second: u64,
    calls: u32,
    failures: u32,
}

/// Calls and failures of the last `len` seconds.
#[derive(Debug)]
pub(super) struct Window {
    origin: Instant,
    buckets: Box<[Bucket]>,
}

impl Window {
    /// An empty window of `seconds` one-second buckets.
    pub(super) fn new(seconds: u64, origin: Instant) -> Self {
        let len = usize::try_from(seconds.max(1)).unwrap_or(1);
        Self {
            origin,
            buckets: vec![Bucket::default(); len].into_boxed_slice(),
        }
    }

    fn second(&self, now: Instant) -> u64 {
        // Buckets count from 1 so that a zeroed bucket is never current.
        now.saturating_duration_since(self.origin).as_secs() + 1
    }

    /// Counts one call at `now`.
    pub(super) fn record(&mut self, now: Instant, failed: bool) {
        let second = self.second(now);
        let len = self.buckets.len() as u64;
        let bucket = &mut self.buckets[(second % len) as usize];
        if bucket.second != second {
            *bucket = Bucket {
                second,
                ..Bucket::default()
            };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        bucket.failures = bucket.failures.saturating_add(u32::from(failed));
    }

    /// Calls and failures within the window ending at `now`.
    pub(super) fn totals(&self, now: Instant) -> (u32, u32) {
        let second = self.second(now);
        let len = self.buckets.len() as u64;
        self.buckets
            .iter()
            .filter(|b| b.second != 0 && b.second <= second && second - b.second < len)
            .fold((0u32, 0u32), |(c, f), b| {
                (c.saturating_add(b.calls), f.saturating_add(b.failures))
            })
    }

    /// Forgets every call (a circuit that closes starts afresh).
    pub(super) fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
    }
}
