//! `[cluster]`: where the fleet's shared state lives, and its resolved form.
//!
//! Absent a Redis (no `redis_url`, `sentinels` or `mode = "cluster"`):
//! one process, state in memory (the default). The Redis password and the
//! appkey sealing key are never in the TOML: the section names the
//! variable or file that holds each.
//!
//! Three ways to name the Redis, exclusive ([`RedisTarget`]): one server
//! (`redis_url`), a master found through Sentinel (`sentinels` and
//! `master_name`), or a Redis Cluster (`mode = "cluster"`, seed `nodes`).

use std::{path::PathBuf, time::Duration};

use base64::Engine as _;
use serde::Deserialize;

mod target;
mod tls;

pub use target::RedisTarget;
pub use tls::{ClientIdentity, RedisTls};

use super::encryption::{Digester, Keys, SealKey, Sealer};
use crate::config_source::{ConfigError, read_secret};

/// `[cluster] mode`: how the Redis is deployed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedisMode {
    /// One server (`redis_url`) or a Sentinel-managed master.
    #[default]
    Standalone,
    /// A Redis Cluster reached through its seed `nodes`.
    Cluster,
}

/// `[cluster]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// `redis://host:port[/db]` or `rediss://` (TLS). Absent (and no
    /// `sentinels`, no cluster `nodes`): single process, shared state in
    /// memory.
    pub redis_url: Option<String>,
    /// Sentinel addresses, `host:port` (or `redis://host:port`), or all
    /// `rediss://host:port` for sentinels and a master that speak TLS
    /// only: the master named `master_name` is found through them, and
    /// found again after a failover.
    #[serde(deserialize_with = "list")]
    pub sentinels: Vec<String>,
    /// The name the sentinels know the master by (`sentinel monitor NAME`).
    pub master_name: Option<String>,
    /// `standalone` (default) or `cluster`.
    pub mode: RedisMode,
    /// Seed nodes of a Redis Cluster, `redis://host:port` or `rediss://`;
    /// the rest of the cluster is discovered from them.
    #[serde(deserialize_with = "list")]
    pub nodes: Vec<String>,
    /// ACL user name (the password comes from `password_env`/`password_file`).
    pub username: Option<String>,
    /// Environment variable holding the Redis password.
    pub password_env: Option<String>,
    /// File holding the Redis password (wins over the variable).
    pub password_file: Option<PathBuf>,
    /// ACL user the sentinels are asked as, for sentinels that require a
    /// password (`requirepass` in their own configuration); the password
    /// from `sentinel_password_env`/`sentinel_password_file`.
    pub sentinel_username: Option<String>,
    /// Environment variable holding the sentinels' password.
    pub sentinel_password_env: Option<String>,
    /// File holding the sentinels' password (wins over the variable).
    pub sentinel_password_file: Option<PathBuf>,
    /// Prefix of every key, the event stream's too.
    pub key_prefix: String,
    /// Environment variable holding the appkey sealing key: 32 random
    /// bytes, Base64. Required with `redis_url`.
    pub secret_key_env: Option<String>,
    /// File holding the sealing key (wins over the variable).
    pub secret_key_file: Option<PathBuf>,
    /// The previous sealing key's variable, read-only during a rotation.
    pub previous_secret_key_env: Option<String>,
    /// The previous sealing key's file.
    pub previous_secret_key_file: Option<PathBuf>,
    /// Longest wait for a TCP (and TLS) connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Longest wait for one Redis command, in milliseconds. Nothing the
    /// gateway serves waits on Redis longer than this.
    pub command_timeout_ms: u64,
    /// Longest pause between two reconnection attempts, in milliseconds.
    pub max_backoff_ms: u64,
    /// PEM file of the certificate authorities trusted for `rediss://`
    /// (a private CA), the sentinels' and their master's too; absent: the
    /// system's trusted roots.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate chain presented to a Redis that asks for
    /// one (`tls-auth-clients yes`); with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// About how many fleet events (completion notices, control changes)
    /// the Redis stream keeps (`XADD ... MAXLEN ~`): how long an outage a
    /// replica can catch up on.
    pub stream_max_len: u64,
}

/// Default [`ClusterConfig::stream_max_len`]: at about 240 bytes per
/// event (measured, `docs/capacity.md`), about 24 MB of Redis; at 100
/// completed journeys a second, a quarter of an hour of outage caught up
/// on.
pub const DEFAULT_STREAM_MAX_LEN: u64 = 100_000;

