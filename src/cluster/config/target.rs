//! Where the fleet's Redis is: one server, a Sentinel-managed master or a
//! Redis Cluster, checked from `[cluster]` (each error names its key).

use super::{ClusterConfig, RedisMode, invalid};
use crate::config_source::ConfigError;

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
        /// The sentinels and the master they name speak TLS only
        /// (`rediss://` entries).
        tls: bool,
    },
    /// A Redis Cluster, from these seed node URLs.
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// `server`, `sentinel` or `cluster`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            RedisTarget::Server(_) => "server",
            RedisTarget::Sentinel { .. } => "sentinel",
            RedisTarget::Cluster(_) => "cluster",
        }
    }
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

/// A `sentinels` entry: `host:port` or `redis://host:port` (plain TCP), or
/// `rediss://host:port` (TLS); its address and whether it is TLS. Nothing
/// else in it: no credentials, path or database.
fn sentinel_entry(text: &str) -> Option<((String, u16), bool)> {
    let text = text.trim();
    let (rest, tls) = match text.split_once("://") {
        None => (text, false),
        Some(("redis", rest)) => (rest, false),
        Some(("rediss", rest)) => (rest, true),
        Some(_) => return None,
    };
    if rest.contains(['@', '/']) {
        return None;
    }
    host_port(rest).map(|address| (address, tls))
}

/// `host:port` with a non-zero port.
fn host_port(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.trim().rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && !host.contains(char::is_whitespace)).then(|| (host.to_owned(), port))
}

