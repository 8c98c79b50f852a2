//! The keys JWTs are checked against: a JSON Web Key Set from a local file
//! (re-read on SIGHUP) or from a URL (fetched at start, cached, refreshed
//! in the background and once when a token names an unknown `kid`, at most
//! once per `min_refresh_interval_secs`).
//!
//! Each key carries its algorithm, taken from the key (`alg`, else its type
//! and curve: an RSA key without `alg` is RS256), never from a token: only
//! RS256, PS256, ES256 and EdDSA keys are kept; symmetric (`oct`) keys and
//! encryption keys are dropped, so `HS*` can never verify. A failed fetch
//! or read keeps the last good keys, is logged (the location, never a
//! token) and counted.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock, Weak},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse},
};
use tokio::time::Instant;

use super::{AuthEvents, config::JwksLocation};
use crate::sync;

/// Largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// One verification key and the one algorithm it verifies.
pub struct VerifyKey {
    /// The key.
    pub key: DecodingKey,
    /// Its algorithm.
    pub alg: Algorithm,
}

/// A parsed key set: keys by `kid`, and the lone key of a set of one (for
/// tokens without a `kid`).
#[derive(Default)]
pub struct KeySet {
    by_kid: HashMap<String, Arc<VerifyKey>>,
    lone: Option<Arc<VerifyKey>>,
}

impl KeySet {
    /// Parses a JWKS document, keeping the usable signature keys. Fails
    /// when the text is not a JWKS or holds no usable key.
    pub fn parse(text: &[u8]) -> Result<Self, JwksError> {
        #[derive(serde::Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let doc: Document = serde_json::from_slice(text).map_err(|_| JwksError::NotAJwks)?;
        let mut set = KeySet::default();
        let mut all = Vec::new();
        for value in doc.keys {
            let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
                continue;
            };
            let Some(key) = verify_key(&jwk) else {
                continue;
            };
            let key = Arc::new(key);
            if let Some(kid) = &jwk.common.key_id {
                set.by_kid.insert(kid.clone(), Arc::clone(&key));
            }
            all.push(key);
        }
        if all.is_empty() {
            return Err(JwksError::NoUsableKey);
        }
        if all.len() == 1 {
            set.lone = all.pop();
        }
        Ok(set)
    }

    /// The key a token's `kid` names (no `kid`: the set's only key).
    pub fn find(&self, kid: Option<&str>) -> Option<&Arc<VerifyKey>> {
        match kid {
            Some(kid) => self.by_kid.get(kid),
            None => self.lone.as_ref(),
        }
    }

    /// How many keys have a `kid`.
    pub fn len(&self) -> usize {
        self.by_kid.len().max(usize::from(self.lone.is_some()))
    }

    /// Whether the set is empty (before the first successful fetch).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The algorithm of a signature key, from the key itself.
fn key_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let from_alg = |a: KeyAlgorithm| match a {
        KeyAlgorithm::RS256 => Some(Algorithm::RS256),
        KeyAlgorithm::PS256 => Some(Algorithm::PS256),
        KeyAlgorithm::ES256 => Some(Algorithm::ES256),
        KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
        _ => None,
    };
    let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
        (AlgorithmParameters::RSA(_), Some(a)) => from_alg(a)?,
        (AlgorithmParameters::RSA(_), None) => Algorithm::RS256,
        (AlgorithmParameters::EllipticCurve(p), a) if p.curve == EllipticCurve::P256 => {
            a.map_or(Some(Algorithm::ES256), from_alg)?
        }
        (AlgorithmParameters::OctetKeyPair(p), a) if p.curve == EllipticCurve::Ed25519 => {
            a.map_or(Some(Algorithm::EdDSA), from_alg)?
        }
        _ => return None,
    };
    // The key's type must fit its algorithm (an `alg: ES256` on an RSA key
    // is refused, not trusted).
    let fits = matches!(
        (&jwk.algorithm, alg),
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256 | Algorithm::PS256
        ) | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256)
            | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
    );
    fits.then_some(alg)
}

fn verify_key(jwk: &Jwk) -> Option<VerifyKey> {
    let alg = key_algorithm(jwk)?;
    let key = DecodingKey::from_jwk(jwk).ok()?;
    // An Ed25519 key is 32 bytes; the verifier slices it unchecked.
    if alg == Algorithm::EdDSA && key.try_get_as_bytes().map_or(true, |b| b.len() != 32) {
        return None;
    }
    Some(VerifyKey { key, alg })
}

