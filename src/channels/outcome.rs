//! One record per call on a channel, and the one place that counts it.
//!
//! The router ends every 3D call it routes with a [`CallOutcome`]: which
//! operation, how it ended (granted, a verdict, failed by error class,
//! refused by this gateway's own bulkhead, skipped because the circuit was
//! open) and how long it took. [`OutcomeRecorder::record`] derives every
//! view of a channel from that one record:
//!
//! - the channel's counters and last-seen values ([`ChannelStats`], read
//!   by `ListChannels` and the CLI);
//! - the vendor figures over a rolling window ([`ChannelFigures`], read by
//!   `GetChannelFigures`);
//! - the per-channel series of `/metrics` (`idgate_channel_sessions`,
//!   `idgate_channel_session_failures`, `idgate_channel_contingency_answers`,
//!   `idgate_channel_verifications`, `idgate_channel_verification_duration`),
//!   counted as the call ends rather than copied from the counters at
//!   scrape time.
//!
//! A failover is a routing decision, not a call, so it has its own entry
//! ([`OutcomeRecorder::failover`]) feeding the same views.
//!
//! The HTTP exchanges under a call are counted once more, per attempt and
//! by HTTP status, by the REST client (`idgate_upstream_*`, see
//! `telemetry::UpstreamOutcome`): a different question (what went over
//! the wire), answered where the wire is.
//!
//! A record holds an operation, classes, a vendor name and a duration: no
//! appkey, token or person.

use std::{sync::Arc, time::Duration};

use super::{
    channel::{Channel, ChannelStats},
    figures::ChannelFigures,
    rollout::counts::StepCounter,
    transport::SessionGrant,
};
use crate::{
    domain::Operation,
    proto::v1::{LivenessCode, LivenessVerdict},
    telemetry::{ChannelSessionEnd, Metrics},
    upstream::UpstreamError,
};

/// The verdict of a verification that was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// codID 200.0.
    Valid,
    /// codID 300.1.
    Invalid,
    /// codID 300.2.
    Blocked,
    /// A code no table lists.
    Other,
}

impl Verdict {
    /// The verdict of `v`'s code.
    pub fn of(v: &LivenessVerdict) -> Self {
        match LivenessCode::try_from(v.code) {
            Ok(LivenessCode::Valid) => Verdict::Valid,
            Ok(LivenessCode::Invalid) => Verdict::Invalid,
            Ok(LivenessCode::UserBlocked) => Verdict::Blocked,
            _ => Verdict::Other,
        }
    }

    /// The metric label: `valid`, `invalid`, `blocked` or `other`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Blocked => "blocked",
            Verdict::Other => "other",
        }
    }
}

/// How a call on a channel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended<'a> {
    /// A session start granted by `vendor`, in contingency or not.
    Granted {
        /// The vendor named by the answer.
        vendor: &'a str,
        /// `isContingency`.
        contingency: bool,
    },
    /// A verification answered with a verdict.
    Verdict(Verdict),
    /// The call failed with an error of this class (`connect`, `timeout`,
    /// `http_5xx`, `deadline`, ...).
    Failed(&'static str),
    /// This gateway's own bulkhead refused it: nothing was sent.
    Refused,
    /// Not tried: the channel's circuit was open.
    CircuitOpen,
}

/// One call on a channel: the record every channel view is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOutcome<'a> {
    /// [`Operation::SessionToken3D`] or [`Operation::Liveness3D`].
    pub op: Operation,
    /// How it ended.
    pub ended: Ended<'a>,
    /// From sending to the answer (zero when nothing was sent).
    pub elapsed: Duration,
}

/// How an upstream error ends a call: refused by the bulkhead, else failed
/// by its class.
fn failed(e: &UpstreamError) -> Ended<'static> {
    match e {
        UpstreamError::Saturated { .. } => Ended::Refused,
        e => Ended::Failed(e.class()),
    }
}

impl<'a> CallOutcome<'a> {
    /// A session start that ended in `result` after `elapsed`.
    pub fn session(result: &'a Result<SessionGrant, UpstreamError>, elapsed: Duration) -> Self {
        let ended = match result {
            Ok(grant) => Ended::Granted {
                vendor: &grant.vendor,
                contingency: grant.contingency,
            },
            Err(e) => failed(e),
        };
        Self {
            op: Operation::SessionToken3D,
            ended,
            elapsed,
        }
    }

    /// A verification that ended in `result` after `elapsed`.
    pub fn verification(
        result: &Result<LivenessVerdict, UpstreamError>,
        elapsed: Duration,
    ) -> Self {
        let ended = match result {
            Ok(v) => Ended::Verdict(Verdict::of(v)),
            Err(e) => failed(e),
        };
        Self {
            op: Operation::Liveness3D,
            ended,
            elapsed,
        }
    }

