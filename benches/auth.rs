//! What caller authentication costs per call on the public listener: a
//! bearer token already verified (the cache the hop sees on every call of
//! a caller after its first), a token verified from scratch (ES256 and
//! EdDSA signature checks), a token refused for its signature and sent
//! again (what a client stuck on a bad token, or a flood of them, costs),
//! and the open gateway (`[auth] mode = "none"`).
//!
//! `cargo bench --bench auth`

use std::{hint::black_box, sync::Arc};

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use idgate::auth::{AuthConfig, Authenticator, CallerConfig, NoEvents};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::json;

struct Key {
    alg: Algorithm,
    der: Vec<u8>,
    jwk: serde_json::Value,
}

fn key(kid: &str, alg: Algorithm) -> Key {
    let rcgen_alg = match alg {
        Algorithm::ES256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        _ => &rcgen::PKCS_ED25519,
    };
    let pair = rcgen::KeyPair::generate_for(rcgen_alg).expect("key");
    let raw = pair.public_key_raw();
    let jwk = match alg {
        Algorithm::ES256 => {
            json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": B64.encode(&raw[1..33]), "y": B64.encode(&raw[33..])})
        }
        _ => json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": B64.encode(raw)}),
    };
    Key {
        alg,
        der: pair.serialize_der(),
        jwk,
    }
}

fn token(key: &Key, kid: &str, n: u64) -> HeaderMap {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let mut header = Header::new(key.alg);
    header.kid = Some(kid.to_owned());
    let signing = match key.alg {
        Algorithm::ES256 => EncodingKey::from_ec_der(&key.der),
        _ => EncodingKey::from_ed_der(&key.der),
    };
    let claims = json!({"sub": "svc", "iss": "iss", "aud": "idgate", "exp": now + 3600, "jti": n});
    let jwt = encode(&header, &claims, &signing).expect("sign");
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {jwt}")).expect("header"),
    );
    headers
}

fn authenticators(rt: &tokio::runtime::Runtime) -> (Authenticator, Key, Key) {
    let es = key("es", Algorithm::ES256);
    let ed = key("ed", Algorithm::EdDSA);
    let path = std::env::temp_dir().join(format!("idgate-bench-jwks-{}.json", std::process::id()));
    std::fs::write(&path, json!({"keys": [es.jwk, ed.jwk]}).to_string()).expect("JWKS");
    let auth: AuthConfig = toml::from_str(&format!(
        "mode = \"jwt\"\n[jwt]\njwks_file = {path:?}\nissuer = \"iss\"\naudience = \"idgate\""
    ))
    .expect("[auth]");
    #[derive(serde::Deserialize)]
    struct Doc {
        callers: Vec<CallerConfig>,
    }
    let callers = toml::from_str::<Doc>(
        "[[callers]]\nname = \"svc\"\njwt_subject = \"svc\"\noperations = [\"session_3d\"]",
    )
    .expect("callers")
    .callers;
    let authenticator = rt
        .block_on(Authenticator::from_config(
            &auth,
            &callers,
            idgate::auth::Shares::UNBOUNDED,
            Arc::new(NoEvents),
        ))
        .expect("authenticator");
    let _ = std::fs::remove_file(&path);
    (authenticator, es, ed)
}

fn authentication(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (auth, es, ed) = authenticators(&rt);
    let extensions = http::Extensions::new();
    let cached = token(&es, "es", 0);
    c.bench_function("auth_cached_bearer_token", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(auth.authenticate(black_box(&cached), &extensions).await).expect("caller")
        })
    });
    for (name, key, kid) in [("es256", &es, "es"), ("eddsa", &ed, "ed")] {
        // A new token per iteration (signed outside the measurement):
        // every one is verified in full.
        let mut n = 0;
        c.bench_function(&format!("auth_first_verification_{name}"), |b| {
            b.to_async(&rt).iter_batched(
                || {
                    n += 1;
                    token(key, kid, n)
                },
                |headers| {
                    let auth = &auth;
                    let extensions = &extensions;
                    async move { black_box(auth.authenticate(&headers, extensions).await).is_ok() }
                },
                BatchSize::SmallInput,
            )
        });
    }
    // Signed by a key the JWKS does not hold, under a kid it does: the
    // signature check fails, every time the token is sent.
    let forged = token(&key("es", Algorithm::ES256), "es", 0);
    c.bench_function("auth_refused_token_sent_again", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(auth.authenticate(black_box(&forged), &extensions).await)
                .expect_err("refused")
        })
    });
    let open = Authenticator::open(Arc::new(NoEvents));
    let none = HeaderMap::new();
    c.bench_function("auth_open_gateway", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(open.authenticate(&none, &extensions).await).expect("open")
        })
    });
}

criterion_group!(benches, authentication);
criterion_main!(benches);
