//! OTLP export: spans through the project's own encoder and transport
//! ([`wire`], [`transport`]), metrics (opt-in) through `opentelemetry-otlp`.
//! Both follow the standard `OTEL_*` variables:
//!
//! - Protocol: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
//!   `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` (the default here, as before, so
//!   existing `:4317` endpoints keep working) or `http/protobuf`;
//!   `http/json` is refused by name.
//! - TLS for `https://` endpoints: rustls (ring) with the system's roots
//!   (tonic's native roots for gRPC, reqwest's platform verifier for HTTP)
//!   plus, for a private collector, the CA file of
//!   `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE`.
//! - Headers, compression (`gzip`) and timeout:
//!   `OTEL_EXPORTER_OTLP_{,TRACES_}{HEADERS,COMPRESSION,TIMEOUT}` ([`options`]
//!   for spans; the metrics exporter reads its own).
//! - Endpoint: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is used as is;
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces` appended over HTTP
//!   (the specification's rule). An endpoint given to the builder is used
//!   as is.
//!
//! Spans leave from a thread of their own with a Tokio runtime of its own
//! (`span_queue`); the metrics exporter's gRPC channel runs on the
//! gateway's runtime.

use std::path::{Path, PathBuf};

use opentelemetry_otlp::{
    MetricExporter, Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use tonic::transport::{Certificate, ClientTlsConfig};

use super::TelemetryError;

mod failure;
mod options;
mod retry;
pub mod transport;
pub mod wire;

pub(super) use options::{log_target, span_target};

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (`grpc`).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`).
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The protocol a `*_PROTOCOL` value names.
    pub fn parse(value: &str) -> Result<Self, TelemetryError> {
        match value.trim() {
            v if v.eq_ignore_ascii_case("grpc") => Ok(OtlpProtocol::Grpc),
            v if v.eq_ignore_ascii_case("http/protobuf") => Ok(OtlpProtocol::HttpProtobuf),
            other => Err(TelemetryError::UnsupportedProtocol(other.to_owned())),
        }
    }
}

/// The telemetry signal an exporter carries: its `OTEL_*` variables and
/// its OTLP/HTTP path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// Spans.
    Traces,
    /// Metrics.
    Metrics,
}

impl Signal {
    /// `OTEL_EXPORTER_OTLP_{SIGNAL}_{name}`.
    fn var(self, name: &str) -> String {
        let signal = match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
        };
        format!("OTEL_EXPORTER_OTLP_{signal}_{name}")
    }

    /// The signal's own variable `name`, else the shared one.
    fn env(self, env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
        self.env_named(env, name).map(|(_, value)| value)
    }

    /// As [`Signal::env`], with the name of the variable that was set.
    fn env_named(
        self,
        env: &dyn Fn(&str) -> Option<String>,
        name: &str,
    ) -> Option<(String, String)> {
        [self.var(name), format!("OTEL_EXPORTER_OTLP_{name}")]
            .into_iter()
            .find_map(|variable| env(&variable).map(|value| (variable, value)))
    }
}

/// Where and how to export, as resolved by the builder.
#[derive(Debug, Clone)]
pub(super) struct OtlpSettings {
    /// The builder's endpoint; `None`: the `OTEL_*` variables'.
    pub(super) endpoint: Option<String>,
    /// The builder's protocol; `None`: the `OTEL_*` variables'.
    pub(super) protocol: Option<OtlpProtocol>,
    /// The builder's CA file; `None`: the `OTEL_*` variables'.
    pub(super) ca_file: Option<PathBuf>,
}

impl OtlpSettings {
    /// The endpoint export goes to, to tell whether it is `https`.
    fn target(&self, signal: Signal, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.endpoint
            .clone()
            .or_else(|| signal.env(env, "ENDPOINT"))
    }

    /// The CA file trusted beside the system's roots, if any.
    fn ca_file(&self, signal: Signal, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        self.ca_file
            .clone()
            .or_else(|| signal.env(env, "CERTIFICATE").map(PathBuf::from))
    }

