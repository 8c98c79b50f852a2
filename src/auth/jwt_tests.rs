//! Every verification rule, with keys made in the test.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use super::*;
use crate::auth::{
    NoEvents,
    config::JwksLocation,
    jwks::{Jwks, Refresh},
};

const ISS: &str = "https://issuer.test";
const AUD: &str = "idgate";

/// A signing key and the public JWK of it.
pub(crate) struct TestKey {
    pub(crate) kid: String,
    pub(crate) alg: Algorithm,
    der: Vec<u8>,
    pub(crate) public_raw: Vec<u8>,
}

impl TestKey {
    pub(crate) fn es256(kid: &str) -> Self {
        Self::new(kid, Algorithm::ES256, &rcgen::PKCS_ECDSA_P256_SHA256)
    }

    pub(crate) fn ed25519(kid: &str) -> Self {
        Self::new(kid, Algorithm::EdDSA, &rcgen::PKCS_ED25519)
    }

    fn new(kid: &str, alg: Algorithm, rcgen_alg: &'static rcgen::SignatureAlgorithm) -> Self {
        let pair = rcgen::KeyPair::generate_for(rcgen_alg).unwrap();
        Self {
            kid: kid.to_owned(),
            alg,
            der: pair.serialize_der(),
            public_raw: pair.public_key_raw().to_vec(),
        }
    }

    pub(crate) fn jwk(&self) -> Value {
        match self.alg {
            Algorithm::ES256 => {
                let (x, y) = self.public_raw[1..].split_at(32);
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "x": B64.encode(x), "y": B64.encode(y)})
            }
            _ => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": B64.encode(&self.public_raw)})
            }
        }
    }

    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        let key = match self.alg {
            Algorithm::ES256 => EncodingKey::from_ec_der(&self.der),
            _ => EncodingKey::from_ed_der(&self.der),
        };
        encode(&header, claims, &key).unwrap()
    }
}