/// Bounds of [`ClusterConfig::stream_max_len`].
pub const STREAM_MAX_LEN_RANGE: std::ops::RangeInclusive<u64> = 1_000..=10_000_000;

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            sentinels: Vec::new(),
            master_name: None,
            mode: RedisMode::Standalone,
            nodes: Vec::new(),
            username: None,
            password_env: None,
            password_file: None,
            sentinel_username: None,
            sentinel_password_env: None,
            sentinel_password_file: None,
            key_prefix: "idgate:".to_owned(),
            secret_key_env: None,
            secret_key_file: None,
            previous_secret_key_env: None,
            previous_secret_key_file: None,
            connect_timeout_ms: 1_000,
            command_timeout_ms: 250,
            max_backoff_ms: 2_000,
            ca_file: None,
            cert_file: None,
            key_file: None,
            stream_max_len: DEFAULT_STREAM_MAX_LEN,
        }
    }
}

/// `[cluster]` with its secrets read and checked.
#[derive(Clone)]
pub struct ClusterSettings {
    /// Where Redis is.
    pub target: RedisTarget,
    /// ACL user.
    pub username: Option<String>,
    /// Password, if any.
    pub password: Option<secrecy::SecretString>,
    /// ACL user of the sentinels, if any.
    pub sentinel_username: Option<String>,
    /// Password of the sentinels, if any.
    pub sentinel_password: Option<secrecy::SecretString>,
    /// Key prefix.
    pub key_prefix: String,
    /// Seals appkeys before they go to Redis.
    pub sealer: Sealer,
    /// Keyed digests of idempotent requests (key derived from the sealing
    /// key, so every replica's digests agree).
    pub digester: Digester,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Per-command timeout.
    pub command_timeout: Duration,
    /// Longest pause between reconnection attempts.
    pub max_backoff: Duration,
    /// The CAs of `ca_file`, and the client certificate of `cert_file`
    /// and `key_file`, if set.
    pub tls: RedisTls,
    /// About how many events the fleet's stream keeps.
    pub stream_max_len: u64,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("key_prefix", &self.key_prefix)
            .finish_non_exhaustive()
    }
}

/// A list, or one comma-separated string: an environment override
/// (`IDGATE_CLUSTER__SENTINELS=a:26379,b:26379`) is a string.
fn list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::Many(items) => items,
        OneOrMany::One(text) => text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

fn invalid(why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(why.into())
}

/// Reads a secret named by a file (first) or a variable, if either is set.
fn optional_secret(
    what: &str,
    env: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, ConfigError> {
    match (file, env) {
        (Some(file), _) => read_secret(what, None, Some(file)).map(Some),
        (None, Some(env)) => read_secret(what, Some(env), None).map(Some),
        (None, None) => Ok(None),
    }
}

/// Decodes a Base64 key of exactly 32 bytes.
/// Both the decoded bytes and the key are wiped when dropped.
pub(crate) fn decode_key(what: &str, text: &str) -> Result<SealKey, ConfigError> {
    let bytes = zeroize::Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| invalid(format!("{what} is not Base64")))?,
    );
    <[u8; 32]>::try_from(bytes.as_slice())
        .map(zeroize::Zeroizing::new)
        .map_err(|_| {
            invalid(format!(
                "{what} must be 32 bytes (Base64 of 32 random bytes)"
            ))
        })
}

impl ClusterConfig {
    /// True when a Redis is configured (a fleet).
    pub fn is_enabled(&self) -> bool {
        self.redis_url.is_some()
            || !self.sentinels.is_empty()
            || self.master_name.is_some()
            || self.mode == RedisMode::Cluster
            || !self.nodes.is_empty()
    }

