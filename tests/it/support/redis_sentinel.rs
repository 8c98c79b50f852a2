//! A Sentinel-managed Redis of one test: a master, one replica and three
//! sentinels (`redis-server --sentinel` on a generated config), all on
//! loopback. Sentinels judge a master down after 1 s without an answer and
//! fail over with a short timeout, so a test that kills the master sees
//! the replica promoted within seconds; the test waits on the sentinels'
//! answer, never on a delay.
//!
//! [`SentinelPair`]: a master and one sentinel, serving TLS only, the
//! sentinel requiring a password, or both.

use std::time::Duration;

pub use super::redis_node::TlsFiles;
use super::redis_node::{Access, RedisNode, plain_server, settle};

/// The name the sentinels monitor the master by.
pub const MASTER_NAME: &str = "idgate-fleet";

/// Longest a set may take to settle or to fail over before the test fails.
const SETTLE_WAIT: Duration = Duration::from_secs(60);

/// A master, its replica and three sentinels.
pub struct RedisSentinelSet {
    /// The master at start; `None` once killed.
    master: Option<RedisNode>,
    replica: RedisNode,
    sentinels: Vec<RedisNode>,
}

impl RedisSentinelSet {
    /// Starts the set and waits until the replica is linked and every
    /// sentinel knows the replica and the two other sentinels (what a
    /// failover needs).
    pub fn start() -> Self {
        let master = RedisNode::start(None, plain_server);
        let master_port = master.port();
        let replica = RedisNode::start(None, |port, dir| {
            let mut args = plain_server(port, dir);
            args.extend([
                "--replicaof".into(),
                "127.0.0.1".into(),
                master_port.to_string(),
            ]);
            args
        });
        settle("the replica is linked to the master", SETTLE_WAIT, || {
            replica
                .query::<String>(redis::cmd("INFO").arg("replication"))
                .is_ok_and(|i| i.contains("master_link_status:up"))
        });
        let sentinels: Vec<RedisNode> = (0..3)
            .map(|_| {
                RedisNode::start(None, |port, dir| {
                    let conf = dir.join("sentinel.conf");
                    std::fs::write(&conf, sentinel_conf(port, master_port))
                        .expect("write sentinel.conf");
                    vec![conf.display().to_string(), "--sentinel".into()]
                })
            })
            .collect();
        for s in &sentinels {
            settle(
                "each sentinel knows the replica and the other sentinels",
                SETTLE_WAIT,
                || {
                    let known = |what: &str| {
                        s.query::<Vec<redis::Value>>(
                            redis::cmd("SENTINEL").arg(what).arg(MASTER_NAME),
                        )
                        .map_or(0, |v| v.len())
                    };
                    known("replicas") == 1 && known("sentinels") == 2
                },
            );
        }
        Self {
            master: Some(master),
            replica,
            sentinels,
        }
    }

