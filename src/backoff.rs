//! How long to wait before trying again: exponential, capped, jittered.
//!
//! Every retry loop of the gateway waits this way, each with its own
//! numbers: an upstream call's retries (`upstream::send`), a span export's
//! (`telemetry::otlp::retry`), a watched journey's result reads
//! (`events::watches::reader`), a channel breaker's open time
//! (`channels::breaker`) and the sandbox's webhook deliveries
//! (`sandbox::webhook`).
//!
//! - Exponential: a peer that just failed is likely to fail again soon;
//!   doubling the wait takes load off it quickly while it recovers.
//! - Capped: once it is back, the next try comes within a known time.
//! - Jittered: callers that failed together (a vendor's outage, a
//!   collector's restart, journeys whose grace periods ended together)
//!   would otherwise try again together, in lockstep. A breaker's open
//!   time is not jittered: one state machine per channel, nothing to
//!   spread.

use std::{hash::BuildHasher as _, time::Duration};

/// The shortest step: a zero step would retry in a tight loop.
const MIN_STEP: Duration = Duration::from_millis(1);

/// How each wait is spread around its step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Jitter {
    /// Exactly the step.
    None,
    /// A random part of the step, from `floor` (a fraction of it: `0.5`
    /// is half) up to the whole: never longer than the step, so a
    /// deadline planned on the steps still holds.
    Down { floor: f64 },
    /// The step plus up to this much, within the cap.
    Up(Duration),
}

/// The waits between the tries of one piece of work: the first `base`,
/// each next one double the last, up to `cap`, spread by a [`Jitter`].
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    jitter: Jitter,
    /// The step the next wait is drawn from.
    step: Duration,
    /// The jitter's random state (splitmix64), seeded at its first draw:
    /// work that never waits pays nothing for it.
    random: Option<u64>,
}

impl Backoff {
    /// Waits from `base` (at least 1 ms), doubling up to `cap` (at least
    /// `base`), not jittered.
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        let base = base.max(MIN_STEP);
        Self {
            base,
            cap: cap.max(base),
            jitter: Jitter::None,
            step: base,
            random: None,
        }
    }

    /// The same waits, spread by `jitter`.
    pub(crate) fn jittered(self, jitter: Jitter) -> Self {
        Self { jitter, ..self }
    }

    /// The wait before the next try: the step, jittered. The step then
    /// doubles, up to the cap.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = step.saturating_mul(2).min(self.cap);
        match self.jitter {
            Jitter::None => step,
            Jitter::Down { floor } => step.mul_f64(floor + (1.0 - floor) * self.draw()),
            Jitter::Up(most) => (step + most.mul_f64(self.draw())).min(self.cap),
        }
    }

    /// The step the next wait is drawn from, before jitter: what a
    /// caller that plans ahead (a read turn held for the fleet) counts on.
    pub(crate) fn step(&self) -> Duration {
        self.step
    }

    /// Back to the first step: news came that makes waiting long wrong.
    pub(crate) fn reset(&mut self) {
        self.step = self.base;
    }

    /// A wait asked for from outside (a server's `Retry-After`): the next
    /// step is at least `floor`, never shortened by it; a `floor` past
    /// the cap raises the cap to `ceiling`, so that the steps after it go
    /// on doubling from there.
    pub(crate) fn at_least(&mut self, floor: Duration, ceiling: Duration) {
        if floor > self.cap {
            self.cap = ceiling.max(floor);
        }
        self.step = self.step.max(floor);
    }

    /// The `n`th step (1-based) from the first, before jitter: for a
    /// caller that counts its own tries (a breaker's ejections in a row).
    pub(crate) fn nth_step(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A number in `[0, 1)`.
    fn draw(&mut self) -> f64 {
        let state = self.random.get_or_insert_with(|| {
            std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now())
        });
        // splitmix64
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn steps_double_from_the_base_up_to_the_cap() {
        let mut backoff = Backoff::new(ms(100), ms(500));
        let waits: Vec<_> = (0..5).map(|_| backoff.next_delay()).collect();
        assert_eq!(waits, [100, 200, 400, 500, 500].map(ms));
        assert_eq!(
            (1..=5).map(|n| backoff.nth_step(n)).collect::<Vec<_>>(),
            waits,
            "the nth step is the nth wait"
        );
        assert_eq!(backoff.nth_step(u32::MAX), ms(500));
        backoff.reset();
        assert_eq!(backoff.step(), ms(100));
    }

    #[test]
    fn a_zero_base_is_one_millisecond_and_the_cap_never_below_the_base() {
        let mut zero = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(zero.next_delay(), ms(1));
        let mut inverted = Backoff::new(ms(300), ms(100));
        assert_eq!(inverted.next_delay(), ms(300));
        assert_eq!(inverted.next_delay(), ms(300));
    }

    #[test]
    fn jitter_down_stays_between_its_floor_and_the_step() {
        let mut backoff = Backoff::new(ms(100), ms(400)).jittered(Jitter::Down { floor: 0.75 });
        for step in [100, 200, 400, 400, 400].map(ms) {
            let wait = backoff.next_delay();
            assert!(
                wait <= step && wait >= step.mul_f64(0.75),
                "{wait:?} of {step:?}"
            );
        }
    }

    #[test]
    fn jitter_up_adds_at_most_its_amount_and_never_passes_the_cap() {
        for _ in 0..100 {
            let mut backoff = Backoff::new(ms(100), ms(250)).jittered(Jitter::Up(ms(100)));
            let first = backoff.next_delay();
            assert!((ms(100)..=ms(200)).contains(&first), "{first:?}");
            let capped = backoff.next_delay();
            assert!((ms(200)..=ms(250)).contains(&capped), "{capped:?}");
        }
    }

    #[test]
    fn a_wait_asked_from_outside_is_never_shortened_and_steps_double_on_from_it() {
        let mut backoff = Backoff::new(ms(100), ms(1_600));
        backoff.at_least(ms(5_000), ms(30_000));
        assert_eq!(backoff.next_delay(), ms(5_000));
        backoff.at_least(ms(10), ms(30_000));
        assert_eq!(backoff.next_delay(), ms(10_000), "the doubled step");
        assert_eq!(backoff.next_delay(), ms(20_000));
        assert_eq!(backoff.next_delay(), ms(30_000), "the raised cap");
    }
}
