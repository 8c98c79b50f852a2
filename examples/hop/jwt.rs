//! The caller of the JWT rows: a service account with a cached token.

use std::path::Path;

/// A service account as idgate's `[auth] mode = "jwt"` knows it: an ES256
/// key whose public half is in a JWKS file, and one token signed with it.
pub struct BenchCaller {
    kid: &'static str,
    key: rcgen::KeyPair,
}

impl BenchCaller {
    const SUBJECT: &'static str = "system:serviceaccount:bench:load";

    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            kid: "bench-1",
            key: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?,
        })
    }

    /// Writes the JWKS file into `dir`; the `[auth]` and `[[callers]]`
    /// sections that name it. `journeys = "any"`: the benchmark's appkey
    /// is no journey of this caller's.
    pub fn config(&self, dir: &Path) -> anyhow::Result<String> {
        self.config_granting(dir, "operations = [\"session_3d\"]\njourneys = \"any\"\n")
    }

    /// As [`BenchCaller::config`], the caller's entry granting what
    /// `grant` says (its keys after `name` and `jwt_subject`, TOML lines):
    /// examples/deployed_capacity's caller runs whole journeys of its own.
    pub fn config_granting(&self, dir: &Path, grant: &str) -> anyhow::Result<String> {
        use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
        let raw = self.key.public_key_raw();
        let (x, y) = raw[1..].split_at(32);
        let jwks = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
            "kid": self.kid, "x": B64.encode(x), "y": B64.encode(y),
        }]});
        let path = dir.join("jwks.json");
        std::fs::write(&path, jwks.to_string())?;
        Ok(format!(
            "[auth]\nmode = \"jwt\"\n\n\
             [auth.jwt]\njwks_file = \"{}\"\nissuer = \"https://issuer.bench\"\naudience = \"idgate\"\n\n\
             [[callers]]\nname = \"bench\"\njwt_subject = \"{}\"\n{grant}",
            path.display(),
            Self::SUBJECT
        ))
    }

    /// `Bearer <token>`, valid for an hour.
    pub fn bearer(&self) -> anyhow::Result<http::HeaderValue> {
        use jsonwebtoken::{Algorithm, EncodingKey, Header};
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let claims = serde_json::json!({
            "iss": "https://issuer.bench", "aud": "idgate", "sub": Self::SUBJECT,
            "iat": now, "nbf": now, "exp": now + 3600,
        });
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.to_owned());
        let token = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_ec_der(&self.key.serialize_der()),
        )?;
        Ok(http::HeaderValue::from_str(&format!("Bearer {token}"))?)
    }
}
