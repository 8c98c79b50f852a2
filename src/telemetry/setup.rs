//! Installing `tracing`: logs (text or JSON, level from `RUST_LOG`) and,
//! when a collector is configured, spans exported over OTLP (gRPC or
//! HTTP/protobuf, see [`super::otlp`]).
//!
//! - This file: [`TelemetryBuilder`], which builds the subscriber.
//! - `providers`: what the `OTEL_*` variables ask for, and the tracer and
//!   meter providers built from it.
//! - `lifecycle`: [`Telemetry`] installed, [`TelemetryExporters`] flushing and
//!   stopping the exporters.
//! - `captured`: [`CapturedLogs`], log lines kept for tests.
//!
//! Production calls [`init`] once. Tests build a [`Telemetry`] with
//! [`TelemetryBuilder`] pointed at their own collector and log buffer and
//! install it for their thread only ([`Telemetry::set_default`]), so tests
//! of one binary never fight over the global subscriber. Thread-local
//! installation covers a test's servers when they run on the test's
//! current-thread runtime (the `#[tokio::test]` default).

use std::{
    io::{self, IsTerminal},
    path::PathBuf,
};

use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::{
    Resource,
    metrics::{PeriodicReader, SdkMeterProvider},
    trace::SdkTracerProvider,
};
use tracing::{Dispatch, Level, level_filters::LevelFilter};
use tracing_subscriber::{
    EnvFilter, Layer, Registry,
    filter::Targets,
    fmt::{MakeWriter, writer::BoxMakeWriter},
    layer::{Layered, SubscriberExt},
};

use super::{
    OtelEnv, TelemetryConfig,
    span_queue::SpanExportStats,
    spans::{SpanLayer, sampler_from_env},
};
use super::{
    log_filter::LogFilter,
    logs::TraceIds,
    otlp::{OtlpProtocol, OtlpSettings, metric_exporter},
    propagation::install_propagator,
};

/// Instrumentation scope of every idgate span.
const TRACER_NAME: &str = "idgate";

/// What the log layer and the exporter's layer see: the registry, behind
/// the log filter when that is the only filter.
type Subscribed = Layered<Option<LogFilter>, Registry>;

/// Crates whose own spans and events must not become exported spans: the
/// exporter's transport (h2, hyper, tonic, tower) would otherwise trace its
/// own exports, and each export would cause another.
const NOT_EXPORTED: [&str; 8] = [
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "opentelemetry",
    "opentelemetry_otlp",
    "opentelemetry_sdk",
];

/// Log records that must not become events of exported spans: the access
/// log line repeats what the server span holds (method, code, duration)
/// and adds the peer's address, and the audit record names the caller and
/// what it was given; both belong in the logs an operator keeps, not in
/// every trace backend. As span events they also added an event of six
/// attributes to every call's exported span (measured: 800 to 1,600 bytes
/// of OTLP per call with the access log on).
const NOT_SPAN_EVENTS: [&str; 2] = [super::logs::ACCESS_TARGET, "idgate::audit"];

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, with the current span and its parents,
    /// and inside a span its `trace_id` and `span_id`.
    Json,
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` (or the builder's filter) does not parse.
    #[error("invalid log filter: {0}")]
    Filter(String),
    /// The OTLP exporter rejected its configuration.
    #[error("cannot build the OTLP span exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// `OTEL_EXPORTER_OTLP_*PROTOCOL` names a protocol idgate does not speak.
    #[error("OTLP protocol `{0}` is not supported: use `grpc` or `http/protobuf`")]
    UnsupportedProtocol(String),
    /// The collector's CA file cannot be read.
    #[error("cannot read the OTLP CA file {}: {source}", path.display())]
    CaFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An `OTEL_EXPORTER_OTLP_*HEADERS` entry is not a valid header. Named
    /// by its key, or its position when the key is malformed: the value
    /// may be an API key.
    #[error(
        "`{variable}`: the entry {entry} is not a valid header (key=value, value percent-encoded)"
    )]
    Header {
        /// The variable.
        variable: String,
        /// The entry: its key, quoted, or its position.
        entry: String,
    },
    /// An `OTEL_*` setting does not parse.
    #[error("`{variable}={value}`: expected {expected}")]
    Setting {
        /// The variable.
        variable: String,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// The OTLP endpoint is not a URL the exporter can use. The endpoint
    /// itself is not repeated: it may carry credentials.
    #[error("the OTLP endpoint is not usable: {0}")]
    Endpoint(String),
    /// The HTTP client of OTLP/HTTP export could not be built.
    #[error("cannot build the OTLP/HTTP client: {0}")]
    HttpClient(String),
    /// The OTLP metrics exporter runs its gRPC connection on Tokio.
    #[error("OTLP metrics export needs a Tokio runtime: set up telemetry inside one")]
    NoRuntime,
    /// Another global subscriber was installed first.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
    /// Flushing or shutting down the exporter failed.
    #[error("span export failed: {0}")]
    Export(String),
}

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OtlpTarget {
    /// Follow the `OTEL_*` variables: export only when an endpoint is set.
    FromEnv,
    /// Export to this endpoint (the other `OTEL_*` variables still apply).
    Endpoint(String),
    /// Export nothing.
    Disabled,
}

/// Where metrics go besides `GET /metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MetricsTarget {
    /// Export over OTLP only when `OTEL_METRICS_EXPORTER=otlp` and an
    /// endpoint is set.
    FromEnv,
    /// Export to this endpoint.
    Endpoint(String),
}

