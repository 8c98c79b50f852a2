//! The per-channel 3D verification series: how each vendor answers and
//! how fast, for comparing channels during a migration.
//!
//! `outcome` is `valid`, `invalid` (300.1), `blocked` (300.2), `other` (a
//! code no table lists) or the REST client's error class: a fixed set.
//! Session starts are already counted per channel
//! (`idgate_channel_sessions`, `idgate_channel_contingency_answers`) and
//! timed by `idgate_upstream_duration{operation="session_token_3d"}`.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VerificationLabels {
    channel: ChannelLabel,
    outcome: &'static str,
}

/// Outcomes shown at zero for every configured channel, so a pass-rate
/// query has both sides before the first verification.
const VERDICT_OUTCOMES: [&str; 3] = ["valid", "invalid", "blocked"];

/// `idgate_channel_verifications` and `idgate_channel_verification_duration`.
pub(super) struct VerificationSeries {
    count: Family<VerificationLabels, Counter>,
    duration: HistogramFamily<VerificationLabels>,
}

impl VerificationSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            count: Family::default(),
            duration: HistogramFamily::<VerificationLabels>::new_with_constructor(
                latency_histogram,
            ),
        };
        registry.register(
            "idgate_channel_verifications",
            "3D verifications sent, by channel and outcome (valid, invalid, blocked, other, or the error class)",
            series.count.clone(),
        );
        registry.register_with_unit(
            "idgate_channel_verification_duration",
            "3D verification (/3d/liveness) latency, by channel and outcome",
            Unit::Seconds,
            series.duration.clone(),
        );
        series
    }

    /// Shows the verdict outcomes of `channel` at zero.
    pub(super) fn preset(&self, channel: ChannelLabel) {
        for outcome in VERDICT_OUTCOMES {
            drop(self.count.get_or_create(&VerificationLabels {
                channel: channel.clone(),
                outcome,
            }));
        }
    }
}

impl Metrics {
    /// Records one 3D verification sent to `channel` (a configured name)
    /// that ended in `outcome` (a fixed set, see the module) after
    /// `elapsed`.
    pub fn record_channel_verification(
        &self,
        channel: &str,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        let labels = VerificationLabels {
            channel: self.channel_label(channel),
            outcome,
        };
        let series = &self.inner.verifications;
        series.count.get_or_create(&labels).inc();
        series
            .duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}
