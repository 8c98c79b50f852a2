//! The upstream series, from one record per REST exchange.
//!
//! The REST client ends every exchange (one HTTP attempt) with an
//! [`UpstreamOutcome`]: its HTTP status, the class of a failure that got
//! no status (`connect`, `timeout`, `transport`, `cancelled`, ...), or a
//! refusal by a full bulkhead before anything was sent.
//! [`Metrics::record_upstream`] derives `idgate_upstream_requests`,
//! `idgate_upstream_duration`, `idgate_upstream_rejected` and their
//! OpenTelemetry twins from it, and nothing else writes them.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct UpstreamLabels {
    operation: &'static str,
    channel: ChannelLabel,
    status: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RejectedLabels {
    operation: &'static str,
    channel: String,
}

/// How one upstream exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamEnd {
    /// The upstream answered with this HTTP status after `elapsed`.
    Answered {
        /// The HTTP status code.
        status: u16,
        /// From sending to the status.
        elapsed: Duration,
    },
    /// No status arrived: the failure's class, from a fixed set.
    Failed {
        /// `connect`, `timeout`, `transport`, `cancelled`, ...
        class: &'static str,
        /// From sending to the failure.
        elapsed: Duration,
    },
    /// A full bulkhead refused the call: nothing was sent.
    Refused,
}

/// One upstream REST exchange: the record its series are derived from.
/// Holds an operation, a configured channel name, a status or class and
/// a duration: nothing a caller sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOutcome {
    /// The operation called.
    pub operation: Operation,
    /// The 3D channel's name as a label ([`Metrics::channel_label`]),
    /// `None` for the core service ([`CORE_CHANNEL`]).
    pub channel: Option<ChannelLabel>,
    /// How it ended.
    pub ended: UpstreamEnd,
}

impl Metrics {
    /// Records one upstream exchange in every upstream series.
    pub fn record_upstream(&self, outcome: &UpstreamOutcome) {
        let channel = outcome
            .channel
            .clone()
            .unwrap_or_else(|| self.inner.core_label.clone());
        let operation = outcome.operation.as_str();
        let (status, elapsed) = match outcome.ended {
            UpstreamEnd::Answered { status, elapsed } => (http_status_label(status), elapsed),
            UpstreamEnd::Failed { class, elapsed } => (Cow::Borrowed(class), elapsed),
            UpstreamEnd::Refused => {
                self.inner
                    .upstream_rejected
                    .get_or_create(&RejectedLabels {
                        operation,
                        channel: channel.to_string(),
                    })
                    .inc();
                return;
            }
        };
        let labels = UpstreamLabels {
            operation,
            channel,
            status,
        };
        let inner = &self.inner;
        record_call(
            &inner.upstream_handles,
            (&inner.upstream_requests, &inner.upstream_duration),
            &labels,
            elapsed,
        );
        let attributes = [
            KeyValue::new("operation", labels.operation),
            KeyValue::new("channel", labels.channel.shared()),
            KeyValue::new("status", labels.status),
        ];
        inner.otel.upstream_requests.add(1, &attributes);
        inner
            .otel
            .upstream_duration
            .record(elapsed.as_secs_f64(), &attributes);
    }
}
