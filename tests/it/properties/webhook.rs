//! Webhook authentication: any delivery fails with one of the documented
//! failures, a signature verifies exactly the delivery it signed (and only
//! among the first candidates), and a signing secret that does not parse
//! is refused without being quoted.

use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use idgate::events::{
    BasicCredentials, HmacSecret,
    delivery_proof::{self, AuthFailure},
};
use proptest::prelude::*;

use super::{any_bytes, any_text, cases, marker, quotes};

/// Header text: what `HeaderValue` takes (visible ASCII, space, tab and
/// obs-text bytes), near-valid forms included.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\t'), 0x80u8..=0xff], 0..80),
        "v1,[A-Za-z0-9+/=]{0,60}( v1,[A-Za-z0-9+/=]{0,60}){0,3}".prop_map(String::into_bytes),
        "[+-]?[0-9]{1,20}".prop_map(String::into_bytes),
        "(Basic|basic|Bearer|BASIC) *[A-Za-z0-9+/=:]{0,40}".prop_map(String::into_bytes),
    ]
}

fn secret() -> HmacSecret {
    HmacSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a valid secret")
}

fn headers(pairs: &[(&'static str, Option<Vec<u8>>)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        if let Some(v) = value.as_ref().and_then(|v| HeaderValue::from_bytes(v).ok()) {
            h.insert(*name, v);
        }
    }
    h
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Any headers and body: one of the documented failures, never a
    /// panic; Basic answers `None` or a verdict.
    #[test]
    fn webhook_verifier_refuses_arbitrary_deliveries_with_a_documented_failure(
        id in prop::option::of(header_bytes()),
        timestamp in prop::option::of(header_bytes()),
        signature in prop::option::of(header_bytes()),
        authorization in prop::option::of(header_bytes()),
        body in any_bytes(128),
        now in any::<i64>(),
        window in any::<u64>(),
    ) {
        let h = headers(&[
            (delivery_proof::HEADER_ID, id),
            (delivery_proof::HEADER_TIMESTAMP, timestamp),
            (delivery_proof::HEADER_SIGNATURE, signature),
            ("authorization", authorization),
        ]);
        match delivery_proof::check_signature(&h, &body, &secret(), now, window) {
            Ok(()) => prop_assert!(false, "an unsigned delivery was accepted"),
            Err(f) => prop_assert!(matches!(
                f,
                AuthFailure::InvalidSignature | AuthFailure::StaleTimestamp
            )),
        }
        let _ = delivery_proof::has_signature_headers(&h);
        if let Some(id) = delivery_proof::delivery_id(&h) {
            prop_assert!(!id.is_empty() && id.len() <= 256);
        }
        let creds = BasicCredentials {
            user: "vendor".into(),
            password: idgate::domain::Password::new("pa:ss"),
        };
        prop_assert_ne!(delivery_proof::check_basic(&h, &creds), Some(true));
    }

    /// A delivery signed by `sign` verifies inside the window and in no
    /// other case: not stale, not with another body, not with another id.
    #[test]
    fn webhook_signatures_verify_exactly_the_signed_delivery(
        id in "[!-~]{1,256}",
        ts in any::<i64>(),
        skew in any::<i64>(),
        window in 0u64..1_000_000,
        body in any_bytes(128),
        other_body in any_bytes(128),
    ) {
        let signature = delivery_proof::sign(&secret(), &id, ts, &body);
        let h = headers(&[
            (delivery_proof::HEADER_ID, Some(id.clone().into_bytes())),
            (delivery_proof::HEADER_TIMESTAMP, Some(ts.to_string().into_bytes())),
            (delivery_proof::HEADER_SIGNATURE, Some(signature.into_bytes())),
        ]);
        let now = ts.wrapping_add(skew % 2_000_000);
        let expected = if now.abs_diff(ts) <= window {
            Ok(())
        } else {
            Err(AuthFailure::StaleTimestamp)
        };
        prop_assert_eq!(delivery_proof::check_signature(&h, &body, &secret(), now, window), expected);
        if other_body != body {
            prop_assert_eq!(
                delivery_proof::check_signature(&h, &other_body, &secret(), now, window),
                Err(AuthFailure::InvalidSignature)
            );
        }
    }

    /// Only the first `MAX_SIGNATURE_CANDIDATES` `v1,` signatures are
    /// tried: the right one among them verifies, after them it does not,
    /// however many candidates (and other versions) the header packs.
    #[test]
    fn webhook_signatures_past_the_candidate_cap_are_not_tried(
        decoys in prop::collection::vec(prop_oneof![
            any_bytes(32).prop_map(|b| format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(b))),
            "v2,[A-Za-z0-9+/]{4,44}",
            "v1,[!-~]{0,20}",
        ], 0..24),
        at in 0usize..24,
    ) {
        let body = b"{}";
        let ts = 1_700_000_000;
        let mut candidates = decoys.clone();
        let at = at.min(candidates.len());
        candidates.insert(at, delivery_proof::sign(&secret(), "msg_1", ts, body));
        let h = headers(&[
            (delivery_proof::HEADER_ID, Some(b"msg_1".to_vec())),
            (delivery_proof::HEADER_TIMESTAMP, Some(ts.to_string().into_bytes())),
            (delivery_proof::HEADER_SIGNATURE, Some(candidates.join(" ").into_bytes())),
        ]);
        let v1_before = candidates[..at].iter().filter(|c| c.starts_with("v1,")).count();
        let expected = if v1_before < delivery_proof::MAX_SIGNATURE_CANDIDATES {
            Ok(())
        } else {
            Err(AuthFailure::InvalidSignature)
        };
        prop_assert_eq!(delivery_proof::check_signature(&h, body, &secret(), ts, 300), expected);
    }

    /// A signing secret from the configuration: accepted, or refused with
    /// an error that does not quote it.
    #[test]
    fn webhook_secret_parses_or_gives_a_value_free_error(
        text in prop_oneof![
            any_text(64),
            "(whsec_)?[A-Za-z0-9+/]{0,60}={0,2}",
            marker().prop_map(|m| format!("whsec_{m}")),
        ],
    ) {
        if let Err(e) = HmacSecret::parse(&text) {
            let e = e.to_string();
            prop_assert!(e.starts_with("invalid configuration: webhook HMAC secret must"), "{}", e);
            prop_assert!(!quotes(&e, &text), "{}", e);
        }
    }
}
