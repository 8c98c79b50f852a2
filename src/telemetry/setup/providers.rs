//! What the standard `OTEL_*` variables ask for, and the tracer and meter
//! providers built from it.

use super::*;
use crate::telemetry::{
    audit_export::{AuditExport, resource_of},
    otlp::{log_target, span_target, transport::OtlpTransport},
    span_queue::{EncodedBatch, SpanExportStats, SpanQueue, SpanQueueConfig},
};
use opentelemetry_sdk::resource::TelemetryResourceDetector;

/// True when the `OTEL_*` variables ask for span export: an endpoint is set,
/// and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`.
pub(super) fn export_requested(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let none = env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    endpoint && !disabled && !none
}

/// True when the environment names the service (`OTEL_SERVICE_NAME`, or
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`), which then wins over the
/// configuration.
pub(super) fn env_names_service(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attrs| {
            attrs
                .split(',')
                .any(|kv| kv.split('=').next().map(str::trim) == Some("service.name"))
        })
}

pub(super) fn resource(service_name: &str, env: &dyn Fn(&str) -> Option<String>) -> Resource {
    // The default detectors read OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    let builder = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if env_names_service(env) {
        builder.build()
    } else {
        builder.with_service_name(service_name.to_owned()).build()
    }
}

/// [`resource`] from `otel_env`: the SDK's own detectors for the
/// process's environment; for a given set, the same attributes read from
/// it (the SDK's detectors would read the process's).
pub(super) fn resource_from(service_name: &str, otel_env: &OtelEnv) -> Resource {
    let env = |name: &str| otel_env.var(name);
    if otel_env.is_process() {
        return resource(service_name, &env);
    }
    let attributes = env("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    let attributes = attributes.split(',').filter_map(|kv| {
        let (key, value) = kv.split_once('=')?;
        Some(KeyValue::new(
            key.trim().to_owned(),
            value.trim().to_owned(),
        ))
    });
    let name = env("OTEL_SERVICE_NAME").unwrap_or_else(|| service_name.to_owned());
    let mut builder = Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attributes(attributes)
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if env("OTEL_SERVICE_NAME").is_some() || !env_names_service(&env) {
        builder = builder.with_service_name(name);
    }
    builder.build()
}

/// True when the `OTEL_*` variables ask for OTLP metrics export:
/// `OTEL_METRICS_EXPORTER` lists `otlp`, an endpoint is set, and the SDK is
/// not disabled. Off by default: `GET /metrics` is the metrics interface.
pub(super) fn metrics_export_requested(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let otlp = env("OTEL_METRICS_EXPORTER")
        .is_some_and(|v| v.split(',').any(|e| e.trim().eq_ignore_ascii_case("otlp")));
    let endpoint = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    otlp && endpoint && !disabled
}

pub(super) fn build_meter_provider(
    service_name: &str,
    settings: &OtlpSettings,
    otel_env: &OtelEnv,
) -> Result<SdkMeterProvider, TelemetryError> {
    let env = |name: &str| otel_env.var(name);
    let exporter = metric_exporter(settings, &env)?;
    // OTEL_METRIC_EXPORT_INTERVAL sets the period (default 60 s).
    let reader = PeriodicReader::builder(exporter).build();
    Ok(SdkMeterProvider::builder()
        .with_resource(resource_from(service_name, otel_env))
        .with_reader(reader)
        .build())
}

/// The tracer provider and its export queue: spans encoded as they end
/// into the bounded, counted queue ([`EncodedBatch`]) and sent to the
/// collector; what became of them counted in `stats`. The gateway's span
/// layer writes into the queue; the provider owns the export thread
/// (flush, shutdown) and gives it the resource.
pub(super) fn build_provider(
    service_name: &str,
    settings: &OtlpSettings,
    stats: &SpanExportStats,
    otel_env: &OtelEnv,
) -> Result<(SdkTracerProvider, SpanQueue), TelemetryError> {
    let env = |name: &str| otel_env.var(name);
    let (target, options) = span_target(settings, &env)?;
    let queue = SpanQueueConfig::from_env(&env);
    let processor = EncodedBatch::new(OtlpTransport::new(target, options), queue, stats.clone())
        .map_err(|e| TelemetryError::Export(format!("cannot start the span export thread: {e}")))?;
    let queue = processor.queue();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource_from(service_name, otel_env))
        .with_span_processor(processor)
        .build();
    Ok((provider, queue))
}

/// The export of audit records as OTLP logs (`[audit] otlp`), to the
/// spans' collector, under the spans' resource.
pub(super) fn build_audit_export(
    service_name: &str,
    settings: &OtlpSettings,
    otel_env: &OtelEnv,
) -> Result<AuditExport, TelemetryError> {
    let env = |name: &str| otel_env.var(name);
    let (target, options) = log_target(settings, &env)?;
    let resource = resource_of(&resource_from(service_name, otel_env));
    AuditExport::start(OtlpTransport::for_logs(target, options), resource)
        .map_err(|e| TelemetryError::Export(format!("cannot start the audit export thread: {e}")))
}
