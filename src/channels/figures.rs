//! Vendor figures per channel: what a platform team reads to decide when
//! to move a weighted split from 10% to 50% to 100%.
//!
//! The router records every 3D call it sends: session starts (granted, in
//! contingency, or failed by error class) and verifications (valid,
//! invalid 300.1, blocked 300.2, another code, or failed by error class),
//! each with its latency in a fixed-bucket histogram. The counts live in
//! per-minute buckets per channel (about 0.4 KB each), kept for a bounded
//! retention
//! ([`DEFAULT_RETENTION_MINUTES`]), so a window ("the last hour") is a sum
//! of buckets. Every count is a plain sum, so the figures of several
//! replicas merge by adding them ([`ChannelTally::merge`]): the fleet view
//! is the sum of every replica's answer.
//!
//! Calls this gateway never sent (refused by its own bulkhead, or with the
//! caller's deadline already gone) are not the vendor's doing and are not
//! counted. Nothing here is keyed by anything but a configured channel
//! name: no appkey, token or person ever reaches the figures.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::{
    proto::v1::{LivenessCode, LivenessVerdict},
    sync::lock,
    upstream::UpstreamError,
};

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

/// Default retention of the figures: 24 hours of per-minute buckets.
pub const DEFAULT_RETENTION_MINUTES: u32 = 1_440;

/// Longest retention accepted: 7 days of per-minute buckets.
pub const MAX_RETENTION_MINUTES: u32 = 10_080;

/// Most channels with figures kept at once. Channels come from the
/// configuration, so this is only reached after many reloads with new
/// names; then the channel recorded least recently is forgotten.
pub const MAX_FIGURE_CHANNELS: usize = 64;

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

/// How one verification on a channel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyOutcome {
    /// codID 200.0.
    Valid,
    /// codID 300.1.
    Invalid,
    /// codID 300.2.
    Blocked,
    /// A verdict with a code no table lists.
    Other,
    /// The call failed with an error of this class.
    Error(&'static str),
}

impl VerifyOutcome {
    /// The outcome of a verification's result.
    pub fn of(result: &Result<LivenessVerdict, UpstreamError>) -> Self {
        match result {
            Ok(v) => match LivenessCode::try_from(v.code) {
                Ok(LivenessCode::Valid) => VerifyOutcome::Valid,
                Ok(LivenessCode::Invalid) => VerifyOutcome::Invalid,
                Ok(LivenessCode::UserBlocked) => VerifyOutcome::Blocked,
                _ => VerifyOutcome::Other,
            },
            Err(e) => VerifyOutcome::Error(e.class()),
        }
    }

    /// The metric label: `valid`, `invalid`, `blocked`, `other` or the
    /// error class (a fixed set).
    pub fn label(self) -> &'static str {
        match self {
            VerifyOutcome::Valid => "valid",
            VerifyOutcome::Invalid => "invalid",
            VerifyOutcome::Blocked => "blocked",
            VerifyOutcome::Other => "other",
            VerifyOutcome::Error(class) => class,
        }
    }
}

/// Everything counted for one channel over some time. Every field is a
/// sum, so tallies of several minutes or replicas merge by addition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelTally {
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

impl ChannelTally {
    /// Adds `other` to this tally.
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

/// Each channel's per-minute tallies, oldest first.
type TallyMap = HashMap<String, VecDeque<(u64, ChannelTally)>, foldhash::fast::RandomState>;

/// The rolling per-minute figures of every channel of this gateway.
#[derive(Debug)]
pub struct ChannelFigures {
    retention_minutes: u32,
    /// By channel name (from configuration; looked up on every 3D call).
    channels: Mutex<TallyMap>,
}

impl Default for ChannelFigures {
    fn default() -> Self {
        Self::new(DEFAULT_RETENTION_MINUTES)
    }
}

/// Minutes since the Unix epoch: buckets of different replicas cover the
/// same minutes.
fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

impl ChannelFigures {
    /// Figures kept for `retention_minutes` (at least 1, at most
    /// [`MAX_RETENTION_MINUTES`]).
    pub fn new(retention_minutes: u32) -> Self {
        Self {
            retention_minutes: retention_minutes.clamp(1, MAX_RETENTION_MINUTES),
            channels: Mutex::new(HashMap::default()),
        }
    }

