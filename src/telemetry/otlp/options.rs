//! The trace exporter's `OTEL_EXPORTER_OTLP_*` variables, read as the
//! OpenTelemetry specification says: the `TRACES_` form first, else the
//! shared one.
//!
//! A value that does not parse fails telemetry's set-up with the variable
//! named, rather than exporting somewhere or somehow other than asked. An
//! error names a header by its key only: header values are a backend's
//! API key.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::transport::Endpoint;

use super::{
    OtlpProtocol, OtlpSettings, Signal,
    transport::{ExportOptions, SpanTarget},
};
use crate::telemetry::TelemetryError;

/// The specification's default export timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The specification's default endpoints, used when only the protocol is
/// set.
const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";
const DEFAULT_HTTP_ENDPOINT: &str = "http://localhost:4318/v1/traces";

/// Headers of `OTEL_EXPORTER_OTLP_HEADERS` with those of
/// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` over them: `key=value` pairs split
/// by commas, values percent-decoded.
fn headers(env: &dyn Fn(&str) -> Option<String>) -> Result<HeaderMap, TelemetryError> {
    let mut map = HeaderMap::new();
    for variable in [
        "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
        Signal::Traces.var("HEADERS"),
    ] {
        let Some(list) = env(&variable) else { continue };
        let entries = list.split(',').filter(|p| !p.trim().is_empty());
        for (n, pair) in entries.enumerate() {
            // An entry is named by its key only when the key is a valid
            // header name: a malformed entry (`Authorization Bearer ...`,
            // no `=`) may be all secret.
            let bad = |key: Option<&str>| TelemetryError::Header {
                variable: variable.clone(),
                entry: key.map_or_else(|| format!("number {}", n + 1), |k| format!("`{k}`")),
            };
            let (key, value) = pair.split_once('=').ok_or_else(|| bad(None))?;
            let key = key.trim();
            let name = HeaderName::from_bytes(key.to_ascii_lowercase().as_bytes())
                .map_err(|_| bad(None))?;
            let bad = || bad(Some(key));
            let decoded = percent_encoding::percent_decode_str(value.trim())
                .decode_utf8()
                .map_err(|_| bad())?;
            let mut value = HeaderValue::from_str(&decoded).map_err(|_| bad())?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
    }
    Ok(map)
}

fn setting(variable: String, value: &str, expected: &'static str) -> TelemetryError {
    TelemetryError::Setting {
        variable,
        value: value.to_owned(),
        expected,
    }
}

/// `gzip` or `none`.
fn gzip(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, TelemetryError> {
    let Some((variable, value)) = Signal::Traces.env_named(env, "COMPRESSION") else {
        return Ok(false);
    };
    match value.trim() {
        v if v.eq_ignore_ascii_case("gzip") => Ok(true),
        v if v.eq_ignore_ascii_case("none") => Ok(false),
        other => Err(setting(variable, other, "`gzip` or `none`")),
    }
}

/// Milliseconds, at least one.
fn timeout(env: &dyn Fn(&str) -> Option<String>) -> Result<Duration, TelemetryError> {
    let Some((variable, value)) = Signal::Traces.env_named(env, "TIMEOUT") else {
        return Ok(DEFAULT_TIMEOUT);
    };
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(setting(
            variable,
            &value,
            "a number of milliseconds above 0",
        )),
    }
}

/// The endpoint: the builder's or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
/// is; `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` appended over HTTP.
fn endpoint(
    settings: &OtlpSettings,
    protocol: OtlpProtocol,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    if let Some(endpoint) = settings
        .endpoint
        .clone()
        .or_else(|| env(&Signal::Traces.var("ENDPOINT")))
    {
        return endpoint.trim().to_owned();
    }
    match (env("OTEL_EXPORTER_OTLP_ENDPOINT"), protocol) {
        (Some(base), OtlpProtocol::HttpProtobuf) => {
            format!("{}/v1/traces", base.trim().trim_end_matches('/'))
        }
        (Some(base), OtlpProtocol::Grpc) => base.trim().to_owned(),
        (None, OtlpProtocol::HttpProtobuf) => DEFAULT_HTTP_ENDPOINT.to_owned(),
        (None, OtlpProtocol::Grpc) => DEFAULT_GRPC_ENDPOINT.to_owned(),
    }
}

fn grpc_target(
    endpoint: &str,
    https: bool,
    ca: Option<&[u8]>,
) -> Result<SpanTarget, TelemetryError> {
    let bad = |reason: String| TelemetryError::Endpoint(reason);
    let mut endpoint =
        Endpoint::from_shared(endpoint.to_owned()).map_err(|e| bad(e.to_string()))?;
    if https {
        endpoint = endpoint
            .tls_config(super::grpc_tls(ca))
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(SpanTarget::Grpc(Box::new(endpoint)))
}

fn http_target(endpoint: &str, ca: Option<&[u8]>) -> Result<SpanTarget, TelemetryError> {
    let url = reqwest::Url::parse(endpoint).map_err(|e| TelemetryError::Endpoint(e.to_string()))?;
    // Selects ring as the process's rustls provider if none is yet.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut client = reqwest::Client::builder();
    if let Some(ca) = ca {
        client = client.add_root_certificate(super::http_root(ca)?);
    }
    let client = client
        .build()
        .map_err(|e| TelemetryError::HttpClient(e.to_string()))?;
    Ok(SpanTarget::Http { client, url })
}

/// Where spans go and how, from the builder's settings and the
/// environment.
pub(in crate::telemetry) fn span_target(
    settings: &OtlpSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(SpanTarget, ExportOptions), TelemetryError> {
    let resolved = super::resolve(settings, Signal::Traces, env)?;
    let endpoint = endpoint(settings, resolved.protocol, env);
    let ca = resolved.ca.as_deref();
    let target = match resolved.protocol {
        OtlpProtocol::Grpc => grpc_target(&endpoint, resolved.https, ca)?,
        OtlpProtocol::HttpProtobuf => http_target(&endpoint, ca)?,
    };
    let options = ExportOptions {
        headers: headers(env)?,
        gzip: gzip(env)?,
        timeout: timeout(env)?,
    };
    Ok((target, options))
}

/// Where audit records go as OTLP logs: the spans' collector, protocol,
/// TLS, headers and timeout; over HTTP the logs URL is
/// `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` as is, else the spans' URL with its
/// `/v1/traces` made `/v1/logs` (an HTTP traces URL of another shape
/// needs the logs variable, and is refused without it).
pub(in crate::telemetry) fn log_target(
    settings: &OtlpSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(SpanTarget, ExportOptions), TelemetryError> {
    let (target, options) = span_target(settings, env)?;
    let target = match target {
        SpanTarget::Http { client, url } => {
            let logs = match env("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") {
                Some(endpoint) => reqwest::Url::parse(endpoint.trim())
                    .map_err(|e| TelemetryError::Endpoint(e.to_string()))?,
                None => {
                    let path = url.path().strip_suffix("/v1/traces").ok_or_else(|| {
                        TelemetryError::Endpoint(
                            "the traces URL does not end in /v1/traces: set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT for [audit] otlp".to_owned(),
                        )
                    })?;
                    let mut logs = url.clone();
                    logs.set_path(&format!("{path}/v1/logs"));
                    logs
                }
            };
            SpanTarget::Http { client, url: logs }
        }
        grpc => grpc,
    };
    Ok((target, options))
}

#[cfg(test)]
mod tests;
