use tracing_subscriber::{Registry, layer::SubscriberExt};

use super::*;
use crate::telemetry::CapturedLogs;

/// A JSON fmt layer as `setup` builds it (without the time, which would
/// differ between two runs), writing into `logs`.
macro_rules! json_layer {
    ($logs:expr) => {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .without_time()
            .with_writer($logs.clone())
    };
}

/// Spans opening with values, recording more (the same name twice among
/// them) before and after lines are written in them, nested, empty, with
/// escapes, numbers, bytes, errors, raw names and `Debug` values.
fn emit() {
    let server = tracing::info_span!(
        "grpc.server",
        otel.name = "idgate.v1.LivenessService/StartSession3D",
        otel.kind = "server",
        rpc.grpc.status_code = tracing::field::Empty,
        idgate.journey_ref = tracing::field::Empty,
        server.port = 8080i64,
        ratio = 0.25f64,
        ok = true,
        quoted = "a \"b\" \\ c\n",
        accented = "São Paulo",
        r#type = "raw",
        debug = ?Some(3),
        bytes = &b"ab"[..],
    );
    let _in_server = server.enter();
    tracing::info!("before any record");
    server.record("idgate.journey_ref", "j-0123456789abcdef");
    let empty = tracing::info_span!("handler", idgate.channel = tracing::field::Empty);
    let _in_handler = empty.enter();
    tracing::warn!(n = -4i64, "inside an empty span");
    empty.record("idgate.channel", "primary");
    let err = std::io::Error::other("refused");
    let client = tracing::info_span!(
        "http.client",
        url.path = "/facecaptcha/service/captcha/3d/session-token",
        error.type = tracing::field::Empty,
    );
    client.record("error.type", "connect");
    client.record("error.type", &err as &dyn std::error::Error);
    let _in_client = client.enter();
    tracing::error!(message = "plain \"message\"", count = 7u64);
    server.record("rpc.grpc.status_code", 14i64);
    server.record("idgate.journey_ref", "j-fedcba9876543210");
    tracing::info!("after more records");
}

#[test]
fn lines_show_the_same_span_fields_as_the_eager_json_formatter() {
    let eager = CapturedLogs::new();
    tracing::subscriber::with_default(Registry::default().with(json_layer!(eager)), emit);

    let lazy = CapturedLogs::new();
    let subscriber = Registry::default()
        .with(LazyJsonSpanFields.and_then(json_layer!(lazy).fmt_fields(LazyJsonFields)));
    tracing::subscriber::with_default(subscriber, emit);

    let (eager, lazy) = (eager.contents(), lazy.contents());
    assert_eq!(lazy, eager);
    assert_eq!(lazy.lines().count(), 4, "{lazy}");
    assert!(
        lazy.contains(r#""idgate.journey_ref":"j-fedcba9876543210""#),
        "the last value recorded wins: {lazy}"
    );
    assert!(lazy.contains(r#""rpc.grpc.status_code":14"#), "{lazy}");
    assert!(lazy.contains(r#""type":"raw""#), "{lazy}");
}
