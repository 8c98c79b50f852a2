//! The layer end to end: spans opened under a `Registry` with the layer,
//! exported through the real queue to a transport that decodes them.

use std::sync::{Arc, Mutex};

use opentelemetry::{
    Context, KeyValue,
    baggage::BaggageExt as _,
    trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::any_value::Value as Any,
    trace::v1::{Span as OtlpSpan, status::StatusCode},
};
use opentelemetry_sdk::trace::{Sampler, SpanProcessor as _};
use prost::Message as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;
use crate::telemetry::{
    otlp::transport::{Accepted, ExportFailure, Transport},
    span_queue::{DEFAULT_SCHEDULE_DELAY, EncodedBatch, SpanExportStats, SpanQueueConfig},
};

/// A transport that keeps every span it is sent, decoded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<OtlpSpan>>>);

impl Transport for Captured {
    async fn send(&mut self, request: Vec<u8>) -> Result<Accepted, ExportFailure> {
        let decoded = ExportTraceServiceRequest::decode(request.as_slice()).expect("valid OTLP");
        let mut spans = self.0.lock().expect("lock");
        for resource in decoded.resource_spans {
            for scope in resource.scope_spans {
                assert_eq!(scope.scope.expect("scope").name, "test");
                spans.extend(scope.spans);
            }
        }
        Ok(Accepted { rejected: 0 })
    }
}

/// A subscriber with the layer (sampling with `sampler`), the batch to
/// flush, and what the transport received.
pub(crate) fn traced(
    sampler: Sampler,
) -> (
    impl tracing::Subscriber + Send + Sync,
    EncodedBatch,
    Captured,
) {
    let captured = Captured::default();
    let config = SpanQueueConfig {
        max_queue_size: 1024,
        max_export_batch_size: 512,
        schedule_delay: DEFAULT_SCHEDULE_DELAY,
    };
    let batch = EncodedBatch::new(captured.clone(), config, SpanExportStats::default())
        .expect("export thread");
    let layer = SpanLayer::new(
        batch.queue(),
        InstrumentationScope::builder("test").build(),
        sampler,
    );
    (
        tracing_subscriber::Registry::default().with(layer),
        batch,
        captured,
    )
}

/// Every span exported so far.
fn exported(batch: &EncodedBatch, captured: &Captured) -> Vec<OtlpSpan> {
    batch.force_flush().expect("flush");
    captured.0.lock().expect("lock").clone()
}

fn named<'a>(spans: &'a [OtlpSpan], name: &str) -> &'a OtlpSpan {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

fn attribute(span: &OtlpSpan, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn caller() -> SpanContext {
    SpanContext::new(
        TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("hex"),
        SpanId::from_hex("b7ad6b7169203331").expect("hex"),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )
}

#[test]
fn a_server_span_continues_the_callers_trace_and_its_child_continues_the_server_span() {
    let (subscriber, batch, captured) = traced(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
    tracing::subscriber::with_default(subscriber, || {
        let server = tracing::info_span!(
            "grpc.server",
            otel.name = "idgate.v1.Gateway/CreateSession",
            otel.kind = "server",
            rpc.grpc.status_code = tracing::field::Empty,
        );
        assert!(server.set_parent(Context::new().with_remote_span_context(caller())));
        let client = server.in_scope(|| {
            tracing::info_span!(
                "http.client",
                otel.kind = "client",
                server.port = 8080_i64,
                retried = false,
                ratio = 0.5,
                url.path = "/appkey",
            )
        });
        server.record("rpc.grpc.status_code", 0_i64);
        drop(client);
        drop(server);
    });
    let spans = exported(&batch, &captured);
    assert_eq!(spans.len(), 2);
    let server = named(&spans, "idgate.v1.Gateway/CreateSession");
    let client = named(&spans, "http.client");
    assert_eq!(server.trace_id, caller().trace_id().to_bytes());
    assert_eq!(server.parent_span_id, caller().span_id().to_bytes());
    assert_eq!(server.kind, 2, "server");
    assert_eq!(server.flags, 0x301, "sampled, its parent remote");
    assert_eq!(
        attribute(server, "rpc.grpc.status_code"),
        Some(Any::IntValue(0))
    );
    assert_eq!(client.trace_id, server.trace_id);
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(client.kind, 3, "client");
    assert_eq!(client.flags, 0x101, "sampled, its parent local");
    assert_eq!(attribute(client, "server.port"), Some(Any::IntValue(8080)));
    assert_eq!(attribute(client, "retried"), Some(Any::BoolValue(false)));
    assert_eq!(attribute(client, "ratio"), Some(Any::DoubleValue(0.5)));
    assert_eq!(
        attribute(client, "url.path"),
        Some(Any::StringValue("/appkey".to_owned()))
    );
    assert!(server.start_time_unix_nano <= client.start_time_unix_nano);
    assert!(client.end_time_unix_nano <= server.end_time_unix_nano);
}

#[test]
fn a_spans_context_carries_its_parents_baggage_and_its_own_ids() {
    let (subscriber, _batch, _captured) = traced(Sampler::AlwaysOn);
    tracing::subscriber::with_default(subscriber, || {
        let from_caller = Context::new()
            .with_remote_span_context(caller())
            .with_baggage([KeyValue::new("idgate.journey_ref", "j-1")]);
        let server = tracing::info_span!("server");
        server.set_parent(from_caller);
        let child = server.in_scope(|| tracing::info_span!("child"));
        let context = child.context();
        assert_eq!(
            context
                .baggage()
                .get("idgate.journey_ref")
                .map(|v| v.as_str().to_owned()),
            Some("j-1".to_owned())
        );
        assert_eq!(context.span().span_context(), &child.span_context());
        assert_eq!(child.span_context().trace_id(), caller().trace_id());
        assert_ne!(
            child.span_context().span_id(),
            server.span_context().span_id()
        );
    });
}

#[test]
fn once_a_span_has_ids_a_parent_set_later_is_refused() {
    let (subscriber, _batch, _captured) = traced(Sampler::AlwaysOn);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("server");
        let own = span.span_context();
        assert!(own.is_valid());
        assert!(!span.set_parent(Context::new().with_remote_span_context(caller())));
        assert_eq!(span.span_context().trace_id(), own.trace_id());
    });
}

