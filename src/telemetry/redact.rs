//! Redaction by construction.
//!
//! Secrets and personal data stay out of telemetry because nothing puts
//! them there: the domain newtypes print `<redacted>` under `Debug`, request
//! and response bodies and header values are never recorded, URLs are
//! recorded as path templates without queries, and metric labels come from
//! fixed sets. What this module adds is a tripwire: a span field whose
//! *name* says it holds a secret or personal data is a bug, and
//! [`forbidden_field`] finds it. Tests run it over every span this module
//! opens; other modules can run it over theirs.

use tracing::Span;

/// Words that must not appear as a segment (split on `.` and `_`) of a
/// span field name.
pub const FORBIDDEN_WORDS: [&str; 14] = [
    "appkey",
    "token",
    "cpf",
    "name",
    "nome",
    "password",
    "pass",
    "secret",
    "birth",
    "nascimento",
    "image",
    "images",
    "authorization",
    "cookie",
];

/// Field names allowed despite a forbidden segment: conventions whose value
/// is never user data (`otel.name` is the span name template).
const ALLOWED: [&str; 1] = ["otel.name"];

/// True when `field` names a secret or personal data.
pub fn is_forbidden_field_name(field: &str) -> bool {
    if ALLOWED.contains(&field) {
        return false;
    }
    field
        .split(['.', '_'])
        .any(|segment| FORBIDDEN_WORDS.contains(&segment.to_ascii_lowercase().as_str()))
}

/// The first forbidden field name declared by `span`, if any.
pub fn forbidden_field(span: &Span) -> Option<&'static str> {
    span.metadata()?
        .fields()
        .iter()
        .map(|f| f.name())
        .find(|name| is_forbidden_field_name(name))
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::{
        domain::Operation,
        telemetry::{Metrics, UpstreamCall, UpstreamRequest},
    };

    #[test]
    fn secret_looking_names_are_caught_and_conventions_are_not() {
        for bad in [
            "appkey",
            "idgate.appkey",
            "session_token",
            "end_user.cpf",
            "user.name",
        ] {
            assert!(is_forbidden_field_name(bad), "{bad}");
        }
        for good in ["otel.name", "idgate.journey_ref", "rpc.method", "url.path"] {
            assert!(!is_forbidden_field_name(good), "{good}");
        }
    }

    #[test]
    fn spans_opened_by_telemetry_declare_no_forbidden_field() {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            // Other tests of this binary reach the same callsites with no
            // subscriber; whichever came first may have cached "never"
            // for them. Recompute interest now that this one is current.
            tracing::callsite::rebuild_interest_cache();
            let metrics = Metrics::default();
            let call = UpstreamCall::start(
                &metrics,
                UpstreamRequest::new(Operation::Appkey, &Method::POST, "http://h/p"),
            );
            let spans = [
                call.span().clone(),
                crate::telemetry::grpc::server_span("a.B/C", "a.B", "C"),
                crate::telemetry::http::server_span("POST", Some("/x")),
            ];
            for span in &spans {
                assert!(span.metadata().is_some(), "span must be enabled");
                assert_eq!(forbidden_field(span), None);
            }
            let leaky = tracing::info_span!("leaky", idgate.appkey = "x");
            assert_eq!(forbidden_field(&leaky), Some("idgate.appkey"));
        });
    }
}