/// Builds a [`Telemetry`]; [`init`] is the production shorthand.
pub struct TelemetryBuilder {
    service_name: String,
    log_format: LogFormat,
    filter: Option<String>,
    otlp: OtlpTarget,
    metrics: MetricsTarget,
    protocol: Option<OtlpProtocol>,
    ca_file: Option<PathBuf>,
    log_writer: Option<BoxMakeWriter>,
    /// `[audit] otlp`: audit records exported as OTLP logs too.
    audit_otlp: bool,
    env: OtelEnv,
}

impl std::fmt::Debug for TelemetryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryBuilder")
            .field("service_name", &self.service_name)
            .field("log_format", &self.log_format)
            .field("filter", &self.filter)
            .field("otlp", &self.otlp)
            .finish_non_exhaustive()
    }
}

impl TelemetryBuilder {
    /// Defaults: text logs to stdout, `RUST_LOG` (else `info`), export as the
    /// `OTEL_*` variables of `config.otel_env` say.
    pub fn new(config: &TelemetryConfig) -> Self {
        Self {
            service_name: config.service_name.clone(),
            log_format: LogFormat::Text,
            filter: None,
            otlp: OtlpTarget::FromEnv,
            metrics: MetricsTarget::FromEnv,
            protocol: None,
            ca_file: None,
            log_writer: None,
            audit_otlp: false,
            env: config.otel_env.clone(),
        }
    }

    /// Exports audit records as OTLP logs too, to the spans' collector
    /// (`[audit] otlp`); the build fails when nothing is exported.
    pub fn audit_otlp(mut self, on: bool) -> Self {
        self.audit_otlp = on;
        self
    }

    /// Reads the `OTEL_*` variables from `env` instead of the
    /// configuration's source.
    pub fn otel_env(mut self, env: OtelEnv) -> Self {
        self.env = env;
        self
    }

    /// Text or JSON logs.
    pub fn log_format(mut self, format: LogFormat) -> Self {
        self.log_format = format;
        self
    }

    /// Log filter directives instead of `RUST_LOG`.
    pub fn log_filter(mut self, directives: impl Into<String>) -> Self {
        self.filter = Some(directives.into());
        self
    }