    /// Checks what types cannot, without reading secrets.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let target = self.target()?;
        if self.mode == RedisMode::Cluster
            && (self.key_prefix.contains('{') || self.key_prefix.contains('}'))
        {
            return Err(invalid(
                "cluster.key_prefix must not hold { or } with mode = \"cluster\" (idgate adds its own hash tags)",
            ));
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(char::is_whitespace) {
            return Err(invalid(
                "cluster.key_prefix must be non-empty, without spaces",
            ));
        }
        if self.secret_key_env.is_none() && self.secret_key_file.is_none() {
            return Err(invalid(
                "a [cluster] Redis needs cluster.secret_key_env or cluster.secret_key_file (32 random bytes, Base64)",
            ));
        }
        if self.command_timeout_ms == 0 || self.connect_timeout_ms == 0 {
            return Err(invalid("cluster timeouts must be positive"));
        }
        let tls = match &target {
            RedisTarget::Server(url) => url.starts_with("rediss://"),
            RedisTarget::Cluster(nodes) => nodes.iter().all(|n| n.starts_with("rediss://")),
            RedisTarget::Sentinel { tls, .. } => *tls,
        };
        let sentinel_auth = self.sentinel_username.is_some()
            || self.sentinel_password_env.is_some()
            || self.sentinel_password_file.is_some();
        if sentinel_auth && !matches!(target, RedisTarget::Sentinel { .. }) {
            return Err(invalid(
                "cluster.sentinel_username and cluster.sentinel_password_* need cluster.sentinels",
            ));
        }
        let files = [
            ("cluster.ca_file", &self.ca_file),
            ("cluster.cert_file", &self.cert_file),
            ("cluster.key_file", &self.key_file),
        ];
        if let Some((key, _)) = files.iter().find(|(_, file)| file.is_some())
            && !tls
        {
            return Err(invalid(format!(
                "{key} needs TLS: a rediss:// cluster.redis_url, cluster.nodes or cluster.sentinels"
            )));
        }
        if !STREAM_MAX_LEN_RANGE.contains(&self.stream_max_len) {
            return Err(invalid(format!(
                "cluster.stream_max_len must be from {} to {}",
                STREAM_MAX_LEN_RANGE.start(),
                STREAM_MAX_LEN_RANGE.end()
            )));
        }
        Ok(())
    }

    /// The sealing keys `[cluster]` names, with or without a Redis: a
    /// single replica's embedded store seals with them when they are set
    /// (else with its own key file). `None`: no secret key is named.
    pub fn secret_keys(&self) -> Result<Option<Keys>, ConfigError> {
        Ok(self
            .read_secret_keys()?
            .map(|(current, previous)| Keys::new(&current, previous.as_deref())))
    }

    /// The secret key and the previous one, read and decoded, if named.
    fn read_secret_keys(&self) -> Result<Option<(SealKey, Option<SealKey>)>, ConfigError> {
        let Some(key) = optional_secret(
            "cluster.secret_key",
            self.secret_key_env.as_deref(),
            self.secret_key_file.as_deref(),
        )?
        .map(zeroize::Zeroizing::new) else {
            return Ok(None);
        };
        let current = decode_key("cluster.secret_key", &key)?;
        let previous = optional_secret(
            "cluster.previous_secret_key",
            self.previous_secret_key_env.as_deref(),
            self.previous_secret_key_file.as_deref(),
        )?
        .map(|k| decode_key("cluster.previous_secret_key", &zeroize::Zeroizing::new(k)))
        .transpose()?;
        Ok(Some((current, previous)))
    }

