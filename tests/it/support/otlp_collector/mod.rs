//! The in-process OTLP collector of the tests, the only one.
//!
//! A real server on `127.0.0.1:0` implementing the OTLP `TraceService` and
//! `MetricsService`: the code under test exports to it over a real socket
//! with the production exporter, and the test awaits the spans (or metric
//! points) it expects. It serves OTLP/gRPC in plaintext ([`Collector::start`])
//! or over TLS ([`Collector::start_grpc_tls`]), or OTLP/HTTP with protobuf
//! bodies over TLS ([`Collector::start_http_tls`]), for the exporter's
//! private-CA settings.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use opentelemetry_proto::tonic::{
    collector::{
        metrics::v1::{
            ExportMetricsServiceRequest, ExportMetricsServiceResponse,
            metrics_service_server::{MetricsService, MetricsServiceServer},
        },
        trace::v1::{
            ExportTraceServiceRequest, ExportTraceServiceResponse,
            trace_service_server::{TraceService, TraceServiceServer},
        },
    },
    common::v1::{AnyValue, KeyValue, any_value::Value},
    metrics::v1::{metric::Data, number_data_point},
};
use tokio::{net::TcpListener, sync::Notify, task::JoinHandle};
use tokio_stream::wrappers::TcpListenerStream;

use super::tls::{Leaf, TlsListener};

mod exports;
mod logs;

pub use exports::ExportSeen;
use exports::export_http;
pub use logs::CollectedLog;
use logs::export_logs_http;

/// OTLP span kinds, as numbers on the wire.
pub mod kind {
    /// `SPAN_KIND_SERVER`.
    pub const SERVER: i32 = 2;
    /// `SPAN_KIND_CLIENT`.
    pub const CLIENT: i32 = 3;
}

/// OTLP `STATUS_CODE_ERROR`.
pub const STATUS_ERROR: i32 = 2;

/// An attribute value, reduced to what the tests compare.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// Anything else, printed.
    Other(String),
}

/// One received span, ids in lower-case hex (parent empty for a root).
#[derive(Debug, Clone)]
pub struct CollectedSpan {
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// Parent span id, empty for a root span.
    pub parent_span_id: String,
    /// Span name.
    pub name: String,
    /// OTLP span kind.
    pub kind: i32,
    /// OTLP status code.
    pub status_code: i32,
    /// Span attributes.
    pub attributes: HashMap<String, Attr>,
    /// Attributes of the resource that sent the span.
    pub resource: HashMap<String, Attr>,
    /// Span links: `(trace id, span id)` of each linked span.
    pub links: Vec<(String, String)>,
    /// Span events: name and attributes (log events inside the span).
    pub events: Vec<(String, HashMap<String, Attr>)>,
    /// Status message (set on error spans).
    #[allow(dead_code)]
    pub status_message: String,
}

