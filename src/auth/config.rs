//! `[auth]`, `[auth.jwt]` and `[[callers]]`: how the public listener
//! learns who calls, and what each caller may do.
//!
//! Validation errors name the key (`callers[2].operations[0]`) and the
//! values a key accepts, never the value found: a misplaced token pasted
//! into the file must not reach a log.

use std::{collections::HashSet, path::PathBuf, time::Duration};

use serde::Deserialize;

use crate::{
    config_source::ConfigError,
    domain::{JourneyScope, Permission, ResultView},
};

/// How the public listener authenticates callers (`[auth] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// `authorization: Bearer <JWT>` on every call.
    Jwt,
    /// The verified mTLS client certificate's SPIFFE ID (or first DNS SAN).
    Mtls,
    /// A bearer token when the call carries one, else the mTLS identity.
    JwtOrMtls,
    /// No authentication: every call is the open caller (explicit only).
    None,
}

impl AuthMode {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Jwt => "jwt",
            AuthMode::Mtls => "mtls",
            AuthMode::JwtOrMtls => "jwt_or_mtls",
            AuthMode::None => "none",
        }
    }

    /// Whether bearer tokens are accepted.
    pub fn accepts_jwt(self) -> bool {
        matches!(self, AuthMode::Jwt | AuthMode::JwtOrMtls)
    }

    /// Whether mTLS identities are accepted.
    pub fn accepts_mtls(self) -> bool {
        matches!(self, AuthMode::Mtls | AuthMode::JwtOrMtls)
    }
}

/// `[auth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// How callers are authenticated.
    pub mode: AuthMode,
    /// Accept bearer tokens without `[tls.grpc]` on a public listener
    /// other machines reach: for a mesh sidecar that terminates TLS in the
    /// pod. Anyone who reads a token in clear is that caller until it
    /// expires, so it must be asked for, and it is a WARN and a plaintext
    /// hop (`grpc_tokens`). A listener bound to loopback needs no switch
    /// (`Config::takes_tokens_in_clear`).
    #[serde(default)]
    pub allow_plaintext_tokens: bool,
    /// JWT verification; required by `jwt` and `jwt_or_mtls`.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
}

/// `[auth.jwt]`: one issuer, its keys and the claims checked.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// A local JWKS file, re-read on SIGHUP.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// A JWKS URL, fetched at start and refreshed in the background:
    /// `https://`, or `http://` to a loopback host only (whoever sits on a
    /// plaintext path could swap the keys and mint any caller's token).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// PEM CA certificates the JWKS fetch trusts beside the system's roots
    /// (an issuer on a private CA).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The audience every token's `aud` must contain.
    pub audience: String,
    /// The claim whose value is the caller's subject.
    #[serde(default = "default_subject_claim")]
    pub subject_claim: String,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway_secs")]
    pub leeway_secs: u64,
    /// How often a JWKS URL is fetched again, in seconds.
    #[serde(default = "default_refresh_secs")]
    pub refresh_secs: u64,
    /// Shortest time between two fetches caused by a token with an unknown
    /// `kid`, in seconds (a stream of forged `kid`s cannot hammer the
    /// issuer).
    #[serde(default = "default_min_refresh_secs")]
    pub min_refresh_interval_secs: u64,
    /// Budget of one JWKS fetch, in milliseconds.
    #[serde(default = "default_fetch_timeout_ms")]
    pub fetch_timeout_ms: u64,
}

fn default_subject_claim() -> String {
    "sub".to_owned()
}
fn default_leeway_secs() -> u64 {
    30
}
fn default_refresh_secs() -> u64 {
    300
}
fn default_min_refresh_secs() -> u64 {
    30
}
fn default_fetch_timeout_ms() -> u64 {
    5000
}

/// Where a JWKS comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksLocation {
    /// A local file.
    File(PathBuf),
    /// A URL, fetched trusting the system's roots and `extra_roots`.
    Url {
        /// `https://`, or `http://` to a loopback host.
        uri: http::Uri,
        /// The certificates of `[auth.jwt] ca_file` (DER).
        extra_roots: Vec<Vec<u8>>,
    },
}

