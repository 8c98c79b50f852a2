//! The one Redis connection every Redis store of the fleet, and the
//! fleet itself, share.
//!
//! Commands go through one connection ([`link`]: a single server, the
//! master Sentinel names, or a Redis Cluster; each reconnects by itself),
//! each under the configured command timeout and in a client span
//! (`db.system = redis`, the command name, never a key or a value). Every
//! key starts with `key_prefix`; each store names its own keys in its own
//! file, and keys one script or `MULTI` touches together share a hash tag
//! ([`RedisConn::tagged_key`]), on every deployment, so one layout serves
//! one server, Sentinel and a Redis Cluster. The up flag lives here: a
//! command that fails marks Redis down (`idgate_cluster_up` 0, one
//! warning), and the fleet's supervisor (`cluster::fleet::supervisor`),
//! which reads the event stream on a connection of its own
//! ([`link::Link::open_reader`]), marks it up again once it reconnects.
//! `rediss://` trusts the system's roots, or `[cluster] ca_file` (`tls`).
//!
//! The stores hold a [`RedisConn`] (cheap to clone) and nothing else of
//! Redis: the connection, the prefix, the timeouts and the up flag live
//! here alone. What travels on the event stream is the fleet's
//! (`cluster::fleet`), which this file knows nothing of.

pub(super) mod link;
mod sentinel;
mod tls;

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use redis::RedisResult;
use tracing::field::Empty;

use self::link::{Conn, Link};
use super::{
    config::ClusterSettings,
    encryption::{Digester, Sealer},
    error::ClusterError,
};
use crate::telemetry::Metrics;

/// Deletes `KEYS[1]` only if it still holds `ARGV[1]` (a binding that
/// still names its channel, a claim still pending for its request).
pub(super) const DELETE_IF_SCRIPT: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Takes `KEYS[1]` for replica `ARGV[1]` for `ARGV[2]` milliseconds when
/// nobody holds it or this replica already does (then renews it).
const HOLD_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
     if v == false or v == ARGV[1] then \
       redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return 0";

/// Unix milliseconds now.
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration as Redis takes it (`PX`), at least one millisecond.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

struct Inner {
    link: Link,
    prefix: String,
    sealer: Sealer,
    digester: Digester,
    command_timeout: Duration,
    connect_timeout: Duration,
    max_backoff: Duration,
    stream_max_len: u64,
    server: (String, u16),
    up: AtomicBool,
    origin: String,
    metrics: Metrics,
}

/// The fleet's Redis connection, shared by its stores. Cheap to clone.
#[derive(Clone)]
pub struct RedisConn {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConn")
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

impl RedisConn {
    /// Gives the calling thread, a serving thread starting, a command
    /// connection of its own ([`Link::install_thread`]).
    pub fn install_thread(&self) {
        self.inner.link.install_thread();
    }

    /// A connection to the Redis of `settings`. Connects lazily: nothing
    /// waits here; the fleet's supervisor connects and marks it up.
    pub(super) fn new(
        settings: &ClusterSettings,
        metrics: Metrics,
    ) -> Result<Self, redis::RedisError> {
        // rediss:// uses rustls; the process-wide provider may be set already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (link, server) = Link::new(settings)?;
        metrics.set_cluster_up(false);
        Ok(Self {
            inner: Arc::new(Inner {
                link,
                prefix: settings.key_prefix.clone(),
                sealer: settings.sealer.clone(),
                digester: settings.digester.clone(),
                command_timeout: settings.command_timeout,
                connect_timeout: settings.connect_timeout,
                max_backoff: settings.max_backoff,
                stream_max_len: settings.stream_max_len,
                server,
                up: AtomicBool::new(false),
                origin: uuid::Uuid::new_v4().simple().to_string(),
                metrics,
            }),
        })
    }

    /// Waits until the cluster is up, at most `timeout`; returns whether it is.
    pub(super) async fn wait_up(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.is_up() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// True while Redis answers.
    pub(super) fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Acquire)
    }

    /// `{prefix}<name>`: every key, the event stream's too.
    pub(super) fn key(&self, name: &str) -> String {
        self.key_of(&[name])
    }

    /// `{prefix}` followed by `parts`, in one allocation: the keys a call
    /// builds on every `StartSession3D` (`binding:<journey>`,
    /// `journey:<journey>`) went through `format!` twice, which the hop's
    /// profile showed at 0.7 % of a call's CPU.
    pub(super) fn key_of(&self, parts: &[&str]) -> String {
        let prefix = self.inner.prefix.as_str();
        let mut key =
            String::with_capacity(prefix.len() + parts.iter().map(|p| p.len()).sum::<usize>());
        key.push_str(prefix);
        for part in parts {
            key.push_str(part);
        }
        key
    }

    /// `{prefix}{<group>}:<name>`, for keys of `group` that one script or
    /// `MULTI` touches together: the group is a hash tag, so its keys
    /// share a Redis Cluster slot (a node). The same layout on every
    /// deployment, so moving a fleet between one server, Sentinel and a
    /// cluster keeps its keys.
    pub(super) fn tagged_key(&self, group: &str, name: &str) -> String {
        format!("{}{{{group}}}:{name}", self.inner.prefix)
    }

    /// About how many events the stream keeps (`MAXLEN ~`).
    pub(super) fn stream_max_len(&self) -> u64 {
        self.inner.stream_max_len
    }

    /// Seals appkeys for the stores that keep one.
    pub(super) fn sealer(&self) -> &Sealer {
        &self.inner.sealer
    }

