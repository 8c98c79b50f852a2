use std::{
    borrow::Cow,
    time::{Duration, SystemTime},
};

use opentelemetry::{
    Array, InstrumentationScope, KeyValue, StringValue, Value,
    trace::{Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState},
};
use opentelemetry_proto::{
    tonic::collector::trace::v1::ExportTraceServiceRequest,
    transform::{
        common::tonic::ResourceAttributesWithSchema,
        trace::tonic::group_spans_by_resource_and_scope,
    },
};
use opentelemetry_sdk::{
    Resource,
    trace::{SpanData, SpanEvents, SpanLinks},
};
use proptest::prelude::*;
use prost::Message as _;

use super::*;

fn context(trace: u128, span: u64, remote: bool, state: &str) -> SpanContext {
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        TraceFlags::SAMPLED,
        remote,
        state.parse::<TraceState>().expect("trace state"),
    )
}

fn values() -> Vec<Value> {
    vec![
        Value::Bool(false),
        Value::Bool(true),
        Value::I64(0),
        Value::I64(-7),
        Value::I64(i64::MAX),
        Value::F64(0.0),
        Value::F64(-1.5),
        Value::String("".into()),
        Value::String("Verificação".into()),
        Value::Array(Array::Bool(vec![true, false])),
        Value::Array(Array::I64(vec![0, -1, 300])),
        Value::Array(Array::F64(vec![])),
        Value::Array(Array::String(vec![
            StringValue::from("a"),
            StringValue::from(""),
        ])),
    ]
}

fn attributes() -> Vec<KeyValue> {
    values()
        .into_iter()
        .enumerate()
        .map(|(i, v)| KeyValue::new(format!("k{i}"), v))
        .collect()
}

/// A span with every field set: a remote parent, events, links, an error
/// status, a trace state, dropped counts.
fn full_span(scope: InstrumentationScope) -> SpanData {
    let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
    SpanData {
        span_context: context(0xabc, 0x1, false, "vendor=x,other=y"),
        parent_span_id: SpanId::from(0x2),
        parent_span_is_remote: true,
        span_kind: SpanKind::Server,
        name: Cow::Borrowed("idgate.v1.Liveness/StartSession3D"),
        start_time: start,
        end_time: start + Duration::from_micros(70),
        attributes: attributes(),
        dropped_attributes_count: 3,
        events: {
            let mut events = SpanEvents::default();
            events
                .events
                .push(Event::new("retry", start, attributes(), 1));
            events.events.push(Event::new("", start, vec![], 0));
            events.dropped_count = 2;
            events
        },
        links: {
            let mut links = SpanLinks::default();
            links.links.push(Link::new(
                context(0xdef, 0x9, true, ""),
                vec![KeyValue::new("idgate.link", "journey")],
                4,
            ));
            links.dropped_count = 5;
            links
        },
        status: Status::error("upstream refused"),
        instrumentation_scope: scope,
    }
}

/// A span with every field at its default where it can be.
fn bare_span(scope: InstrumentationScope) -> SpanData {
    SpanData {
        span_context: context(0x1, 0x1, false, ""),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed(""),
        start_time: SystemTime::UNIX_EPOCH,
        end_time: SystemTime::UNIX_EPOCH,
        attributes: vec![],
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: scope,
    }
}

fn scopes() -> [InstrumentationScope; 2] {
    [
        InstrumentationScope::builder("idgate").build(),
        InstrumentationScope::builder("vendor")
            .with_version("1.2")
            .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
            .with_attributes([KeyValue::new("scope.attr", 7)])
            .build(),
    ]
}

/// Encodes `spans` the way the export queue does: grouped by scope, in
/// first-seen order.
fn encode(resource: &Resource, spans: &[SpanData]) -> Vec<u8> {
    let mut groups: Vec<(EncodedScope, Vec<u8>, &InstrumentationScope)> = Vec::new();
    for span in spans {
        let i = match groups
            .iter()
            .position(|(_, _, s)| *s == &span.instrumentation_scope)
        {
            Some(i) => i,
            None => {
                let scope = &span.instrumentation_scope;
                groups.push((EncodedScope::new(scope), Vec::new(), scope));
                groups.len() - 1
            }
        };
        put_span(&mut groups[i].1, span);
    }
    request(
        &EncodedResource::new(resource),
        groups
            .iter()
            .map(|(scope, spans, _)| (scope, spans.as_slice())),
    )
}

/// What `opentelemetry-proto` makes of the same spans.
fn reference(resource: &Resource, spans: Vec<SpanData>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(
            spans,
            &ResourceAttributesWithSchema::from(resource),
        ),
    }
}

fn resource() -> Resource {
    Resource::builder_empty()
        .with_service_name("idgate")
        .with_attribute(KeyValue::new("service.version", "0.1.0"))
        .with_schema_url([], "https://opentelemetry.io/schemas/1.30.0")
        .build()
}

#[test]
fn spans_decode_as_the_reference_conversion_makes_them() {
    let [a, b] = scopes();
    let spans = vec![
        full_span(a.clone()),
        bare_span(b.clone()),
        full_span(b),
        bare_span(a),
    ];
    // One resource: its attributes are a hash map, iterated in its order.
    let resource = resource();
    let bytes = encode(&resource, &spans);
    let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(decoded, reference(&resource, spans));
}

#[test]
fn an_empty_resource_and_no_spans_still_make_a_valid_request() {
    let empty = Resource::builder_empty().build();
    let bytes = encode(&empty, &[]);
    let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(decoded, reference(&empty, vec![]));
}

fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::I64),
        any::<f64>()
            .prop_filter("NaN never equals itself", |d| !d.is_nan())
            .prop_map(Value::F64),
        ".{0,40}".prop_map(|s| Value::String(s.into())),
        prop::collection::vec(any::<i64>(), 0..4).prop_map(|v| Value::Array(Array::I64(v))),
        prop::collection::vec(".{0,8}", 0..4).prop_map(|v| Value::Array(Array::String(
            v.into_iter().map(StringValue::from).collect()
        ))),
    ]
}

proptest! {
    #[test]
    fn any_attributes_name_and_times_decode_as_the_reference_makes_them(
        name in ".{0,60}",
        attrs in prop::collection::vec((".{0,20}", value_strategy()), 0..12),
        start in 0..u64::MAX / 2,
        length in any::<u32>(),
        dropped in any::<u32>(),
    ) {
        let [scope, _] = scopes();
        let mut span = bare_span(scope);
        span.name = Cow::Owned(name);
        span.attributes = attrs.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
        span.start_time = SystemTime::UNIX_EPOCH + Duration::from_nanos(start);
        span.end_time = span.start_time + Duration::from_nanos(u64::from(length));
        span.dropped_attributes_count = dropped;
        let spans = vec![span];
        let resource = resource();
        let bytes = encode(&resource, &spans);
        let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("decodes");
        prop_assert_eq!(decoded, reference(&resource, spans));
    }
}