/// The certificates of the PEM file `path` (`[auth.jwt] ca_file`), DER.
fn read_ca_file(path: &std::path::Path) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls::pki_types::{CertificateDer, pem::PemObject as _};
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(format!("auth.jwt.ca_file {}: {e}", path.display())))?
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("auth.jwt.ca_file {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "auth.jwt.ca_file {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

impl JwtConfig {
    /// The configured key source (validated: exactly one).
    pub fn location(&self) -> Result<JwksLocation, ConfigError> {
        match (&self.jwks_file, &self.jwks_url) {
            (Some(path), None) => Ok(JwksLocation::File(path.clone())),
            (None, Some(url)) => {
                let uri: http::Uri = url
                    .parse()
                    .map_err(|_| invalid("auth.jwt.jwks_url is not a valid URL".to_owned()))?;
                let host = uri.host().unwrap_or_default();
                match uri.scheme_str() {
                    Some("https") if !host.is_empty() => {}
                    Some("http") if crate::net::is_loopback_host(host) => {}
                    Some("http") if !host.is_empty() => {
                        return Err(invalid(
                            "auth.jwt.jwks_url must be https:// (http:// only to a loopback host): whoever sits on a plaintext path could swap the keys and mint any caller's token".into(),
                        ));
                    }
                    _ => {
                        return Err(invalid(
                            "auth.jwt.jwks_url must be an https:// URL with a host".into(),
                        ));
                    }
                }
                let extra_roots = match &self.ca_file {
                    Some(path) => read_ca_file(path)?,
                    None => Vec::new(),
                };
                Ok(JwksLocation::Url { uri, extra_roots })
            }
            (Some(_), Some(_)) => Err(invalid(
                "auth.jwt: set jwks_file or jwks_url, not both".to_owned(),
            )),
            (None, None) => Err(invalid("auth.jwt needs jwks_file or jwks_url".to_owned())),
        }
    }

    /// Clock skew allowed on `exp` and `nbf`.
    pub fn leeway(&self) -> Duration {
        Duration::from_secs(self.leeway_secs)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.location()?;
        for (key, value) in [
            ("auth.jwt.issuer", &self.issuer),
            ("auth.jwt.audience", &self.audience),
            ("auth.jwt.subject_claim", &self.subject_claim),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(format!("{key} must not be empty")));
            }
        }
        if self.leeway_secs > 300 {
            return Err(invalid(
                "auth.jwt.leeway_secs must be at most 300 (a small clock skew)".to_owned(),
            ));
        }
        for (key, value) in [
            ("auth.jwt.refresh_secs", self.refresh_secs),
            (
                "auth.jwt.min_refresh_interval_secs",
                self.min_refresh_interval_secs,
            ),
            ("auth.jwt.fetch_timeout_ms", self.fetch_timeout_ms),
        ] {
            if value == 0 {
                return Err(invalid(format!("{key} must be at least 1")));
            }
        }
        Ok(())
    }
}

impl AuthConfig {
    /// The mode's requirements: `[auth.jwt]` present and valid when tokens
    /// are accepted.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match (&self.jwt, self.mode.accepts_jwt()) {
            (Some(jwt), true) => jwt.validate(),
            (None, true) => Err(invalid(format!(
                "[auth] mode = \"{}\" needs an [auth.jwt] section",
                self.mode.as_str()
            ))),
            (Some(_), false) => Err(invalid(format!(
                "[auth.jwt] is set but [auth] mode = \"{}\" accepts no tokens",
                self.mode.as_str()
            ))),
            (None, false) => Ok(()),
        }
    }
}

/// One `[[callers]]` entry, as operators write it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerConfig {
    /// The caller's name: in audit records, logs and as a journey's owner.
    pub name: String,
    /// The JWT subject (the configured subject claim) of this caller.
    #[serde(default)]
    pub jwt_subject: Option<String>,
    /// The SPIFFE ID (URI SAN) of this caller's client certificate.
    #[serde(default)]
    pub spiffe_id: Option<String>,
    /// The first DNS SAN of this caller's client certificate, for
    /// certificates that carry no SPIFFE ID.
    #[serde(default)]
    pub dns_name: Option<String>,
    /// Operator profiles it may create journeys on.
    #[serde(default)]
    pub operator_profiles: Vec<String>,
    /// Operations it may call (see [`Permission`]).
    #[serde(default)]
    pub operations: Vec<String>,
    /// `own` (default) or `any`.
    #[serde(default)]
    pub journeys: Option<String>,
    /// `full` (default), `no_images` or `status_only`.
    #[serde(default)]
    pub result_view: Option<String>,
    /// Unary calls in flight at once (default
    /// [`CallerLimits::DEFAULT_MAX_IN_FLIGHT`](crate::domain::CallerLimits)).
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// `WatchJourney` streams at once (default
    /// [`CallerLimits::DEFAULT_MAX_WATCH_STREAMS`](crate::domain::CallerLimits)).
    #[serde(default)]
    pub max_watch_streams: Option<usize>,
    /// Request bytes its calls may be receiving at once (default: an
    /// equal part of `[serving] max_body_bytes_in_flight` among the
    /// configured callers, at least its largest message).
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// Live journey records it may hold (default: an equal part of
    /// `[journeys] max_entries` among the configured callers).
    #[serde(default)]
    pub max_journeys: Option<usize>,
}

