//! OTLP/protobuf, written straight from the spans the gateway keeps.
//!
//! `opentelemetry-otlp` turns each ended span into the generated protobuf
//! structs first (an owned `String` per attribute key and value, a `Vec`
//! per id) and encodes those. The gateway ends two or three spans per call,
//! so that copy was most of what export cost (docs/performance.md). Here a
//! span's attributes, events and links are written as OTLP as they are
//! recorded (`telemetry::spans`), the span around them once, on the thread
//! that ended it (`span`), into the bytes it takes inside an
//! `ExportTraceServiceRequest`; a batch is those bytes behind a resource
//! and a scope header. [`put_span`] writes an SDK span record the same way.
//!
//! Field numbers and layout are those of `opentelemetry/proto/trace/v1/
//! trace.proto` and `common/v1/common.proto` (OTLP 1.x); the unit tests
//! decode what is written here with the generated structs and compare it
//! to `opentelemetry-proto`'s own conversion of the same spans.

use std::time::SystemTime;

use opentelemetry::{
    Array, InstrumentationScope, KeyValue, Value,
    trace::{SpanKind, Status},
};
use opentelemetry_sdk::Resource;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

/// Span flags: the context says whether its parent is remote (bit 8), and
/// whether it is (bit 9). `SpanFlags` in trace.proto.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// A length-delimited field of `len` bytes: its key, its length and its
/// content.
fn delimited_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn put_delimited_header(out: &mut Vec<u8>, tag: u32, len: usize) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_delimited_header(out, tag, bytes.len());
    out.extend_from_slice(bytes);
}

/// A string or bytes field; proto3 leaves an empty one out.
fn opt_bytes_len(tag: u32, len: usize) -> usize {
    if len == 0 { 0 } else { delimited_len(tag, len) }
}

fn put_opt_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    if !bytes.is_empty() {
        put_bytes(out, tag, bytes);
    }
}

fn varint_len(tag: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(value)
    }
}

fn put_varint(out: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(value, out);
    }
}

fn fixed64_len(tag: u32, value: u64) -> usize {
    if value == 0 { 0 } else { key_len(tag) + 8 }
}

fn put_fixed64(out: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        encode_key(tag, WireType::SixtyFourBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed32_len(tag: u32, value: u32) -> usize {
    if value == 0 { 0 } else { key_len(tag) + 4 }
}

fn put_fixed32(out: &mut Vec<u8>, tag: u32, value: u32) {
    if value != 0 {
        encode_key(tag, WireType::ThirtyTwoBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One value of an `AnyValue`'s oneof. A oneof member is written even when
/// it holds its type's default, so that the value is present.
enum Scalar<'a> {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(&'a str),
}

impl Scalar<'_> {
    fn len(&self) -> usize {
        match self {
            Scalar::Str(s) => delimited_len(1, s.len()),
            Scalar::Bool(_) => key_len(2) + 1,
            // int64 is written as its two's complement, ten bytes when
            // negative.
            Scalar::Int(i) => key_len(3) + encoded_len_varint(*i as u64),
            Scalar::Double(_) => key_len(4) + 8,
        }
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Scalar::Str(s) => put_bytes(out, 1, s.as_bytes()),
            Scalar::Bool(b) => {
                encode_key(2, WireType::Varint, out);
                encode_varint(u64::from(*b), out);
            }
            Scalar::Int(i) => {
                encode_key(3, WireType::Varint, out);
                encode_varint(*i as u64, out);
            }
            Scalar::Double(d) => {
                encode_key(4, WireType::SixtyFourBit, out);
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
    }
}

/// The elements of an array value, each an `AnyValue` (field 1 of
/// `ArrayValue`).
fn array_scalars(array: &Array) -> Box<dyn Iterator<Item = Scalar<'_>> + '_> {
    match array {
        Array::Bool(v) => Box::new(v.iter().map(|b| Scalar::Bool(*b))),
        Array::I64(v) => Box::new(v.iter().map(|i| Scalar::Int(*i))),
        Array::F64(v) => Box::new(v.iter().map(|d| Scalar::Double(*d))),
        Array::String(v) => Box::new(v.iter().map(|s| Scalar::Str(s.as_str()))),
        // A kind of array this encoder does not know yet: an empty array.
        _ => Box::new(std::iter::empty()),
    }
}

fn array_len(array: &Array) -> usize {
    array_scalars(array)
        .map(|s| delimited_len(1, s.len()))
        .sum()
}

/// The body of an `AnyValue`.
fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Bool(b) => Scalar::Bool(*b).len(),
        Value::I64(i) => Scalar::Int(*i).len(),
        Value::F64(d) => Scalar::Double(*d).len(),
        Value::String(s) => Scalar::Str(s.as_str()).len(),
        Value::Array(a) => delimited_len(5, array_len(a)),
        // A kind of value this encoder does not know yet: no value.
        _ => 0,
    }
}

fn put_any_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Bool(b) => Scalar::Bool(*b).put(out),
        Value::I64(i) => Scalar::Int(*i).put(out),
        Value::F64(d) => Scalar::Double(*d).put(out),
        Value::String(s) => Scalar::Str(s.as_str()).put(out),
        Value::Array(a) => {
            put_delimited_header(out, 5, array_len(a));
            for scalar in array_scalars(a) {
                put_delimited_header(out, 1, scalar.len());
                scalar.put(out);
            }
        }
        _ => {}
    }
}

