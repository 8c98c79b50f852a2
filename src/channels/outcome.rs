//! The one place that counts a call on a channel.
//!
//! The router ends every 3D call it routes with a [`CallOutcome`]: which
//! operation, how it ended (granted, a verdict, failed by error class,
//! refused by this gateway's own bulkhead, skipped because the circuit was
//! open) and how long it took. [`OutcomeRecorder::record`] counts it in
//! the channel's own counters ([`ChannelStats`](super::channel::ChannelStats),
//! read by `ListChannels` and the CLI), then hands it to each
//! [`OutcomeSink`] it was given:
//!
//! - the vendor figures over a rolling window
//!   ([`Figures`](super::figures::Figures), read by
//!   `GetChannelFigures`);
//! - the counts of a rollout's step under way
//!   ([`StepCounter`](super::rollout::counts::StepCounter));
//! - the per-channel series of `/metrics` (`idgate_channel_sessions`,
//!   `idgate_channel_session_failures`, `idgate_channel_contingency_answers`,
//!   `idgate_channel_verifications`, `idgate_channel_verification_duration`),
//!   counted as the call ends rather than copied from the counters at
//!   scrape time ([`ChannelSeries`]).
//!
//! A failover is a routing decision, not a call, so it has its own entry
//! ([`OutcomeRecorder::failover`]) feeding the same views.
//!
//! The HTTP exchanges under a call are counted once more, per attempt and
//! by HTTP status, by the REST client (`idgate_upstream_*`, see
//! `telemetry::UpstreamOutcome`): a different question (what went over
//! the wire), answered where the wire is.

use std::sync::Arc;

pub use super::call_outcome::{CallOutcome, Ended, OutcomeSink, Verdict};
use super::{channel::Channel, figures::Figures, rollout::counts::StepCounter};
use crate::{
    domain::Operation,
    telemetry::{ChannelSessionEnd, Metrics},
};

/// Where a router's outcomes go: the channel's own counters, then every
/// sink (its figures, its rollout step counts and, for a gateway, its
/// metrics). Iterating the sinks allocates nothing per call.
#[derive(Clone)]
pub struct OutcomeRecorder {
    figures: Arc<Figures>,
    steps: Arc<StepCounter>,
    sinks: Vec<Arc<dyn OutcomeSink>>,
}

impl std::fmt::Debug for OutcomeRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutcomeRecorder")
            .field("sinks", &self.sinks.len())
            .finish_non_exhaustive()
    }
}

impl OutcomeRecorder {
    /// Records into `figures` and a rollout step counter (no `/metrics`).
    pub fn new(figures: Figures) -> Self {
        let figures = Arc::new(figures);
        let steps = Arc::new(StepCounter::default());
        Self {
            sinks: vec![figures.clone(), steps.clone()],
            figures,
            steps,
        }
    }

    /// The same recorder, also feeding the channel series of `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.sinks.push(Arc::new(ChannelSeries(metrics)));
        self
    }

    /// The vendor figures recorded.
    pub fn figures(&self) -> &Figures {
        &self.figures
    }

    /// The counts of a rollout's step under way, this recorder feeds.
    pub fn step_counter(&self) -> Arc<StepCounter> {
        Arc::clone(&self.steps)
    }

    /// Counts one call on `channel` in every view.
    pub fn record(&self, channel: &Channel, outcome: &CallOutcome<'_>) {
        channel.stats().count(outcome);
        if !outcome.was_sent() {
            return;
        }
        for sink in &self.sinks {
            sink.record(channel.name(), outcome);
        }
    }

    /// Counts a session start sent past `to`'s open circuit because every
    /// channel refused (panic routing).
    pub fn panic(&self, to: &Channel) {
        for sink in &self.sinks {
            sink.panic(to.name());
        }
    }

    /// Counts a failed session start on `from` that is being tried on
    /// another channel.
    pub fn failover(&self, from: &Channel) {
        from.stats().record_failover();
        for sink in &self.sinks {
            sink.failover(from.name());
        }
    }
}

/// The per-channel series of `/metrics`, as a sink.
#[derive(Debug)]
pub struct ChannelSeries(Metrics);

impl OutcomeSink for ChannelSeries {
    fn record(&self, channel: &str, outcome: &CallOutcome<'_>) {
        let m = &self.0;
        match outcome.ended {
            Ended::Granted { contingency, .. } => {
                m.record_channel_session(channel, ChannelSessionEnd::Started { contingency })
            }
            Ended::Failed(_) if outcome.op == Operation::SessionToken3D => {
                m.record_channel_session(channel, ChannelSessionEnd::Failed)
            }
            _ => {}
        }
        if outcome.op == Operation::Liveness3D {
            if let Some(label) = outcome.verification_label() {
                m.record_channel_verification(channel, label, outcome.elapsed);
            }
        }
    }

    fn failover(&self, channel: &str) {
        self.0.record_channel_failover(channel);
    }

    fn panic(&self, channel: &str) {
        self.0.record_channel_panic(channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::channels::{ChannelSpec, SessionGrant, channel::Channel};
    use crate::telemetry::metrics::exposition;
    use crate::upstream::UpstreamError;

    fn channel() -> Channel {
        Channel::new(ChannelSpec::new("alt", "http://127.0.0.1:1/alt", 2))
    }

    #[test]
    fn one_record_feeds_counters_figures_and_metrics() {
        let metrics = Metrics::new(["alt"]);
        let recorder = OutcomeRecorder::new(Figures::default()).with_metrics(metrics.clone());
        let ch = channel();
        let grant: Result<SessionGrant, UpstreamError> = Ok(SessionGrant {
            token: crate::domain::SessionToken::new("t"),
            vendor: "v".to_owned(),
            vendor_url: String::new(),
            contingency: true,
        });
        recorder.record(&ch, &CallOutcome::session(&grant, Duration::from_millis(3)));
        let op = Operation::Liveness3D;
        let timeout = Err(UpstreamError::Timeout { op });
        recorder.record(
            &ch,
            &CallOutcome::verification(&timeout, Duration::from_millis(9)),
        );
        let refused = Err(UpstreamError::Saturated { op });
        recorder.record(&ch, &CallOutcome::verification(&refused, Duration::ZERO));
        recorder.record(&ch, &CallOutcome::circuit_open());
        recorder.failover(&ch);

        let s = ch.snapshot(tokio::time::Instant::now());
        assert_eq!(
            (s.sessions_started, s.contingency_answers, s.failovers),
            (1, 1, 1)
        );
        assert_eq!((s.verifications, s.verification_failures), (2, 2));
        assert_eq!((s.rejected_open, s.last_error_class), (1, "saturated"));

        let t = recorder.figures().window(60)["alt"];
        assert_eq!((t.sessions_started, t.verifications()), (1, 1));

        let text = metrics.encode().unwrap();
        for line in [
            r#"idgate_channel_sessions_total{channel="alt"} 1"#,
            r#"idgate_channel_contingency_answers_total{channel="alt"} 1"#,
            r#"idgate_channel_failovers_total{channel="alt"} 1"#,
            r#"idgate_channel_verifications_total{channel="alt",outcome="timeout"} 1"#,
        ] {
            exposition::assert_sample(&text, line);
        }
        assert!(
            !exposition::has_label(&text, "outcome", "saturated"),
            "{text}"
        );
    }
}
