//! The audit trail of access to personal data (LGPD art. 37, the record of
//! processing operations): one structured record per call that submits or
//! releases personal data, on its own log target [`AUDIT_TARGET`].
//!
//! A record names who (the caller's configured name), what (the
//! operation), which journey (its reference, a hash of the appkey), what
//! was released (the caller's result view, on reads), how it ended (`ok`
//! or the refusal's reason) and the trace id. Never a value: no appkey,
//! CPF, name, image or token.
//!
//! The log filter lets these records through whatever `RUST_LOG` says
//! (`telemetry::log_filter`), so an operator who turns INFO off does not
//! turn the record of processing off. With `--log-format json` each
//! record is one JSON object on its own line (`target` `idgate::audit`).
//!
//! Calls audited: `CreateJourney`, `SubmitChallengeResponse`,
//! `StartSession3D`, `VerifyLiveness3D`, `SubmitDocumentImages`,
//! `SubmitDigitalLicence`, `GetJourneyResult`, `WatchJourney` (the call),
//! and each result a `WatchJourney` stream delivers (`watch_result`).

use std::sync::{Arc, OnceLock};

use futures_util::StreamExt as _;
use opentelemetry::trace::TraceContextExt as _;
use tonic::{Request, Status};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::{
    domain::{Caller, JourneyRef, ResultView},
    events::WatchStream,
};

/// The log target of audit records.
pub const AUDIT_TARGET: &str = "idgate::audit";

/// One audited call: filled as the handler learns the journey, written
/// once by [`Audit::finish`].
pub struct Audit {
    caller: Option<Arc<Caller>>,
    operation: &'static str,
    /// The result view released; `None` for calls that release no result.
    view: Option<ResultView>,
    journey: OnceLock<JourneyRef>,
    trace_id: String,
}

impl Audit {
    /// The record of `operation` on `request` (its caller and trace, as
    /// the auth and telemetry layers left them). `releases`: whether the
    /// call releases a result (the caller's view is recorded).
    pub fn start<T>(request: &Request<T>, operation: &'static str, releases: bool) -> Self {
        let caller = request.extensions().get::<Arc<Caller>>().cloned();
        let view = releases.then(|| caller.as_ref().map_or(ResultView::Full, |c| c.result_view));
        let trace_id = super::server_span(request)
            .map(|span| span.context().span().span_context().trace_id())
            .filter(|id| *id != opentelemetry::trace::TraceId::INVALID)
            .map(|id| id.to_string())
            .unwrap_or_default();
        Self {
            caller,
            operation,
            view,
            journey: OnceLock::new(),
            trace_id,
        }
    }

    /// The journey the call names, once known.
    pub fn journey(&self, journey: &JourneyRef) {
        let _ = self.journey.set(journey.clone());
    }

    /// Writes the record with the call's outcome and returns `result`.
    pub fn finish<R>(self, result: Result<R, Status>) -> Result<R, Status> {
        let outcome = match &result {
            Ok(_) => "ok".to_owned(),
            Err(status) => outcome_of(status),
        };
        self.write(self.operation, &outcome);
        result
    }

    /// `stream` with one `watch_result` record per result it delivers
    /// (the record of the call itself is [`Audit::finish`]'s).
    pub fn watched(&self, stream: WatchStream) -> WatchStream {
        let record = Audit {
            caller: self.caller.clone(),
            operation: "watch_result",
            view: self.view,
            journey: self.journey.clone(),
            trace_id: self.trace_id.clone(),
        };
        Box::pin(stream.inspect(move |item| {
            if let Ok(response) = item
                && response.result.is_some()
            {
                record.write("watch_result", "ok");
            }
        }))
    }

    fn write(&self, operation: &str, outcome: &str) {
        let caller = self.caller.as_ref().map_or("", |c| c.name.as_str());
        let journey = self.journey.get().map_or("", JourneyRef::as_str);
        let view = self.view.map_or("", ResultView::as_str);
        tracing::info!(
            target: AUDIT_TARGET,
            caller,
            operation,
            journey_ref = journey,
            view,
            outcome,
            // `trace`: JSON lines inside a span already carry `trace_id`.
            trace = self.trace_id.as_str(),
            "personal data access"
        );
    }
}

/// `ok`, or the refusal's `ErrorInfo.reason` (else its gRPC code).
fn outcome_of(status: &Status) -> String {
    use tonic_types::StatusExt as _;
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_else(|| format!("{:?}", status.code()))
}