    /// Reads the secrets; `None` when no Redis is configured.
    pub fn resolve(&self) -> Result<Option<ClusterSettings>, ConfigError> {
        self.validate()?;
        if !self.is_enabled() {
            return Ok(None);
        }
        let target = self.target()?;
        let (current, previous) = self
            .read_secret_keys()?
            .ok_or_else(|| invalid("cluster.secret_key is not configured"))?;
        let password = optional_secret(
            "cluster.password",
            self.password_env.as_deref(),
            self.password_file.as_deref(),
        )?
        .map(secrecy::SecretString::from);
        let sentinel_password = optional_secret(
            "cluster.sentinel_password",
            self.sentinel_password_env.as_deref(),
            self.sentinel_password_file.as_deref(),
        )?
        .map(secrecy::SecretString::from);
        let tls = RedisTls::read(
            self.ca_file.as_deref(),
            self.cert_file.as_deref(),
            self.key_file.as_deref(),
        )?;
        Ok(Some(ClusterSettings {
            target,
            username: self.username.clone(),
            password,
            sentinel_username: self.sentinel_username.clone(),
            sentinel_password,
            key_prefix: self.key_prefix.clone(),
            sealer: Sealer::new(&current, previous.as_deref()),
            digester: Digester::new(&current, previous.as_deref()),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            command_timeout: Duration::from_millis(self.command_timeout_ms),
            max_backoff: Duration::from_millis(self.max_backoff_ms.max(100)),
            tls,
            stream_max_len: self.stream_max_len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key file in `dir` (removed with it when the test ends).
    pub(super) fn key_file(dir: &tempfile::TempDir, bytes: &[u8]) -> PathBuf {
        let path = dir.path().join(format!("key-{}", bytes.len()));
        std::fs::write(
            &path,
            base64::engine::general_purpose::STANDARD.encode(bytes) + "\n",
        )
        .unwrap();
        path
    }

    #[test]
    fn no_url_means_single_process() {
        assert!(ClusterConfig::default().resolve().unwrap().is_none());
    }

    #[test]
    fn a_url_needs_a_32_byte_key() {
        let mut c = ClusterConfig {
            redis_url: Some("redis://127.0.0.1:6390".into()),
            ..ClusterConfig::default()
        };
        assert!(c.resolve().unwrap_err().to_string().contains("secret_key"));
        let dir = tempfile::tempdir().unwrap();
        c.secret_key_file = Some(key_file(&dir, &[7; 16]));
        assert!(c.resolve().unwrap_err().to_string().contains("32 bytes"));
        c.secret_key_file = Some(key_file(&dir, &[7; 32]));
        let s = c.resolve().unwrap().unwrap();
        assert_eq!(s.key_prefix, "idgate:");
    }

    #[test]
    fn a_ca_file_needs_tls_and_the_stream_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["redis".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&ca, cert.pem()).unwrap();
        let mut c = ClusterConfig {
            redis_url: Some("redis://127.0.0.1:6390".into()),
            secret_key_file: Some(key_file(&dir, &[3; 32])),
            ca_file: Some(ca.clone()),
            ..ClusterConfig::default()
        };
        assert!(c.resolve().unwrap_err().to_string().contains("rediss://"));
        c.redis_url = Some("rediss://127.0.0.1:6390".into());
        let s = c.resolve().unwrap().unwrap();
        assert!(s.tls.ca_pem.is_some());
        assert_eq!(s.stream_max_len, DEFAULT_STREAM_MAX_LEN);
        for bad in [0, 999, 10_000_001] {
            c.stream_max_len = bad;
            let err = c.resolve().unwrap_err().to_string();
            assert!(err.contains("stream_max_len"), "{err}");
        }
        c.stream_max_len = 1_000;
        // Plain sentinels: no TLS for the CA to apply to.
        let sentinel = ClusterConfig {
            redis_url: None,
            sentinels: vec!["127.0.0.1:26379".into()],
            master_name: Some("idgate".into()),
            ..c.clone()
        };
        assert!(
            sentinel
                .resolve()
                .unwrap_err()
                .to_string()
                .contains("cluster.ca_file needs TLS")
        );
        // rediss:// sentinels take it, for them and their master.
        let sentinel = ClusterConfig {
            sentinels: vec!["rediss://127.0.0.1:26379".into()],
            ..sentinel
        };
        assert!(sentinel.resolve().unwrap().unwrap().tls.ca_pem.is_some());
        // A cluster's rediss:// nodes take it.
        let cluster = ClusterConfig {
            redis_url: None,
            mode: RedisMode::Cluster,
            nodes: vec!["rediss://127.0.0.1:7000".into()],
            ..c.clone()
        };
        assert!(cluster.resolve().unwrap().unwrap().tls.ca_pem.is_some());
        c.ca_file = Some(ca.with_extension("absent"));
        assert!(c.resolve().unwrap_err().to_string().contains("ca_file"));
    }

    #[test]
    fn urls_must_be_redis_and_credential_free() {
        let dir = tempfile::tempdir().unwrap();
        for url in ["http://x", "redis://user:pw@host:6379"] {
            let c = ClusterConfig {
                redis_url: Some(url.into()),
                secret_key_file: Some(key_file(&dir, &[1; 32])),
                ..ClusterConfig::default()
            };
            let err = c.resolve().unwrap_err().to_string();
            assert!(!err.contains("pw"), "{err}");
        }
    }

    #[test]
    fn toml_names_the_modes() {
        let c: ClusterConfig =
            toml::from_str("mode = \"cluster\"\nnodes = [\"redis://127.0.0.1:7000\"]\n").unwrap();
        assert_eq!(c.mode, RedisMode::Cluster);
        assert!(toml::from_str::<ClusterConfig>("mode = \"sharded\"\n").is_err());
        // An environment override is one string: a comma-separated list.
        let c: ClusterConfig =
            toml::from_str("sentinels = \"10.0.0.1:26379, 10.0.0.2:26379\"\n").unwrap();
        assert_eq!(c.sentinels, ["10.0.0.1:26379", "10.0.0.2:26379"]);
    }
}