    /// The keyed digester every replica of this fleet agrees on.
    pub(super) fn digester(&self) -> &Digester {
        &self.inner.digester
    }

    /// This replica's id: in fleet messages, as a lease or turn holder.
    pub(super) fn origin(&self) -> &str {
        &self.inner.origin
    }

    pub(super) fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub(super) fn max_backoff(&self) -> Duration {
        self.inner.max_backoff
    }

    pub(super) fn command_timeout(&self) -> Duration {
        self.inner.command_timeout
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        self.inner.connect_timeout
    }

    /// How this replica reaches Redis (the event stream's connection).
    pub(super) fn link(&self) -> &Link {
        &self.inner.link
    }

    pub(super) fn set_up(&self, up: bool, why: &str) {
        let was = self.inner.up.swap(up, Ordering::AcqRel);
        if was != up {
            self.inner.metrics.set_cluster_up(up);
            if up {
                tracing::info!("fleet shared state (Redis) reachable again; control state re-read");
            } else {
                tracing::warn!(
                    why,
                    "fleet shared state (Redis) unavailable: core RPCs go on, admin changes are refused, watchers poll; reconnecting"
                );
            }
        }
    }

    /// Runs one Redis call under the command timeout, in a client span.
    pub(super) async fn exec<T, F, Fut>(
        &self,
        command: &'static str,
        run: F,
    ) -> Result<T, ClusterError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let inner = &self.inner;
        let span = tracing::info_span!(
            "redis",
            otel.name = command,
            otel.kind = "client",
            otel.status_code = Empty,
            db.system = "redis",
            db.system.name = "redis",
            db.operation.name = command,
            server.address = inner.server.0.as_str(),
            server.port = i64::from(inner.server.1),
            error.type = Empty,
        );
        let started = std::time::Instant::now();
        let call = async {
            let answer = tokio::time::timeout(inner.command_timeout, async {
                run(inner.link.conn().await?).await
            })
            .await;
            match answer {
                Ok(answer) => answer.map_err(Some),
                // No answer within the command timeout.
                Err(_) => Err(None),
            }
        };
        // Not entered while the command runs: nothing in it logs, and
        // entering the span on each poll cost a clock read and registry
        // look-ups every time (docs/performance.md). The span is a child of
        // the caller's, and ends when dropped, below.
        let result = call.await;
        match &result {
            Err(Some(e)) => inner.link.failed(e),
            Err(None) => inner.link.timed_out(),
            Ok(_) => {}
        }
        let (outcome, value) = match result {
            Ok(v) => ("ok", Some(v)),
            Err(None) => ("timeout", None),
            Err(Some(e)) if e.is_timeout() => ("timeout", None),
            Err(Some(e))
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() =>
            {
                ("unavailable", None)
            }
            Err(Some(e)) => {
                tracing::debug!(kind = ?e.kind(), command, "redis command failed");
                ("error", None)
            }
        };
        inner
            .metrics
            .record_cluster_op(command, outcome, started.elapsed());
        match value {
            Some(v) => Ok(v),
            None => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", outcome);
                self.set_up(false, outcome);
                Err(ClusterError::Unavailable)
            }
        }
    }

    /// Fails fast while the supervisor knows Redis is down, so callers do
    /// not each wait for the timeout.
    pub(super) fn check_up(&self) -> Result<(), ClusterError> {
        if self.is_up() {
            Ok(())
        } else {
            Err(ClusterError::Unavailable)
        }
    }

    /// `SET key value PX ttl`: an entry that expires like its in-memory
    /// counterpart.
    pub(super) async fn set_px(
        &self,
        key: String,
        value: String,
        ttl: u64,
    ) -> Result<(), ClusterError> {
        self.exec("SET", move |mut c| async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(&value)
                .arg("PX")
                .arg(ttl)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// `SET key value NX PX ttl`: true when written, false when `key`
    /// already held a value (left as it was).
    pub(super) async fn set_nx_px(
        &self,
        key: String,
        value: String,
        ttl: u64,
    ) -> Result<bool, ClusterError> {
        self.exec("SET", move |mut c| async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(&value)
                .arg("NX")
                .arg("PX")
                .arg(ttl)
                .query_async::<Option<String>>(&mut c)
                .await
        })
        .await
        .map(|written| written.is_some())
    }

    /// `GET key`: the text stored under `key`, if any.
    pub(super) async fn get(&self, key: String) -> Result<Option<String>, ClusterError> {
        self.exec("GET", move |mut c| async move {
            redis::cmd("GET").arg(&key).query_async(&mut c).await
        })
        .await
    }

    /// Takes `key` for this replica for `ttl`, or renews it when this
    /// replica holds it ([`HOLD_SCRIPT`]): true while this replica holds
    /// it. What one replica at a time may do (a journey's read turn, the
    /// rollout's driving) holds its key so.
    pub(super) async fn hold(&self, key: String, ttl: Duration) -> Result<bool, ClusterError> {
        let holder = self.origin().to_owned();
        let ttl = millis(ttl);
        let held: i64 = self
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(HOLD_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(&holder)
                    .arg(ttl)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(held == 1)
    }

    /// Deletes `key` if it still holds `value` ([`DELETE_IF_SCRIPT`]).
    pub(super) async fn delete_if(&self, key: String, value: String) -> Result<(), ClusterError> {
        self.exec("EVAL", move |mut c| async move {
            redis::cmd("EVAL")
                .arg(DELETE_IF_SCRIPT)
                .arg(1)
                .arg(&key)
                .arg(&value)
                .query_async::<i64>(&mut c)
                .await
        })
        .await
        .map(|_| ())
    }
}
