//! The OTLP span exporter: `grpc` or `http/protobuf`, `http://` or
//! `https://`, as the standard `OTEL_*` variables say.
//!
//! - Protocol: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
//!   `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` (the default here, as before, so
//!   existing `:4317` endpoints keep working) or `http/protobuf`;
//!   `http/json` is refused by name.
//! - TLS for `https://` endpoints: rustls (ring) with the system's roots
//!   (tonic's native roots for gRPC, reqwest's platform verifier for HTTP)
//!   plus, for a private collector, the CA file of
//!   `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE`.
//! - Headers, compression (`gzip`) and timeout: read by the exporter itself
//!   from `OTEL_EXPORTER_OTLP_{,TRACES_}{HEADERS,COMPRESSION,TIMEOUT}`.
//! - Endpoint: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is used as is;
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces` appended over HTTP
//!   (the specification's rule). An endpoint given to the builder is used
//!   as is.
//!
//! gRPC export runs on the Tokio runtime (the channel's connection task);
//! HTTP export uses reqwest's blocking client, which brings its own
//! thread, because the batch span processor exports from a thread of its
//! own.

use std::path::{Path, PathBuf};

use opentelemetry_otlp::{
    Protocol, SpanExporter, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use tonic::transport::{Certificate, ClientTlsConfig};

use super::TelemetryError;

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

    /// The protocol the `OTEL_*` variables ask for; gRPC when none does.
    pub(super) fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, TelemetryError> {
        env(opentelemetry_otlp::OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .map_or(Ok(OtlpProtocol::Grpc), |p| Self::parse(&p))
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
    fn target(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.endpoint
            .clone()
            .or_else(|| env(opentelemetry_otlp::OTEL_EXPORTER_OTLP_TRACES_ENDPOINT))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
    }

    /// The CA file trusted beside the system's roots, if any.
    fn ca_file(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        self.ca_file.clone().or_else(|| {
            env("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
                .or_else(|| env("OTEL_EXPORTER_OTLP_CERTIFICATE"))
                .map(PathBuf::from)
        })
    }
}

fn read_ca(path: &Path) -> Result<Vec<u8>, TelemetryError> {
    std::fs::read(path).map_err(|source| TelemetryError::CaFile {
        path: path.to_owned(),
        source,
    })
}

/// Builds the span exporter `settings` and the environment describe.
pub(super) fn span_exporter(
    settings: &OtlpSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SpanExporter, TelemetryError> {
    let protocol = match settings.protocol {
        Some(p) => p,
        None => OtlpProtocol::from_env(env)?,
    };
    let https = settings
        .target(env)
        .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("https://"));
    let ca = settings.ca_file(env).map(|p| read_ca(&p)).transpose()?;
    match protocol {
        OtlpProtocol::Grpc => {
            // The tonic channel spawns its connection task when it is built.
            if tokio::runtime::Handle::try_current().is_err() {
                return Err(TelemetryError::NoRuntime);
            }
            let mut exporter = SpanExporter::builder()
                .with_tonic()
                .with_protocol(Protocol::Grpc);
            if let Some(endpoint) = &settings.endpoint {
                exporter = exporter.with_endpoint(endpoint);
            }
            if https {
                let mut tls = ClientTlsConfig::new().with_native_roots();
                if let Some(ca) = &ca {
                    tls = tls.ca_certificate(Certificate::from_pem(ca));
                }
                exporter = exporter.with_tls_config(tls);
            }
            Ok(exporter.build()?)
        }
        OtlpProtocol::HttpProtobuf => {
            // Selects ring as the process's rustls provider if none is yet.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut client = reqwest::blocking::Client::builder();
            if let Some(ca) = &ca {
                let cert = reqwest::Certificate::from_pem(ca)
                    .map_err(|e| TelemetryError::HttpClient(e.to_string()))?;
                client = client.add_root_certificate(cert);
            }
            // Built on a thread of its own: the blocking client starts a
            // runtime, which must not happen on a Tokio worker.
            let client = std::thread::spawn(move || client.build())
                .join()
                .map_err(|_| TelemetryError::HttpClient("client thread panicked".to_owned()))?
                .map_err(|e| TelemetryError::HttpClient(e.to_string()))?;
            let mut exporter = SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_http_client(client);
            if let Some(endpoint) = &settings.endpoint {
                exporter = exporter.with_endpoint(endpoint);
            }
            Ok(exporter.build()?)
        }
    }
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

    #[test]
    fn grpc_is_the_default_and_http_protobuf_is_accepted_and_json_is_refused_by_name() {
        assert_eq!(
            OtlpProtocol::from_env(&env_of(&[])).unwrap(),
            OtlpProtocol::Grpc
        );
        assert_eq!(
            OtlpProtocol::from_env(&env_of(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]))
                .unwrap(),
            OtlpProtocol::HttpProtobuf
        );
        assert_eq!(
            OtlpProtocol::from_env(&env_of(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ]))
            .unwrap(),
            OtlpProtocol::Grpc,
            "the signal's own variable wins"
        );
        assert!(matches!(
            OtlpProtocol::from_env(&env_of(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])),
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
        assert_eq!(
            settings.ca_file(&env_of(&[
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/a.pem"),
                ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/t.pem"),
            ])),
            Some(PathBuf::from("/t.pem"))
        );
        assert_eq!(settings.ca_file(&env_of(&[])), None);
    }

    #[test]
    fn a_missing_ca_file_is_an_error_that_names_the_file() {
        let settings = OtlpSettings {
            endpoint: Some("https://collector.example:4318/v1/traces".into()),
            protocol: Some(OtlpProtocol::HttpProtobuf),
            ca_file: Some(PathBuf::from("/nonexistent/idgate-ca.pem")),
        };
        let err = span_exporter(&settings, &env_of(&[])).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/idgate-ca.pem"),
            "{err}"
        );
    }
}
