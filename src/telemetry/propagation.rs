//! W3C trace context and baggage in and out of HTTP headers.
//!
//! OpenTelemetry's global propagator is a no-op until someone installs one:
//! without [`install_propagator`] every hop starts a new trace and nothing
//! says so. [`crate::telemetry::init`] and [`crate::telemetry::TelemetryBuilder`]
//! call it; servers and clients then go through the helpers here, never
//! through a propagator of their own.
//!
//! A hop that records no span (export off, or the span filtered out) must
//! still pass the caller's context on, as Envoy and nginx do: the server
//! layers keep the caller's span context on their server span
//! ([`remember_caller`]) and the client side falls back to it
//! ([`caller_of`]) when its own span has no valid context. The spans exist
//! whatever the log filter says: the subscriber enables idgate's own spans
//! at INFO for this purpose ([`super::setup`]).
//!
//! tonic metadata is an `http::HeaderMap` underneath
//! (`tonic::metadata::MetadataMap::as_ref` / `into_headers`), and reqwest 0.13
//! uses `http` 1 headers, so one pair of helpers serves every hop.

use std::sync::Once;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::{
    Context, global,
    propagation::{Extractor, Injector, TextMapCompositePropagator},
    trace::{SpanContext, TraceContextExt, TraceFlags},
};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};

use super::journey::JOURNEY_REF_FIELD;
use crate::domain::JourneyRef;
use tracing::Span;
use tracing_subscriber::{
    Registry,
    registry::{LookupSpan, SpanRef},
};

/// Installs the W3C TraceContext + Baggage composite as the global
/// propagator. Idempotent and cheap after the first call.
pub fn install_propagator() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]));
    });
}

/// `traceparent`, the W3C trace context header.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate`, vendor data riding with `traceparent`.
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
/// `baggage`, the W3C baggage header.
const BAGGAGE: HeaderName = HeaderName::from_static("baggage");

/// The context carried by `headers` (`traceparent`, `tracestate`,
/// `baggage`). Malformed or non-UTF-8 values are ignored: the result is then
/// an empty context and the caller's span starts a new trace.
///
/// Most calls carry neither `traceparent` nor `baggage` (`tracestate` alone
/// means nothing): those skip the global propagator, its lock and its
/// parsers, and get what it would give them, the current context.
pub fn extract_from_http(headers: &HeaderMap) -> Context {
    if !headers.contains_key(TRACEPARENT) && !headers.contains_key(BAGGAGE) {
        return Context::current();
    }
    install_propagator();
    global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)))
}

/// Writes the W3C headers of an outgoing call made in `span_context`:
/// `traceparent` and `tracestate` when the context is valid, and `baggage`
/// holding `idgate.journey_ref` alone when `journey` is given (baggage
/// that came from the gateway's caller is not forwarded).
///
/// The same bytes [`inject_into_http`] writes for a context holding just
/// that span context and baggage (a test holds them equal), except that an
/// empty `tracestate` is left out rather than sent empty. Every upstream
/// call goes through here: writing the headers straight costs a small
/// fraction of building an OpenTelemetry `Context` and going through the
/// global propagator's lock, `format!` and percent-encoder.
pub fn inject_call(
    span_context: &SpanContext,
    journey: Option<&JourneyRef>,
    headers: &mut HeaderMap,
) {
    if span_context.is_valid() {
        // 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
        let mut value = [b'-'; 55];
        value[..2].copy_from_slice(b"00");
        let flags = (span_context.trace_flags() & TraceFlags::SAMPLED).to_u8();
        let trace_id = span_context.trace_id().to_bytes();
        let span_id = span_context.span_id().to_bytes();
        // Each slice is exactly the hex of its bytes: encoding cannot fail.
        let written = base16ct::lower::encode(&trace_id, &mut value[3..35]).is_ok()
            && base16ct::lower::encode(&span_id, &mut value[36..52]).is_ok()
            && base16ct::lower::encode(&[flags], &mut value[53..55]).is_ok();
        if written && let Ok(value) = HeaderValue::from_bytes(&value) {
            headers.insert(TRACEPARENT, value);
        }
        let state = span_context.trace_state().header();
        if !state.is_empty() {
            if let Ok(value) = HeaderValue::from_str(&state) {
                headers.insert(TRACESTATE, value);
            }
        }
    }
    if let Some(journey) = journey {
        // A journey reference is `j-` and hex digits: nothing in it needs
        // percent-encoding.
        let mut value = String::with_capacity(JOURNEY_REF_FIELD.len() + 1 + 18);
        value.push_str(JOURNEY_REF_FIELD);
        value.push('=');
        value.push_str(journey.as_str());
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(BAGGAGE, value);
        }
    }
}

/// Writes `cx` into `headers` as `traceparent`, `tracestate` and `baggage`,
/// replacing any value already there.
pub fn inject_into_http(cx: &Context, headers: &mut HeaderMap) {
    install_propagator();
    global::get_text_map_propagator(|p| p.inject_context(cx, &mut HeaderInjector(headers)));
}

