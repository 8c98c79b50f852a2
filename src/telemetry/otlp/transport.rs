//! Sending an encoded `ExportTraceServiceRequest` to the collector: OTLP/gRPC
//! over a tonic channel or OTLP/HTTP over reqwest, with the headers,
//! compression and timeout of the `OTEL_EXPORTER_OTLP_*` variables.
//!
//! The body is already protobuf ([`super::wire`]), so gRPC goes through a
//! codec that writes the bytes as they are and reads the response's
//! partial success, and HTTP posts them. A failure the OTLP specification
//! calls transient is retried within the export's timeout
//! ([`super::retry`]); past it, the export is counted `failed` and its
//! spans are gone, so a collector that is down costs a bounded wait per
//! batch, never a growing backlog.

use std::time::Duration;

use bytes::{Buf as _, BufMut as _, Bytes};
use http::{HeaderMap, HeaderValue, header};
use prost::Message as _;
use tonic::{
    Status,
    codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder},
    metadata::MetadataMap,
    transport::{Channel, Endpoint},
};

pub use super::failure::ExportFailure;
use super::retry::{ExportRetries, retry_after_header};
use tonic_types::StatusExt as _;

/// The gRPC method of trace export.
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// The gRPC method of log export (audit records, `telemetry::audit_export`).
const LOGS_EXPORT_PATH: &str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";

/// What the collector made of an export it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Spans it says it rejected (OTLP partial success).
    pub rejected: u64,
}

/// Headers, compression and timeout of every export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// `OTEL_EXPORTER_OTLP_{,TRACES_}HEADERS`.
    pub headers: HeaderMap,
    /// `OTEL_EXPORTER_OTLP_{,TRACES_}COMPRESSION=gzip`.
    pub gzip: bool,
    /// `OTEL_EXPORTER_OTLP_{,TRACES_}TIMEOUT`.
    pub timeout: Duration,
}

/// Where exports go: built when telemetry is set up, so that a bad
/// endpoint or TLS file fails the start, and connected on the export
/// thread.
#[derive(Debug, Clone)]
pub enum SpanTarget {
    /// OTLP/gRPC: the channel is made lazily on the export thread's
    /// runtime.
    Grpc(Box<Endpoint>),
    /// OTLP/HTTP: `POST` of `application/x-protobuf` to the URL.
    Http {
        /// The client (TLS roots, CA file).
        client: reqwest::Client,
        /// The full URL, `/v1/traces` included.
        url: reqwest::Url,
    },
}

/// Sends encoded requests. The export thread owns one.
pub trait Transport: Send + 'static {
    /// Sends one `ExportTraceServiceRequest`.
    fn send(&mut self, request: Vec<u8>) -> impl Future<Output = Result<Accepted, ExportFailure>>;
}

/// The transport of [`SpanTarget`] with its [`ExportOptions`].
#[derive(Debug)]
pub struct OtlpTransport {
    target: SpanTarget,
    options: ExportOptions,
    /// The gRPC method: trace or log export.
    grpc_path: &'static str,
    /// The gRPC client, made at the first send.
    grpc: Option<tonic::client::Grpc<Channel>>,
}

impl OtlpTransport {
    /// A transport to `target`; nothing connects until the first send.
    pub fn new(target: SpanTarget, options: ExportOptions) -> Self {
        Self {
            target,
            options,
            grpc_path: EXPORT_PATH,
            grpc: None,
        }
    }

    /// A transport of `ExportLogsServiceRequest`s to the collector of
    /// `target` (already pointed at its logs URL over HTTP), with the same
    /// headers, compression, timeout and TLS as spans.
    pub fn for_logs(target: SpanTarget, options: ExportOptions) -> Self {
        Self {
            grpc_path: LOGS_EXPORT_PATH,
            ..Self::new(target, options)
        }
    }
}