    /// How many minutes are kept.
    pub fn retention_minutes(&self) -> u32 {
        self.retention_minutes
    }

    /// Records a session start sent to `channel` that took `elapsed`:
    /// granted (`Ok(contingency)`) or failed.
    pub fn record_session(
        &self,
        channel: &str,
        result: Result<bool, &UpstreamError>,
        elapsed: Duration,
    ) {
        self.update(channel, minute_now(), |t| {
            match result {
                Ok(contingency) => {
                    t.sessions_started += 1;
                    t.contingency_answers += u64::from(contingency);
                }
                Err(e) => t.session_errors.add(e.class(), 1),
            }
            t.session_latency.observe(elapsed);
        });
    }

    /// Records a verification sent to `channel` that took `elapsed`.
    pub fn record_verification(&self, channel: &str, outcome: VerifyOutcome, elapsed: Duration) {
        self.update(channel, minute_now(), |t| {
            match outcome {
                VerifyOutcome::Valid => t.valid += 1,
                VerifyOutcome::Invalid => t.invalid += 1,
                VerifyOutcome::Blocked => t.blocked += 1,
                VerifyOutcome::Other => t.other += 1,
                VerifyOutcome::Error(class) => t.verification_errors.add(class, 1),
            }
            t.liveness_latency.observe(elapsed);
        });
    }

    fn update(&self, channel: &str, minute: u64, f: impl FnOnce(&mut ChannelTally)) {
        let retention = u64::from(self.retention_minutes);
        let mut channels = lock(&self.channels);
        if !channels.contains_key(channel) && channels.len() >= MAX_FIGURE_CHANNELS {
            let stalest = channels
                .iter()
                .min_by_key(|(_, b)| b.back().map_or(0, |(m, _)| *m))
                .map(|(name, _)| name.clone());
            if let Some(name) = stalest {
                channels.remove(&name);
            }
        }
        // Owned names only for a channel not seen yet: no allocation per call.
        if !channels.contains_key(channel) {
            channels.insert(channel.to_owned(), Default::default());
        }
        let Some(buckets) = channels.get_mut(channel) else {
            return;
        };
        match buckets.back_mut() {
            // A clock stepped back lands in the newest bucket.
            Some((m, tally)) if *m >= minute => f(tally),
            _ => {
                let mut tally = ChannelTally::default();
                f(&mut tally);
                buckets.push_back((minute, tally));
            }
        }
        while buckets
            .front()
            .is_some_and(|(m, _)| m.saturating_add(retention) <= minute)
        {
            buckets.pop_front();
        }
    }

    /// The tally of every channel over the last `minutes` minutes (the
    /// current one included), by channel name.
    pub fn window(&self, minutes: u32) -> BTreeMap<String, ChannelTally> {
        self.window_at(minute_now(), minutes)
    }

