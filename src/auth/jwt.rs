//! Bearer tokens: a JWT verified against the [`Jwks`] keys, its claims
//! checked, its subject read from the configured claim.
//!
//! The rules, each refused with its own [`JwtRefusal`] cause (a metric
//! label, never shown to the caller beyond `CALLER_UNAUTHENTICATED`):
//! - the key is the one the header's `kid` names (no `kid`: the set's only
//!   key); an unknown `kid` triggers one rate-limited refresh of a URL
//!   source, then is refused;
//! - the algorithm is the key's; a header naming another (`none`, `HS256`
//!   over the public key's bytes, ...) is refused before any signature
//!   work;
//! - `exp`, `iss` and `aud` must be present and right; `nbf` is checked
//!   when present; `exp` and `nbf` with the configured leeway;
//! - the subject claim must be a non-empty string.
//!
//! Signature checks cost tens of microseconds, so a verified token is
//! remembered (by its SHA-256, never its text) until it expires, at most
//! [`CACHE_TTL`], and only while the key set it was checked against is the
//! current one.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{Validation, decode, decode_header, errors::ErrorKind};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::{
    config::JwtConfig,
    jwks::{Jwks, KeySet},
};
use crate::sync;

/// Longest a verified token is remembered.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// Most tokens remembered at once.
const CACHE_ENTRIES: usize = 10_000;

/// Why a token was refused: a fixed set, used as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JwtRefusal {
    /// Not a JWT, or unreadable claims.
    Malformed,
    /// The header's algorithm is not the key's.
    Algorithm,
    /// No key has the token's `kid` (after one refresh).
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// `exp` passed (beyond the leeway).
    Expired,
    /// `nbf` not reached (beyond the leeway).
    NotYetValid,
    /// Wrong or missing `aud`.
    Audience,
    /// Wrong or missing `iss`.
    Issuer,
    /// A required claim is missing (`exp`) or the subject claim is not a
    /// non-empty string.
    MissingClaim,
}

impl JwtRefusal {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            JwtRefusal::Malformed => "malformed",
            JwtRefusal::Algorithm => "algorithm",
            JwtRefusal::UnknownKey => "unknown_key",
            JwtRefusal::Signature => "signature",
            JwtRefusal::Expired => "expired",
            JwtRefusal::NotYetValid => "not_yet_valid",
            JwtRefusal::Audience => "audience",
            JwtRefusal::Issuer => "issuer",
            JwtRefusal::MissingClaim => "missing_claim",
        }
    }

    fn of(kind: &ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidSignature => JwtRefusal::Signature,
            ErrorKind::ExpiredSignature => JwtRefusal::Expired,
            ErrorKind::ImmatureSignature => JwtRefusal::NotYetValid,
            ErrorKind::InvalidAudience => JwtRefusal::Audience,
            ErrorKind::InvalidIssuer => JwtRefusal::Issuer,
            ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
                "aud" => JwtRefusal::Audience,
                "iss" => JwtRefusal::Issuer,
                _ => JwtRefusal::MissingClaim,
            },
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => JwtRefusal::Algorithm,
            _ => JwtRefusal::Malformed,
        }
    }
}

struct Remembered {
    subject: Arc<str>,
    until: Instant,
    keys: Arc<KeySet>,
}

/// Verifies bearer tokens of one issuer.
pub struct JwtVerifier {
    jwks: Arc<Jwks>,
    issuer: String,
    audience: String,
    subject_claim: String,
    leeway: u64,
    verified: Mutex<HashMap<[u8; 32], Remembered, foldhash::fast::RandomState>>,
}

impl JwtVerifier {
    /// A verifier for `[auth.jwt]` over `jwks`.
    pub fn new(config: &JwtConfig, jwks: Arc<Jwks>) -> Self {
        Self {
            jwks,
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            subject_claim: config.subject_claim.clone(),
            leeway: config.leeway_secs,
            verified: Mutex::new(HashMap::default()),
        }
    }

    /// The key source (for SIGHUP reloads).
    pub fn jwks(&self) -> &Arc<Jwks> {
        &self.jwks
    }

    /// The subject of a valid token.
    pub async fn verify(&self, token: &str) -> Result<Arc<str>, JwtRefusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let mut keys = self.jwks.current();
        if let Some(subject) = self.remembered(&digest, now, &keys) {
            return Ok(subject);
        }
        let header = decode_header(token).map_err(|e| JwtRefusal::of(e.kind()))?;
        let kid = header.kid.as_deref();
        if keys.find(kid).is_none() && self.jwks.refresh_for_unknown_kid().await {
            keys = self.jwks.current();
        }
        let key = keys.find(kid).ok_or(JwtRefusal::UnknownKey)?;
        if header.alg != key.alg {
            return Err(JwtRefusal::Algorithm);
        }
        let mut validation = Validation::new(key.alg);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        let data = decode::<HashMap<String, serde_json::Value>>(token, &key.key, &validation)
            .map_err(|e| JwtRefusal::of(e.kind()))?;
        let subject: Arc<str> = match data.claims.get(&self.subject_claim) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.as_str().into(),
            _ => return Err(JwtRefusal::MissingClaim),
        };
        let exp = data.claims.get("exp").and_then(serde_json::Value::as_u64);
        self.remember(digest, &subject, exp, now, keys);
        Ok(subject)
    }

    fn remembered(&self, digest: &[u8; 32], now: Instant, keys: &Arc<KeySet>) -> Option<Arc<str>> {
        let cache = sync::lock(&self.verified);
        let hit = cache.get(digest)?;
        (hit.until > now && Arc::ptr_eq(&hit.keys, keys)).then(|| Arc::clone(&hit.subject))
    }

    fn remember(
        &self,
        digest: [u8; 32],
        subject: &Arc<str>,
        exp: Option<u64>,
        now: Instant,
        keys: Arc<KeySet>,
    ) {
        let unix_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Valid for as long as `exp` (with the leeway) still allows.
        let left = exp.map_or(Duration::ZERO, |exp| {
            Duration::from_secs(exp.saturating_add(self.leeway).saturating_sub(unix_now))
        });
        let ttl = left.min(CACHE_TTL);
        if ttl.is_zero() {
            return;
        }
        let mut cache = sync::lock(&self.verified);
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, r| r.until > now);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(
            digest,
            Remembered {
                subject: Arc::clone(subject),
                until: now + ttl,
                keys,
            },
        );
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
pub(crate) mod tests;
