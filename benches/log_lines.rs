//! What one JSON log line costs inside a call's server span, through the
//! subscriber `idgate serve --log-format json` installs (the manifests'
//! choice): the audit record every audited call writes, and the access
//! log line (`[telemetry] access_log = true`); and what the JSON log
//! layer costs a span that writes no line (the upstream call's, a Redis
//! command's): opened with its fields, two recorded, entered and left as a
//! call's future is polled, closed. Lines go to `io::sink`, so this is the
//! formatting alone, not the write to stdout.
//!
//! `cargo bench --bench log_lines`

use std::{hint::black_box, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use idgate::telemetry::{LogFormat, TelemetryBuilder, TelemetryConfig};
use tracing::field::Empty;

/// The server span of a `StartSession3D` call, as the gateway opens it,
/// with the journey and channel recorded.
fn server_span() -> tracing::Span {
    let span = idgate::telemetry::grpc::server_span(
        "idgate.v1.LivenessService/StartSession3D",
        "idgate.v1.LivenessService",
        "StartSession3D",
    );
    span.record("idgate.journey_ref", "j-3f9c1e0a7b2d4c58");
    span.record("idgate.channel", "primary");
    span
}

fn lines(c: &mut Criterion) {
    let telemetry = TelemetryBuilder::new(&TelemetryConfig::default())
        .log_format(LogFormat::Json)
        .log_filter("info")
        .without_export()
        .log_writer(std::io::sink)
        .build()
        .expect("the production JSON subscriber");
    let _installed = telemetry.set_default();
    let span = server_span();
    // As a connection renders it once (`net::ConnInfo::remote_text`).
    let peer = String::from("127.0.0.1:51234");

    let mut group = c.benchmark_group("json_log_line");
    group.bench_function("audit_record", |b| {
        b.iter(|| {
            span.in_scope(|| {
                tracing::info!(
                    target: "idgate::audit",
                    caller = black_box("system:serviceaccount:bench:load"),
                    operation = "session_3d",
                    journey_ref = black_box("j-3f9c1e0a7b2d4c58"),
                    view = "",
                    outcome = "ok",
                    trace = black_box("4bf92f3577b34da6a3ce929d0e0e4736"),
                    "personal data access"
                );
            });
        });
    });
    group.bench_function("access_line", |b| {
        b.iter(|| {
            idgate::telemetry::logs::access(
                &span,
                "idgate.v1.LivenessService/StartSession3D",
                tonic::Code::Ok,
                black_box(Duration::from_micros(412)),
                Some(black_box(peer.as_str())),
            );
        });
    });
    group.bench_function("span_without_lines", |b| {
        b.iter(|| {
            let span = tracing::info_span!(
                "redis",
                otel.name = "SET",
                otel.kind = "client",
                otel.status_code = Empty,
                db.system = "redis",
                db.system.name = "redis",
                db.operation.name = "SET",
                server.address = black_box("127.0.0.1"),
                server.port = 6379_i64,
                error.type = Empty,
            );
            for _ in 0..4 {
                drop(span.enter());
            }
            span.record("otel.status_code", "OK");
            span.record("error.type", black_box("timeout"));
            drop(span);
        });
    });
    group.finish();
}

criterion_group!(benches, lines);
criterion_main!(benches);
