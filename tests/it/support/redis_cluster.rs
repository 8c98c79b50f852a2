//! A Redis Cluster of one test: three masters, no replicas, on loopback,
//! made with `redis-cli --cluster create` (Debian's `redis-tools`). Each
//! node's cluster bus port (its port + 10000) is free when the node
//! starts. The cluster is ready once every node reports
//! `cluster_state:ok` with all 16384 slots assigned.
//!
//! [`RedisClusterSet::start_tls`]: the same, every node serving TLS only
//! (its clients, its peers on the cluster bus) and asking every client
//! for a certificate of the test's CA.

use std::time::Duration;

use super::redis_node::{Access, RedisNode, TlsFiles, plain_server, require, settle};

/// Longest the cluster may take to form before the test fails.
const SETTLE_WAIT: Duration = Duration::from_secs(60);

/// A cluster's bus listens on the node's port plus this.
const BUS_OFFSET: u16 = 10_000;

/// Three masters sharing the 16384 slots.
pub struct RedisClusterSet {
    nodes: Vec<RedisNode>,
}

impl RedisClusterSet {
    /// Starts three cluster-enabled nodes, joins them into a cluster and
    /// waits until every node serves it.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// As [`RedisClusterSet::start`], every node serving TLS only on
    /// `tls`'s files and asking clients for a certificate.
    pub fn start_tls(tls: &TlsFiles) -> Self {
        Self::start_with(Some(tls))
    }

    fn start_with(tls: Option<&TlsFiles>) -> Self {
        require("redis-cli", "redis-tools");
        let access = Access {
            tls: tls.map(|files| files.certificates(true)),
            password: None,
        };
        let nodes: Vec<RedisNode> = (0..3)
            .map(|_| {
                RedisNode::start_with(Some(BUS_OFFSET), access.clone(), |port, dir| {
                    let mut args = plain_server(port, dir);
                    if let Some(files) = tls {
                        // `plain_server`'s `--port`, served over TLS only.
                        args.drain(..2);
                        args.extend(files.args(port, true));
                    }
                    args.extend(
                        [
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            "5000",
                        ]
                        .map(str::to_owned),
                    );
                    args
                })
            })
            .collect();
        // `redis-cli` trusts the CA and presents the nodes' certificate.
        let client_tls: Vec<String> = tls
            .map(|f| {
                let path = |p: &std::path::PathBuf| p.display().to_string();
                vec![
                    "--tls".into(),
                    "--cacert".into(),
                    path(&f.ca),
                    "--cert".into(),
                    path(&f.cert),
                    "--key".into(),
                    path(&f.key),
                ]
            })
            .unwrap_or_default();
        let output = crate::child_env::command("redis-cli")
            .args(&client_tls)
            .arg("--cluster")
            .arg("create")
            .args(nodes.iter().map(RedisNode::addr))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "redis-cli --cluster create: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        for node in &nodes {
            settle("every node serves the whole cluster", SETTLE_WAIT, || {
                node.query::<String>(redis::cmd("CLUSTER").arg("INFO"))
                    .is_ok_and(|i| {
                        i.contains("cluster_state:ok")
                            && i.contains("cluster_slots_assigned:16384")
                            && i.contains("cluster_known_nodes:3")
                    })
            });
        }
        Self { nodes }
    }

    /// `redis://127.0.0.1:PORT` of every node (`[cluster] nodes`).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisNode::url).collect()
    }

    /// Every key on every node (`KEYS *`, a test's few keys).
    pub fn keys(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| {
                n.query::<Vec<String>>(redis::cmd("KEYS").arg("*"))
                    .expect("KEYS on a node")
            })
            .collect()
    }

    /// `cmd` on the node that owns its key (the others answer `MOVED`).
    pub fn query_owner<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        self.nodes
            .iter()
            .find_map(|n| n.query::<T>(cmd).ok())
            .expect("one node owns the key")
    }

    /// How many nodes hold at least one key.
    pub fn nodes_with_keys(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.query::<i64>(&redis::cmd("DBSIZE")).is_ok_and(|k| k > 0))
            .count()
    }
}
