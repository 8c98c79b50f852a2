//! The OTLP collector sink of the export rows: OTLP/gRPC (tonic's
//! `TraceService`) or OTLP/HTTP with protobuf bodies (`POST /v1/traces`,
//! what `../shared/perf/run.py --otlp-sink` receives), in this process on
//! a thread of its own. It decodes every export and counts spans per
//! trace, those of traces rooted in no call apart: each `StartSession3D` the benchmark sends (no `traceparent`) is
//! a trace of its own. Most calls make the same spans (a journey's first
//! call on a replica may make more: its Redis directory read), so the
//! commonest trace size is a call's, and a lossless exporter delivers at
//! least that many for every call: a trace short of it, or a call with no
//! trace at all, counts as spans missing.

use std::{
    collections::{HashMap, HashSet},
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use prost::Message as _;

use crate::upstream::spawn_server;

/// The name of the server span of the calls the benchmark sends.
const CALL_SPAN: &str = "idgate.v1.LivenessService/StartSession3D";

/// How idgate sends its spans (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    /// The `OTEL_EXPORTER_OTLP_PROTOCOL` value.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// For clap: `grpc` or `http/protobuf` (`http` too).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
            other => Err(format!("{other:?}: grpc or http/protobuf")),
        }
    }
}

/// What the sink received since it was last reset.
#[derive(Default)]
struct Received {
    exports: u64,
    undecodable: u64,
    /// Spans per trace id.
    traces: HashMap<Vec<u8>, u32>,
    /// Traces whose root is no call: the readiness checks, the benchmark's
    /// `/metrics` scrape, idgate's own background Redis commands.
    other: HashSet<Vec<u8>>,
}

/// What one row's export delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanTally {
    /// Export requests (batches) received.
    pub exports: u64,
    /// Export requests the sink could not decode (compressed over HTTP).
    pub undecodable: u64,
    /// Spans of the calls' traces.
    pub spans: u64,
    /// The calls' traces.
    pub traces: u64,
    /// Spans of other traces (see [`Received::other`]), not counted above.
    pub other_spans: u64,
    /// The commonest number of spans in one trace: the spans of one call.
    pub spans_per_call: u32,
    /// Spans the calls' traces fall short of `spans_per_call`, together.
    pub short: u64,
}

impl SpanTally {
    fn of(received: &Received) -> SpanTally {
        let (other, calls): (Vec<_>, Vec<_>) = received
            .traces
            .iter()
            .partition(|(id, _)| received.other.contains(*id));
        let sum = |traces: &[(&Vec<u8>, &u32)]| traces.iter().map(|t| u64::from(*t.1)).sum();
        let mut sizes: HashMap<u32, u64> = HashMap::new();
        for (_, size) in &calls {
            *sizes.entry(**size).or_default() += 1;
        }
        // The commonest size; of two as common, the larger (a lost span
        // only shrinks a trace).
        let spans_per_call = sizes
            .into_iter()
            .max_by_key(|&(size, count)| (count, size))
            .map_or(0, |(size, _)| size);
        SpanTally {
            exports: received.exports,
            undecodable: received.undecodable,
            spans: sum(&calls),
            traces: calls.len() as u64,
            other_spans: sum(&other),
            spans_per_call,
            short: calls
                .iter()
                .map(|t| u64::from(spans_per_call.saturating_sub(*t.1)))
                .sum(),
        }
    }

    /// Spans missing for `calls` calls: traces short of a call's spans,
    /// and calls of which no span arrived.
    pub fn missing(&self, calls: usize) -> u64 {
        let untraced = (calls as u64).saturating_sub(self.traces);
        self.short + untraced * u64::from(self.spans_per_call)
    }

    /// Spans a lossless exporter delivers for `calls` calls, at least.
    pub fn expected(&self, calls: usize) -> u64 {
        self.spans + self.missing(calls)
    }
}

/// The sink's shared counts.
#[derive(Clone, Default)]
struct State(Arc<Mutex<Received>>);

impl State {
    fn record(&self, request: &ExportTraceServiceRequest) {
        let mut received = self.0.lock().expect("sink lock");
        received.exports += 1;
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans);
        for span in spans {
            *received.traces.entry(span.trace_id.clone()).or_default() += 1;
            if span.parent_span_id.is_empty() && span.name != CALL_SPAN {
                received.other.insert(span.trace_id.clone());
            }
        }
    }

    fn undecodable(&self) {
        let mut received = self.0.lock().expect("sink lock");
        received.exports += 1;
        received.undecodable += 1;
    }
}