    fn window_at(&self, now: u64, minutes: u32) -> BTreeMap<String, ChannelTally> {
        let first = now.saturating_sub(u64::from(minutes.max(1)) - 1);
        lock(&self.channels)
            .iter()
            .map(|(name, buckets)| {
                let mut sum = ChannelTally::default();
                for (_, t) in buckets.iter().filter(|(m, _)| *m >= first) {
                    sum.merge(t);
                }
                (name.clone(), sum)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Operation;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        for _ in 0..100 {
            h.observe(ms(600)); // (500, 1000]
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!(p50 > ms(500) && p50 <= ms(1_000), "{p50:?}");
        h.observe(Duration::from_secs(120));
        assert_eq!(h.quantile(1.0), Some(ms(60_000)));
        assert_eq!(LatencyHistogram::from_counts(h.counts()), Some(h));
        assert_eq!(LatencyHistogram::from_counts(&[1, 2]), None);
    }

    #[test]
    fn the_wilson_interval_brackets_the_rate() {
        let t = ChannelTally {
            valid: 90,
            invalid: 8,
            blocked: 2,
            ..ChannelTally::default()
        };
        let (p, lo, hi) = t.pass_rate().unwrap();
        assert!((p - 0.9).abs() < 1e-9);
        assert!(
            (lo - 0.8256).abs() < 1e-3 && (hi - 0.9448).abs() < 1e-3,
            "{lo} {hi}"
        );
        let all = ChannelTally {
            valid: 5,
            ..ChannelTally::default()
        };
        let (_, lo, hi) = all.pass_rate().unwrap();
        assert!(lo > 0.5 && hi == 1.0, "{lo} {hi}");
        assert_eq!(ChannelTally::default().pass_rate(), None);
    }

    #[test]
    fn buckets_age_out_after_the_retention_and_windows_sum_minutes() {
        let f = ChannelFigures::new(3);
        let grant = |t: &mut ChannelTally| t.sessions_started += 1;
        for minute in [100, 100, 101, 102] {
            f.update("primary", minute, grant);
        }
        assert_eq!(f.window_at(102, 1)["primary"].sessions_started, 1);
        assert_eq!(f.window_at(102, 3)["primary"].sessions_started, 4);
        f.update("primary", 103, grant);
        // Minute 100 is gone: at most 3 buckets are kept.
        assert_eq!(f.window_at(103, 10)["primary"].sessions_started, 3);
        assert_eq!(lock(&f.channels)["primary"].len(), 3);
    }

    #[test]
    fn a_minute_of_one_channel_costs_about_0_4_kb() {
        // The documented memory bound: retention x channels x this.
        assert!(std::mem::size_of::<(u64, ChannelTally)>() <= 432);
    }

    #[test]
    fn channels_beyond_the_cap_evict_the_stalest() {
        let f = ChannelFigures::new(10);
        for i in 0..=MAX_FIGURE_CHANNELS {
            f.update(&format!("c{i}"), i as u64, |t| t.valid += 1);
        }
        let w = f.window_at(MAX_FIGURE_CHANNELS as u64, 10);
        assert_eq!(lock(&f.channels).len(), MAX_FIGURE_CHANNELS);
        assert!(!lock(&f.channels).contains_key("c0"));
        assert!(w.contains_key(&format!("c{MAX_FIGURE_CHANNELS}")));
    }

    #[test]
    fn outcomes_and_errors_are_counted_by_class() {
        let f = ChannelFigures::default();
        let op = Operation::Liveness3D;
        f.record_verification("alt", VerifyOutcome::Invalid, ms(3));
        f.record_verification(
            "alt",
            VerifyOutcome::of(&Err(UpstreamError::Timeout { op })),
            ms(7),
        );
        f.record_session("alt", Ok(true), ms(1));
        f.record_session(
            "alt",
            Err(&UpstreamError::Status {
                op: Operation::SessionToken3D,
                status: 503,
            }),
            ms(1),
        );
        let t = f.window(60)["alt"];
        assert_eq!((t.invalid, t.verifications(), t.verdicts()), (1, 2, 1));
        assert_eq!(
            t.verification_errors.classes().collect::<Vec<_>>(),
            [("timeout", 1)]
        );
        assert_eq!(
            t.session_errors.classes().collect::<Vec<_>>(),
            [("http_5xx", 1)]
        );
        assert_eq!(t.contingency_rate(), Some(1.0));
        assert_eq!(t.error_rate(), Some(0.5));
        assert_eq!(t.liveness_latency.count(), 2);
        let mut e = ErrorCounts::default();
        e.add("from-a-newer-replica", 2);
        assert_eq!(e.classes().collect::<Vec<_>>(), [("other", 2)]);
    }
}