#[test]
fn spans_the_sampler_drops_keep_their_ids_for_the_next_hop_and_are_not_exported() {
    let (subscriber, batch, captured) = traced(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
    tracing::subscriber::with_default(subscriber, || {
        let unsampled = SpanContext::new(
            caller().trace_id(),
            caller().span_id(),
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let server = tracing::info_span!("server", attribute = "kept nowhere");
        server.set_parent(Context::new().with_remote_span_context(unsampled));
        let child = server.in_scope(|| tracing::info_span!("child"));
        assert!(child.span_context().is_valid());
        assert!(!child.span_context().is_sampled());
        assert_eq!(child.span_context().trace_id(), caller().trace_id());
    });
    assert!(exported(&batch, &captured).is_empty());

    let (subscriber, batch, captured) = traced(Sampler::AlwaysOff);
    tracing::subscriber::with_default(subscriber, || {
        drop(tracing::info_span!("root"));
    });
    assert!(exported(&batch, &captured).is_empty());
}

#[test]
fn log_lines_inside_a_span_are_its_events_and_an_error_sets_its_status() {
    let (subscriber, batch, captured) = traced(Sampler::AlwaysOn);
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!("quiet").in_scope(|| tracing::info!(attempt = 2_i64, "retrying"));
        tracing::info_span!("failing").in_scope(|| tracing::error!("gave up"));
        tracing::info_span!("described", otel.status_description = "upstream down").in_scope(|| {});
    });
    let spans = exported(&batch, &captured);
    let quiet = named(&spans, "quiet");
    assert_eq!(quiet.events.len(), 1);
    let event = &quiet.events[0];
    assert_eq!(event.name, "retrying");
    let keys: Vec<_> = event.attributes.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["level", "target", "attempt"]);
    assert_eq!(
        quiet.status.as_ref().map(|s| s.code),
        Some(StatusCode::Unset as i32)
    );
    let failing = named(&spans, "failing");
    assert_eq!(
        failing.status.as_ref().map(|s| s.code),
        Some(StatusCode::Error as i32)
    );
    let described = named(&spans, "described");
    let status = described.status.as_ref().expect("status");
    assert_eq!(
        (status.code, status.message.as_str()),
        (StatusCode::Error as i32, "upstream down")
    );
}

#[test]
fn links_and_attributes_set_from_outside_are_exported() {
    let (subscriber, batch, captured) = traced(Sampler::AlwaysOn);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("read");
        span.add_link(caller());
        span.add_link(SpanContext::empty_context());
        span.set_attribute("idgate.journey_ref", "j-2");
    });
    let spans = exported(&batch, &captured);
    let read = named(&spans, "read");
    assert_eq!(read.links.len(), 1, "an invalid context is no link");
    assert_eq!(read.links[0].trace_id, caller().trace_id().to_bytes());
    assert_eq!(read.links[0].span_id, caller().span_id().to_bytes());
    assert_eq!(
        attribute(read, "idgate.journey_ref"),
        Some(Any::StringValue("j-2".to_owned()))
    );
}

#[test]
fn past_the_span_limit_attributes_are_counted_as_dropped() {
    let (subscriber, batch, captured) = traced(Sampler::AlwaysOn);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("many");
        for i in 0..130_i64 {
            span.set_attribute("n", i);
        }
    });
    let spans = exported(&batch, &captured);
    let many = named(&spans, "many");
    assert_eq!(many.attributes.len(), 128);
    assert_eq!(many.dropped_attributes_count, 2);
}

#[test]
fn a_span_no_layer_records_answers_an_empty_context() {
    tracing::subscriber::with_default(tracing_subscriber::Registry::default(), || {
        let span = tracing::info_span!("plain");
        assert!(!span.span_context().is_valid());
        assert!(!span.set_parent(Context::new().with_remote_span_context(caller())));
        assert!(!span.context().has_active_span());
    });
}

#[test]
fn the_sampler_is_the_one_otel_traces_sampler_names() {
    let named = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        format!(
            "{:?}",
            sampler_from_env(&|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        )
    };
    let debug = |sampler: Sampler| format!("{sampler:?}");
    let parent_based = |root| debug(Sampler::ParentBased(Box::new(root)));
    assert_eq!(named(&[]), parent_based(Sampler::AlwaysOn));
    assert_eq!(
        named(&[("OTEL_TRACES_SAMPLER", "always_off")]),
        debug(Sampler::AlwaysOff)
    );
    assert_eq!(
        named(&[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]),
        parent_based(Sampler::TraceIdRatioBased(0.25))
    );
    assert_eq!(
        named(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2")
        ]),
        debug(Sampler::TraceIdRatioBased(1.0))
    );
    assert_eq!(
        named(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]),
        parent_based(Sampler::AlwaysOn)
    );
}