pub(crate) fn jwks_of(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims() -> Value {
    json!({"sub": "svc-a", "iss": ISS, "aud": AUD, "exp": now() + 300, "iat": now()})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

/// A verifier on a JWKS file; the file's directory goes with the fixture.
struct Fixture {
    verifier: JwtVerifier,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

async fn fixture(keys: &[&TestKey], subject_claim: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks_of(keys)).unwrap();
    let config: JwtConfig = toml::from_str(&format!(
        "jwks_file = {path:?}\nissuer = {ISS:?}\naudience = {AUD:?}\nsubject_claim = {subject_claim:?}"
    ))
    .unwrap();
    let refresh = Refresh {
        every: Duration::from_secs(300),
        min_interval: Duration::from_secs(30),
        timeout: Duration::from_secs(1),
    };
    let jwks = Jwks::load(
        &JwksLocation::File(path.clone()),
        refresh,
        Arc::new(NoEvents),
    )
    .await
    .unwrap();
    Fixture {
        verifier: JwtVerifier::new(&config, jwks),
        path,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_valid_token_gives_its_subject_for_each_key_type() {
    let es = TestKey::es256("es");
    let ed = TestKey::ed25519("ed");
    let f = fixture(&[&es, &ed], "sub").await;
    for key in [&es, &ed] {
        let token = key.sign(&claims());
        assert_eq!(&*f.verifier.verify(&token).await.unwrap(), "svc-a");
        // Remembered: the same answer again.
        assert_eq!(&*f.verifier.verify(&token).await.unwrap(), "svc-a");
    }
}

#[tokio::test]
async fn time_claims_are_checked_with_the_leeway() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let v = &f.verifier;
    let expired = key.sign(&with(claims(), "exp", json!(now() - 120)));
    assert_eq!(
        v.verify(&expired).await.map_err(|r| r.refusal),
        Err(JwtRefusal::Expired)
    );
    let within_leeway = key.sign(&with(claims(), "exp", json!(now() - 5)));
    assert!(v.verify(&within_leeway).await.is_ok());
    let early = key.sign(&with(claims(), "nbf", json!(now() + 120)));
    assert_eq!(
        v.verify(&early).await.map_err(|r| r.refusal),
        Err(JwtRefusal::NotYetValid)
    );
    let no_exp = key.sign(&without(claims(), "exp"));
    assert_eq!(
        v.verify(&no_exp).await.map_err(|r| r.refusal),
        Err(JwtRefusal::MissingClaim)
    );
}

#[tokio::test]
async fn time_claims_at_the_edge_of_the_integer_range_saturate_rather_than_overflow() {
    // An `exp` a signer set to "never" (u64::MAX), and an `nbf` of zero or
    // of the far future: answered, never a panic or a wrapped sum.
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let v = &f.verifier;
    let forever = key.sign(&with(claims(), "exp", json!(u64::MAX)));
    assert_eq!(&*v.verify(&forever).await.unwrap(), "svc-a");
    // Remembered (for the cache's own bound, not for u64::MAX seconds).
    assert_eq!(&*v.verify(&forever).await.unwrap(), "svc-a");
    let since_epoch = key.sign(&with(claims(), "nbf", json!(0)));
    assert!(v.verify(&since_epoch).await.is_ok());
    let far_future = key.sign(&with(claims(), "nbf", json!(u64::MAX)));
    assert_eq!(
        v.verify(&far_future).await.map_err(|r| r.refusal),
        Err(JwtRefusal::NotYetValid)
    );
}

#[tokio::test]
async fn issuer_and_audience_must_match_and_be_present() {
    let key = TestKey::ed25519("k");
    let f = fixture(&[&key], "sub").await;
    let v = &f.verifier;
    for (token, want) in [
        (
            key.sign(&with(claims(), "aud", json!("other"))),
            JwtRefusal::Audience,
        ),
        (
            key.sign(&with(claims(), "aud", json!(["other", "x"]))),
            JwtRefusal::Audience,
        ),
        (key.sign(&without(claims(), "aud")), JwtRefusal::Audience),
        (
            key.sign(&with(claims(), "iss", json!("https://evil.test"))),
            JwtRefusal::Issuer,
        ),
        (key.sign(&without(claims(), "iss")), JwtRefusal::Issuer),
    ] {
        assert_eq!(v.verify(&token).await.map_err(|r| r.refusal), Err(want));
    }
    let among = key.sign(&with(claims(), "aud", json!(["other", AUD])));
    assert!(v.verify(&among).await.is_ok());
}

#[tokio::test]
async fn a_signature_by_another_key_under_the_same_kid_is_refused() {
    let key = TestKey::es256("k");
    let impostor = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let token = impostor.sign(&claims());
    assert_eq!(
        f.verifier.verify(&token).await.map_err(|r| r.refusal),
        Err(JwtRefusal::Signature)
    );
    let mut tampered = key.sign(&claims());
    let payload = B64.encode(with(claims(), "sub", json!("svc-root")).to_string());
    let parts: Vec<&str> = tampered.split('.').collect();
    tampered = format!("{}.{payload}.{}", parts[0], parts[2]);
    assert_eq!(
        f.verifier.verify(&tampered).await.map_err(|r| r.refusal),
        Err(JwtRefusal::Signature)
    );
}

#[tokio::test]
async fn alg_none_is_refused() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    for header in [json!({"alg": "none", "kid": "k"}), json!({"alg": "none"})] {
        let token = format!(
            "{}.{}.",
            B64.encode(header.to_string()),
            B64.encode(claims().to_string())
        );
        let refused = f
            .verifier
            .verify(&token)
            .await
            .map_err(|r| r.refusal)
            .unwrap_err();
        assert!(
            matches!(refused, JwtRefusal::Malformed | JwtRefusal::Algorithm),
            "{refused:?}"
        );
    }
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_refused() {
    let key = TestKey::ed25519("k");
    let f = fixture(&[&key], "sub").await;
    let secrets = [key.public_raw.clone(), key.jwk().to_string().into_bytes()];
    for secret in secrets {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k".into());
        let token = encode(&header, &claims(), &EncodingKey::from_secret(&secret)).unwrap();
        assert_eq!(
            f.verifier.verify(&token).await.map_err(|r| r.refusal),
            Err(JwtRefusal::Algorithm)
        );
    }
}

#[tokio::test]
async fn an_unknown_kid_is_refused_and_a_lone_key_serves_tokens_without_kid() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let stranger = TestKey::es256("other");
    assert_eq!(
        f.verifier
            .verify(&stranger.sign(&claims()))
            .await
            .map_err(|r| r.refusal),
        Err(JwtRefusal::UnknownKey)
    );
    let mut header = Header::new(Algorithm::ES256);
    header.kid = None;
    let token = encode(&header, &claims(), &EncodingKey::from_ec_der(&key.der)).unwrap();
    assert!(f.verifier.verify(&token).await.is_ok());
}

#[tokio::test]
async fn the_subject_comes_from_the_configured_claim() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "client_id").await;
    let token = key.sign(&with(claims(), "client_id", json!("onboarding-api")));
    assert_eq!(&*f.verifier.verify(&token).await.unwrap(), "onboarding-api");
    for bad in [json!(""), json!(42)] {
        let token = key.sign(&with(claims(), "client_id", bad));
        assert_eq!(
            f.verifier.verify(&token).await.map_err(|r| r.refusal),
            Err(JwtRefusal::MissingClaim)
        );
    }
    let token = key.sign(&claims());
    assert_eq!(
        f.verifier.verify(&token).await.map_err(|r| r.refusal),
        Err(JwtRefusal::MissingClaim)
    );
}