impl Transport for OtlpTransport {
    async fn send(&mut self, request: Vec<u8>) -> Result<Accepted, ExportFailure> {
        let options = &self.options;
        let deadline = tokio::time::Instant::now() + options.timeout;
        let body = match &self.target {
            SpanTarget::Http { .. } if options.gzip => Bytes::from(gzip(&request)?),
            _ => Bytes::from(request),
        };
        let mut retries = ExportRetries::new();
        loop {
            let attempt = async {
                match &self.target {
                    SpanTarget::Grpc(endpoint) => {
                        // The channel spawns its connection task on the
                        // runtime it is made on: the export thread's.
                        let grpc = self.grpc.get_or_insert_with(|| {
                            let client = tonic::client::Grpc::new(endpoint.connect_lazy());
                            if options.gzip {
                                client.send_compressed(CompressionEncoding::Gzip)
                            } else {
                                client
                            }
                        });
                        send_grpc(grpc, self.grpc_path, options, deadline, body.clone()).await
                    }
                    SpanTarget::Http { client, url } => {
                        send_http(client, url, options, body.clone()).await
                    }
                }
            };
            let failure = match tokio::time::timeout_at(deadline, attempt).await {
                Ok(Ok(accepted)) => return Ok(accepted),
                // tonic's own timer (the `grpc-timeout` sent) may notice
                // the deadline first: past it, it is a timeout either way.
                Ok(Err(_)) | Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(ExportFailure::Timeout(options.timeout));
                }
                Ok(Err(failure)) => failure,
                Err(_) => return Err(ExportFailure::Timeout(options.timeout)),
            };
            match retries.next(&failure) {
                Some(wait) if tokio::time::Instant::now() + wait < deadline => {
                    tracing::debug!(error = %failure, ?wait, "span export failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                _ => return Err(failure),
            }
        }
    }
}

async fn send_grpc(
    grpc: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    options: &ExportOptions,
    deadline: tokio::time::Instant,
    request: Bytes,
) -> Result<Accepted, ExportFailure> {
    grpc.ready()
        .await
        .map_err(|e| ExportFailure::Transport(e.to_string()))?;
    let mut call = tonic::Request::new(request);
    *call.metadata_mut() = MetadataMap::from_headers(options.headers.clone());
    // The collector learns what is left of the export's budget.
    call.set_timeout(deadline.saturating_duration_since(tokio::time::Instant::now()));
    let path = http::uri::PathAndQuery::from_static(path);
    let response =
        grpc.unary(call, path, RawCodec)
            .await
            .map_err(|status| ExportFailure::Grpc {
                code: status.code(),
                retry_after: status
                    .get_details_retry_info()
                    .and_then(|info| info.retry_delay),
            })?;
    Ok(response.into_inner().accepted())
}

async fn send_http(
    client: &reqwest::Client,
    url: &reqwest::Url,
    options: &ExportOptions,
    body: Bytes,
) -> Result<Accepted, ExportFailure> {
    let mut post = client
        .post(url.clone())
        .headers(options.headers.clone())
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        )
        .timeout(options.timeout);
    if options.gzip {
        post = post.header(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    let post = post.body(body);
    let response = post
        .send()
        .await
        .map_err(|e| transport_failure(e, options.timeout))?;
    let status = response.status();
    if !status.is_success() {
        return Err(ExportFailure::Http {
            status: status.as_u16(),
            retry_after: retry_after_header(response.headers().get(header::RETRY_AFTER)),
        });
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| transport_failure(e, options.timeout))?;
    // A collector may answer an empty body; anything else must be the
    // response message.
    Ok(ExportResponse::decode(body)
        .map(|r| r.accepted())
        .unwrap_or_default())
}

/// reqwest's error, without its URL, which may carry credentials.
fn transport_failure(e: reqwest::Error, timeout: Duration) -> ExportFailure {
    if e.is_timeout() {
        return ExportFailure::Timeout(timeout);
    }
    ExportFailure::Transport(e.without_url().to_string())
}

fn gzip(body: &[u8]) -> Result<Vec<u8>, ExportFailure> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    encoder
        .write_all(body)
        .and_then(|()| encoder.finish())
        .map_err(|e| ExportFailure::Transport(format!("gzip: {e}")))
}

/// `ExportTraceServiceResponse`, of which only the partial success
/// matters.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportResponse {
    #[prost(message, optional, tag = "1")]
    partial_success: Option<PartialSuccess>,
}

/// `ExportTracePartialSuccess`, of which only the count is read (its
/// message, tag 2, is skipped: it is never logged).
#[derive(Clone, PartialEq, prost::Message)]
struct PartialSuccess {
    #[prost(int64, tag = "1")]
    rejected_spans: i64,
}

impl ExportResponse {
    fn accepted(&self) -> Accepted {
        Accepted {
            rejected: self
                .partial_success
                .as_ref()
                .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0)),
        }
    }
}

/// Writes an already encoded request as the message, and reads the
/// response.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = ExportResponse;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = ExportResponse;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<ExportResponse>, Status> {
        let len = src.remaining();
        ExportResponse::decode(src.copy_to_bytes(len))
            .map(Some)
            .map_err(|e| Status::internal(format!("bad export response: {e}")))
    }
}
