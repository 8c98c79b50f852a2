//! One `redis-server` child of a multi-process Redis set (a Sentinel set,
//! a Redis Cluster): loopback, no persistence, in a directory of its own,
//! killed on drop. [`super::redis::RedisServer`] is the single server of
//! a plain fleet; this is the building block of
//! [`super::redis_sentinel`] and [`super::redis_cluster`].
//!
//! The port is picked free and bound by the child; the node is ready only
//! once the process answering on the port reports the child's own pid
//! (`INFO server`'s `process_id`), and a child that exits first (its port
//! taken meanwhile) is started again on another port.

use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

pub use super::redis::TlsFiles;
use super::redis::{answers_as_itself, process_id, spawn_failed};

/// A running `redis-server` (or `redis-server --sentinel`) of this test.
pub struct RedisNode {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    access: Access,
}

/// How the test's own client reaches a node.
#[derive(Clone, Default)]
pub struct Access {
    /// The CAs, and where asked a client certificate, of a node that
    /// serves TLS only ([`TlsFiles::certificates`]).
    pub tls: Option<redis::TlsCertificates>,
    /// The node's `requirepass`.
    pub password: Option<String>,
}

/// A free loopback port; with `bus_offset`, `port + bus_offset` is free
/// too (a cluster node's bus port).
pub fn free_port(bus_offset: Option<u16>) -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let Some(offset) = bus_offset else {
            return port;
        };
        let Some(bus) = port.checked_add(offset) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
}

/// Panics naming the Debian package when `binary` cannot run.
pub fn require(binary: &str, package: &str) {
    if let Err(e) = crate::child_env::command(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        panic!(
            "cannot run {binary} ({e}): these tests need Debian's `{package}` package (scripts/test installs it)"
        );
    }
}

impl RedisNode {
    /// Starts a node in a new directory: `args(port, dir)` is its command
    /// line after `redis-server` (a config file written there, flags).
    /// `bus_offset`: also keep `port + offset` free (cluster bus).
    pub fn start(bus_offset: Option<u16>, args: impl Fn(u16, &Path) -> Vec<String>) -> Self {
        Self::start_with(bus_offset, Access::default(), args)
    }

    /// As [`RedisNode::start`], for a node the test's client reaches as
    /// `access` says: over TLS only (`args` say `--port 0 --tls-port
    /// PORT` and its files), with a password (`args` set `requirepass`).
    pub fn start_with(
        bus_offset: Option<u16>,
        access: Access,
        args: impl Fn(u16, &Path) -> Vec<String>,
    ) -> Self {
        require("redis-server", "redis-server");
        let dir = std::env::temp_dir().join(format!("idgate-test-redis-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("redis node dir");
        let mut node = Self {
            port: 0,
            dir,
            child: None,
            access,
        };
        loop {
            node.port = free_port(bus_offset);
            if node.spawn(&args(node.port, &node.dir)) {
                return node;
            }
        }
    }

    /// Starts the child and waits until it answers on its port; false if
    /// it exited first (the port was taken).
    fn spawn(&mut self, args: &[String]) -> bool {
        let mut child = crate::child_env::command("redis-server")
            .args(args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| spawn_failed(&e));
        if !answers_as_itself(&mut child, self.port, || self.pid_on_port()) {
            return false;
        }
        self.child = Some(child);
        true
    }

    fn pid_on_port(&self) -> Option<u32> {
        let info: String = self.query(redis::cmd("INFO").arg("server")).ok()?;
        process_id(&info)
    }

    /// One command on a connection of the test's own (blocking).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        let url = match &self.access.password {
            Some(p) => self.url().replacen("://", &format!("://:{p}@"), 1),
            None => self.url(),
        };
        let client = match &self.access.tls {
            None => redis::Client::open(url)?,
            Some(certificates) => redis::Client::build_with_tls(url, certificates.clone())?,
        };
        let mut conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
        cmd.query(&mut conn)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://` for a node serving TLS.
    pub fn url(&self) -> String {
        let scheme = if self.access.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// True until [`RedisNode::kill`].
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the process at once (`SIGKILL`: no goodbye to its peers).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `check` every 50 ms (blocking) until it holds, at most `within`;
/// panics naming `what` otherwise. For a Redis set settling (replication
/// linked, sentinels met, slots assigned, a failover done).
pub fn settle(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let give_up = Instant::now() + within;
    while !check() {
        assert!(
            Instant::now() < give_up,
            "not reached within {within:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plain server: loopback, no persistence, files in `dir`.
pub fn plain_server(port: u16, dir: &std::path::Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}
