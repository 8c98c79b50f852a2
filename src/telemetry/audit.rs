//! The audit trail of access to personal data (LGPD art. 37, the record of
//! processing operations): one structured record per call that submits or
//! releases personal data, and one per refusal of an authenticated
//! caller, on its own log target [`AUDIT_TARGET`].
//!
//! A record names who (the caller's configured name, or [`ADMIN_PRINCIPAL`]
//! and the channel on an admin call's), what (the operation), which journey (its reference, a hash of the appkey), what
//! was released (the caller's result view, on reads), how it ended (`ok`,
//! the refusal's reason, or `cancelled`), which REST operation had already
//! been sent upstream (`upstream`) and the trace id. Never a value: no
//! appkey, CPF, name, image or token.
//!
//! An [`AuditRecord`] is opened by the admission layer (`api::admission`)
//! before the handler runs and written exactly once: by
//! [`AuditRecord::finish`] with the call's outcome, or by its `Drop` as
//! `cancelled` when the call ended first (the client went away, the
//! deadline passed): no call path can skip it. The same single point
//! counts the call by caller, operation and outcome for the metrics and
//! the usage report ([`AuditRecord::counted`], `telemetry::usage`). Lines
//! are written through
//! (`log_lines`), not batched; the log filter lets them through whatever
//! `RUST_LOG` says (`log_filter`).

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use super::{log_throttle::LogThrottle, usage::CallerUsage};
use crate::domain::{Caller, CallerName, JourneyRef, ResultView};

/// The log target of audit records.
pub const AUDIT_TARGET: &str = "idgate::audit";

/// `[audit]`: where audit records go besides stdout.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Also export each record as an OTLP log, to the spans' collector
    /// (`telemetry::audit_export`); needs an OTLP endpoint.
    pub otlp: bool,
}

/// One audited call, written once (see the module doc).
#[derive(Debug)]
pub struct AuditRecord {
    caller: Option<CallerName>,
    operation: &'static str,
    /// The result view released; `None` for calls that release no result.
    view: Option<ResultView>,
    journey: Option<JourneyRef>,
    /// The first REST operation sent upstream, once it was (shared with
    /// [`Upstream`] markers).
    upstream: Arc<OnceLock<&'static str>>,
    /// On an admin call's record: the channel it names.
    channel: Option<String>,
    trace_id: String,
    /// Where the call is counted once written (none: not counted).
    usage: Option<CallerUsage>,
    written: bool,
}

/// The `caller` of an admin call's record: whoever holds the admin token
/// (one token, so one principal; `identity` says `admin_token`, which no
/// `[[callers]]` entry's record carries).
pub const ADMIN_PRINCIPAL: &str = "admin";

impl AuditRecord {
    /// The record of `operation` by `caller` in the trace `trace_id`.
    /// `releases`: the call releases a result (the caller's view is
    /// recorded).
    pub fn open(
        caller: &Caller,
        operation: &'static str,
        releases: bool,
        trace_id: String,
    ) -> Self {
        Self {
            caller: Some(caller.name.clone()),
            operation,
            view: releases.then_some(caller.result_view),
            journey: None,
            upstream: Arc::default(),
            channel: None,
            trace_id,
            usage: None,
            written: false,
        }
    }

    /// The record of the admin call `operation` (`probe_channel`) on
    /// `channel` (a configured channel's name, or empty), by
    /// [`ADMIN_PRINCIPAL`], in the trace `trace_id`.
    pub fn admin(operation: &'static str, channel: &str, trace_id: String) -> Self {
        Self {
            caller: Some(CallerName::new(ADMIN_PRINCIPAL)),
            operation,
            view: None,
            journey: None,
            upstream: Arc::default(),
            channel: Some(channel.to_owned()),
            trace_id,
            usage: None,
            written: false,
        }
    }

