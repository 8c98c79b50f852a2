//! What proves a webhook delivery came from the vendor: HTTP Basic
//! credentials, or a Standard Webhooks HMAC-SHA256 signature over the raw
//! body.
//!
//! Every comparison of a secret is constant-time: Basic credentials are
//! compared as SHA-256 digests (so lengths do not leak either), signatures
//! through `hmac`'s `verify_slice`.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::HeaderMap;
use sha2::Sha256;

use super::{BasicCredentials, HmacSecret};
use crate::domain::{authorization_credentials, secrets_match};

/// Standard Webhooks header: the delivery's unique id.
pub const HEADER_ID: &str = "webhook-id";
/// Standard Webhooks header: seconds since the Unix epoch.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Standard Webhooks header: space-separated `v1,<base64>` signatures.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Longest `webhook-id` accepted; it is also the dedupe key.
const MAX_ID_LEN: usize = 256;

/// Most `v1,` signatures of one `webhook-signature` header tried (a sender
/// rotating keys sends two or three); the rest are ignored, so a peer
/// cannot make one request cost an HMAC comparison per candidate it packs
/// into the header.
pub const MAX_SIGNATURE_CANDIDATES: usize = 8;

/// Why a delivery failed authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No credentials of any configured kind.
    Missing,
    /// Basic credentials that do not match.
    InvalidCredentials,
    /// Signature headers malformed, or no signature matches.
    InvalidSignature,
    /// A correctly signed delivery whose timestamp is outside the window.
    StaleTimestamp,
}

/// Verifies HTTP Basic `Authorization` against `expected`.
/// `None` when the request carries no Basic credentials at all.
pub fn check_basic(headers: &HeaderMap, expected: &BasicCredentials) -> Option<bool> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = authorization_credentials(value, "basic")?;
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return Some(false);
    };
    let Some(colon) = decoded.iter().position(|b| *b == b':') else {
        return Some(false);
    };
    let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
    // `&`, not `&&`: both are compared whatever the first says.
    let user_ok = secrets_match(user, &expected.user);
    let password_ok = secrets_match(password, expected.password.expose());
    Some(user_ok & password_ok)
}

/// With Basic the only method configured (`hmac` false), the verdict of
/// the headers alone, so that a refusal never reads the body; `None` when
/// a signature may also authenticate (it covers the body) or Basic is not
/// configured.
pub fn basic_only(
    headers: &HeaderMap,
    basic: Option<&BasicCredentials>,
    hmac: bool,
) -> Option<Result<(), AuthFailure>> {
    let basic = basic.filter(|_| !hmac)?;
    Some(match check_basic(headers, basic) {
        Some(true) => Ok(()),
        Some(false) => Err(AuthFailure::InvalidCredentials),
        None => Err(AuthFailure::Missing),
    })
}

/// True when the request carries any Standard Webhooks header.
pub fn has_signature_headers(headers: &HeaderMap) -> bool {
    headers.contains_key(HEADER_SIGNATURE)
        || headers.contains_key(HEADER_TIMESTAMP)
        || headers.contains_key(HEADER_ID)
}

/// The `webhook-id` header, when present, printable and short.
pub fn delivery_id(headers: &HeaderMap) -> Option<&str> {
    let id = headers.get(HEADER_ID)?.to_str().ok()?.trim();
    (!id.is_empty() && id.len() <= MAX_ID_LEN).then_some(id)
}

/// Verifies a Standard Webhooks signature over the raw `body`, then the
/// timestamp against `now_unix` ± `window_secs`. The signature is checked
/// first so that an unsigned request learns nothing about the clock. Only
/// the first [`MAX_SIGNATURE_CANDIDATES`] `v1,` signatures are tried.
pub fn check_signature(
    headers: &HeaderMap,
    body: &[u8],
    secret: &HmacSecret,
    now_unix: i64,
    window_secs: u64,
) -> Result<(), AuthFailure> {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .map(str::trim)
    };
    let (Some(id), Some(timestamp), Some(signatures)) = (
        delivery_id(headers),
        header(HEADER_TIMESTAMP),
        header(HEADER_SIGNATURE),
    ) else {
        return Err(AuthFailure::InvalidSignature);
    };
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| AuthFailure::InvalidSignature)?;
    let mac = mac(secret, id, timestamp, body).ok_or(AuthFailure::InvalidSignature)?;
    let matched = signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .take(MAX_SIGNATURE_CANDIDATES)
        .filter_map(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        // Checks every candidate, without stopping at the first match.
        .fold(false, |found, sig| {
            mac.clone().verify_slice(&sig).is_ok() | found
        });
    if !matched {
        return Err(AuthFailure::InvalidSignature);
    }
    if now_unix.abs_diff(ts) > window_secs {
        return Err(AuthFailure::StaleTimestamp);
    }
    Ok(())
}

