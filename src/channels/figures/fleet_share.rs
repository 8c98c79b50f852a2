//! The figures this replica shares with the fleet ([`FleetShare`]): what
//! it records is also queued here and added to the fleet's per-minute
//! buckets on Redis ([`crate::cluster::FleetFigures`]) every
//! [`FLUSH_INTERVAL`] by a task of its own, so no call waits on Redis; and
//! a window of the fleet's figures, read back from any replica.
//!
//! The counters travel by name ([`counters`], [`from_counters`]): the
//! store adds numbers and knows nothing of what they count. While Redis is
//! unreachable the queue keeps at most [`MAX_PENDING_BUCKETS`] buckets
//! (one per channel and minute; the oldest go first, with a warning) and
//! is added once Redis answers again, so a short outage loses nothing.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use super::{ChannelFigures, ERROR_CLASSES, LATENCY_BUCKETS, LatencyHistogram};
use crate::{
    cluster::{ClusterError, FigureDelta, FleetFigures},
    sync::lock,
};

/// How often a replica adds what it recorded to the fleet's figures: the
/// most a fleet-wide answer lags behind the calls.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Most buckets (channel and minute) waiting for Redis: with four
/// channels, about 17 hours of outage, at most 2 MB.
pub const MAX_PENDING_BUCKETS: usize = 4_096;

/// By minute, then channel: the counts not yet added to the fleet's.
type Pending = BTreeMap<u64, HashMap<String, ChannelFigures>>;

/// This replica's share of the fleet's figures.
pub struct FleetShare {
    store: FleetFigures,
    pending: Mutex<Pending>,
}

impl std::fmt::Debug for FleetShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetShare").finish_non_exhaustive()
    }
}

impl FleetShare {
    /// Shares through `store`.
    pub(super) fn new(store: FleetFigures) -> Self {
        Self {
            store,
            pending: Mutex::new(Pending::new()),
        }
    }

    /// Queues `delta` of `channel` in `minute` for the next flush.
    pub(super) fn queue(&self, channel: &str, minute: u64, delta: &ChannelFigures) {
        let mut pending = lock(&self.pending);
        merge_into(&mut pending, channel, minute, delta);
    }

    /// Adds everything queued to the fleet's figures; on a failure keeps
    /// it for the next flush. Returns how many buckets were added.
    pub async fn flush(&self) -> Result<usize, ClusterError> {
        let taken = std::mem::take(&mut *lock(&self.pending));
        let deltas: Vec<FigureDelta> = taken
            .iter()
            .flat_map(|(minute, channels)| {
                channels.iter().map(|(channel, figures)| FigureDelta {
                    channel: channel.clone(),
                    minute: *minute,
                    counts: counters(figures),
                })
            })
            .collect();
        if deltas.is_empty() {
            return Ok(0);
        }
        let count = deltas.len();
        match self.store.add(deltas).await {
            Ok(()) => Ok(count),
            Err(e) => {
                let mut pending = lock(&self.pending);
                for (minute, channels) in taken {
                    for (channel, figures) in channels {
                        merge_into(&mut pending, &channel, minute, &figures);
                    }
                }
                Err(e)
            }
        }
    }

    /// The fleet's figures of every channel over minutes `first..=last`;
    /// `None` when Redis does not answer.
    pub(super) async fn window(
        &self,
        first: u64,
        last: u64,
    ) -> Option<BTreeMap<String, ChannelFigures>> {
        match self.store.sums(first, last).await {
            Ok(sums) => Some(
                sums.iter()
                    .map(|(channel, counts)| (channel.clone(), from_counters(counts)))
                    .collect(),
            ),
            Err(_) => None,
        }
    }
}

/// Adds `delta` to the queue, forgetting the oldest minute past the bound.
fn merge_into(pending: &mut Pending, channel: &str, minute: u64, delta: &ChannelFigures) {
    let channels = pending.entry(minute).or_default();
    match channels.get_mut(channel) {
        Some(figures) => figures.merge(delta),
        None => {
            channels.insert(channel.to_owned(), *delta);
        }
    }
    let mut buckets: usize = pending.values().map(HashMap::len).sum();
    while buckets > MAX_PENDING_BUCKETS {
        let Some((oldest, dropped)) = pending.pop_first() else {
            break;
        };
        buckets -= dropped.len();
        tracing::warn!(
            minute = oldest,
            "vendor figures of a minute dropped before reaching Redis (unreachable too long)"
        );
    }
}