    /// The record counts its call in `usage` (by the caller, the
    /// operation and the outcome it is written with).
    #[must_use]
    pub fn counted(mut self, usage: CallerUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// The journey the call names, once known.
    pub fn journey(&mut self, journey: &JourneyRef) {
        self.journey = Some(journey.clone());
    }

    /// `operation` (a REST operation's name) is being sent upstream: a
    /// record written as `cancelled` after this says so (the first one
    /// sent is kept).
    pub fn upstream(&self, operation: &'static str) {
        let _ = self.upstream.set(operation);
    }

    /// A marker that says "`operation` sent upstream" on this record,
    /// for code that does not hold it (journey creation, which reaches
    /// the vendor only after its idempotency and budget checks).
    pub fn upstream_marker(&self, operation: &'static str) -> Upstream {
        Upstream {
            record: self.upstream.clone(),
            operation,
        }
    }

    /// Writes the record with the call's `outcome` (`ok`, the refusal's
    /// `ErrorInfo.reason`, or the gRPC code name of a call no handler
    /// answered), and counts the call.
    pub fn finish(mut self, outcome: &'static str) {
        self.write(self.operation, outcome);
        self.count(outcome);
        self.written = true;
    }

    fn count(&self, outcome: &'static str) {
        if let Some(usage) = &self.usage {
            usage.call(self.operation, outcome);
        }
    }

    /// A record of each result a `WatchJourney` stream delivers
    /// (`watch_result`), sharing this call's fields; written by
    /// [`AuditRecord::delivered`], never on drop.
    pub fn deliveries(&self) -> Self {
        Self {
            caller: self.caller.clone(),
            operation: "watch_result",
            view: self.view,
            journey: self.journey.clone(),
            upstream: Arc::default(),
            channel: None,
            trace_id: self.trace_id.clone(),
            usage: None,
            written: true,
        }
    }

    /// Writes one `watch_result` record (see [`AuditRecord::deliveries`]).
    pub fn delivered(&self) {
        self.write("watch_result", "ok");
    }

    fn write(&self, operation: &str, outcome: &str) {
        let caller = self.caller.as_ref().map_or("", CallerName::as_str);
        let journey = self.journey.as_ref().map_or("", JourneyRef::as_str);
        let view = self.view.map_or("", ResultView::as_str);
        let upstream = self.upstream.get().copied().unwrap_or("");
        if let Some(channel) = &self.channel {
            tracing::info!(
                target: AUDIT_TARGET,
                caller,
                identity = "admin_token",
                operation,
                channel = channel.as_str(),
                journey_ref = journey,
                view,
                outcome,
                upstream,
                trace = self.trace_id.as_str(),
                "personal data access"
            );
            return;
        }
        tracing::info!(
            target: AUDIT_TARGET,
            caller,
            operation,
            journey_ref = journey,
            view,
            outcome,
            upstream,
            // `trace`: JSON lines inside a span already carry `trace_id`.
            trace = self.trace_id.as_str(),
            "personal data access"
        );
    }
}

/// Marks an [`AuditRecord`] as having sent one operation upstream.
#[derive(Debug, Clone)]
pub struct Upstream {
    record: Arc<OnceLock<&'static str>>,
    operation: &'static str,
}

impl Upstream {
    /// The operation is being sent upstream now.
    pub fn sending(&self) {
        let _ = self.record.set(self.operation);
    }
}

impl Drop for AuditRecord {
    fn drop(&mut self) {
        if !self.written {
            self.written = true;
            self.write(self.operation, "cancelled");
            self.count("cancelled");
        }
    }
}

/// The trace id of the call's server span (left in the request's
/// extensions by the telemetry layer), or empty: lower-case hex, as its
/// `Display` writes it, without the formatting machinery (every audited
/// call asks).
pub fn trace_id(extensions: &http::Extensions) -> String {
    use super::spans::SpanExt as _;
    extensions
        .get::<super::ServerSpan>()
        .map(|s| s.0.span_context().trace_id())
        .filter(|id| *id != opentelemetry::trace::TraceId::INVALID)
        .map(|id| {
            let mut hex = [0; 32];
            base16ct::lower::encode_str(&id.to_bytes(), &mut hex)
                .map(str::to_owned)
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

/// Records a refusal of a valid identity that no `[[callers]]` entry
/// names (`CALLER_UNKNOWN`): the identity's kind (`jwt`, `mtls`) stands
/// for the caller, never its subject or name.
pub fn refused_identity(kind: &'static str, operation: &str, trace_id: &str) {
    tracing::info!(
        target: AUDIT_TARGET,
        caller = "",
        identity = kind,
        operation,
        journey_ref = "",
        view = "",
        outcome = "CALLER_UNKNOWN",
        upstream = "",
        trace = trace_id,
        "personal data access"
    );
}

/// Unauthenticated refusals (no credential, a bad token) on one listener,
/// counted and said at most once per interval with the count since, never
/// one line each: a client sending garbage cannot flood the log. The
/// public listener's auth layer and the admin listener's token check each
/// keep one.
#[derive(Debug)]
pub struct RefusalLog {
    listener: &'static str,
    lines: LogThrottle,
}

/// The interval of a [`RefusalLog`] unless told otherwise.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

impl RefusalLog {
    /// One line per [`REFUSAL_LOG_INTERVAL`] about `listener` (`grpc`,
    /// `admin`).
    pub fn on(listener: &'static str) -> Self {
        Self::every(listener, REFUSAL_LOG_INTERVAL)
    }

    /// One line per `interval` about `listener`.
    pub fn every(listener: &'static str, interval: Duration) -> Self {
        Self {
            listener,
            lines: LogThrottle::new(interval),
        }
    }

    /// Counts one refusal for `cause` (a fixed word); returns the count
    /// said, when this refusal's line was the one written.
    pub fn refused(&self, cause: &'static str) -> Option<u64> {
        let left_out = self.lines.admit(tokio::time::Instant::now())?;
        let count = left_out + 1;
        tracing::warn!(
            listener = self.listener,
            refused = count,
            last_cause = cause,
            "unauthenticated calls refused since the last such line"
        );
        Some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_id_is_its_lower_case_hex_as_display_writes_it() {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        };
        use opentelemetry_sdk::trace::Sampler;

        use crate::telemetry::spans::SpanExt as _;

        let (subscriber, _batch, _captured) =
            crate::telemetry::spans::tests::traced(Sampler::AlwaysOn);
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("hex");
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("grpc.server");
            let parent = SpanContext::new(
                id,
                SpanId::from_hex("b7ad6b7169203331").expect("hex"),
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            );
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
            let mut extensions = http::Extensions::new();
            assert_eq!(trace_id(&extensions), "", "no server span");
            extensions.insert(super::super::ServerSpan(span));
            assert_eq!(trace_id(&extensions), id.to_string());
        });
    }

    #[test]
    fn unauthenticated_refusals_are_said_once_per_interval_with_their_count() {
        let log = RefusalLog::every("grpc", Duration::from_secs(3600));
        assert_eq!(log.refused("no_credential"), Some(1));
        for _ in 0..5 {
            assert_eq!(log.refused("expired"), None);
        }
        let now = RefusalLog::every("admin", Duration::ZERO);
        assert_eq!(now.refused("a"), Some(1));
        assert_eq!(now.refused("a"), Some(1));
    }
}