/// The body of a `KeyValue`: key (1) and value (2, always present).
fn key_value_len(key: &str, value: &Value) -> usize {
    opt_bytes_len(1, key.len()) + delimited_len(2, any_value_len(value))
}

fn put_key_value(out: &mut Vec<u8>, tag: u32, key: &str, value: &Value) {
    put_delimited_header(out, tag, key_value_len(key, value));
    put_opt_bytes(out, 1, key.as_bytes());
    put_delimited_header(out, 2, any_value_len(value));
    put_any_value(out, value);
}

fn attributes_len(tag: u32, attributes: &[KeyValue]) -> usize {
    attributes
        .iter()
        .map(|kv| delimited_len(tag, key_value_len(kv.key.as_str(), &kv.value)))
        .sum()
}

fn put_attributes(out: &mut Vec<u8>, tag: u32, attributes: &[KeyValue]) {
    for kv in attributes {
        put_key_value(out, tag, kv.key.as_str(), &kv.value);
    }
}

fn span_flags(trace_flags: u8, parent_is_remote: bool) -> u32 {
    let mut flags = u32::from(trace_flags) | HAS_IS_REMOTE;
    if parent_is_remote {
        flags |= IS_REMOTE;
    }
    flags
}

fn kind_number(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

/// `Status`: message (2) and code (3: unset 0, ok 1, error 2).
fn status_parts(status: &Status) -> (&str, u64) {
    match status {
        Status::Unset => ("", 0),
        Status::Ok => ("", 1),
        Status::Error { description } => (description, 2),
    }
}

fn status_len(status: &Status) -> usize {
    let (message, code) = status_parts(status);
    opt_bytes_len(2, message.len()) + varint_len(3, code)
}

/// A resource, encoded once: the `Resource` message's body and the
/// `ResourceSpans.schema_url` it brings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodedResource {
    body: Vec<u8>,
    schema_url: String,
}

impl EncodedResource {
    /// Encodes `resource`'s attributes.
    pub fn new(resource: &Resource) -> Self {
        let mut body = Vec::new();
        for (key, value) in resource.iter() {
            put_key_value(&mut body, 1, key.as_str(), value);
        }
        Self {
            body,
            schema_url: resource.schema_url().unwrap_or_default().to_owned(),
        }
    }
}

/// An instrumentation scope, encoded once: the `InstrumentationScope`
/// message's body and the `ScopeSpans.schema_url` it brings.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedScope {
    body: Vec<u8>,
    schema_url: String,
}

impl EncodedScope {
    /// Encodes `scope`: name (1), version (2), attributes (3).
    pub fn new(scope: &InstrumentationScope) -> Self {
        let mut body = Vec::new();
        put_opt_bytes(&mut body, 1, scope.name().as_bytes());
        put_opt_bytes(&mut body, 2, scope.version().unwrap_or_default().as_bytes());
        for kv in scope.attributes() {
            put_key_value(&mut body, 3, kv.key.as_str(), &kv.value);
        }
        Self {
            body,
            schema_url: scope.schema_url().unwrap_or_default().to_owned(),
        }
    }

    /// The body of a `ScopeSpans` holding `spans` (entries written by
    /// [`put_span`]).
    fn scope_spans_len(&self, spans: &[u8]) -> usize {
        delimited_len(1, self.body.len()) + spans.len() + opt_bytes_len(3, self.schema_url.len())
    }
}

/// An `ExportTraceServiceRequest` of one resource: for each scope, the
/// spans [`put_span`] wrote.
pub fn request<'a>(
    resource: &EncodedResource,
    scopes: impl Iterator<Item = (&'a EncodedScope, &'a [u8])> + Clone,
) -> Vec<u8> {
    let scope_spans: usize = scopes
        .clone()
        .map(|(scope, spans)| delimited_len(2, scope.scope_spans_len(spans)))
        .sum();
    let resource_spans = delimited_len(1, resource.body.len())
        + scope_spans
        + opt_bytes_len(3, resource.schema_url.len());
    let mut out = Vec::with_capacity(delimited_len(1, resource_spans));
    put_delimited_header(&mut out, 1, resource_spans);
    put_bytes(&mut out, 1, &resource.body);
    for (scope, spans) in scopes {
        put_delimited_header(&mut out, 2, scope.scope_spans_len(spans));
        put_bytes(&mut out, 1, &scope.body);
        out.extend_from_slice(spans);
        put_opt_bytes(&mut out, 3, scope.schema_url.as_bytes());
    }
    put_opt_bytes(&mut out, 3, resource.schema_url.as_bytes());
    out
}

mod span;
#[cfg(test)]
mod tests;

pub use span::{
    SpanParts, put_attribute, put_event, put_event_attribute, put_link, put_span, put_span_parts,
    put_str_attribute, put_str_event_attribute,
};