/// The named counters of `t` that are not zero.
pub fn counters(t: &ChannelFigures) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut put = |name: String, n: u64| {
        if n > 0 {
            out.push((name, n));
        }
    };
    put("sessions_started".into(), t.sessions_started);
    put("contingency_answers".into(), t.contingency_answers);
    put("valid".into(), t.valid);
    put("invalid".into(), t.invalid);
    put("blocked".into(), t.blocked);
    put("other".into(), t.other);
    for (class, n) in t.session_errors.classes() {
        put(format!("session_errors.{class}"), n);
    }
    for (class, n) in t.verification_errors.classes() {
        put(format!("verification_errors.{class}"), n);
    }
    for (i, n) in t.session_latency.counts().iter().enumerate() {
        put(format!("session_latency.{i}"), *n);
    }
    for (i, n) in t.liveness_latency.counts().iter().enumerate() {
        put(format!("liveness_latency.{i}"), *n);
    }
    out
}

/// Figures from named counters; names it does not know (a newer
/// replica's) are left out.
pub fn from_counters(counts: &BTreeMap<String, u64>) -> ChannelFigures {
    let mut t = ChannelFigures::default();
    let mut session = [0u64; LATENCY_BUCKETS];
    let mut liveness = [0u64; LATENCY_BUCKETS];
    for (name, &n) in counts {
        match name.split_once('.') {
            None => match name.as_str() {
                "sessions_started" => t.sessions_started = n,
                "contingency_answers" => t.contingency_answers = n,
                "valid" => t.valid = n,
                "invalid" => t.invalid = n,
                "blocked" => t.blocked = n,
                "other" => t.other = n,
                _ => {}
            },
            Some(("session_errors", class)) if ERROR_CLASSES.contains(&class) => {
                t.session_errors.add(class, n);
            }
            Some(("verification_errors", class)) if ERROR_CLASSES.contains(&class) => {
                t.verification_errors.add(class, n);
            }
            Some(("session_latency", i)) => {
                if let Some(slot) = i.parse::<usize>().ok().and_then(|i| session.get_mut(i)) {
                    *slot = n;
                }
            }
            Some(("liveness_latency", i)) => {
                if let Some(slot) = i.parse::<usize>().ok().and_then(|i| liveness.get_mut(i)) {
                    *slot = n;
                }
            }
            Some(_) => {}
        }
    }
    t.session_latency = LatencyHistogram::from_counts(&session).unwrap_or_default();
    t.liveness_latency = LatencyHistogram::from_counts(&liveness).unwrap_or_default();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_survive_their_named_counters() {
        let mut t = ChannelFigures {
            sessions_started: 4,
            contingency_answers: 1,
            valid: 2,
            invalid: 1,
            blocked: 1,
            ..ChannelFigures::default()
        };
        t.session_errors.add("timeout", 3);
        t.verification_errors.add("http_5xx", 2);
        t.session_latency.observe(Duration::from_millis(7));
        t.liveness_latency.observe(Duration::from_secs(90));
        let named: BTreeMap<String, u64> = counters(&t).into_iter().collect();
        assert_eq!(from_counters(&named), t);
        assert!(named.values().all(|n| *n > 0), "no zero counter travels");
    }

    #[test]
    fn the_queue_forgets_the_oldest_minutes_past_its_bound() {
        let mut pending = Pending::new();
        let one = ChannelFigures {
            valid: 1,
            ..ChannelFigures::default()
        };
        for minute in 0..(MAX_PENDING_BUCKETS as u64 + 10) {
            merge_into(&mut pending, "primary", minute, &one);
        }
        merge_into(
            &mut pending,
            "primary",
            MAX_PENDING_BUCKETS as u64 + 9,
            &one,
        );
        assert_eq!(
            pending.values().map(HashMap::len).sum::<usize>(),
            MAX_PENDING_BUCKETS
        );
        assert_eq!(pending.first_key_value().map(|(m, _)| *m), Some(10));
        assert_eq!(pending.last_key_value().unwrap().1["primary"].valid, 2);
    }
}