    /// `host:port` of each sentinel (`[cluster] sentinels`).
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisNode::addr).collect()
    }

    /// Waits until the replica has every write the master took (`WAIT`).
    pub fn sync_replica(&self) {
        let master = self.master.as_ref().expect("the master is alive");
        settle("the replica has the master's writes", SETTLE_WAIT, || {
            master
                .query::<i64>(redis::cmd("WAIT").arg(1).arg(1000))
                .is_ok_and(|n| n >= 1)
        });
    }

    /// Kills sentinel `i` (in [`RedisSentinelSet::sentinel_addrs`]
    /// order); the two others still make a quorum and a majority.
    pub fn kill_sentinel(&mut self, i: usize) {
        self.sentinels[i].kill();
    }

    /// Asks the sentinels for a failover with the master alive
    /// (`SENTINEL FAILOVER`): it is demoted to a replica of its replica.
    pub fn switch_over(&self) {
        settle("a sentinel starts the failover", SETTLE_WAIT, || {
            self.sentinels.iter().filter(|s| s.is_running()).any(|s| {
                s.query::<String>(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
                    .is_ok()
            })
        });
    }

    /// Kills the master (`SIGKILL`: its clients see the connection drop).
    pub fn kill_master(&mut self) {
        self.master.take().expect("the master is alive").kill();
    }

    /// Waits until every running sentinel names the replica as master,
    /// the replica says it is one, and the old master, if alive, says it
    /// is a replica.
    pub fn wait_for_failover(&self) {
        let promoted = self.replica.port();
        for s in self.sentinels.iter().filter(|s| s.is_running()) {
            settle(
                "the sentinels name the replica as master",
                SETTLE_WAIT,
                || {
                    s.query::<(String, String)>(
                        redis::cmd("SENTINEL")
                            .arg("get-master-addr-by-name")
                            .arg(MASTER_NAME),
                    )
                    .is_ok_and(|(_, port)| port == promoted.to_string())
                },
            );
        }
        settle("the replica acts as master", SETTLE_WAIT, || {
            self.replica
                .query::<String>(redis::cmd("INFO").arg("replication"))
                .is_ok_and(|i| i.contains("role:master"))
        });
        if let Some(old) = &self.master {
            settle(
                "the old master is demoted to a replica",
                SETTLE_WAIT,
                || {
                    old.query::<String>(redis::cmd("INFO").arg("replication"))
                        .is_ok_and(|i| i.contains("role:slave"))
                },
            );
        }
    }
}

/// A sentinel on `port` monitoring the master on `master_port` (quorum 2
/// of 3), judging it down after 1 s.
fn sentinel_conf(port: u16, master_port: u16) -> String {
    format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
         sentinel failover-timeout {MASTER_NAME} 5000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n"
    )
}

/// A master and one sentinel, hardened as a deployment may be: both
/// serving TLS only, and the sentinel requiring a password of its own
/// (`requirepass` in its configuration). Quorum 1: enough to name the
/// master (failover is [`RedisSentinelSet`]'s).
pub struct SentinelPair {
    master: RedisNode,
    sentinel: RedisNode,
}

impl SentinelPair {
    /// Starts both, over TLS with `tls`, the sentinel requiring
    /// `sentinel_password`; waits until the sentinel has reached the
    /// master.
    pub fn start(tls: Option<TlsFiles>, sentinel_password: Option<&str>) -> Self {
        let listen = |port: u16| match &tls {
            Some(files) => files.args(port, false),
            None => vec!["--port".into(), port.to_string()],
        };
        let master_access = Access {
            tls: tls.as_ref().map(|files| files.certificates(false)),
            password: None,
        };
        let master = RedisNode::start_with(None, master_access.clone(), |port, dir| {
            // `plain_server`'s flags, listening as `listen` says.
            let mut args = listen(port);
            args.extend(plain_server(port, dir).into_iter().skip(2));
            args
        });
        let master_port = master.port();
        let sentinel_access = Access {
            password: sentinel_password.map(str::to_owned),
            ..master_access
        };
        let sentinel = RedisNode::start_with(None, sentinel_access, |port, dir| {
            let conf = dir.join("sentinel.conf");
            let requirepass = sentinel_password
                .map(|p| format!("requirepass {p}\n"))
                .unwrap_or_default();
            let monitor = format!(
                "bind 127.0.0.1\n{requirepass}\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
            );
            std::fs::write(&conf, monitor).expect("write sentinel.conf");
            let mut args = vec![conf.display().to_string(), "--sentinel".into()];
            args.extend(listen(port));
            args
        });
        settle("the sentinel reaches the master", SETTLE_WAIT, || {
            sentinel
                .query::<Vec<String>>(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))
                .is_ok_and(|fields| {
                    fields.chunks(2).any(|pair| {
                        pair[0] == "flags" && pair.get(1).is_some_and(|f| f == "master")
                    })
                })
        });
        Self { master, sentinel }
    }

    /// `redis://` or `rediss://127.0.0.1:PORT` of the sentinel
    /// (`[cluster] sentinels`).
    pub fn sentinel_url(&self) -> String {
        self.sentinel.url()
    }

    /// The master, asked as it is served.
    pub fn master(&self) -> &RedisNode {
        &self.master
    }
}
