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
//! remembered ([`TokenMemory`]) until it expires, at most [`CACHE_TTL`];
//! and a refused one for [`REFUSAL_TTL`], so that a client sending a bad
//! token again and again pays for one check, not one per call. A refusal
//! that time may undo (`nbf` not reached yet) is not remembered.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{Validation, decode, decode_header, errors::ErrorKind};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::{
    config::JwtConfig,
    jwks::{Jwks, KeySet},
    memory::{Digest, TokenMemory},
};

/// Longest a verified token is remembered.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is refused again without a check.
pub const REFUSAL_TTL: Duration = Duration::from_secs(60);

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

    /// Whether the same token is refused again later: every cause but
    /// `nbf`, which time reaches.
    fn lasts(self) -> bool {
        self != JwtRefusal::NotYetValid
    }
}

/// A refused token: why, and whether the refusal was remembered (no
/// signature check this time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Why the token was refused.
    pub refusal: JwtRefusal,
    /// True when answered from the memory of refused tokens.
    pub remembered: bool,
}

impl From<JwtRefusal> for Refused {
    fn from(refusal: JwtRefusal) -> Self {
        Self {
            refusal,
            remembered: false,
        }
    }
}

/// Verifies bearer tokens of one issuer.
pub struct JwtVerifier {
    jwks: Arc<Jwks>,
    issuer: String,
    audience: String,
    subject_claim: String,
    leeway: u64,
    verified: TokenMemory<Arc<str>>,
    refused: TokenMemory<JwtRefusal>,
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
            verified: TokenMemory::default(),
            refused: TokenMemory::default(),
        }
    }

    /// The key source (for SIGHUP reloads).
    pub fn jwks(&self) -> &Arc<Jwks> {
        &self.jwks
    }

    /// The subject of a valid token.
    pub async fn verify(&self, token: &str) -> Result<Arc<str>, Refused> {
        let digest: Digest = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let mut keys = self.jwks.current();
        if let Some(subject) = self.verified.get(&digest, now, &keys) {
            return Ok(subject);
        }
        if let Some(refusal) = self.refused.get(&digest, now, &keys) {
            return Err(Refused {
                refusal,
                remembered: true,
            });
        }
        match self.check(token, &mut keys).await {
            Ok((subject, exp)) => {
                self.remember(digest, &subject, exp, now, keys);
                Ok(subject)
            }
            Err(refusal) => {
                if refusal.lasts() {
                    self.refused
                        .insert(digest, refusal, now, now + REFUSAL_TTL, keys);
                }
                Err(refusal.into())
            }
        }
    }

    /// Checks `token` in full: its subject and `exp`. `keys` are refreshed
    /// once for an unknown `kid`, and are then the set it was checked
    /// against.
    async fn check(
        &self,
        token: &str,
        keys: &mut Arc<KeySet>,
    ) -> Result<(Arc<str>, Option<u64>), JwtRefusal> {
        let header = decode_header(token).map_err(|e| JwtRefusal::of(e.kind()))?;
        let kid = header.kid.as_deref();
        if keys.find(kid).is_none() && self.jwks.refresh_for_unknown_kid().await {
            *keys = self.jwks.current();
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
        Ok((subject, exp))
    }

    fn remember(
        &self,
        digest: Digest,
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
        if !ttl.is_zero() {
            self.verified
                .insert(digest, Arc::clone(subject), now, now + ttl, keys);
        }
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
pub(crate) mod tests;
