//! Injectable time, so expiries and document processing can be tested
//! without real waits.

use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;

/// The sandbox's source of time.
///
/// Every expiry (credential token, appkey, challenge window) and the
/// document-processing timeline is evaluated against this clock, lazily,
/// when a request or the background driver looks at the state. Tests inject
/// a [`ManualClock`] and move time with [`ManualClock::advance`].
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> OffsetDateTime;

    /// A receiver that changes whenever the clock jumps, so the background
    /// driver can wake up at once instead of polling. `None` for clocks
    /// that follow real time (the driver then sleeps until the next due
    /// event).
    fn watch(&self) -> Option<watch::Receiver<OffsetDateTime>> {
        None
    }
}

/// Wall-clock time: what a customer running the sandbox locally wants.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told to, for deterministic tests.
///
/// Advancing it notifies the sandbox's background driver, so a completion
/// webhook that becomes due is sent without any real sleep.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<OffsetDateTime>,
}

impl ManualClock {
    /// A manual clock that starts at the current wall-clock second, so
    /// timestamps it produces look plausible to other components.
    pub fn new() -> Self {
        let now = OffsetDateTime::now_utc();
        Self::starting_at(now.replace_nanosecond(0).unwrap_or(now))
    }

    /// A manual clock that starts at `start`, for fully reproducible output.
    pub fn starting_at(start: OffsetDateTime) -> Self {
        let (now, _) = watch::channel(start);
        Self { now }
    }

    /// Moves the clock forward by `by` and wakes whoever watches it.
    pub fn advance(&self, by: Duration) {
        self.now.send_modify(|now| {
            *now = now.saturating_add(by.try_into().unwrap_or(time::Duration::MAX))
        });
    }

    /// Sets the clock to `to` (which may be in the past) and wakes watchers.
    pub fn set(&self, to: OffsetDateTime) {
        self.now.send_replace(to);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.now.borrow()
    }

    fn watch(&self) -> Option<watch::Receiver<OffsetDateTime>> {
        Some(self.now.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::starting_at(time::macros::datetime!(2025-01-06 12:00 UTC));
        assert_eq!(clock.now(), time::macros::datetime!(2025-01-06 12:00 UTC));
        clock.advance(Duration::from_secs(61));
        assert_eq!(
            clock.now(),
            time::macros::datetime!(2025-01-06 12:01:01 UTC)
        );
    }

    #[test]
    fn manual_clock_notifies_watchers_on_advance() {
        let clock = ManualClock::new();
        let rx = clock.watch().expect("manual clock is watchable");
        assert!(!rx.has_changed().unwrap_or(true));
        clock.advance(Duration::from_secs(1));
        assert!(rx.has_changed().unwrap_or(false));
    }
}