/// Why a key set could not be loaded; names no value.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The file could not be read.
    #[error("cannot read the JWKS file: {0}")]
    Read(std::io::ErrorKind),
    /// The fetch failed.
    #[error("JWKS fetch failed: {0}")]
    Fetch(&'static str),
    /// The URL answered a status other than 200.
    #[error("JWKS fetch answered HTTP {0}")]
    Status(u16),
    /// The document is not a JWKS.
    #[error("the document is not a JSON Web Key Set")]
    NotAJwks,
    /// The document holds no RS256, PS256, ES256 or EdDSA signature key.
    #[error("the JWKS holds no usable signature key (RS256, PS256, ES256, EdDSA)")]
    NoUsableKey,
    /// The HTTP client could not be built.
    #[error("cannot set up TLS for the JWKS URL: {0}")]
    Tls(String),
}

type FetchClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

enum Source {
    File(std::path::PathBuf),
    Url {
        uri: http::Uri,
        client: Box<FetchClient>,
        timeout: Duration,
    },
}

/// Timing of a URL source.
#[derive(Debug, Clone, Copy)]
pub struct Refresh {
    /// Background refresh period.
    pub every: Duration,
    /// Shortest time between two unknown-`kid` refreshes.
    pub min_interval: Duration,
    /// Budget of one fetch.
    pub timeout: Duration,
}

/// A key set and where it comes from; the current keys are swapped whole.
pub struct Jwks {
    keys: RwLock<Arc<KeySet>>,
    source: Source,
    refresh: Refresh,
    /// When the last unknown-`kid` refresh started (rate limit); a Tokio
    /// mutex is not needed: the guard is never held across an await.
    last_on_demand: Mutex<Option<Instant>>,
    /// Serialises fetches, so a burst of unknown `kid`s makes one.
    fetching: tokio::sync::Mutex<()>,
    events: Arc<dyn AuthEvents>,
}

impl Jwks {
    /// Loads the keys. A file must hold usable keys; a URL that cannot be
    /// fetched now starts empty (every token refused) and is fetched again
    /// by the background refresh or the next unknown `kid`.
    pub async fn load(
        location: &JwksLocation,
        refresh: Refresh,
        events: Arc<dyn AuthEvents>,
    ) -> Result<Arc<Self>, JwksError> {
        let source = match location {
            JwksLocation::File(path) => Source::File(path.clone()),
            JwksLocation::Url { uri, extra_roots } => Source::Url {
                uri: uri.clone(),
                client: Box::new(fetch_client(extra_roots)?),
                timeout: refresh.timeout,
            },
        };
        let jwks = Arc::new(Self {
            keys: RwLock::new(Arc::new(KeySet::default())),
            source,
            refresh,
            last_on_demand: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            events,
        });
        match &jwks.source {
            Source::File(_) => jwks.reload().await?,
            Source::Url { .. } => {
                // Logged and counted inside; the gateway starts anyway.
                let _ = jwks.reload().await;
            }
        }
        Ok(jwks)
    }

    /// What [`Jwks::load`] reads, without fetching anything: a file's
    /// keys, parsed (`Some` of their count); a URL's client, built with its
    /// `ca_file` roots (`None`: the keys are fetched at start only). For
    /// `idgate check`.
    pub fn check(location: &JwksLocation) -> Result<Option<usize>, JwksError> {
        match location {
            JwksLocation::File(path) => read_file(path).map(|set| Some(set.len())),
            JwksLocation::Url { extra_roots, .. } => fetch_client(extra_roots).map(|_| None),
        }
    }

    /// The current keys.
    pub fn current(&self) -> Arc<KeySet> {
        Arc::clone(&sync::read(&self.keys))
    }