impl CollectedSpan {
    /// A string attribute.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(Attr::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// An integer attribute.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.attributes.get(key) {
            Some(Attr::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// A string attribute of the resource.
    pub fn resource_str(&self, key: &str) -> Option<&str> {
        match self.resource.get(key) {
            Some(Attr::Str(s)) => Some(s),
            _ => None,
        }
    }
}

/// One metric data point: metric name, string attributes, and the sum's
/// value or the histogram's count.
#[derive(Debug, Clone)]
pub struct MetricPoint {
    /// Metric name.
    pub name: String,
    /// The point's string attributes.
    pub attributes: Vec<(String, String)>,
    /// A sum's value (truncated), or a histogram's count.
    pub value: u64,
}

#[derive(Default)]
struct Store {
    exports: Mutex<Vec<ExportSeen>>,
    /// Trace exports still to refuse, and whether as a transient failure
    /// (gRPC `UNAVAILABLE`, HTTP 503) or not (`INVALID_ARGUMENT`, 400).
    refusals: Mutex<(usize, bool)>,
    spans: Mutex<Vec<CollectedSpan>>,
    points: Mutex<Vec<MetricPoint>>,
    logs: Mutex<Vec<CollectedLog>>,
    arrived: Notify,
}

#[derive(Clone)]
struct Service(Arc<Store>);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attrs(kvs: &[KeyValue]) -> HashMap<String, Attr> {
    kvs.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref()) {
                Some(Value::StringValue(s)) => Attr::Str(s.clone()),
                Some(Value::IntValue(i)) => Attr::Int(*i),
                other => Attr::Other(format!("{other:?}")),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

impl Store {
    /// Keeps the spans of one export request and wakes the waiters.
    fn keep_spans(&self, request: ExportTraceServiceRequest) {
        let mut received = Vec::new();
        for rs in request.resource_spans {
            let resource = rs
                .resource
                .as_ref()
                .map(|r| attrs(&r.attributes))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    received.push(CollectedSpan {
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        kind: span.kind,
                        status_code: span.status.as_ref().map(|s| s.code).unwrap_or_default(),
                        status_message: span.status.map(|s| s.message).unwrap_or_default(),
                        attributes: attrs(&span.attributes),
                        resource: resource.clone(),
                        links: span
                            .links
                            .iter()
                            .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                            .collect(),
                        events: span
                            .events
                            .iter()
                            .map(|e| (e.name.clone(), attrs(&e.attributes)))
                            .collect(),
                    });
                }
            }
        }
        self.spans.lock().expect("collector lock").extend(received);
        self.arrived.notify_waiters();
    }

