//! Callers' credentials for tests: signing keys made per test (rcgen),
//! their public JWKS, tokens signed with them (and forged ones), and a
//! JWKS URL served by a local axum server whose key set a test can rotate.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use axum::{Router, extract::State, http::StatusCode, routing::get};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use idgate::auth::{AuthConfig, AuthMode, CallerConfig, JwtConfig};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

/// The issuer and audience every test token names.
pub const ISSUER: &str = "https://issuer.idgate.test";
pub const AUDIENCE: &str = "idgate";

/// A signing key and its public JWK.
pub struct TestKey {
    pub kid: String,
    alg: Algorithm,
    der: Vec<u8>,
    public_raw: Vec<u8>,
}

impl TestKey {
    /// An ES256 (P-256) key.
    pub fn es256(kid: &str) -> Self {
        Self::new(kid, Algorithm::ES256, &rcgen::PKCS_ECDSA_P256_SHA256)
    }

    /// An EdDSA (Ed25519) key.
    pub fn ed25519(kid: &str) -> Self {
        Self::new(kid, Algorithm::EdDSA, &rcgen::PKCS_ED25519)
    }

    fn new(kid: &str, alg: Algorithm, rcgen_alg: &'static rcgen::SignatureAlgorithm) -> Self {
        let pair = rcgen::KeyPair::generate_for(rcgen_alg).expect("key pair");
        Self {
            kid: kid.to_owned(),
            alg,
            der: pair.serialize_der(),
            public_raw: pair.public_key_raw().to_vec(),
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
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

    /// `claims` signed with this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        let key = match self.alg {
            Algorithm::ES256 => EncodingKey::from_ec_der(&self.der),
            _ => EncodingKey::from_ed_der(&self.der),
        };
        encode(&header, claims, &key).expect("sign")
    }

    /// A token for `subject`, valid for five minutes.
    pub fn token(&self, subject: &str) -> String {
        self.sign(&claims(subject))
    }

    /// `claims` "signed" with HS256 over this key's public bytes: the
    /// algorithm-confusion forgery.
    pub fn hs256_forgery(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(self.kid.clone());
        encode(&header, claims, &EncodingKey::from_secret(&self.public_raw)).expect("sign")
    }
}

/// `claims` with `alg: none` and no signature.
pub fn unsigned(kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "none", "typ": "JWT", "kid": kid});
    format!(
        "{}.{}.",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// Valid claims for `subject`.
pub fn claims(subject: &str) -> Value {
    json!({"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "iat": now(), "exp": now() + 300})
}

/// A JWKS document of `keys`.
pub fn jwks_of(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

/// `[auth]` with `mode = "jwt"`, keys from `jwks_file` or `jwks_url`.
pub fn jwt_auth(jwks_file: Option<std::path::PathBuf>, jwks_url: Option<String>) -> AuthConfig {
    let text =
        format!("issuer = {ISSUER:?}\naudience = {AUDIENCE:?}\nmin_refresh_interval_secs = 1");
    let mut jwt: JwtConfig = toml::from_str(&text).expect("[auth.jwt]");
    jwt.jwks_file = jwks_file;
    jwt.jwks_url = jwks_url;
    AuthConfig {
        mode: AuthMode::Jwt,
        jwt: Some(jwt),
        // The test gateways' public listener is plain HTTP/2 on loopback.
        allow_plaintext_tokens: true,
    }
}

/// `[[callers]]` entries from TOML text.
pub fn callers(text: &str) -> Vec<CallerConfig> {
    #[derive(serde::Deserialize)]
    struct Doc {
        callers: Vec<CallerConfig>,
    }
    toml::from_str::<Doc>(text).expect("[[callers]]").callers
}

/// A JWKS file in the temporary directory, removed with the test
/// ([`super::temp::file`]).
pub fn jwks_file(keys: &[&TestKey]) -> std::path::PathBuf {
    super::temp::file("jwks", jwks_of(keys).as_bytes())
}

#[derive(Default)]
struct Published {
    document: Mutex<String>,
    /// 0: answer 200 with the document; else this status.
    failing_with: AtomicU16,
    fetches: AtomicU64,
}

/// A JWKS URL on loopback whose key set the test controls.
pub struct JwksServer {
    pub addr: SocketAddr,
    published: Arc<Published>,
    scheme: &'static str,
}

impl JwksServer {
    /// Serves `keys` at `/jwks.json`, over plain HTTP on loopback.
    pub async fn start(keys: &[&TestKey]) -> Self {
        let (published, app) = Self::app(keys);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            published,
            scheme: "http",
        }
    }

    /// Serves `keys` at `/jwks.json` over TLS with `identity` (a
    /// certificate for `localhost`).
    pub async fn start_tls(keys: &[&TestKey], identity: &super::tls::Leaf) -> Self {
        let (published, app) = Self::app(keys);
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = tcp.local_addr().expect("addr");
        let listener = super::tls::TlsListener::new(tcp, identity);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            published,
            scheme: "https",
        }
    }

    fn app(keys: &[&TestKey]) -> (Arc<Published>, Router) {
        let published = Arc::new(Published::default());
        *published.document.lock().expect("lock") = jwks_of(keys);
        let app = Router::new()
            .route("/jwks.json", get(serve))
            .with_state(Arc::clone(&published));
        (published, app)
    }

    /// The URL to configure (`https://localhost:<port>` over TLS).
    pub fn url(&self) -> String {
        match self.scheme {
            "https" => format!("https://localhost:{}/jwks.json", self.addr.port()),
            _ => format!("http://{}/jwks.json", self.addr),
        }
    }

    /// Publishes `keys` instead.
    pub fn publish(&self, keys: &[&TestKey]) {
        *self.published.document.lock().expect("lock") = jwks_of(keys);
    }

    /// Answers `status` from now on (0: serve the keys again).
    pub fn fail_with(&self, status: u16) {
        self.published.failing_with.store(status, Ordering::SeqCst);
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> u64 {
        self.published.fetches.load(Ordering::SeqCst)
    }
}

async fn serve(State(p): State<Arc<Published>>) -> (StatusCode, String) {
    p.fetches.fetch_add(1, Ordering::SeqCst);
    match p.failing_with.load(Ordering::SeqCst) {
        0 => (StatusCode::OK, p.document.lock().expect("lock").clone()),
        status => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            String::new(),
        ),
    }
}

/// `request` carrying `authorization: Bearer <token>`.
pub fn bearer<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header value"),
    );
    request
}