/// The HMAC-SHA256 state over a delivery's signed content,
/// `{id}.{timestamp}.{body}`, with `timestamp` as the header carries it.
/// `None` never happens in practice: HMAC takes a key of any length.
fn mac(secret: &HmacSecret, id: &str, timestamp: &str, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.key()).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// Computes the `v1,<base64>` signature of a delivery: what a sender puts in
/// `webhook-signature`. Used by the integration tests to sign deliveries
/// (the embedded sandbox has its own signer, as an independent sender).
pub fn sign(secret: &HmacSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let Some(mac) = mac(secret, id, &timestamp.to_string(), body) else {
        return String::new();
    };
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Password;

    /// The test vector published with the Standard Webhooks specification.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn secret() -> HmacSecret {
        HmacSecret::parse(SECRET).unwrap()
    }

    fn signed(sig: &str, ts: i64) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER_ID, ID.parse().unwrap());
        h.insert(HEADER_TIMESTAMP, ts.to_string().parse().unwrap());
        h.insert(HEADER_SIGNATURE, sig.parse().unwrap());
        h
    }

    fn basic_header(user: &str, pass: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        h.insert(
            http::header::AUTHORIZATION,
            format!("Basic {token}").parse().unwrap(),
        );
        h
    }

    fn creds() -> BasicCredentials {
        BasicCredentials {
            user: "vendor".into(),
            password: Password::new("pa:ss"),
        }
    }

    #[test]
    fn signing_matches_the_standard_webhooks_test_vector() {
        assert_eq!(sign(&secret(), ID, TS, BODY), SIG);
    }

    #[test]
    fn a_valid_signature_inside_the_window_is_accepted() {
        assert_eq!(
            check_signature(&signed(SIG, TS), BODY, &secret(), TS + 299, 300),
            Ok(())
        );
    }

    #[test]
    fn one_valid_signature_among_several_is_enough() {
        let sigs = format!("v1,AAAA v1a,whatever {SIG} v2,xyz");
        assert_eq!(
            check_signature(&signed(&sigs, TS), BODY, &secret(), TS, 300),
            Ok(())
        );
    }

    #[test]
    fn a_tampered_body_or_wrong_secret_is_refused() {
        assert_eq!(
            check_signature(&signed(SIG, TS), br#"{"test": 1}"#, &secret(), TS, 300),
            Err(AuthFailure::InvalidSignature)
        );
        let other = HmacSecret::parse("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").unwrap();
        assert_eq!(
            check_signature(&signed(SIG, TS), BODY, &other, TS, 300),
            Err(AuthFailure::InvalidSignature)
        );
    }

    #[test]
    fn timestamps_outside_the_window_are_refused_in_both_directions() {
        for now in [TS + 301, TS - 301] {
            assert_eq!(
                check_signature(&signed(SIG, TS), BODY, &secret(), now, 300),
                Err(AuthFailure::StaleTimestamp)
            );
        }
    }

    #[test]
    fn missing_or_malformed_signature_headers_are_refused() {
        let mut h = signed(SIG, TS);
        h.remove(HEADER_ID);
        assert_eq!(
            check_signature(&h, BODY, &secret(), TS, 300),
            Err(AuthFailure::InvalidSignature)
        );
        let mut h = signed(SIG, TS);
        h.insert(HEADER_TIMESTAMP, "yesterday".parse().unwrap());
        assert_eq!(
            check_signature(&h, BODY, &secret(), TS, 300),
            Err(AuthFailure::InvalidSignature)
        );
        assert_eq!(
            check_signature(&signed("v1,!!notbase64", TS), BODY, &secret(), TS, 300),
            Err(AuthFailure::InvalidSignature)
        );
    }

    #[test]
    fn basic_credentials_must_match_user_and_password() {
        assert_eq!(
            check_basic(&basic_header("vendor", "pa:ss"), &creds()),
            Some(true)
        );
        assert_eq!(
            check_basic(&basic_header("vendor", "pa:sx"), &creds()),
            Some(false)
        );
        assert_eq!(
            check_basic(&basic_header("vendo", "pa:ss"), &creds()),
            Some(false)
        );
        assert_eq!(check_basic(&HeaderMap::new(), &creds()), None);
        let mut bearer = HeaderMap::new();
        bearer.insert(http::header::AUTHORIZATION, "Bearer x".parse().unwrap());
        assert_eq!(check_basic(&bearer, &creds()), None);
        let mut garbage = HeaderMap::new();
        garbage.insert(http::header::AUTHORIZATION, "Basic ***".parse().unwrap());
        assert_eq!(check_basic(&garbage, &creds()), Some(false));
    }
}
