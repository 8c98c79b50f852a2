//! What exporting one span costs: the gateway's encoder
//! (`telemetry::otlp::wire`, on the serving thread) against the path it
//! replaced (`opentelemetry-proto`'s conversion of the span record to the
//! generated structs, then their encoding, as `opentelemetry-otlp` does
//! on its export thread). The span is a server span as the gateway makes
//! it: the RPC's attributes, a remote parent, an OK status.
//!
//! And what a call's two spans cost end to end through the gateway's span
//! layer (`telemetry::spans`): the server span opened with the RPC's
//! fields and continued from the caller's context, the upstream client
//! span opened under it, the statuses recorded, both closed, encoded and
//! queued (the export thread's sending not counted).
//!
//! `cargo bench --bench span_export`

use std::{
    borrow::Cow,
    hint::black_box,
    time::{Duration, SystemTime},
};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use idgate::telemetry::{
    SpanExportStats,
    otlp::{
        transport::{Accepted, ExportFailure, Transport},
        wire,
    },
    span_queue::{
        DEFAULT_MAX_EXPORT_BATCH_SIZE, DEFAULT_MAX_QUEUE_SIZE, DEFAULT_SCHEDULE_DELAY,
        EncodedBatch, SpanQueueConfig,
    },
    spans::{SpanExt as _, SpanLayer},
};
use opentelemetry::{
    InstrumentationScope, KeyValue,
    trace::{
        SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
        TraceState,
    },
};
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use opentelemetry_sdk::trace::{Sampler, SpanProcessor as _};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use prost::Message as _;
use tracing_subscriber::layer::SubscriberExt as _;

fn server_span() -> SpanData {
    let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
    SpanData {
        span_context: SpanContext::new(
            TraceId::from(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736),
            SpanId::from(0x00f0_67aa_0ba9_02b7),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id: SpanId::from(0x5fb3_97be_34d2_6b51),
        parent_span_is_remote: true,
        span_kind: SpanKind::Server,
        name: Cow::Borrowed("idgate.v1.LivenessService/StartSession3D"),
        start_time: start,
        end_time: start + Duration::from_micros(412),
        attributes: vec![
            KeyValue::new("rpc.system", "grpc"),
            KeyValue::new("rpc.service", "idgate.v1.LivenessService"),
            KeyValue::new("rpc.method", "StartSession3D"),
            KeyValue::new("rpc.grpc.status_code", 0_i64),
            KeyValue::new("server.address", "127.0.0.1"),
            KeyValue::new("server.port", 19084_i64),
            KeyValue::new("network.peer.address", "127.0.0.1"),
            KeyValue::new("idgate.journey_ref", "j-3f9c1e0a7b2d4c58"),
            KeyValue::new("idgate.caller", "system:serviceaccount:bench:load"),
            KeyValue::new("idgate.channel", "primary"),
        ],
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Ok,
        instrumentation_scope: InstrumentationScope::builder("idgate").build(),
    }
}

fn span_export(c: &mut Criterion) {
    let mut group = c.benchmark_group("span export");
    let mut out = Vec::with_capacity(1024);
    group.bench_function("wire::put_span (encode, drop the record)", |b| {
        b.iter_batched(
            server_span,
            |span| {
                out.clear();
                wire::put_span(&mut out, black_box(&span));
                black_box(out.len())
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("opentelemetry-proto conversion + prost encode", |b| {
        b.iter_batched(
            server_span,
            |span| {
                out.clear();
                ProtoSpan::from(black_box(span))
                    .encode(&mut out)
                    .expect("room");
                black_box(out.len())
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// A transport that takes every export and sends nothing.
struct Discard;

impl Transport for Discard {
    async fn send(&mut self, _request: Vec<u8>) -> Result<Accepted, ExportFailure> {
        Ok(Accepted { rejected: 0 })
    }
}

/// One call's spans, as `telemetry::grpc` and `telemetry::client` open them.
fn one_call(caller: &opentelemetry::Context) {
    let server = tracing::info_span!(
        "grpc.server",
        otel.name = "idgate.v1.LivenessService/StartSession3D",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = "idgate.v1.LivenessService",
        rpc.method = "StartSession3D",
        rpc.grpc.status_code = tracing::field::Empty,
        idgate.journey_ref = "j-0af7651916cd43dd",
        idgate.channel = tracing::field::Empty,
    );
    server.set_parent(caller.clone());
    let client = server.in_scope(|| {
        tracing::info_span!(
            "http.client",
            otel.name = "POST /3d/session-token",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            http.request.method = "POST",
            http.response.status_code = tracing::field::Empty,
            url.path = "/3d/session-token",
            url.template = "/3d/session-token",
            server.address = "127.0.0.1",
            server.port = 19081_i64,
            idgate.operation = "session_token",
            idgate.channel = "primary",
            idgate.journey_ref = "j-0af7651916cd43dd",
        )
    });
    black_box(client.span_context());
    client.record("http.response.status_code", 200_i64);
    drop(client);
    server.record("idgate.channel", "primary");
    server.record("rpc.grpc.status_code", 0_i64);
}

fn span_layer(c: &mut Criterion) {
    let batch = EncodedBatch::new(
        Discard,
        SpanQueueConfig {
            max_queue_size: DEFAULT_MAX_QUEUE_SIZE,
            max_export_batch_size: DEFAULT_MAX_EXPORT_BATCH_SIZE,
            schedule_delay: DEFAULT_SCHEDULE_DELAY,
        },
        SpanExportStats::default(),
    )
    .expect("export thread");
    let layer = SpanLayer::new(
        batch.queue(),
        InstrumentationScope::builder("idgate").build(),
        Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
    );
    let subscriber = tracing_subscriber::Registry::default().with(layer);
    let caller = opentelemetry::Context::new().with_remote_span_context(server_span().span_context);
    let mut group = c.benchmark_group("span layer");
    tracing::subscriber::with_default(subscriber, || {
        group.bench_function(
            "one call's two spans (open, record, close, encode, queue)",
            |b| {
                b.iter_custom(|iterations| {
                    let mut spent = Duration::ZERO;
                    // Rounds the queue holds whole, emptied between them, so
                    // that every span is encoded (a full queue drops before
                    // encoding).
                    let mut left = iterations;
                    while left > 0 {
                        let round = left.min(4_000);
                        let started = std::time::Instant::now();
                        for _ in 0..round {
                            one_call(&caller);
                        }
                        spent += started.elapsed();
                        batch.force_flush().expect("flush");
                        left -= round;
                    }
                    spent
                })
            },
        );
    });
    group.finish();
}

criterion_group!(benches, span_export, span_layer);
criterion_main!(benches);