impl CallerConfig {
    /// The granted operations, checked; the error names the key.
    pub(super) fn permissions(&self, at: &str) -> Result<Vec<Permission>, ConfigError> {
        self.operations
            .iter()
            .enumerate()
            .map(|(j, op)| {
                Permission::parse(op).ok_or_else(|| {
                    invalid(format!(
                        "{at}.operations[{j}] is not an operation (one of: {})",
                        Permission::ALL.map(Permission::as_str).join(", ")
                    ))
                })
            })
            .collect()
    }

    pub(super) fn scope(&self, at: &str) -> Result<JourneyScope, ConfigError> {
        self.journeys.as_deref().map_or(Ok(JourneyScope::Own), |s| {
            JourneyScope::parse(s)
                .ok_or_else(|| invalid(format!("{at}.journeys must be \"own\" or \"any\"")))
        })
    }

    pub(super) fn view(&self, at: &str) -> Result<ResultView, ConfigError> {
        self.result_view
            .as_deref()
            .map_or(Ok(ResultView::Full), |s| {
                ResultView::parse(s).ok_or_else(|| {
                    invalid(format!(
                        "{at}.result_view must be \"full\", \"no_images\" or \"status_only\""
                    ))
                })
            })
    }
}

/// Checks the `[[callers]]` table against the mode and the operator
/// profiles the gateway will have.
pub fn validate_callers(
    callers: &[CallerConfig],
    mode: AuthMode,
    profiles: &[&str],
) -> Result<(), ConfigError> {
    if mode == AuthMode::None && !callers.is_empty() {
        // Accepted and ignored, they would silently drop every `own`
        // scope and `status_only` view they hold.
        return Err(invalid(format!(
            "[auth] mode = \"none\" serves every call as the open caller, so the {} [[callers]] entries would be ignored: remove [[callers]], or set [auth] mode to \"jwt\", \"mtls\" or \"jwt_or_mtls\"",
            callers.len()
        )));
    }
    let mut names = HashSet::new();
    let mut identities = HashSet::new();
    for (i, c) in callers.iter().enumerate() {
        let at = format!("callers[{i}]");
        if c.name.trim().is_empty() {
            return Err(invalid(format!("{at}.name must not be empty")));
        }
        // The name is a journey's owner in the directory, and a field of
        // every audit record: a short identifier, nothing else.
        if c.name.len() > 64
            || !c
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
        {
            return Err(invalid(format!(
                "{at}.name must be at most 64 characters of letters, digits, '.', '_', ':' or '-'"
            )));
        }
        if !names.insert(c.name.as_str()) {
            return Err(invalid(format!(
                "{at}.name repeats an earlier caller's name"
            )));
        }
        let ids = [
            ("jwt_subject", &c.jwt_subject),
            ("spiffe_id", &c.spiffe_id),
            ("dns_name", &c.dns_name),
        ];
        let set: Vec<_> = ids.iter().filter(|(_, v)| v.is_some()).collect();
        let [(key, Some(value))] = set.as_slice() else {
            return Err(invalid(format!(
                "{at} needs exactly one of jwt_subject, spiffe_id or dns_name"
            )));
        };
        if value.trim().is_empty() {
            return Err(invalid(format!("{at}.{key} must not be empty")));
        }
        if *key == "spiffe_id" && !value.starts_with("spiffe://") {
            return Err(invalid(format!("{at}.spiffe_id must start with spiffe://")));
        }
        let reachable = match *key {
            "jwt_subject" => mode.accepts_jwt(),
            _ => mode.accepts_mtls(),
        };
        if !reachable {
            return Err(invalid(format!(
                "{at}.{key}: [auth] mode = \"{}\" never presents such an identity",
                mode.as_str()
            )));
        }
        if !identities.insert((*key, value.as_str())) {
            return Err(invalid(format!(
                "{at}.{key} repeats an earlier caller's identity"
            )));
        }
        c.permissions(&at)?;
        c.scope(&at)?;
        c.view(&at)?;
        for (j, p) in c.operator_profiles.iter().enumerate() {
            if !profiles.contains(&p.as_str()) {
                return Err(invalid(format!(
                    "{at}.operator_profiles[{j}] is not a configured operator profile (profiles: {})",
                    profiles.join(", ")
                )));
            }
        }
        for (key, value) in [
            ("max_in_flight", c.max_in_flight),
            ("max_watch_streams", c.max_watch_streams),
            ("max_body_bytes", c.max_body_bytes),
            ("max_journeys", c.max_journeys),
        ] {
            if value == Some(0) {
                return Err(invalid(format!("{at}.{key} must be at least 1")));
            }
        }
    }
    Ok(())
}

fn invalid(why: String) -> ConfigError {
    ConfigError::Invalid(why)
}

#[cfg(test)]
mod tests;
