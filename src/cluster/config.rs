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

use super::seal::{Digester, SealKey, Sealer};
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
    /// Sentinel addresses, `host:port`: the master named `master_name` is
    /// found through them, and found again after a failover.
    pub sentinels: Vec<String>,
    /// The name the sentinels know the master by (`sentinel monitor NAME`).
    pub master_name: Option<String>,
    /// `standalone` (default) or `cluster`.
    pub mode: RedisMode,
    /// Seed nodes of a Redis Cluster, `redis://host:port` or `rediss://`;
    /// the rest of the cluster is discovered from them.
    pub nodes: Vec<String>,
    /// ACL user name (the password comes from `password_env`/`password_file`).
    pub username: Option<String>,
    /// Environment variable holding the Redis password.
    pub password_env: Option<String>,
    /// File holding the Redis password (wins over the variable).
    pub password_file: Option<PathBuf>,
    /// Prefix of every key and of the pub/sub channel.
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
}

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
            key_prefix: "idgate:".to_owned(),
            secret_key_env: None,
            secret_key_file: None,
            previous_secret_key_env: None,
            previous_secret_key_file: None,
            connect_timeout_ms: 1_000,
            command_timeout_ms: 250,
            max_backoff_ms: 2_000,
        }
    }
}

/// Where the fleet's Redis is, resolved from `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server: `redis://` or `rediss://` URL, no credentials in it.
    Server(String),
    /// The master `master_name`, as the sentinels at these `(host, port)`
    /// say; asked again after every loss of connection.
    Sentinel {
        /// Sentinel addresses.
        sentinels: Vec<(String, u16)>,
        /// The monitored master's name.
        master_name: String,
    },
    /// A Redis Cluster, from these seed node URLs.
    Cluster(Vec<String>),
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
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("key_prefix", &self.key_prefix)
            .finish_non_exhaustive()
    }
}

fn invalid(why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(why.into())
}

/// A Redis URL: `redis://` or `rediss://`, no credentials in it.
fn check_url(key: &str, url: &str) -> Result<(), ConfigError> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(invalid(format!(
            "{key} must start with redis:// or rediss://"
        )));
    }
    if url.contains('@') {
        return Err(invalid(format!(
            "{key} must not hold credentials: use cluster.username and password_env or password_file"
        )));
    }
    Ok(())
}

