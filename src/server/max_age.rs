//! How long a connection lives (`[serving] max_connection_age_secs`): the
//! age, jittered per connection, and the grace after it. A policy of its
//! own, read by the connection (`connections`) and by the listener that
//! ages it (`listeners::aging`), so neither imports the other for it.

use std::{
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use tokio::time::Instant;

/// How long connections live: the age (before jitter) and the grace after
/// it for calls in flight.
#[derive(Debug, Clone, Copy)]
pub(in crate::server) struct MaxAge {
    age: Duration,
    /// After the age, how long calls in flight may take before the
    /// connection is closed outright.
    pub(in crate::server) grace: Duration,
}

impl MaxAge {
    /// The age policy of `[serving]`; `None` when the age is 0 (off).
    pub(in crate::server) fn from_secs(age_secs: u64, grace_secs: u64) -> Option<Self> {
        (age_secs > 0).then(|| Self {
            age: Duration::from_secs(age_secs),
            grace: Duration::from_secs(grace_secs),
        })
    }

    /// When a connection accepted at `now` ages: the age scaled by a
    /// factor drawn per connection in [0.9, 1.1), so the connections of a
    /// replica that started (or was reached) at one moment do not all
    /// reconnect at one moment.
    pub(in crate::server) fn aged_at(&self, now: Instant) -> Instant {
        now + jittered(self.age, unit_draw())
    }
}

/// `age` scaled by `0.9 + 0.2 * unit` (`unit` in [0, 1)).
fn jittered(age: Duration, unit: f64) -> Duration {
    age.mul_f64(0.9 + 0.2 * unit.clamp(0.0, 1.0))
}

/// A number in [0, 1): std's randomly keyed hasher (fresh keys for each
/// `RandomState`), which is plenty for spreading reconnects and costs no
/// dependency.
fn unit_draw() -> f64 {
    let bits = std::hash::RandomState::new().build_hasher().finish();
    // The top 53 bits, the mantissa of an f64.
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_is_jittered_ten_percent_either_way() {
        let age = Duration::from_secs(100);
        assert_eq!(jittered(age, 0.0), Duration::from_secs(90));
        assert_eq!(jittered(age, 0.5), Duration::from_secs(100));
        assert!(jittered(age, 0.999_999) < Duration::from_secs(110));
        assert!(jittered(age, 0.999_999) > Duration::from_secs(109));
    }

    #[test]
    fn draws_fall_in_the_unit_interval_and_differ() {
        let draws: Vec<f64> = (0..1000).map(|_| unit_draw()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        // 1000 draws of 53 bits: a repeat has odds near 2^-33.
        let mut sorted = draws.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.dedup();
        assert_eq!(sorted.len(), draws.len());
    }

    #[test]
    fn an_age_of_zero_is_off() {
        assert!(MaxAge::from_secs(0, 60).is_none());
        let max = MaxAge::from_secs(10, 5).unwrap();
        let now = Instant::now();
        let at = max.aged_at(now);
        assert!(at >= now + Duration::from_secs(9) && at < now + Duration::from_secs(11));
    }
}