    /// Reads the file or fetches the URL again; on failure the last good
    /// keys stay, and the failure is logged and counted.
    pub async fn reload(&self) -> Result<(), JwksError> {
        let _one = self.fetching.lock().await;
        let loaded = match &self.source {
            // A small local file, read on start and SIGHUP only.
            Source::File(path) => read_file(path),
            Source::Url {
                uri,
                client,
                timeout,
            } => match tokio::time::timeout(*timeout, fetch(client, uri)).await {
                Ok(r) => r.and_then(|bytes| KeySet::parse(&bytes)),
                Err(_) => Err(JwksError::Fetch("timed out")),
            },
        };
        match loaded {
            Ok(set) => {
                tracing::debug!(keys = set.len(), "JWKS loaded");
                *sync::write(&self.keys) = Arc::new(set);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, source = self.describe(), "JWKS not loaded; the last good keys stay");
                self.events.jwks_fetch_failed();
                Err(e)
            }
        }
    }

    /// A file source's keys read again, not yet in use (`None` for a URL,
    /// which refreshes on its own): the checking half of a SIGHUP, which
    /// [`Jwks::install`]s them once everything else it reloads is checked
    /// too. A failure is logged and counted, and the keys in use stay.
    pub fn read_file_again(&self) -> Result<Option<KeySet>, JwksError> {
        let Source::File(path) = &self.source else {
            return Ok(None);
        };
        read_file(path).map(Some).inspect_err(|e| {
            tracing::warn!(error = %e, source = self.describe(), "JWKS not loaded; the last good keys stay");
            self.events.jwks_fetch_failed();
        })
    }

    /// Puts `keys` in use (from [`Jwks::read_file_again`]).
    pub fn install(&self, keys: KeySet) {
        tracing::debug!(keys = keys.len(), "JWKS loaded");
        *sync::write(&self.keys) = Arc::new(keys);
    }

    /// One refresh for a token whose `kid` is unknown, unless another one
    /// ran less than `min_interval` ago. Returns whether it fetched.
    pub async fn refresh_for_unknown_kid(&self) -> bool {
        if matches!(self.source, Source::File(_)) {
            return false; // a file changes on SIGHUP, not on demand
        }
        {
            let mut last = sync::lock(&self.last_on_demand);
            let now = Instant::now();
            if last.is_some_and(|t| now.duration_since(t) < self.refresh.min_interval) {
                return false;
            }
            *last = Some(now);
        }
        let _ = self.reload().await;
        true
    }

    /// Whether the keys come from a file (re-read on SIGHUP).
    pub fn is_file(&self) -> bool {
        matches!(self.source, Source::File(_))
    }

    /// Starts the background refresh of a URL source; it ends when the
    /// last holder of the key set is gone.
    pub fn spawn_refresh(self: &Arc<Self>) {
        if self.is_file() {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        let every = self.refresh.every;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(jwks) = weak.upgrade() else { return };
                let _ = jwks.reload().await;
            }
        });
    }

    fn describe(&self) -> String {
        match &self.source {
            Source::File(path) => path.display().to_string(),
            // Scheme, host and path only: a query could hold a credential.
            Source::Url { uri, .. } => format!(
                "{}://{}{}",
                uri.scheme_str().unwrap_or("?"),
                uri.authority().map_or("?", |a| a.as_str()),
                uri.path()
            ),
        }
    }
}

/// The keys of a JWKS file.
fn read_file(path: &std::path::Path) -> Result<KeySet, JwksError> {
    match std::fs::read(path) {
        Ok(bytes) => KeySet::parse(&bytes),
        Err(e) => Err(JwksError::Read(e.kind())),
    }
}

/// The HTTP client of a JWKS URL: the system's roots and `extra_roots`
/// (`[auth.jwt] ca_file`). Plain `http://` reaches only a loopback host
/// (checked at load, `JwtConfig::location`).
fn fetch_client(extra_roots: &[Vec<u8>]) -> Result<FetchClient, JwksError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra_roots
            .iter()
            .map(|der| rustls::pki_types::CertificateDer::from(der.clone())),
        provider.clone(),
    )
    .map_err(|e| JwksError::Tls(e.to_string()))?;
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| JwksError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

async fn fetch(client: &FetchClient, uri: &http::Uri) -> Result<Bytes, JwksError> {
    let request = http::Request::get(uri.clone())
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::new())
        .map_err(|_| JwksError::Fetch("bad request"))?;
    let response = client
        .request(request)
        .await
        .map_err(|_| JwksError::Fetch("connection failed"))?;
    if response.status() != http::StatusCode::OK {
        return Err(JwksError::Status(response.status().as_u16()));
    }
    let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map_err(|_| JwksError::Fetch("body unreadable or too large"))?;
    Ok(body.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_and_encryption_keys_are_dropped() {
        let doc = br#"{"keys":[
            {"kty":"oct","kid":"h","k":"c2VjcmV0"},
            {"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty":"OKP","crv":"Ed25519","kid":"mislabelled","alg":"HS256","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty":"OKP","crv":"Ed25519","kid":"short","x":"AAAA"},
            {"kty":"weird"}
        ]}"#;
        let set = KeySet::parse(doc).unwrap();
        assert!(set.find(Some("h")).is_none());
        assert!(set.find(Some("enc")).is_none());
        assert!(set.find(Some("mislabelled")).is_none());
        assert!(set.find(Some("short")).is_none());
        assert_eq!(set.find(Some("ed")).unwrap().alg, Algorithm::EdDSA);
        // One usable key: it is also the key of tokens without a kid.
        assert!(set.find(None).is_some());
    }

    #[test]
    fn a_set_without_usable_keys_is_refused() {
        assert!(matches!(
            KeySet::parse(br#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#),
            Err(JwksError::NoUsableKey)
        ));
        assert!(matches!(KeySet::parse(b"<html>"), Err(JwksError::NotAJwks)));
    }
}
