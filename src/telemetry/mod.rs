//! Traces, logs and metrics: one trace per call across gateway -> upstream
//! -> vendor, RED metrics per RPC and per channel, no personal data.
//!
//! # Layout
//!
//! - [`TelemetryConfig`] (`config`): `[telemetry]`; [`OtelEnv`]
//!   (`otel_env`): where the `OTEL_*` variables are read from.
//! - [`setup`]: installs `tracing` with the OpenTelemetry layer (OTLP
//!   export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set) and text or JSON logs.
//! - [`otlp`]: the span exporter: `grpc` or `http/protobuf`, TLS with the
//!   system's roots and an optional CA file.
//! - [`propagation`]: the W3C TraceContext + Baggage propagator and the
//!   helpers that move a context in and out of HTTP headers.
//! - [`grpc`]: the tower layer of the tonic servers (server spans, RPC
//!   metrics).
//! - [`http`]: the tower layer of the axum servers (gateway HTTP listener,
//!   sandbox).
//! - [`audit`]: the audit trail: one record per call on personal data;
//!   [`audit_export`]: the same records as OTLP logs (`[audit] otlp`).
//! - [`client`]: [`UpstreamCall`], the client span and metrics of one REST
//!   call.
//! - [`journey`]: puts the journey reference on spans.
//! - [`logs`]: `trace_id` / `span_id` on JSON log lines, the access log.
//! - `log_throttle`: at most one line per interval for what a peer can
//!   cause at will, with the count left out.
//! - [`log_lines`]: stdout, written in batches on the serving threads;
//!   `json_lines` and `text_lines`: the lines, written without `core::fmt`.
//! - [`metrics`]: the Prometheus registry and `GET /metrics`.
//! - [`usage`]: usage by configured caller, counted once for the metrics
//!   and the charge-back report's ledger.
//! - [`span_queue`]: the bounded, counted queue of spans waiting for export.
//! - [`redact`]: the span field names that must never exist.
//!
//! # Span fields every server and client span declares
//!
//! `idgate.journey_ref` is declared empty on every span this module opens,
//! so [`record_journey`] can fill it wherever the journey becomes known
//! (from the request's appkey, or from the `/appkey` response). It also
//! travels as W3C baggage to the next hop, whose server span records it
//! (a gRPC server span once its caller is authenticated:
//! [`trust_baggage`]).
//! `idgate.customer_reference` exists on server spans and is filled only
//! when [`TelemetryConfig::record_customer_reference`] is true.
//!
//! [`TelemetryConfig::record_customer_reference`]:
//!     TelemetryConfig::record_customer_reference

pub mod audit;
pub mod audit_export;
pub mod client;
mod config;
pub mod grpc;
pub mod http;
pub mod journey;
mod json_lines;
mod lazy_fields;
mod lazy_json;
mod log_filter;
pub mod log_lines;
pub(crate) mod log_throttle;
pub mod logs;
pub mod metrics;
pub mod otel_env;
pub mod otlp;
pub mod propagation;
pub mod redact;
pub mod setup;
pub mod span_queue;
pub mod spans;
mod text_fields;
mod text_lines;
mod timestamp;
pub mod usage;

pub use client::{CallTarget, UpstreamCall, UpstreamRequest};
pub use config::TelemetryConfig;
pub use grpc::{GrpcServerLayer, ServerSpan};
pub use http::HttpServerLayer;
pub use journey::{JOURNEY_REF_FIELD, record_customer_reference, record_journey, trust_baggage};
pub use metrics::{
    ChannelLabel, ChannelSessionEnd, IdlePollSeconds, Metrics, UpstreamEnd, UpstreamOutcome,
    metrics_handler, metrics_router,
};
pub use otel_env::OtelEnv;
pub use otlp::OtlpProtocol;
pub use setup::{
    CapturedLogs, LogFormat, Telemetry, TelemetryBuilder, TelemetryError, TelemetryExporters, init,
};
pub use span_queue::SpanExportStats;
