//! At most one log line per interval for events a peer can cause at will
//! (refused webhook deliveries, unauthenticated calls, a vendor repeating
//! an appkey): a flood of forged requests must not turn into a flood of
//! log lines. Every event is still counted in the metrics; the line that
//! is written says how many were left out since the last one.
//!
//! Time is passed in (`tokio::time::Instant`), so that tests drive it.

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

/// A log throttle: [`LogThrottle::admit`] says whether to write a line now
/// and how many were suppressed since the last one written.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    interval: Duration,
    state: Mutex<ThrottleState>,
}

#[derive(Debug, Default)]
struct ThrottleState {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogThrottle {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            state: Mutex::new(ThrottleState::default()),
        }
    }

    /// One event at `now`: `Some(suppressed)` when a line is due (the
    /// events left out since the last line), `None` when this one is left
    /// out.
    pub(crate) fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = crate::sync::lock(&self.state);
        let due = state
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        if due {
            state.last = Some(now);
            Some(std::mem::take(&mut state.suppressed))
        } else {
            state.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_first_event_is_logged_then_one_per_interval_with_the_count_left_out() {
        let throttle = LogThrottle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.admit(t0), Some(0));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(30)), Some(0));
    }

    proptest! {
        /// Whatever the arrivals, lines are at least an interval apart, and
        /// every event is either a line or counted in a later line's
        /// suppressed count (or still pending).
        #[test]
        fn lines_are_an_interval_apart_and_no_event_goes_uncounted(
            gaps_ms in proptest::collection::vec(0u64..5_000, 1..200),
        ) {
            let interval = Duration::from_secs(1);
            let throttle = LogThrottle::new(interval);
            let mut now = Instant::now();
            let mut lines: Vec<Instant> = Vec::new();
            let mut reported = 0u64;
            for gap in &gaps_ms {
                now += Duration::from_millis(*gap);
                if let Some(suppressed) = throttle.admit(now) {
                    lines.push(now);
                    reported += suppressed;
                }
            }
            for pair in lines.windows(2) {
                prop_assert!(pair[1] - pair[0] >= interval);
            }
            let pending = crate::sync::lock(&throttle.state).suppressed;
            prop_assert_eq!(lines.len() as u64 + reported + pending, gaps_ms.len() as u64);
        }
    }
}