    /// Keeps the sum and histogram points of one metrics export request.
    fn keep_points(&self, request: ExportMetricsServiceRequest) {
        let strings = |kvs: &[KeyValue]| {
            kvs.iter()
                .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(v) => Some((kv.key.clone(), v.clone())),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let mut points = Vec::new();
        let metrics = request
            .resource_metrics
            .into_iter()
            .flat_map(|r| r.scope_metrics)
            .flat_map(|s| s.metrics);
        for m in metrics {
            match &m.data {
                Some(Data::Sum(sum)) => {
                    for p in &sum.data_points {
                        let value = match p.value {
                            Some(number_data_point::Value::AsInt(i)) => i as u64,
                            Some(number_data_point::Value::AsDouble(d)) => d as u64,
                            None => 0,
                        };
                        points.push(MetricPoint {
                            name: m.name.clone(),
                            attributes: strings(&p.attributes),
                            value,
                        });
                    }
                }
                Some(Data::Histogram(h)) => {
                    for p in &h.data_points {
                        points.push(MetricPoint {
                            name: m.name.clone(),
                            attributes: strings(&p.attributes),
                            value: p.count,
                        });
                    }
                }
                _ => {}
            }
        }
        self.points.lock().expect("collector lock").extend(points);
    }
}

impl Store {
    fn keep_logs(&self, logs: Vec<CollectedLog>) {
        self.logs.lock().expect("collector lock").extend(logs);
        self.arrived.notify_waiters();
    }
}

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let seen = ExportSeen::of(
            &request.metadata().clone().into_headers(),
            request.get_ref(),
        );
        match self.0.arrived(seen) {
            Some(true) => return Err(tonic::Status::unavailable("collector restarting")),
            Some(false) => return Err(tonic::Status::invalid_argument("refused")),
            None => {}
        }
        self.0.keep_spans(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.keep_points(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// A running collector; stops when dropped.
pub struct Collector {
    addr: SocketAddr,
    store: Arc<Store>,
    server: JoinHandle<()>,
}

impl Collector {
    /// Starts a collector of traces and metrics over OTLP/gRPC, plaintext.
    pub async fn start() -> Collector {
        Self::start_grpc(None).await
    }

    /// Starts a collector of traces and metrics over OTLP/gRPC, TLS with
    /// `identity`.
    pub async fn start_grpc_tls(identity: &Leaf) -> Collector {
        Self::start_grpc(Some(identity)).await
    }

    async fn start_grpc(identity: Option<&Leaf>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let store = Arc::new(Store::default());
        let mut server = tonic::transport::Server::builder();
        if let Some(identity) = identity {
            let tls = tonic::transport::ServerTlsConfig::new().identity(
                tonic::transport::Identity::from_pem(&identity.cert_pem, &identity.key_pem),
            );
            server = server.tls_config(tls).expect("server TLS");
        }
        let router = server
            .add_service(
                TraceServiceServer::new(Service(store.clone()))
                    .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
            )
            .add_service(MetricsServiceServer::new(Service(store.clone())))
            .add_service(
                opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::LogsServiceServer::new(
                    Service(store.clone()),
                )
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
            );
        let server = tokio::spawn(async move {
            let _ = router
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
        });
        Collector {
            addr,
            store,
            server,
        }
    }

    /// Starts a trace collector over OTLP/HTTP (`POST /v1/traces`,
    /// protobuf), TLS with `identity`.
    pub async fn start_http_tls(identity: &Leaf) -> Collector {
        Self::start_http_with(Some(identity)).await
    }

    /// Starts a trace collector over OTLP/HTTP (`POST /v1/traces`,
    /// protobuf), plaintext.
    pub async fn start_http() -> Collector {
        Self::start_http_with(None).await
    }

    async fn start_http_with(identity: Option<&Leaf>) -> Collector {
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("local addr");
        let store = Arc::new(Store::default());
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export_http))
            .route("/v1/logs", axum::routing::post(export_logs_http))
            .with_state(Service(store.clone()));
        let server = match identity {
            Some(identity) => {
                let listener = TlsListener::new(tcp, identity);
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                })
            }
            None => tokio::spawn(async move {
                let _ = axum::serve(tcp, app).await;
            }),
        };
        Collector {
            addr,
            store,
            server,
        }
    }

    /// The endpoint for the exporter: `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The endpoint of a collector started over TLS:
    /// `https://127.0.0.1:PORT`.
    pub fn https_endpoint(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Every metric point received so far.
    pub fn points(&self) -> Vec<MetricPoint> {
        self.store.points.lock().expect("collector lock").clone()
    }

    /// Refuses the next `n` trace exports, as a collector restarting
    /// (`transient`: gRPC `UNAVAILABLE`, HTTP 503) or one rejecting them
    /// (gRPC `INVALID_ARGUMENT`, HTTP 400).
    pub fn refuse_next(&self, n: usize, transient: bool) {
        *self.store.refusals.lock().expect("collector lock") = (n, transient);
    }

    /// How every trace export so far arrived.
    pub fn exports(&self) -> Vec<ExportSeen> {
        self.store.exports.lock().expect("collector lock").clone()
    }

    /// Every log record received so far.
    pub fn logs(&self) -> Vec<CollectedLog> {
        self.store.logs.lock().expect("collector lock").clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<CollectedSpan> {
        self.store.spans.lock().expect("collector lock").clone()
    }

    /// Waits until `done` holds for the received spans, or `timeout` passes
    /// (then fails with the spans received, for the test's message).
    /// `poke` runs before every check: tests pass a flush of their provider,
    /// so spans ended after the last flush are not left waiting for the
    /// batch processor's schedule.
    pub async fn wait_until<F, P, Fut>(
        &self,
        timeout: Duration,
        mut poke: P,
        done: F,
    ) -> Result<Vec<CollectedSpan>, String>
    where
        F: Fn(&[CollectedSpan]) -> bool,
        P: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.store.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            poke().await;
            let spans = self.spans();
            if done(&spans) {
                return Ok(spans);
            }
            // Wake on the next export, or re-poke after a short while: a
            // span may end after the flush that just ran.
            let next = (tokio::time::Instant::now() + Duration::from_millis(100)).min(deadline);
            let _ = tokio::time::timeout_at(next, arrived).await;
            if tokio::time::Instant::now() >= deadline {
                let names: Vec<_> = self.spans().into_iter().map(|s| s.name).collect();
                return Err(format!("timed out; spans received: {names:?}"));
            }
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.abort();
    }
}
