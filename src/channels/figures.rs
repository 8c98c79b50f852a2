//! Vendor figures per channel: what a platform team reads to decide when
//! to move a weighted split from 10% to 50% to 100%.
//!
//! Every 3D call the router sends is recorded here from its
//! [`CallOutcome`] (handed to it as an [`OutcomeSink`]): session starts (granted, in
//! contingency, or failed by error class) and verifications (valid,
//! invalid 300.1, blocked 300.2, another code, or failed by error class),
//! each with its latency in a fixed-bucket histogram. The counts live in
//! per-minute buckets per channel (about 0.4 KB each), kept for a bounded
//! retention
//! ([`DEFAULT_RETENTION_MINUTES`]), so a window ("the last hour") is a sum
//! of buckets. Every count is a plain sum, so the figures of several
//! replicas merge by adding them ([`ChannelFigures::merge`]). In a fleet
//! (`[cluster]`), each replica also adds its counts to per-minute buckets
//! on Redis ([`fleet_share`]), so any replica answers for the whole fleet; when
//! Redis does not answer, a replica answers with its own counts and the
//! fleet view is the sum of every replica's answer.
//!
//! Calls this gateway never sent (refused by its own bulkhead, or with the
//! caller's deadline already gone) are not the vendor's doing and are not
//! counted. Nothing here is keyed by anything but a configured channel
//! name: no appkey, token or person ever reaches the figures.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Mutex, OnceLock},
    time::{SystemTime, UNIX_EPOCH},
};

use super::call_outcome::{CallOutcome, Ended, OutcomeSink, Verdict};
use crate::{cluster::FleetFigures, domain::Operation, sync::lock};

mod channel_figures;
pub mod fleet_share;
pub use channel_figures::{
    ChannelFigures, ERROR_CLASSES, ErrorCounts, LATENCY_BOUNDS_MS, LATENCY_BUCKETS,
    LatencyHistogram,
};
pub use fleet_share::FleetShare;

/// Default retention of the figures: 24 hours of per-minute buckets.
pub const DEFAULT_RETENTION_MINUTES: u32 = 1_440;

/// Longest retention accepted: 7 days of per-minute buckets.
pub const MAX_RETENTION_MINUTES: u32 = 10_080;

/// Most channels with figures kept at once. Channels come from the
/// configuration, so this is only reached after many reloads with new
/// names; then the channel recorded least recently is forgotten.
pub const MAX_FIGURE_CHANNELS: usize = 64;

/// Each channel's per-minute figures, oldest first.
type FiguresByChannel =
    HashMap<String, VecDeque<(u64, ChannelFigures)>, foldhash::fast::RandomState>;

/// The rolling per-minute figures of every channel of this gateway.
#[derive(Debug)]
pub struct Figures {
    retention_minutes: u32,
    /// By channel name (from configuration; looked up on every 3D call).
    channels: Mutex<FiguresByChannel>,
    /// This replica's share of the fleet's figures, in a fleet.
    fleet: OnceLock<FleetShare>,
}

impl Default for Figures {
    fn default() -> Self {
        Self::new(DEFAULT_RETENTION_MINUTES)
    }
}

/// What one call sent adds to its channel's figures.
fn delta_of(outcome: &CallOutcome<'_>) -> ChannelFigures {
    let mut t = ChannelFigures::default();
    let session = outcome.op == Operation::SessionToken3D;
    match outcome.ended {
        Ended::Granted { contingency, .. } => {
            t.sessions_started += 1;
            t.contingency_answers += u64::from(contingency);
        }
        Ended::Verdict(Verdict::Valid) => t.valid += 1,
        Ended::Verdict(Verdict::Invalid) => t.invalid += 1,
        Ended::Verdict(Verdict::Blocked) => t.blocked += 1,
        Ended::Verdict(Verdict::Other) => t.other += 1,
        Ended::Failed(class) if session => t.session_errors.add(class, 1),
        Ended::Failed(class) => t.verification_errors.add(class, 1),
        Ended::Refused | Ended::CircuitOpen => {}
    }
    if session {
        t.session_latency.observe(outcome.elapsed);
    } else {
        t.liveness_latency.observe(outcome.elapsed);
    }
    t
}

/// Minutes since the Unix epoch: buckets of different replicas cover the
/// same minutes.
fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

impl OutcomeSink for Figures {
    fn record(&self, channel: &str, outcome: &CallOutcome<'_>) {
        Figures::record(self, channel, outcome);
    }
}

impl Figures {
    /// Figures kept for `retention_minutes` (at least 1, at most
    /// [`MAX_RETENTION_MINUTES`]).
    pub fn new(retention_minutes: u32) -> Self {
        Self {
            retention_minutes: retention_minutes.clamp(1, MAX_RETENTION_MINUTES),
            channels: Mutex::new(HashMap::default()),
            fleet: OnceLock::new(),
        }
    }

    /// Shares these figures with the fleet through `store` (the first
    /// store given).
    pub fn share(&self, store: FleetFigures) {
        let _ = self.fleet.set(FleetShare::new(store));
    }

    /// This replica's share of the fleet's figures, in a fleet.
    pub fn fleet(&self) -> Option<&FleetShare> {
        self.fleet.get()
    }

    /// How many minutes are kept.
    pub fn retention_minutes(&self) -> u32 {
        self.retention_minutes
    }

    /// Counts a call sent to `channel` (see [`CallOutcome::was_sent`]; the
    /// outcome recorder hands its sinks only those).
    pub fn record(&self, channel: &str, outcome: &CallOutcome<'_>) {
        if !outcome.was_sent() {
            return;
        }
        let delta = delta_of(outcome);
        let minute = minute_now();
        self.update(channel, minute, |t| t.merge(&delta));
        if let Some(fleet) = self.fleet.get() {
            fleet.queue(channel, minute, &delta);
        }
    }

    fn update(&self, channel: &str, minute: u64, f: impl FnOnce(&mut ChannelFigures)) {
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
            Some((m, figures)) if *m >= minute => f(figures),
            _ => {
                let mut figures = ChannelFigures::default();
                f(&mut figures);
                buckets.push_back((minute, figures));
            }
        }
        while buckets
            .front()
            .is_some_and(|(m, _)| m.saturating_add(retention) <= minute)
        {
            buckets.pop_front();
        }
    }

    /// The figures of every channel over the last `minutes` minutes (the
    /// current one included), by channel name.
    pub fn window(&self, minutes: u32) -> BTreeMap<String, ChannelFigures> {
        self.window_at(minute_now(), minutes)
    }

    /// The fleet's figures of every channel over the last `minutes` minutes,
    /// from Redis; `None` for one process or when Redis does not answer
    /// (then [`Figures::window`] is this replica's own).
    pub async fn fleet_window(&self, minutes: u32) -> Option<BTreeMap<String, ChannelFigures>> {
        let now = minute_now();
        let first = now.saturating_sub(u64::from(minutes.max(1)) - 1);
        self.fleet.get()?.window(first, now).await
    }

    fn window_at(&self, now: u64, minutes: u32) -> BTreeMap<String, ChannelFigures> {
        let first = now.saturating_sub(u64::from(minutes.max(1)) - 1);
        lock(&self.channels)
            .iter()
            .map(|(name, buckets)| {
                let mut sum = ChannelFigures::default();
                for (_, t) in buckets.iter().filter(|(m, _)| *m >= first) {
                    sum.merge(t);
                }
                (name.clone(), sum)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
