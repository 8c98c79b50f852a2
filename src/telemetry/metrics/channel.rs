//! The per-channel 3D series: sessions, failovers, circuit state and
//! verifications, for comparing channels during a migration.
//!
//! The channel router records each call once, as it ends, from its
//! outcome record (`channels::outcome`); only the circuit state, which
//! changes with time alone, is set at scrape time.
//!
//! Verification `outcome` is `valid`, `invalid` (300.1), `blocked`
//! (300.2), `other` (a code no table lists) or the REST client's error
//! class: a fixed set. Session starts are timed by
//! `idgate_upstream_duration{operation="session_token_3d"}`.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ChannelLabels {
    channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VerificationLabels {
    channel: ChannelLabel,
    outcome: &'static str,
}

/// Outcomes shown at zero for every configured channel, so a pass-rate
/// query has both sides before the first verification.
const VERDICT_OUTCOMES: [&str; 3] = ["valid", "invalid", "blocked"];

/// How a session start on a channel ended, as its series count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelSessionEnd {
    /// Granted; `contingency` when the answer said `isContingency`.
    Started {
        /// `isContingency`.
        contingency: bool,
    },
    /// Sent and failed.
    Failed,
}

/// Every per-channel family.
pub(super) struct ChannelSeries {
    failovers: Family<ChannelLabels, Counter>,
    panics: Family<ChannelLabels, Counter>,
    circuit_state: Family<ChannelLabels, Gauge>,
    sessions: Family<ChannelLabels, Counter>,
    session_failures: Family<ChannelLabels, Counter>,
    contingency_answers: Family<ChannelLabels, Counter>,
    verifications: Family<VerificationLabels, Counter>,
    verification_duration: HistogramFamily<VerificationLabels>,
}

impl ChannelSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            failovers: Family::default(),
            panics: Family::default(),
            circuit_state: Family::default(),
            sessions: Family::default(),
            session_failures: Family::default(),
            contingency_answers: Family::default(),
            verifications: Family::default(),
            verification_duration: HistogramFamily::<VerificationLabels>::new_with_constructor(
                latency_histogram,
            ),
        };
        registry.register(
            "idgate_channel_failovers",
            "3D sessions that failed on a channel and moved to the next one, by the failed channel",
            series.failovers.clone(),
        );
        registry.register(
            "idgate_channel_panic",
            "3D session starts sent past a channel's open circuit because every channel's circuit refused (panic routing), by the channel tried",
            series.panics.clone(),
        );
        registry.register(
            "idgate_channel_circuit_state",
            "Circuit breaker state per channel: 0 closed, 1 half-open, 2 open",
            series.circuit_state.clone(),
        );
        registry.register(
            "idgate_channel_sessions",
            "3D sessions started, by channel",
            series.sessions.clone(),
        );
        registry.register(
            "idgate_channel_session_failures",
            "3D session starts that failed, by channel",
            series.session_failures.clone(),
        );
        registry.register(
            "idgate_channel_contingency_answers",
            "3D session answers in contingency mode (isContingency), by channel",
            series.contingency_answers.clone(),
        );
        registry.register(
            "idgate_channel_verifications",
            "3D verifications sent, by channel and outcome (valid, invalid, blocked, other, or the error class)",
            series.verifications.clone(),
        );
        registry.register_with_unit(
            "idgate_channel_verification_duration",
            "3D verification (/3d/liveness) latency, by channel and outcome",
            Unit::Seconds,
            series.verification_duration.clone(),
        );
        series
    }

    /// Shows the series of `channel` (`label` its label value) at zero
    /// (closed circuit), so dashboards see a channel before its first call.
    pub(super) fn preset(&self, channel: &str, label: ChannelLabel) {
        let labels = labels(channel);
        drop(self.failovers.get_or_create(&labels));
        drop(self.circuit_state.get_or_create(&labels));
        drop(self.sessions.get_or_create(&labels));
        drop(self.session_failures.get_or_create(&labels));
        drop(self.contingency_answers.get_or_create(&labels));
        for outcome in VERDICT_OUTCOMES {
            drop(self.verifications.get_or_create(&VerificationLabels {
                channel: label.clone(),
                outcome,
            }));
        }
    }
}

fn labels(channel: &str) -> ChannelLabels {
    ChannelLabels {
        channel: channel.to_owned(),
    }
}

impl Metrics {
    /// Counts one session start sent to `channel` (a configured name).
    pub fn record_channel_session(&self, channel: &str, end: ChannelSessionEnd) {
        let series = &self.inner.channels;
        let labels = labels(channel);
        match end {
            ChannelSessionEnd::Started { contingency } => {
                series.sessions.get_or_create(&labels).inc();
                if contingency {
                    series.contingency_answers.get_or_create(&labels).inc();
                }
            }
            ChannelSessionEnd::Failed => {
                series.session_failures.get_or_create(&labels).inc();
            }
        }
    }

    /// Counts a failed session start on `channel` that moved to the next
    /// channel.
    pub fn record_channel_failover(&self, channel: &str) {
        self.inner
            .channels
            .failovers
            .get_or_create(&labels(channel))
            .inc();
    }

    /// Counts a session start panic-routed to `channel`.
    pub fn record_channel_panic(&self, channel: &str) {
        self.inner
            .channels
            .panics
            .get_or_create(&labels(channel))
            .inc();
    }

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
        let series = &self.inner.channels;
        series.verifications.get_or_create(&labels).inc();
        series
            .verification_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Sets the circuit breaker gauge of `channel`: 0 closed, 1 half-open,
    /// 2 open (higher is worse, for alerts). Called at scrape time for
    /// every configured channel: an open circuit turns half-open with time
    /// alone. Also shows the channel's other series at zero, so a channel
    /// added by a reload is seen before its first call, like one
    /// configured at start.
    pub fn set_channel_circuit_state(&self, channel: &str, value: i64) {
        let series = &self.inner.channels;
        series.preset(channel, self.channel_label(channel));
        series
            .circuit_state
            .get_or_create(&labels(channel))
            .set(value);
    }
}