    /// Exports spans to `endpoint` (`http://host:4317`) whatever the
    /// environment says.
    pub fn otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp = OtlpTarget::Endpoint(endpoint.into());
        self
    }

    /// Exports over `protocol` whatever the environment says (with
    /// [`OtlpProtocol::HttpProtobuf`], [`TelemetryBuilder::otlp_endpoint`]
    /// is the full URL, `.../v1/traces`).
    pub fn otlp_protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// Trusts the CA certificates (PEM) of `path` for an `https://`
    /// collector, beside the system's roots, whatever the environment says.
    pub fn otlp_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Exports the RED metrics over OTLP to `endpoint` (with the same
    /// protocol and CA file as spans), whatever the environment says.
    pub fn otlp_metrics_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.metrics = MetricsTarget::Endpoint(endpoint.into());
        self
    }

    /// Exports nothing, whatever the environment says.
    pub fn without_export(mut self) -> Self {
        self.otlp = OtlpTarget::Disabled;
        self
    }

    /// Writes log lines to `writer` instead of stdout (tests capture them
    /// with [`CapturedLogs`]).
    pub fn log_writer<W>(mut self, writer: W) -> Self
    where
        W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    {
        self.log_writer = Some(BoxMakeWriter::new(writer));
        self
    }

    /// Builds the subscriber and, when exporting, the tracer provider.
    /// Installs the W3C propagator (process-wide, idempotent); installs no
    /// subscriber.
    pub fn build(self) -> Result<Telemetry, TelemetryError> {
        install_propagator();
        let otel_env = self.env.clone();
        let env = move |name: &str| otel_env.var(name);
        let filter = match &self.filter {
            Some(directives) => EnvFilter::try_new(directives).map_err(|e| e.to_string()),
            None => EnvFilter::builder()
                .with_default_directive(LevelFilter::INFO.into())
                .from_env()
                .map_err(|e| e.to_string()),
        }
        .map_err(TelemetryError::Filter)?;

        let endpoint = match self.otlp {
            OtlpTarget::Disabled => None,
            OtlpTarget::Endpoint(e) => Some(Some(e)),
            OtlpTarget::FromEnv => export_requested(&env).then_some(None),
        };
        let span_stats = endpoint.is_some().then(SpanExportStats::default);
        let audit_endpoint = endpoint.clone().flatten();
        let exported = match (endpoint, &span_stats) {
            (Some(endpoint), Some(stats)) => Some(build_provider(
                &self.service_name,
                &OtlpSettings {
                    endpoint,
                    protocol: self.protocol,
                    ca_file: self.ca_file.clone(),
                },
                stats,
                &self.env,
            )?),
            _ => None,
        };
        let (provider, queue) = exported.unzip();

        let metrics_endpoint = match self.metrics {
            MetricsTarget::Endpoint(e) => Some(Some(e)),
            MetricsTarget::FromEnv => metrics_export_requested(&env).then_some(None),
        };
        let meter_provider = match metrics_endpoint {
            None => None,
            Some(endpoint) => Some(build_meter_provider(
                &self.service_name,
                &OtlpSettings {
                    endpoint,
                    protocol: self.protocol,
                    ca_file: self.ca_file.clone(),
                },
                &self.env,
            )?),
        };

        let to_terminal = self.log_writer.is_none() && io::stdout().is_terminal();
        let writer = self
            .log_writer
            .unwrap_or_else(|| BoxMakeWriter::new(super::log_lines::StdoutLines));
        let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
        let mut trace_ids = None;
        let log: Box<dyn Layer<Subscribed> + Send + Sync> = match self.log_format {
            // Styled output keeps the fmt layer's own (eager) span fields.
            LogFormat::Text if to_terminal => fmt
                .fmt_fields(super::text_fields::TextFields)
                .with_ansi(true)
                .boxed(),
            LogFormat::Text => super::lazy_fields::LazySpanFields
                .and_then(
                    fmt.fmt_fields(super::lazy_fields::LazyTextFields)
                        .with_ansi(false)
                        .event_format(super::text_lines::TextLines::default()),
                )
                .boxed(),
            LogFormat::Json => {
                let (ids, handle) = TraceIds::new();
                let format = super::json_lines::JsonLines::with_trace_ids(ids);
                trace_ids = Some(handle);
                super::lazy_json::LazyJsonSpanFields
                    .and_then(
                        fmt.with_ansi(false)
                            .fmt_fields(super::lazy_json::LazyJsonFields)
                            .event_format(format),
                    )
                    .boxed()
            }
        };
        let filter = LogFilter::new(filter);
        // The log layer alone: its filter is the subscriber's (nothing to
        // ask per span operation). Beside the exporter's layer, each layer
        // filters for itself.
        let (global, layers) = match queue {
            None => (Some(filter), vec![log]),
            Some(queue) => {
                let spans = NOT_EXPORTED
                    .iter()
                    .chain(&NOT_SPAN_EVENTS)
                    .fold(Targets::new().with_default(Level::INFO), |t, target| {
                        t.with_target(*target, LevelFilter::OFF)
                    });
                // Spans carry their own attributes only: no source
                // location, thread, target or busy/idle times (a clock
                // read on every poll of a call, bytes on every exported
                // span, nothing a dashboard reads).
                let export = SpanLayer::new(
                    queue,
                    InstrumentationScope::builder(TRACER_NAME).build(),
                    sampler_from_env(&env),
                )
                .with_filter(spans)
                .boxed();
                (None, vec![log.with_filter(filter).boxed(), export])
            }
        };
        let mut layers = layers;
        let audit = match (self.audit_otlp, &provider) {
            (false, _) => None,
            (true, None) => {
                return Err(TelemetryError::Export(
                    "[audit] otlp = true needs an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)"
                        .to_owned(),
                ));
            }
            (true, Some(_)) => {
                let settings = OtlpSettings {
                    endpoint: audit_endpoint,
                    protocol: self.protocol,
                    ca_file: self.ca_file.clone(),
                };
                let export = build_audit_export(&self.service_name, &settings, &self.env)?;
                layers.push(export.layer().boxed());
                Some(export)
            }
        };
        let dispatch = Dispatch::new(Registry::default().with(global).with(layers));
        if let Some(handle) = trace_ids {
            handle.bind(&dispatch);
        }
        Ok(Telemetry {
            dispatch,
            exporters: TelemetryExporters {
                provider,
                meter_provider,
                span_stats,
                audit,
            },
        })
    }
}

/// Sets up logs and span export for the whole process, as the environment
/// says (`RUST_LOG`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`,
/// ...). Call it once, inside the Tokio runtime, and keep the exporters
/// it returns until the end of `main` (better: `exporters.shutdown().await`
/// there).
pub fn init(
    config: &TelemetryConfig,
    audit: &super::audit::AuditConfig,
    format: LogFormat,
) -> Result<TelemetryExporters, TelemetryError> {
    TelemetryBuilder::new(config)
        .log_format(format)
        .audit_otlp(audit.otlp)
        .build()?
        .install_global()
}

mod captured;
mod lifecycle;
mod providers;
#[cfg(test)]
mod tests;

pub use captured::CapturedLogs;
pub use lifecycle::{Telemetry, TelemetryExporters};

use providers::{
    build_audit_export, build_meter_provider, build_provider, export_requested,
    metrics_export_requested,
};
#[cfg(test)]
use providers::{env_names_service, resource, resource_from};
