//! Journey correlation: every span of a journey carries
//! `idgate.journey_ref`, so one query finds the whole journey across calls
//! and traces.
//!
//! How it gets there:
//! - every span opened by [`super::grpc`], [`super::http`] and
//!   [`super::client`] declares the field empty;
//! - the API layer calls [`record_journey`] on the server span (handed to it
//!   as the [`super::ServerSpan`] request extension) once it knows the
//!   journey, and the REST client passes the reference to
//!   [`super::UpstreamRequest::journey`];
//! - the client span puts the reference in W3C baggage, so the next hop (the
//!   sandbox, or another idgate) records it on its own server span (a gRPC
//!   server span only once the caller is known: [`trust_baggage`]);
//! - spans of other code record it with [`record_journey`] too: if such a
//!   span did not declare the field, the attribute is set on its
//!   OpenTelemetry span directly.
//!
//! The reference is a truncated hash of the appkey: safe to show, grants
//! nothing. Baggage arriving from outside is parsed as a [`JourneyRef`] and
//! dropped when it is not one, so a caller cannot write free text into
//! spans through it.

use super::spans::SpanExt as _;
use opentelemetry::{Context, KeyValue, baggage::BaggageExt};
use tracing::Span;

use super::{ServerSpan, TelemetryConfig};
use crate::domain::{CustomerReference, JourneyRef};

/// Span field and baggage key of the journey reference.
pub const JOURNEY_REF_FIELD: &str = "idgate.journey_ref";

/// Span field of the caller's customer reference (opt-in).
pub const CUSTOMER_REFERENCE_FIELD: &str = "idgate.customer_reference";

/// Sets `idgate.journey_ref` on `span`: through the declared field when the
/// span has one (so logs show it too), else on the OpenTelemetry span.
pub fn record_journey(span: &Span, journey: &JourneyRef) {
    record_str(span, JOURNEY_REF_FIELD, journey.as_str());
}

/// Sets `idgate.customer_reference` on `span`, only when the configuration
/// allows it.
pub fn record_customer_reference(
    span: &Span,
    reference: &CustomerReference,
    config: &TelemetryConfig,
) {
    if config.record_customer_reference {
        record_str(span, CUSTOMER_REFERENCE_FIELD, reference.as_str());
    }
}

fn record_str(span: &Span, field: &'static str, value: &str) {
    if span.field(field).is_some() {
        span.record(field, value);
    } else {
        span.set_attribute(field, value.to_owned());
    }
}

/// The journey reference a call's `baggage` names, left in the request's
/// extensions by the server layer ([`super::grpc`]) and not recorded
/// until the caller is known: otherwise a caller refused at the door
/// could write any journey's reference into the logs and records of its
/// refused call.
#[derive(Debug, Clone)]
pub struct BaggageJourney(pub(super) JourneyRef);

/// The caller of the request of `extensions` is known (authenticated, or
/// the open caller of a gateway that runs open): the journey its baggage
/// names, if any, is recorded on the server span from now on.
pub fn trust_baggage(extensions: &http::Extensions) {
    if let (Some(BaggageJourney(journey)), Some(ServerSpan(span))) =
        (extensions.get(), extensions.get())
    {
        record_journey(span, journey);
    }
}

/// The journey reference carried as baggage by `cx`, when it is a valid
/// reference.
pub fn journey_from_context(cx: &Context) -> Option<JourneyRef> {
    cx.baggage()
        .get(JOURNEY_REF_FIELD)
        .and_then(|v| JourneyRef::parse(v.as_str()))
}

/// `cx` with the journey reference added to its baggage, for the next hop.
pub fn with_journey_baggage(cx: &Context, journey: &JourneyRef) -> Context {
    cx.with_baggage([KeyValue::new(
        JOURNEY_REF_FIELD,
        journey.as_str().to_owned(),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Appkey;

    #[test]
    fn baggage_that_is_not_a_journey_reference_is_dropped() {
        let cx = Context::new().with_baggage([KeyValue::new(JOURNEY_REF_FIELD, "João da Silva")]);
        assert_eq!(journey_from_context(&cx), None);
    }

    #[test]
    fn journey_baggage_round_trips() {
        let j = JourneyRef::from_appkey(&Appkey::new("k"));
        let cx = with_journey_baggage(&Context::new(), &j);
        assert_eq!(journey_from_context(&cx), Some(j));
    }
}