/// A running sink.
pub struct Sink {
    pub addr: SocketAddr,
    pub protocol: Protocol,
    state: State,
}

impl Sink {
    /// Starts a sink for `protocol` on a free loopback port.
    pub fn start(protocol: Protocol) -> anyhow::Result<Sink> {
        let state = State::default();
        let addr = match protocol {
            Protocol::Grpc => {
                let service = TraceServiceServer::new(GrpcSink(state.clone()))
                    .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
                spawn_server("otlp-sink", move |listener| async move {
                    let _ = tonic::transport::Server::builder()
                        .add_service(service)
                        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                            listener,
                        ))
                        .await;
                })?
            }
            Protocol::HttpProtobuf => {
                let state = state.clone();
                spawn_server("otlp-sink", move |listener| serve_http(listener, state))?
            }
        };
        Ok(Sink {
            addr,
            protocol,
            state,
        })
    }

    /// What was received since the last call, and a fresh count.
    pub fn take(&self) -> SpanTally {
        let received = std::mem::take(&mut *self.state.0.lock().expect("sink lock"));
        SpanTally::of(&received)
    }
}

struct GrpcSink(State);

#[tonic::async_trait]
impl TraceService for GrpcSink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.record(request.get_ref());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn serve_http(listener: tokio::net::TcpListener, state: State) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| http_export(req, state.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// `POST /v1/traces` with an `ExportTraceServiceRequest` body: 200 with
/// an empty `ExportTraceServiceResponse`, as a collector answers.
async fn http_export(
    req: Request<Incoming>,
    state: State,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let traces = req.method() == Method::POST && req.uri().path() == "/v1/traces";
    let compressed = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v != "identity");
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    if !traces {
        return Ok(status(StatusCode::NOT_FOUND));
    }
    match body
        .ok()
        .filter(|_| !compressed)
        .and_then(|b| ExportTraceServiceRequest::decode(b).ok())
    {
        Some(request) => state.record(&request),
        None => state.undecodable(),
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .body(Full::new(Bytes::from(answer)))
        .expect("a valid response"))
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(traces: &[(u8, u32)]) -> Received {
        Received {
            exports: 1,
            undecodable: 0,
            traces: traces.iter().map(|&(id, n)| (vec![id; 16], n)).collect(),
            other: HashSet::new(),
        }
    }

    #[test]
    fn spans_per_call_is_the_commonest_trace_and_short_or_absent_traces_are_missing() {
        let tally = SpanTally::of(&received(&[(1, 3), (2, 3), (3, 1), (4, 4), (5, 2), (6, 3)]));
        assert_eq!(tally.spans, 16);
        assert_eq!(tally.traces, 6);
        assert_eq!(tally.spans_per_call, 3);
        // Two short traces (2 + 1 spans short), one call with no trace.
        assert_eq!(tally.missing(7), 6);
        assert_eq!(tally.expected(7), 22);
        // A first call's larger trace is not a loss in the others.
        let whole = SpanTally::of(&received(&[(1, 4), (2, 3), (3, 3)]));
        assert_eq!((whole.spans_per_call, whole.missing(3)), (3, 0));
    }

    #[test]
    fn traces_rooted_in_no_call_are_counted_apart() {
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
        let span = |name: &str, trace: u8, parent: &[u8]| Span {
            name: name.to_owned(),
            trace_id: vec![trace; 16],
            parent_span_id: parent.to_vec(),
            ..Span::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        span("grpc.health.v1.Health/Check", 1, &[]),
                        span("idgate.v1.LivenessService/StartSession3D", 2, &[]),
                        span("POST", 2, &[1; 8]),
                        span("EVAL", 3, &[]),
                        // A call's child whose server span was dropped.
                        span("POST", 4, &[2; 8]),
                    ],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let state = State::default();
        state.record(&request);
        let tally = SpanTally::of(&state.0.lock().unwrap());
        assert_eq!((tally.spans, tally.traces, tally.spans_per_call), (3, 2, 2));
        assert_eq!(tally.other_spans, 2);
    }

    #[test]
    fn nothing_received_expects_nothing() {
        let tally = SpanTally::of(&Received::default());
        assert_eq!(
            (tally.spans, tally.spans_per_call, tally.expected(10)),
            (0, 0, 0)
        );
    }

    #[test]
    fn the_protocols_are_named_as_otel_names_them() {
        for p in [Protocol::Grpc, Protocol::HttpProtobuf] {
            assert_eq!(Protocol::parse(p.name()), Ok(p));
        }
        assert!(Protocol::parse("http/json").is_err());
    }
}
