//! `[telemetry]`: what goes on spans beyond the defaults.

use serde::Deserialize;

use super::OtelEnv;

/// Traces, logs and metrics. Where spans go is not configured here: the
/// standard `OTEL_EXPORTER_OTLP_*` variables say it, so the gateway behaves
/// like every other OpenTelemetry-instrumented process of a deployment.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `service.name` of the exported spans; `OTEL_SERVICE_NAME` (or
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) wins over it.
    pub service_name: String,
    /// Puts the caller's customer reference (`idExternoCliente`) on spans as
    /// `idgate.customer_reference`. Off by default: it is the caller's own
    /// identifier of the end user, which some callers treat as personal data.
    pub record_customer_reference: bool,
    /// Writes one log line per RPC (target `idgate::access`): method, gRPC
    /// code, duration, peer address, inside the server span (so JSON lines
    /// carry its `idgate.journey_ref`, `trace_id` and `span_id`). Never a
    /// value from the request.
    pub access_log: bool,
    /// Where the `OTEL_*` variables are read from: the process's
    /// environment unless an embedder or a test gives them. Not a file
    /// setting.
    #[serde(skip)]
    pub otel_env: OtelEnv,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            service_name: "idgate".to_owned(),
            record_customer_reference: false,
            access_log: false,
            otel_env: OtelEnv::Process,
        }
    }
}
