//! What exporting one span costs: the gateway's encoder
//! (`telemetry::otlp::wire`, on the serving thread) against the path it
//! replaced (`opentelemetry-proto`'s conversion of the span record to the
//! generated structs, then their encoding, as `opentelemetry-otlp` does
//! on its export thread). The span is a server span as the gateway makes
//! it: the RPC's attributes, a remote parent, an OK status.
//!
//! `cargo bench --bench span_export`

use std::{
    borrow::Cow,
    hint::black_box,
    time::{Duration, SystemTime},
};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use idgate::telemetry::otlp::wire;
use opentelemetry::{
    InstrumentationScope, KeyValue,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use prost::Message as _;

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

criterion_group!(benches, span_export);
criterion_main!(benches);
