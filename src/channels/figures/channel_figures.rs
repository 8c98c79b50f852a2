//! What the figures count for one channel: latency histograms, error
//! counts by class, and their sum over a window ([`ChannelFigures`]). Every
//! count is a plain sum, so figures of several minutes or replicas merge
//! by addition.

use std::time::Duration;

/// Upper bounds of the latency buckets, in milliseconds; one more bucket
/// holds everything slower. The same bounds as the gateway's Prometheus
/// latency histograms, so both views agree.
pub const LATENCY_BOUNDS_MS: [u32; 13] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
];

/// Buckets of a latency histogram: one per bound and one above.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// Error classes counted, as the REST client names them (`deadline`: the
/// caller's deadline ran out while the call was under way); any other
/// class (from a newer replica, say) is counted as `other`.
pub const ERROR_CLASSES: [&str; 9] = [
    "connect",
    "timeout",
    "transport",
    "malformed",
    "oversize",
    "deadline",
    "http_4xx",
    "http_5xx",
    "other",
];

/// A latency histogram over [`LATENCY_BOUNDS_MS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: [u64; LATENCY_BUCKETS],
}

impl LatencyHistogram {
    /// Counts one call that took `elapsed`.
    pub fn observe(&mut self, elapsed: Duration) {
        let ms = elapsed.as_millis();
        let at = LATENCY_BOUNDS_MS
            .iter()
            .position(|&bound| ms <= u128::from(bound))
            .unwrap_or(LATENCY_BOUNDS_MS.len());
        self.counts[at] += 1;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a = a.saturating_add(b);
        }
    }

    /// The counts per bucket.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// A histogram from counts per bucket; `None` unless there are exactly
    /// [`LATENCY_BUCKETS`] of them.
    pub fn from_counts(counts: &[u64]) -> Option<Self> {
        Some(Self {
            counts: counts.try_into().ok()?,
        })
    }

    /// Calls counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The `q` quantile (0 to 1), interpolated linearly inside its bucket
    /// as Prometheus' `histogram_quantile` does; a quantile in the bucket
    /// above the last bound is that bound. `None` when nothing was counted.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let Some(&upper) = LATENCY_BOUNDS_MS.get(i) else {
                    let last = LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.len() - 1];
                    return Some(Duration::from_millis(u64::from(last)));
                };
                let lower = if i == 0 { 0 } else { LATENCY_BOUNDS_MS[i - 1] };
                let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
                let ms = f64::from(lower) + within * f64::from(upper - lower);
                return Some(Duration::from_secs_f64(ms / 1_000.0));
            }
            below += n;
        }
        None
    }
}

/// Counts per error class, indexed as [`ERROR_CLASSES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; ERROR_CLASSES.len()]);

impl ErrorCounts {
    /// Adds `n` errors of `class` (an unknown class counts as `other`).
    pub fn add(&mut self, class: &str, n: u64) {
        let at = ERROR_CLASSES
            .iter()
            .position(|&c| c == class)
            .unwrap_or(ERROR_CLASSES.len() - 1);
        self.0[at] = self.0[at].saturating_add(n);
    }

    /// Errors of every class.
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// `(class, count)` of every class with a count.
    pub fn classes(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ERROR_CLASSES
            .iter()
            .zip(self.0)
            .filter(|(_, n)| *n > 0)
            .map(|(c, n)| (*c, n))
    }

    fn merge(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a = a.saturating_add(b);
        }
    }
}

/// Everything counted for one channel over some time. Every field is a
/// sum, so figures of several minutes or replicas merge by addition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelFigures {
    /// Sessions granted.
    pub sessions_started: u64,
    /// Session answers with `isContingency: true`.
    pub contingency_answers: u64,
    /// Failed session starts, by class.
    pub session_errors: ErrorCounts,
    /// Verifications answered 200.0.
    pub valid: u64,
    /// Verifications answered 300.1.
    pub invalid: u64,
    /// Verifications answered 300.2.
    pub blocked: u64,
    /// Verifications answered with another code.
    pub other: u64,
    /// Failed verifications, by class.
    pub verification_errors: ErrorCounts,
    /// Latency of `/3d/session-token` (every outcome).
    pub session_latency: LatencyHistogram,
    /// Latency of `/3d/liveness` (every outcome).
    pub liveness_latency: LatencyHistogram,
}

/// z of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

impl ChannelFigures {
    /// Adds `other` to these figures.
    pub fn merge(&mut self, other: &Self) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.sessions_started, other.sessions_started);
        add(&mut self.contingency_answers, other.contingency_answers);
        self.session_errors.merge(&other.session_errors);
        add(&mut self.valid, other.valid);
        add(&mut self.invalid, other.invalid);
        add(&mut self.blocked, other.blocked);
        add(&mut self.other, other.other);
        self.verification_errors.merge(&other.verification_errors);
        self.session_latency.merge(&other.session_latency);
        self.liveness_latency.merge(&other.liveness_latency);
    }

    /// Verifications with a verdict or an error.
    pub fn verifications(&self) -> u64 {
        self.verdicts()
            .saturating_add(self.other)
            .saturating_add(self.verification_errors.total())
    }

    /// Verifications answered valid, invalid or blocked: the pass rate's
    /// denominator.
    pub fn verdicts(&self) -> u64 {
        self.valid
            .saturating_add(self.invalid)
            .saturating_add(self.blocked)
    }

    /// valid / (valid + invalid + blocked) with its Wilson score 95%
    /// interval `(rate, low, high)`; `None` without verdicts. Wilson's
    /// interval stays inside [0, 1] and is honest for the small counts of
    /// a 10% split's first hour.
    pub fn pass_rate(&self) -> Option<(f64, f64, f64)> {
        let n = self.verdicts();
        if n == 0 {
            return None;
        }
        let n = n as f64;
        let p = self.valid as f64 / n;
        let z2 = Z95 * Z95;
        let denominator = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denominator;
        let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
        Some((p, (centre - half).max(0.0), (centre + half).min(1.0)))
    }

    /// Failed calls over calls sent, both operations together.
    pub fn error_rate(&self) -> Option<f64> {
        let errors = self
            .session_errors
            .total()
            .saturating_add(self.verification_errors.total());
        let calls = self
            .sessions_started
            .saturating_add(self.session_errors.total())
            .saturating_add(self.verifications());
        (calls > 0).then(|| errors as f64 / calls as f64)
    }

    /// Contingency answers over sessions started.
    pub fn contingency_rate(&self) -> Option<f64> {
        (self.sessions_started > 0)
            .then(|| self.contingency_answers as f64 / self.sessions_started as f64)
    }
}