/// The caller's span context, kept in a server span's extensions.
#[derive(Debug, Clone)]
struct CallerContext(SpanContext);

/// Keeps the span context of `caller` (the context a server extracted from
/// its request) on `span`, for [`caller_of`]. Does nothing when `caller`
/// carries no valid span context or `span` is disabled.
pub fn remember_caller(span: &Span, caller: &Context) {
    let span_context = caller.span().span_context().clone();
    if !span_context.is_valid() {
        return;
    }
    span.with_subscriber(|(id, dispatch)| {
        if let Some(span) = dispatch
            .downcast_ref::<Registry>()
            .and_then(|registry| registry.span(id))
        {
            span.extensions_mut().insert(CallerContext(span_context));
        }
    });
}

/// The caller's span context kept on `span` or its nearest ancestor by
/// [`remember_caller`]: what an outgoing call carries when the gateway's
/// own span has no context to propagate.
pub fn caller_of(span: &Span) -> Option<SpanContext> {
    let mut found = None;
    span.with_subscriber(|(id, dispatch)| {
        let Some(span) = dispatch
            .downcast_ref::<Registry>()
            .and_then(|registry| registry.span(id))
        else {
            return;
        };
        found = caller_in(&span);
    });
    found
}

/// [`caller_of`] for a span of the registry, as layers see it.
pub fn caller_in<S>(span: &SpanRef<'_, S>) -> Option<SpanContext>
where
    S: for<'a> LookupSpan<'a>,
{
    span.scope()
        .find_map(|s| s.extensions().get::<CallerContext>().map(|c| c.0.clone()))
}

/// Reads propagation fields from an `http::HeaderMap`.
pub struct HeaderExtractor<'a>(pub &'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Writes propagation fields into an `http::HeaderMap`; a field that is
/// not a valid header name or value is skipped rather than sent broken.
pub struct HeaderInjector<'a>(pub &'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::{
        KeyValue,
        baggage::BaggageExt,
        trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState},
    };

    use super::*;

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_header_becomes_a_remote_parent() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", HeaderValue::from_static(TRACEPARENT));
        let cx = extract_from_http(&headers);
        let span = cx.span();
        let sc = span.span_context();
        assert!(sc.is_valid() && sc.is_remote());
        assert_eq!(
            sc.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(sc.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
    }

    #[test]
    fn the_direct_injection_writes_what_the_propagator_writes() {
        let journey = JourneyRef::parse("j-0123456789abcdef").unwrap();
        for (flags, state) in [
            (TraceFlags::SAMPLED, TraceState::default()),
            (
                TraceFlags::default(),
                TraceState::from_key_value([("vendor", "opaque-7")]).unwrap(),
            ),
        ] {
            let sc = SpanContext::new(
                TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
                SpanId::from_hex("b7ad6b7169203331").unwrap(),
                flags,
                true,
                state,
            );
            let cx = crate::telemetry::journey::with_journey_baggage(
                &Context::new().with_remote_span_context(sc.clone()),
                &journey,
            );
            let mut by_propagator = HeaderMap::new();
            inject_into_http(&cx, &mut by_propagator);
            let mut direct = HeaderMap::new();
            inject_call(&sc, Some(&journey), &mut direct);
            if sc.trace_state().header().is_empty() {
                by_propagator.remove("tracestate");
            }
            assert_eq!(direct, by_propagator);
        }
        let mut none = HeaderMap::new();
        inject_call(&SpanContext::empty_context(), None, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn headers_without_trace_context_or_baggage_extract_the_current_context() {
        let mut headers = HeaderMap::new();
        headers.insert("tracestate", HeaderValue::from_static("vendor=opaque-7"));
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        let cx = extract_from_http(&headers);
        assert!(!cx.span().span_context().is_valid());
        assert_eq!(cx.baggage().len(), 0);
    }

    #[test]
    fn malformed_headers_yield_an_empty_context_without_panicking() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", HeaderValue::from_static("00-zz-garbage"));
        headers.insert("baggage", HeaderValue::from_bytes(b"\xff\xfe=1").unwrap());
        let cx = extract_from_http(&headers);
        assert!(!cx.span().span_context().is_valid());
        assert_eq!(cx.baggage().len(), 0);
    }

    #[test]
    fn injection_writes_traceparent_and_baggage_that_extraction_reads_back() {
        let sc = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
            SpanId::from_hex("b7ad6b7169203331").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new()
            .with_remote_span_context(sc)
            .with_baggage([KeyValue::new("idgate.journey_ref", "j-0123456789abcdef")]);
        let mut headers = HeaderMap::new();
        inject_into_http(&cx, &mut headers);
        assert_eq!(
            headers["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
        let back = extract_from_http(&headers);
        assert_eq!(
            back.span().span_context().trace_id(),
            cx.span().span_context().trace_id()
        );
        assert_eq!(
            back.baggage()
                .get("idgate.journey_ref")
                .map(|v| v.as_str().to_owned()),
            Some("j-0123456789abcdef".to_owned())
        );
    }
}