    fn protocol(
        &self,
        signal: Signal,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OtlpProtocol, TelemetryError> {
        match self.protocol {
            Some(p) => Ok(p),
            None => signal
                .env(env, "PROTOCOL")
                .map_or(Ok(OtlpProtocol::Grpc), |p| OtlpProtocol::parse(&p)),
        }
    }
}

fn read_ca(path: &Path) -> Result<Vec<u8>, TelemetryError> {
    std::fs::read(path).map_err(|source| TelemetryError::CaFile {
        path: path.to_owned(),
        source,
    })
}

/// What the exporter of one signal needs, resolved once.
struct Resolved {
    protocol: OtlpProtocol,
    https: bool,
    ca: Option<Vec<u8>>,
}

fn resolve(
    settings: &OtlpSettings,
    signal: Signal,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Resolved, TelemetryError> {
    let protocol = settings.protocol(signal, env)?;
    Ok(Resolved {
        protocol,
        https: settings
            .target(signal, env)
            .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("https://")),
        ca: settings
            .ca_file(signal, env)
            .map(|p| read_ca(&p))
            .transpose()?,
    })
}

/// A gRPC exporter builder with the endpoint and, for `https`, rustls with
/// the system's roots and the CA file.
fn grpc<B: WithExportConfig + WithTonicConfig>(
    builder: B,
    settings: &OtlpSettings,
    r: &Resolved,
) -> B {
    let mut builder = builder.with_protocol(Protocol::Grpc);
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    if r.https {
        builder = builder.with_tls_config(grpc_tls(r.ca.as_deref()));
    }
    builder
}

/// rustls for gRPC: the system's roots, plus the CA file's.
fn grpc_tls(ca: Option<&[u8]>) -> ClientTlsConfig {
    let tls = ClientTlsConfig::new().with_native_roots();
    match ca {
        Some(ca) => tls.ca_certificate(Certificate::from_pem(ca)),
        None => tls,
    }
}

/// The CA file's certificate for reqwest (whose platform verifier brings
/// the system's roots), once ring is the process's rustls provider.
fn http_root(ca: &[u8]) -> Result<reqwest::Certificate, TelemetryError> {
    // Selects ring as the process's rustls provider if none is yet.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Certificate::from_pem(ca).map_err(|e| TelemetryError::HttpClient(e.to_string()))
}

/// An HTTP/protobuf exporter builder with the endpoint and reqwest's
/// blocking client (rustls, the platform's roots, the CA file).
fn http<B: WithExportConfig + WithHttpConfig>(
    builder: B,
    settings: &OtlpSettings,
    r: &Resolved,
) -> Result<B, TelemetryError> {
    // Selects ring as the process's rustls provider if none is yet.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut client = reqwest::blocking::Client::builder();
    if let Some(ca) = &r.ca {
        client = client.add_root_certificate(http_root(ca)?);
    }
    // Built on a thread of its own: the blocking client starts a runtime,
    // which must not happen on a Tokio worker.
    let client = std::thread::spawn(move || client.build())
        .join()
        .map_err(|_| TelemetryError::HttpClient("client thread panicked".to_owned()))?
        .map_err(|e| TelemetryError::HttpClient(e.to_string()))?;
    let mut builder = builder
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(client);
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    Ok(builder)
}

/// Builds the metric exporter `settings` and the environment describe
/// (the `OTEL_EXPORTER_OTLP_METRICS_*` variables first).
pub(super) fn metric_exporter(
    settings: &OtlpSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<MetricExporter, TelemetryError> {
    let r = resolve(settings, Signal::Metrics, env)?;
    if r.protocol == OtlpProtocol::Grpc && tokio::runtime::Handle::try_current().is_err() {
        // The tonic channel spawns its connection task when it is built.
        return Err(TelemetryError::NoRuntime);
    }
    Ok(match r.protocol {
        OtlpProtocol::Grpc => grpc(MetricExporter::builder().with_tonic(), settings, &r).build()?,
        OtlpProtocol::HttpProtobuf => {
            http(MetricExporter::builder().with_http(), settings, &r)?.build()?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<OtlpProtocol, TelemetryError> {
        let settings = OtlpSettings {
            endpoint: None,
            protocol: None,
            ca_file: None,
        };
        settings.protocol(Signal::Traces, env)
    }

    #[test]
    fn grpc_is_the_default_and_http_protobuf_is_accepted_and_json_is_refused_by_name() {
        assert_eq!(from_env(&env_of(&[])).unwrap(), OtlpProtocol::Grpc);
        assert_eq!(
            from_env(&env_of(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")])).unwrap(),
            OtlpProtocol::HttpProtobuf
        );
        assert_eq!(
            from_env(&env_of(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ]))
            .unwrap(),
            OtlpProtocol::Grpc,
            "the signal's own variable wins"
        );
        assert!(matches!(
            from_env(&env_of(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])),
            Err(TelemetryError::UnsupportedProtocol(p)) if p == "http/json"
        ));
    }

    #[test]
    fn the_ca_file_comes_from_the_signal_variable_first() {
        let settings = OtlpSettings {
            endpoint: None,
            protocol: None,
            ca_file: None,
        };
        let env = env_of(&[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/a.pem"),
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/t.pem"),
        ]);
        assert_eq!(
            settings.ca_file(Signal::Traces, &env),
            Some(PathBuf::from("/t.pem"))
        );
        assert_eq!(
            settings.ca_file(Signal::Metrics, &env),
            Some(PathBuf::from("/a.pem"))
        );
        assert_eq!(settings.ca_file(Signal::Traces, &env_of(&[])), None);
    }

    #[test]
    fn a_missing_ca_file_is_an_error_that_names_the_file() {
        let settings = OtlpSettings {
            endpoint: Some("https://collector.example:4318/v1/traces".into()),
            protocol: Some(OtlpProtocol::HttpProtobuf),
            ca_file: Some(PathBuf::from("/nonexistent/idgate-ca.pem")),
        };
        let err = span_target(&settings, &env_of(&[])).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/idgate-ca.pem"),
            "{err}"
        );
    }
}