impl ClusterConfig {
    /// Where Redis is: exactly one of `redis_url`, `sentinels` with
    /// `master_name`, or `mode = "cluster"` with `nodes`. Each error names
    /// the key at fault.
    pub(super) fn target(&self) -> Result<RedisTarget, ConfigError> {
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
            let entries = self
                .sentinels
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    sentinel_entry(s).ok_or_else(|| {
                        invalid(format!(
                            "cluster.sentinels[{i}] must be host:port, redis://host:port or rediss://host:port"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let tls = entries.first().is_some_and(|(_, tls)| *tls);
            if entries.iter().any(|(_, t)| *t != tls) {
                return Err(invalid(
                    "cluster.sentinels must all be plain (host:port, redis://) or all rediss://",
                ));
            }
            return Ok(RedisTarget::Sentinel {
                sentinels: entries.into_iter().map(|(address, _)| address).collect(),
                master_name,
                tls,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::config::tests::key_file;

    /// `c` with a key file in `dir` (removed with it when the test ends).
    fn with_key(dir: &tempfile::TempDir, c: ClusterConfig) -> ClusterConfig {
        ClusterConfig {
            secret_key_file: Some(key_file(dir, &[3; 32])),
            ..c
        }
    }

    #[test]
    fn sentinels_and_master_name_come_together_and_name_the_missing_key() {
        let dir = tempfile::tempdir().unwrap();
        let only_sentinels = with_key(
            &dir,
            ClusterConfig {
                sentinels: vec!["127.0.0.1:26379".into()],
                ..ClusterConfig::default()
            },
        );
        let err = only_sentinels.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.master_name"), "{err}");
        let only_name = with_key(
            &dir,
            ClusterConfig {
                master_name: Some("fleet".into()),
                ..ClusterConfig::default()
            },
        );
        let err = only_name.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.sentinels"), "{err}");
        let both = with_key(
            &dir,
            ClusterConfig {
                sentinels: vec!["10.0.0.1:26379".into(), "[::1]:26380".into()],
                master_name: Some("fleet".into()),
                ..ClusterConfig::default()
            },
        );
        assert_eq!(
            both.resolve().unwrap().unwrap().target,
            RedisTarget::Sentinel {
                sentinels: vec![("10.0.0.1".into(), 26379), ("::1".into(), 26380)],
                tls: false,
                master_name: "fleet".into(),
            }
        );
        let bad = with_key(
            &dir,
            ClusterConfig {
                sentinels: vec!["10.0.0.1".into()],
                master_name: Some("fleet".into()),
                ..ClusterConfig::default()
            },
        );
        let err = bad.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.sentinels[0]"), "{err}");
    }

    #[test]
    fn rediss_sentinels_ask_for_tls_to_the_sentinels_and_the_master_and_agree() {
        let dir = tempfile::tempdir().unwrap();
        let sentinels = |entries: &[&str]| {
            with_key(
                &dir,
                ClusterConfig {
                    sentinels: entries.iter().map(|e| (*e).to_owned()).collect(),
                    master_name: Some("fleet".into()),
                    ..ClusterConfig::default()
                },
            )
        };
        assert_eq!(
            sentinels(&["rediss://10.0.0.1:26379", " rediss://[::1]:26380 "])
                .resolve()
                .unwrap()
                .unwrap()
                .target,
            RedisTarget::Sentinel {
                sentinels: vec![("10.0.0.1".into(), 26379), ("::1".into(), 26380)],
                master_name: "fleet".into(),
                tls: true,
            }
        );
        assert_eq!(
            sentinels(&["redis://10.0.0.1:26379", "10.0.0.2:26379"])
                .resolve()
                .unwrap()
                .unwrap()
                .target,
            RedisTarget::Sentinel {
                sentinels: vec![("10.0.0.1".into(), 26379), ("10.0.0.2".into(), 26379)],
                master_name: "fleet".into(),
                tls: false,
            }
        );
        let err = sentinels(&["rediss://10.0.0.1:26379", "10.0.0.2:26379"])
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("all rediss://"), "{err}");
        for bad in [
            "rediss://user:secret@10.0.0.1:26379",
            "rediss://10.0.0.1:26379/0",
            "http://10.0.0.1:26379",
        ] {
            let err = sentinels(&[bad]).resolve().unwrap_err().to_string();
            assert!(err.contains("cluster.sentinels[0]"), "{bad}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn sentinel_credentials_need_sentinels_and_are_read_from_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sentinel-password");
        std::fs::write(&file, "sentinel-secret\n").unwrap();
        let c = with_key(
            &dir,
            ClusterConfig {
                sentinels: vec!["127.0.0.1:26379".into()],
                master_name: Some("fleet".into()),
                sentinel_username: Some("watcher".into()),
                sentinel_password_file: Some(file.clone()),
                ..ClusterConfig::default()
            },
        );
        let s = c.resolve().unwrap().unwrap();
        assert_eq!(s.sentinel_username.as_deref(), Some("watcher"));
        assert_eq!(
            secrecy::ExposeSecret::expose_secret(s.sentinel_password.as_ref().unwrap()),
            "sentinel-secret"
        );
        assert!(!format!("{s:?}").contains("sentinel-secret"));
        let one_server = ClusterConfig {
            sentinels: Vec::new(),
            master_name: None,
            redis_url: Some("redis://127.0.0.1:6379".into()),
            ..c
        };
        let err = one_server.resolve().unwrap_err().to_string();
        assert!(err.contains("need cluster.sentinels"), "{err}");
    }

    #[test]
    fn the_redis_is_named_one_way_only() {
        let dir = tempfile::tempdir().unwrap();
        let url_and_sentinels = with_key(
            &dir,
            ClusterConfig {
                redis_url: Some("redis://127.0.0.1:6390".into()),
                sentinels: vec!["127.0.0.1:26379".into()],
                master_name: Some("fleet".into()),
                ..ClusterConfig::default()
            },
        );
        let err = url_and_sentinels.resolve().unwrap_err().to_string();
        assert!(
            err.contains("cluster.redis_url") && err.contains("cluster.sentinels"),
            "{err}"
        );
        let url_and_cluster = with_key(
            &dir,
            ClusterConfig {
                redis_url: Some("redis://127.0.0.1:6390".into()),
                mode: RedisMode::Cluster,
                nodes: vec!["redis://127.0.0.1:7000".into()],
                ..ClusterConfig::default()
            },
        );
        let err = url_and_cluster.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.nodes"), "{err}");
        let sentinels_and_nodes = with_key(
            &dir,
            ClusterConfig {
                sentinels: vec!["127.0.0.1:26379".into()],
                master_name: Some("fleet".into()),
                mode: RedisMode::Cluster,
                nodes: vec!["redis://127.0.0.1:7000".into()],
                ..ClusterConfig::default()
            },
        );
        assert!(sentinels_and_nodes.resolve().is_err());
    }

    #[test]
    fn cluster_mode_needs_credential_free_seed_nodes_and_a_brace_free_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let no_nodes = with_key(
            &dir,
            ClusterConfig {
                mode: RedisMode::Cluster,
                ..ClusterConfig::default()
            },
        );
        let err = no_nodes.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.nodes"), "{err}");
        let nodes_without_mode = with_key(
            &dir,
            ClusterConfig {
                nodes: vec!["redis://127.0.0.1:7000".into()],
                ..ClusterConfig::default()
            },
        );
        let err = nodes_without_mode.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.mode"), "{err}");
        let with_password = with_key(
            &dir,
            ClusterConfig {
                mode: RedisMode::Cluster,
                nodes: vec![
                    "redis://127.0.0.1:7000".into(),
                    "redis://u:pw@h:7001".into(),
                ],
                ..ClusterConfig::default()
            },
        );
        let err = with_password.resolve().unwrap_err().to_string();
        assert!(
            err.contains("cluster.nodes[1]") && !err.contains("pw"),
            "{err}"
        );
        let braces = with_key(
            &dir,
            ClusterConfig {
                mode: RedisMode::Cluster,
                nodes: vec!["redis://127.0.0.1:7000".into()],
                key_prefix: "{fleet}:".into(),
                ..ClusterConfig::default()
            },
        );
        let err = braces.resolve().unwrap_err().to_string();
        assert!(err.contains("cluster.key_prefix"), "{err}");
        let good = with_key(
            &dir,
            ClusterConfig {
                mode: RedisMode::Cluster,
                nodes: vec!["redis://127.0.0.1:7000".into()],
                ..ClusterConfig::default()
            },
        );
        assert_eq!(
            good.resolve().unwrap().unwrap().target,
            RedisTarget::Cluster(vec!["redis://127.0.0.1:7000".into()])
        );
    }
}
