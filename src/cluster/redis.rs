//! The fleet's shared state on Redis.
//!
//! Commands go through one `ConnectionManager` (it reconnects with
//! exponential backoff by itself), each under the configured command
//! timeout and in a client span (`db.system = redis`, the command name,
//! never a key or a value). A supervisor task holds the pub/sub
//! connection on `{prefix}events`: on every (re)connection it seeds the
//! control state if Redis lost it, reads it, hands it to the replica
//! ([`FleetEvent::Control`]) and marks the cluster up; when the
//! connection drops it marks it down (`idgate_cluster_up` 0, one warning)
//! and reconnects with backoff.
//!
//! Keys (`{p}` is `key_prefix`): `{p}journey:<ref>` (sealed appkey),
//! `{p}binding:<ref>` (channel name), `{p}dedupe:<digest>`,
//! `{p}control:mode`, `{p}control:drained` (a set), `{p}control:hold`,
//! `{p}control:seeded`. Every entry but the control state expires with
//! the TTL of its in-memory counterpart. The spending guard's keys
//! (`{p}idem:`, `{p}budget:`, `{p}profile:`) are told in `guard`.

use std::{
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures_util::StreamExt as _;
use redis::{
    Client, RedisResult,
    aio::{ConnectionManager, ConnectionManagerConfig},
};
use secrecy::ExposeSecret as _;
use serde::{Deserialize, Serialize};
use tokio::{sync::broadcast, task::AbortHandle};
use tracing::{Instrument as _, field::Empty};

use super::{
    BoxFuture, ClusterError, ClusterSettings, ControlChange, ControlState, DeliveryKey, FleetEvent,
    FleetNotice, MemoryState, SharedState, Ttls,
    seal::{Digester, Sealer},
};
use crate::{
    domain::{Appkey, JourneyRef},
    telemetry::Metrics,
};

/// Deletes a binding only if it still names the channel.
const UNBIND_SCRIPT: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Writes a replica's control state only when Redis holds none (a fresh or
/// restarted Redis without persistence): the first replica to connect
/// seeds, the others read what it wrote. ARGV: mode, then drained names.
const SEED_SCRIPT: &str = "if redis.call('SET', KEYS[1], '1', 'NX') then \
       redis.call('SET', KEYS[2], ARGV[1]) \
       redis.call('DEL', KEYS[3]) \
       for i = 2, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end \
       return 1 end return 0";

/// What crosses the pub/sub channel. No appkey, no result, no person.
#[derive(Debug, Serialize, Deserialize)]
struct Message {
    /// The replica that sent it (its own messages are skipped).
    origin: String,
    /// Unix milliseconds at sending, for the lag metric.
    sent_ms: u64,
    #[serde(flatten)]
    body: Body,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Body {
    Notice {
        journey_ref: String,
        status: String,
        delivery: String,
    },
    Control,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The current control state of this replica, used to seed an empty Redis.
pub type SeedFn = Arc<dyn Fn() -> ControlState + Send + Sync>;

struct Keys {
    prefix: String,
}

impl Keys {
    fn journey(&self, j: &JourneyRef) -> String {
        format!("{}journey:{j}", self.prefix)
    }
    fn binding(&self, j: &JourneyRef) -> String {
        format!("{}binding:{j}", self.prefix)
    }
    fn dedupe(&self, digest: &str) -> String {
        format!("{}dedupe:{digest}", self.prefix)
    }
    fn control(&self, part: &str) -> String {
        format!("{}control:{part}", self.prefix)
    }
    fn events(&self) -> String {
        format!("{}events", self.prefix)
    }
}

struct Inner {
    client: Client,
    conn: ConnectionManager,
    keys: Keys,
    sealer: Sealer,
    digester: Digester,
    ttls: Ttls,
    command_timeout: Duration,
    connect_timeout: Duration,
    max_backoff: Duration,
    server: (String, u16),
    up: AtomicBool,
    /// Dedupe while Redis is unreachable.
    local: MemoryState,
    events: broadcast::Sender<FleetEvent>,
    origin: String,
    metrics: Metrics,
    supervisor: Mutex<Option<AbortHandle>>,
}

/// The shared state of a fleet, on Redis. Cheap to clone.
#[derive(Clone)]
pub struct RedisState {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("up", &self.inner.up.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisState {
    /// A state on the Redis of `settings`. Connects lazily: nothing waits
    /// here; call [`RedisState::start`] to run the supervisor.
    pub fn new(
        settings: &ClusterSettings,
        ttls: Ttls,
        metrics: Metrics,
    ) -> Result<Self, redis::RedisError> {
        // rediss:// uses rustls; the process-wide provider may be set already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let info = redis::IntoConnectionInfo::into_connection_info(settings.redis_url.as_str())?;
        let server = match info.addr() {
            redis::ConnectionAddr::Tcp(h, p)
            | redis::ConnectionAddr::TcpTls {
                host: h, port: p, ..
            } => (h.clone(), *p),
            _ => (String::new(), 0),
        };
        let mut redis_settings = info.redis_settings().clone();
        if let Some(user) = &settings.username {
            redis_settings = redis_settings.set_username(user);
        }
        if let Some(password) = &settings.password {
            redis_settings = redis_settings.set_password(password.expose_secret());
        }
        let info = info.set_redis_settings(redis_settings);
        let client = Client::open(info)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_number_of_retries(2)
            .set_max_delay(settings.max_backoff);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        metrics.set_cluster_up(false);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                conn,
                keys: Keys {
                    prefix: settings.key_prefix.clone(),
                },
                sealer: settings.sealer.clone(),
                digester: settings.digester.clone(),
                ttls,
                command_timeout: settings.command_timeout,
                connect_timeout: settings.connect_timeout,
                max_backoff: settings.max_backoff,
                server,
                up: AtomicBool::new(false),
                local: MemoryState::new(ttls),
                events: broadcast::channel(1024).0,
                origin: uuid::Uuid::new_v4().simple().to_string(),
                metrics,
                supervisor: Mutex::new(None),
            }),
        })
    }

    /// Runs the supervisor: pub/sub, control state on (re)connection,
    /// reconnection with backoff. `seed` is this replica's own control
    /// state, written when Redis holds none. Subscribe before starting to
    /// see the first [`FleetEvent::Control`].
    pub fn start(&self, seed: SeedFn) {
        let inner = self.inner.clone();
        let task = tokio::spawn(supervise(inner, seed));
        *crate::sync::lock(&self.inner.supervisor) = Some(task.abort_handle());
    }

    /// Waits until the cluster is up, at most `timeout`; returns whether it is.
    pub async fn wait_up(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.inner.up.load(Ordering::Acquire) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the supervisor (the gateway is shutting down).
    pub fn stop(&self) {
        if let Some(task) = crate::sync::lock(&self.inner.supervisor).take() {
            task.abort();
        }
    }
}

impl Inner {
    fn set_up(&self, up: bool, why: &str) {
        let was = self.up.swap(up, Ordering::AcqRel);
        if was != up {
            self.metrics.set_cluster_up(up);
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
    async fn exec<T, F, Fut>(&self, command: &'static str, run: F) -> Result<T, ClusterError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let span = tracing::info_span!(
            "redis",
            otel.name = command,
            otel.kind = "client",
            otel.status_code = Empty,
            db.system = "redis",
            db.system.name = "redis",
            db.operation.name = command,
            server.address = self.server.0.as_str(),
            server.port = i64::from(self.server.1),
            error.type = Empty,
        );
        let started = std::time::Instant::now();
        let result = tokio::time::timeout(self.command_timeout, run(self.conn.clone()))
            .instrument(span.clone())
            .await;
        let (outcome, value) = match result {
            Ok(Ok(v)) => ("ok", Some(v)),
            Ok(Err(e)) if e.is_timeout() => ("timeout", None),
            Ok(Err(e))
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() =>
            {
                ("unavailable", None)
            }
            Ok(Err(e)) => {
                tracing::debug!(kind = ?e.kind(), command, "redis command failed");
                ("error", None)
            }
            Err(_) => ("timeout", None),
        };
        self.metrics
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
    /// `SET key value PX ttl`: an entry that expires like its in-memory
    /// counterpart.
    async fn set_px(&self, key: String, value: String, ttl: u64) -> Result<(), ClusterError> {
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

    /// `GET key`: the text stored under `key`, if any.
    async fn get(&self, key: String) -> Result<Option<String>, ClusterError> {
        self.exec("GET", move |mut c| async move {
            redis::cmd("GET").arg(&key).query_async(&mut c).await
        })
        .await
    }

    fn check_up(&self) -> Result<(), ClusterError> {
        if self.up.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ClusterError::Unavailable)
        }
    }

    async fn read_control(&self) -> Result<ControlState, ClusterError> {
        let (mode, drained, hold_ms) = {
            let keys = [
                self.keys.control("mode"),
                self.keys.control("drained"),
                self.keys.control("hold"),
            ];
            self.exec("MULTI GET SMEMBERS PTTL", move |mut c| async move {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .get(&keys[0])
                    .smembers(&keys[1])
                    .pttl(&keys[2]);
                pipe.query_async::<(Option<String>, Vec<String>, i64)>(&mut c)
                    .await
            })
            .await?
        };
        Ok(ControlState {
            mode,
            drained: drained.into_iter().collect(),
            hold: u64::try_from(hold_ms)
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
        })
    }

    async fn seed(&self, state: ControlState) -> Result<(), ClusterError> {
        let keys = [
            self.keys.control("seeded"),
            self.keys.control("mode"),
            self.keys.control("drained"),
        ];
        let mut args = vec![state.mode.unwrap_or_else(|| "auto".to_owned())];
        args.extend(state.drained);
        let seeded: i64 = self
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(SEED_SCRIPT)
                    .arg(3)
                    .arg(&keys[..])
                    .arg(&args[..])
                    .query_async(&mut c)
                    .await
            })
            .await?;
        if seeded == 1 {
            tracing::info!("fleet control state seeded from this replica (Redis held none)");
        }
        Ok(())
    }

    fn message(&self, body: Body) -> String {
        serde_json::to_string(&Message {
            origin: self.origin.clone(),
            sent_ms: now_ms(),
            body,
        })
        .unwrap_or_default()
    }

    async fn on_message(&self, payload: &[u8]) {
        let Ok(message) = serde_json::from_slice::<Message>(payload) else {
            tracing::debug!("unreadable fleet message ignored");
            return;
        };
        if message.origin == self.origin {
            return;
        }
        let lag = now_ms().saturating_sub(message.sent_ms);
        self.metrics.record_cluster_lag(Duration::from_millis(lag));
        match message.body {
            Body::Notice {
                journey_ref,
                status,
                delivery,
            } => {
                let Some(journey) = JourneyRef::parse(&journey_ref) else {
                    return;
                };
                let _ = self.events.send(FleetEvent::Notice(FleetNotice {
                    journey,
                    status,
                    delivery,
                }));
            }
            Body::Control => match self.read_control().await {
                Ok(state) => {
                    let _ = self.events.send(FleetEvent::Control(state));
                }
                Err(_) => tracing::warn!("fleet control change announced but not readable"),
            },
        }
    }
}

/// Connects the pub/sub channel, loads the control state, relays
/// messages; on a drop, marks the cluster down and starts over.
async fn supervise(inner: Arc<Inner>, seed: SeedFn) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match connect(&inner, &seed).await {
            Ok(mut stream) => {
                backoff = Duration::from_millis(50);
                let mut check = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tokio::select! {
                        message = stream.next() => match message {
                            Some(m) => inner.on_message(m.get_payload_bytes()).await,
                            None => break,
                        },
                        _ = check.tick() => {
                            // A command failure marked the cluster down while
                            // pub/sub stayed up: re-read and mark it up again.
                            if !inner.up.load(Ordering::Acquire) {
                                if let Ok(state) = inner.read_control().await {
                                    let _ = inner.events.send(FleetEvent::Control(state));
                                    inner.set_up(true, "recovered");
                                }
                            }
                        }
                    }
                }
                inner.set_up(false, "pub/sub connection lost");
            }
            Err(why) => inner.set_up(false, why),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(inner.max_backoff);
    }
}

async fn connect(inner: &Inner, seed: &SeedFn) -> Result<redis::aio::PubSubStream, &'static str> {
    let mut pubsub = tokio::time::timeout(inner.connect_timeout, inner.client.get_async_pubsub())
        .await
        .map_err(|_| "connect timeout")?
        .map_err(|_| "connect failed")?;
    tokio::time::timeout(inner.command_timeout, pubsub.subscribe(inner.keys.events()))
        .await
        .map_err(|_| "subscribe timeout")?
        .map_err(|_| "subscribe failed")?;
    inner.seed(seed()).await.map_err(|_| "seed failed")?;
    let state = inner
        .read_control()
        .await
        .map_err(|_| "control read failed")?;
    let _ = inner.events.send(FleetEvent::Control(state));
    inner.set_up(true, "connected");
    Ok(pubsub.into_on_message())
}

mod guard;
mod state;