/// `host:port` with a non-zero port.
fn host_port(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.trim().rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && !host.contains(char::is_whitespace)).then(|| (host.to_owned(), port))
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
        self.target()?;
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
        Ok(())
    }

    /// Where Redis is: exactly one of `redis_url`, `sentinels` with
    /// `master_name`, or `mode = "cluster"` with `nodes`. Each error names
    /// the key at fault.
    fn target(&self) -> Result<RedisTarget, ConfigError> {
        let sentinel = !self.sentinels.is_empty() || self.master_name.is_some();
        let cluster = self.mode == RedisMode::Cluster || !self.nodes.is_empty();
        if sentinel && cluster {
            return Err(invalid(
                "cluster.sentinels and cluster.nodes exclude each other: Sentinel manages one master, a Redis Cluster its own failover",
            ));
        }
        if self.redis_url.is_some() && (sentinel || cluster) {
            let other = if sentinel {
                "cluster.sentinels"
            } else {
                "cluster.nodes"
            };
            return Err(invalid(format!(
                "cluster.redis_url and {other} exclude each other: name the Redis one way"
            )));
        }
        if let Some(url) = &self.redis_url {
            check_url("cluster.redis_url", url)?;
            return Ok(RedisTarget::Server(url.clone()));
        }
        if sentinel {
            let Some(master_name) = self.master_name.clone().filter(|m| !m.trim().is_empty())
            else {
                return Err(invalid(
                    "cluster.sentinels needs cluster.master_name (the name in `sentinel monitor`)",
                ));
            };
            if self.sentinels.is_empty() {
                return Err(invalid(
                    "cluster.master_name needs cluster.sentinels (host:port of each sentinel)",
                ));
            }
            let sentinels = self
                .sentinels
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    host_port(s)
                        .ok_or_else(|| invalid(format!("cluster.sentinels[{i}] must be host:port")))
                })
                .collect::<Result<_, _>>()?;
            return Ok(RedisTarget::Sentinel {
                sentinels,
                master_name,
            });
        }
        if self.mode != RedisMode::Cluster {
            return Err(invalid("cluster.nodes needs cluster.mode = \"cluster\""));
        }
        if self.nodes.is_empty() {
            return Err(invalid(
                "cluster.mode = \"cluster\" needs cluster.nodes (seed node URLs)",
            ));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            check_url(&format!("cluster.nodes[{i}]"), node)?;
        }
        let tls = |n: &String| n.starts_with("rediss://");
        if self.nodes.iter().any(tls) != self.nodes.iter().all(tls) {
            return Err(invalid(
                "cluster.nodes must all be redis:// or all rediss://",
            ));
        }
        Ok(RedisTarget::Cluster(self.nodes.clone()))
    }

    /// Reads the secrets; `None` when no Redis is configured.
    pub fn resolve(&self) -> Result<Option<ClusterSettings>, ConfigError> {
        self.validate()?;
        if !self.is_enabled() {
            return Ok(None);
        }
        let target = self.target()?;
        let key = optional_secret(
            "cluster.secret_key",
            self.secret_key_env.as_deref(),
            self.secret_key_file.as_deref(),
        )?
        .map(zeroize::Zeroizing::new)
        .ok_or_else(|| invalid("cluster.secret_key is not configured"))?;
        let current = decode_key("cluster.secret_key", &key)?;
        let previous = optional_secret(
            "cluster.previous_secret_key",
            self.previous_secret_key_env.as_deref(),
            self.previous_secret_key_file.as_deref(),
        )?
        .map(|k| decode_key("cluster.previous_secret_key", &zeroize::Zeroizing::new(k)))
        .transpose()?;
        let password = optional_secret(
            "cluster.password",
            self.password_env.as_deref(),
            self.password_file.as_deref(),
        )?
        .map(secrecy::SecretString::from);
        Ok(Some(ClusterSettings {
            target,
            username: self.username.clone(),
            password,
            key_prefix: self.key_prefix.clone(),
            sealer: Sealer::new(&current, previous.as_deref()),
            digester: Digester::new(&current, previous.as_deref()),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            command_timeout: Duration::from_millis(self.command_timeout_ms),
            max_backoff: Duration::from_millis(self.max_backoff_ms.max(100)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(bytes: &[u8]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("idgate-cluster-key-{}", uuid::Uuid::new_v4()));
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
        c.secret_key_file = Some(key_file(&[7; 16]));
        assert!(c.resolve().unwrap_err().to_string().contains("32 bytes"));
        c.secret_key_file = Some(key_file(&[7; 32]));
        let s = c.resolve().unwrap().unwrap();
        assert_eq!(s.key_prefix, "idgate:");
    }

    #[test]
    fn urls_must_be_redis_and_credential_free() {
        for url in ["http://x", "redis://user:pw@host:6379"] {
            let c = ClusterConfig {
                redis_url: Some(url.into()),
                secret_key_file: Some(key_file(&[1; 32])),
                ..ClusterConfig::default()
            };
            let err = c.resolve().unwrap_err().to_string();
            assert!(!err.contains("pw"), "{err}");
        }
    }

    fn with_key(c: ClusterConfig) -> ClusterConfig {
        ClusterConfig {
            secret_key_file: Some(key_file(&[3; 32])),
            ..c
        }
    }

    #[test]
    fn sentinels_and_master_name_come_together_and_name_the_missing_key() {
        let only_sentinels = with_key(ClusterConfig {
            sentinels: vec!["127.0.0.1:26379".into()],
            ..ClusterConfig::default()
        });
        let err = only_sentinels.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.master_name"), "{err}");
        let only_name = with_key(ClusterConfig {
            master_name: Some("fleet".into()),
            ..ClusterConfig::default()
        });
        let err = only_name.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.sentinels"), "{err}");
        let both = with_key(ClusterConfig {
            sentinels: vec!["10.0.0.1:26379".into(), "[::1]:26380".into()],
            master_name: Some("fleet".into()),
            ..ClusterConfig::default()
        });
        assert_eq!(
            both.resolve().unwrap().unwrap().target,
            RedisTarget::Sentinel {
                sentinels: vec![("10.0.0.1".into(), 26379), ("::1".into(), 26380)],
                master_name: "fleet".into(),
            }
        );
        let bad = with_key(ClusterConfig {
            sentinels: vec!["10.0.0.1".into()],
            master_name: Some("fleet".into()),
            ..ClusterConfig::default()
        });
        let err = bad.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.sentinels[0]"), "{err}");
    }

    #[test]
    fn the_redis_is_named_one_way_only() {
        let url_and_sentinels = with_key(ClusterConfig {
            redis_url: Some("redis://127.0.0.1:6390".into()),
            sentinels: vec!["127.0.0.1:26379".into()],
            master_name: Some("fleet".into()),
            ..ClusterConfig::default()
        });
        let err = url_and_sentinels.resolve().unwrap_err().to_string();
        assert!(
            err.contains("cluster.redis_url") && err.contains("cluster.sentinels"),
            "{err}"
        );
        let url_and_cluster = with_key(ClusterConfig {
            redis_url: Some("redis://127.0.0.1:6390".into()),
            mode: RedisMode::Cluster,
            nodes: vec!["redis://127.0.0.1:7000".into()],
            ..ClusterConfig::default()
        });
        let err = url_and_cluster.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.nodes"), "{err}");
        let sentinels_and_nodes = with_key(ClusterConfig {
            sentinels: vec!["127.0.0.1:26379".into()],
            master_name: Some("fleet".into()),
            mode: RedisMode::Cluster,
            nodes: vec!["redis://127.0.0.1:7000".into()],
            ..ClusterConfig::default()
        });
        assert!(sentinels_and_nodes.resolve().is_err());
    }

    #[test]
    fn cluster_mode_needs_credential_free_seed_nodes_and_a_brace_free_prefix() {
        let no_nodes = with_key(ClusterConfig {
            mode: RedisMode::Cluster,
            ..ClusterConfig::default()
        });
        let err = no_nodes.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.nodes"), "{err}");
        let nodes_without_mode = with_key(ClusterConfig {
            nodes: vec!["redis://127.0.0.1:7000".into()],
            ..ClusterConfig::default()
        });
        let err = nodes_without_mode.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.mode"), "{err}");
        let with_password = with_key(ClusterConfig {
            mode: RedisMode::Cluster,
            nodes: vec![
                "redis://127.0.0.1:7000".into(),
                "redis://u:pw@h:7001".into(),
            ],
            ..ClusterConfig::default()
        });
        let err = with_password.resolve().unwrap_err().to_string();
        assert!(
            err.contains("cluster.nodes[1]") && !err.contains("pw"),
            "{err}"
        );
        let braces = with_key(ClusterConfig {
            mode: RedisMode::Cluster,
            nodes: vec!["redis://127.0.0.1:7000".into()],
            key_prefix: "{fleet}:".into(),
            ..ClusterConfig::default()
        });
        let err = braces.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.key_prefix"), "{err}");
        let good = with_key(ClusterConfig {
            mode: RedisMode::Cluster,
            nodes: vec!["redis://127.0.0.1:7000".into()],
            ..ClusterConfig::default()
        });
        assert_eq!(
            good.resolve().unwrap().unwrap().target,
            RedisTarget::Cluster(vec!["redis://127.0.0.1:7000".into()])
        );
    }

    #[test]
    fn toml_names_the_modes() {
        let c: ClusterConfig =
            toml::from_str("mode = \"cluster\"\nnodes = [\"redis://127.0.0.1:7000\"]\n").unwrap();
        assert_eq!(c.mode, RedisMode::Cluster);
        assert!(toml::from_str::<ClusterConfig>("mode = \"sharded\"\n").is_err());
    }
}