    /// A session start that skipped a channel whose circuit was open.
    pub fn circuit_open() -> Self {
        Self {
            op: Operation::SessionToken3D,
            ended: Ended::CircuitOpen,
            elapsed: Duration::ZERO,
        }
    }

    /// True when the call reached the vendor's side (or was cut short
    /// there): what the vendor figures and the channel series count. A
    /// call this gateway refused or skipped is not the vendor's doing.
    pub fn was_sent(&self) -> bool {
        !matches!(self.ended, Ended::Refused | Ended::CircuitOpen)
    }

    /// The `outcome` label of a verification: the verdict or the error
    /// class.
    pub fn verification_label(&self) -> Option<&'static str> {
        match self.ended {
            Ended::Verdict(v) => Some(v.label()),
            Ended::Failed(class) => Some(class),
            _ => None,
        }
    }
}

/// Where a router's outcomes go: the figures it keeps and, for a gateway,
/// its metrics. Each channel carries its own counters.
#[derive(Debug, Clone)]
pub struct OutcomeRecorder {
    figures: Arc<ChannelFigures>,
    steps: Arc<StepCounter>,
    metrics: Option<Metrics>,
}

impl OutcomeRecorder {
    /// Records into `figures` only (no `/metrics`).
    pub fn new(figures: ChannelFigures) -> Self {
        Self {
            figures: Arc::new(figures),
            steps: Arc::new(StepCounter::default()),
            metrics: None,
        }
    }

    /// The same recorder, also feeding the channel series of `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The vendor figures recorded.
    pub fn figures(&self) -> &ChannelFigures {
        &self.figures
    }

    /// The counts of a rollout's step under way, this recorder feeds.
    pub fn step_counter(&self) -> Arc<StepCounter> {
        Arc::clone(&self.steps)
    }

    /// Counts one call on `channel` in every view.
    pub fn record(&self, channel: &Channel, outcome: &CallOutcome<'_>) {
        count(channel.stats(), outcome);
        if !outcome.was_sent() {
            return;
        }
        self.figures.record(channel.name(), outcome);
        self.steps.record(channel.name(), outcome);
        let Some(m) = &self.metrics else {
            return;
        };
        match outcome.ended {
            Ended::Granted { contingency, .. } => {
                m.record_channel_session(channel.name(), ChannelSessionEnd::Started { contingency })
            }
            Ended::Failed(_) if outcome.op == Operation::SessionToken3D => {
                m.record_channel_session(channel.name(), ChannelSessionEnd::Failed)
            }
            _ => {}
        }
        if outcome.op == Operation::Liveness3D {
            if let Some(label) = outcome.verification_label() {
                m.record_channel_verification(channel.name(), label, outcome.elapsed);
            }
        }
    }

    /// Counts a failed session start on `from` that is being tried on
    /// another channel.
    pub fn failover(&self, from: &Channel) {
        from.stats().record_failover();
        if let Some(m) = &self.metrics {
            m.record_channel_failover(from.name());
        }
    }
}

/// The channel's own counters. A verification counts as sent even when
/// the bulkhead refused it (`verifications`, `verification_failures` and
/// the last error class `saturated`, as operators have always read them);
/// a refused session start counts nowhere.
fn count(stats: &ChannelStats, outcome: &CallOutcome<'_>) {
    match (outcome.op, outcome.ended) {
        (_, Ended::CircuitOpen) => stats.record_rejected_open(),
        (
            _,
            Ended::Granted {
                vendor,
                contingency,
            },
        ) => stats.record_grant(vendor, contingency),
        (Operation::Liveness3D, Ended::Verdict(_)) => stats.record_verification(None),
        (Operation::Liveness3D, Ended::Failed(class)) => stats.record_verification(Some(class)),
        (Operation::Liveness3D, Ended::Refused) => {
            let refused = UpstreamError::Saturated { op: outcome.op };
            stats.record_verification(Some(refused.class()));
        }
        (_, Ended::Failed(class)) => stats.record_session_failure(class),
        (_, Ended::Refused | Ended::Verdict(_)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::{ChannelSpec, channel::Channel};
    use crate::telemetry::metrics::exposition;

    fn channel() -> Channel {
        Channel::new(ChannelSpec::new("alt", "http://127.0.0.1:1/alt", 2))
    }

    #[test]
    fn one_record_feeds_counters_figures_and_metrics() {
        let metrics = Metrics::new(["alt"]);
        let recorder =
            OutcomeRecorder::new(ChannelFigures::default()).with_metrics(metrics.clone());
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