#[tokio::test]
async fn a_remembered_token_is_checked_again_once_the_keys_change() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let token = key.sign(&claims());
    assert!(f.verifier.verify(&token).await.is_ok());
    // The issuer rotates: same kid, new key; the file is re-read (SIGHUP).
    let rotated = TestKey::es256("k");
    std::fs::write(&f.path, jwks_of(&[&rotated])).unwrap();
    f.verifier.jwks().reload().await.unwrap();
    assert_eq!(
        f.verifier.verify(&token).await.map_err(|r| r.refusal),
        Err(JwtRefusal::Signature)
    );
    assert!(f.verifier.verify(&rotated.sign(&claims())).await.is_ok());
    // A broken file keeps the last good keys.
    std::fs::write(&f.path, "{not json").unwrap();
    assert!(f.verifier.jwks().reload().await.is_err());
    assert!(f.verifier.verify(&rotated.sign(&claims())).await.is_ok());
}

#[tokio::test]
async fn a_refused_token_sent_again_is_refused_from_memory_with_its_cause() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let forged = TestKey::es256("k").sign(&claims());
    let first = f.verifier.verify(&forged).await.unwrap_err();
    assert_eq!(
        (first.refusal, first.remembered),
        (JwtRefusal::Signature, false)
    );
    let again = f.verifier.verify(&forged).await.unwrap_err();
    assert_eq!(
        (again.refusal, again.remembered),
        (JwtRefusal::Signature, true)
    );
    // A good token is not refused for its neighbour's sake.
    assert!(f.verifier.verify(&key.sign(&claims())).await.is_ok());
}

#[tokio::test]
async fn a_refusal_that_time_or_a_key_rotation_may_undo_is_checked_again() {
    let key = TestKey::es256("k");
    let f = fixture(&[&key], "sub").await;
    let early = key.sign(&with(claims(), "nbf", json!(now() + 3600)));
    for _ in 0..2 {
        let refused = f.verifier.verify(&early).await.unwrap_err();
        assert!(!refused.remembered, "nbf is reached in time");
    }
    // A token of a key the issuer has not published yet...
    let next = TestKey::es256("next");
    let token = next.sign(&claims());
    assert!(f.verifier.verify(&token).await.is_err());
    assert!(f.verifier.verify(&token).await.unwrap_err().remembered);
    // ...is served once the key set that holds its key is read.
    std::fs::write(&f.path, jwks_of(&[&key, &next])).unwrap();
    f.verifier.jwks().reload().await.unwrap();
    assert!(f.verifier.verify(&token).await.is_ok());
}
