//! A fleet for tests: gateway replicas sharing one sandbox and one Redis of
//! their own, as a deployment behind a load balancer runs them.
//!
//! Each replica is a [`TestGateway`] on the test configuration, pointed at
//! the fleet's sandbox (an external upstream, so every replica reaches the
//! same vendor) and at its Redis; the helpers below are what a test needs
//! beyond [`TestGateway`]'s: fleet-wide admin changes that may be refused,
//! completion notices posted with the fleet's Basic credentials, and
//! `/metrics` samples.
//!
//! The fleet's Redis is one server ([`RedisServer`], the default), a
//! Sentinel set or a Redis Cluster: each says how a replica is pointed at
//! it ([`FleetRedis`]).

use idgate::testing::GatewayParts as _;
use std::{path::PathBuf, sync::Arc, time::Duration};

use idgate::{
    config::{Config, UpstreamConfig},
    domain::Operation,
    proto::v1::{self, JourneyStatus},
    sandbox::{ManualClock, SandboxConfig, SandboxHandle},
};

use super::{
    gateway::{TestGateway, secret_file, use_upstream},
    net::http_client,
    redis::RedisServer,
    redis_cluster::RedisClusterSet,
    redis_sentinel::{MASTER_NAME, RedisSentinelSet, SentinelPair},
    sandbox::start_on,
    wait::{EVENT_WAIT, eventually},
    webhook::{PASSWORD, USER, notice},
};

/// A Redis a fleet runs on: how a replica's `[cluster]` names it.
pub trait FleetRedis {
    /// Points `c` at this Redis (no password, no secret key: the fleet's).
    fn point(&self, c: &mut Config);
    /// Its password, if any.
    fn password(&self) -> Option<&str> {
        None
    }
}

impl FleetRedis for RedisServer {
    fn point(&self, c: &mut Config) {
        c.cluster.redis_url = Some(self.url());
    }
    fn password(&self) -> Option<&str> {
        RedisServer::password(self)
    }
}

impl FleetRedis for RedisSentinelSet {
    fn point(&self, c: &mut Config) {
        c.cluster.sentinels = self.sentinel_addrs();
        c.cluster.master_name = Some(MASTER_NAME.into());
    }
}

impl FleetRedis for SentinelPair {
    fn point(&self, c: &mut Config) {
        c.cluster.sentinels = vec![self.sentinel_url()];
        c.cluster.master_name = Some(MASTER_NAME.into());
    }
}

impl FleetRedis for RedisClusterSet {
    fn point(&self, c: &mut Config) {
        c.cluster.mode = idgate::cluster::RedisMode::Cluster;
        c.cluster.nodes = self.urls();
    }
}

/// One sandbox, one Redis, and gateway replicas on both.
pub struct Fleet<R: FleetRedis = RedisServer> {
    /// The fleet's Redis.
    pub redis: R,
    /// The sandbox every replica calls.
    pub sandbox: SandboxHandle,
    clock: Arc<ManualClock>,
    /// The replicas, in the order they started.
    pub replicas: Vec<TestGateway>,
    key_file: PathBuf,
    grace_secs: u64,
    /// The Redis password replicas started from now on are given.
    pub password: Option<String>,
}

impl Fleet {
    /// `n` replicas on a Redis of their own; watchers fall back to polling
    /// after `grace_secs` without a notice.
    pub async fn start(n: usize, grace_secs: u64) -> Self {
        Self::start_on(RedisServer::start(), n, grace_secs).await
    }

    /// Stops Redis and waits until every replica has noticed.
    pub async fn stop_redis(&mut self) {
        self.redis.stop();
        self.all_down().await;
    }
}

impl Fleet {
    /// [`Fleet::start`] with a sandbox whose 3D selfie weighs
    /// [`PHOTO_BYTES`], as a real capture does; [`large_rg_images`] gives
    /// the document photo of the same size.
    pub async fn start_with_photos(n: usize, grace_secs: u64) -> Self {
        Self::start_on_with(RedisServer::start(), n, grace_secs, |s| {
            s.selfie_bytes = PHOTO_BYTES;
        })
        .await
    }
}

/// The size of a real capture: each photo of a journey of
/// [`Fleet::start_with_photos`].
pub const PHOTO_BYTES: usize = 300 * 1024;

/// RG front and back, the front padded after its image data to
/// [`PHOTO_BYTES`] (the sandbox still reads its marker).
pub fn large_rg_images() -> Vec<Vec<u8>> {
    use idgate::sandbox::samples::{self, DocumentKind, DocumentType, Side};
    Side::ALL
        .into_iter()
        .map(|side| {
            let mut image = samples::document_image(DocumentKind::new(DocumentType::Rg, side));
            if side == Side::Front {
                image.resize(PHOTO_BYTES, 0);
            }
            image
        })
        .collect()
}

impl<R: FleetRedis> Fleet<R> {
    /// [`Fleet::start`] on `redis`.
    pub async fn start_on(redis: R, n: usize, grace_secs: u64) -> Self {
        Self::start_on_with(redis, n, grace_secs, |_| {}).await
    }

    /// [`Fleet::start_on`], with the sandbox's configuration changed by
    /// `sandbox`.
    pub async fn start_on_with(
        redis: R,
        n: usize,
        grace_secs: u64,
        sandbox: impl FnOnce(&mut SandboxConfig),
    ) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let clock = Arc::new(ManualClock::new());
        let mut config = SandboxConfig {
            processing_delay_ms: 2_000,
            ..SandboxConfig::default()
        };
        sandbox(&mut config);
        let sandbox = start_on(config, clock.clone()).await;
        use base64::Engine as _;
        let key: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        let key_file = secret_file(&base64::engine::general_purpose::STANDARD.encode(key));
        let password = redis.password().map(str::to_owned);
        let mut fleet = Fleet {
            redis,
            sandbox,
            clock,
            replicas: Vec::new(),
            key_file,
            grace_secs,
            password,
        };
        for _ in 0..n {
            fleet.add_replica().await;
        }
        fleet.all_up().await;
        fleet
    }

    /// A replica's configuration: the test configuration on the fleet's
    /// sandbox (its channels in sandbox order), its Redis and secret key,
    /// the fleet's webhook credentials and watch grace.
    fn configure(&self, c: &mut Config) {
        use_upstream(
            c,
            UpstreamConfig {
                base_url: self.sandbox.base_url(),
                result_base_url: self.sandbox.result_base_url(),
                ..UpstreamConfig::default()
            },
        );
        c.channels = self
            .sandbox
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(ch, priority)| {
                idgate::channels::ChannelSpec::new(ch.name, ch.base_url, priority)
            })
            .collect();
        c.webhook.basic_user = Some(USER.into());
        c.webhook.basic_password_file = Some(secret_file(PASSWORD));
        c.routing.contingency_hold_secs = 60;
        c.watch.webhook_grace_secs = self.grace_secs;
        self.redis.point(c);
        c.cluster.secret_key_file = Some(self.key_file.clone());
        c.cluster.password_file = self.password.as_deref().map(secret_file);
    }

    /// Starts one more replica; returns its index.
    pub async fn add_replica(&mut self) -> usize {
        self.add_replica_with(|_| {}).await
    }

    /// Starts a replica whose configuration `edit` changes; returns its
    /// index.
    pub async fn add_replica_with(&mut self, edit: impl FnOnce(&mut Config)) -> usize {
        let replica = TestGateway::start_with(|c| {
            self.configure(c);
            edit(c);
        })
        .await;
        self.replicas.push(replica);
        self.replicas.len() - 1
    }

    /// Starts `n` replicas whose configuration `edit` changes alike, and
    /// waits until every replica reaches Redis.
    pub async fn add_replicas_with(&mut self, n: usize, edit: impl Fn(&mut Config)) {
        for _ in 0..n {
            self.add_replica_with(&edit).await;
        }
        self.all_up().await;
    }

    /// Moves the sandbox's clock past document processing.
    pub fn finish_processing(&self) {
        self.clock.advance(Duration::from_secs(3));
    }

    /// `/document/result` calls the sandbox received.
    pub fn result_reads(&self) -> u64 {
        self.sandbox.calls(Operation::Result, None)
    }

    /// `/appkey` calls the sandbox received.
    pub fn appkey_calls(&self) -> u64 {
        self.sandbox.calls(Operation::Appkey, None)
    }

    /// Waits until every replica reaches Redis.
    pub async fn all_up(&self) {
        eventually("every replica reaches Redis", EVENT_WAIT, async || {
            self.replicas
                .iter()
                .all(|r| r.gateway.shared_state().is_up())
        })
        .await;
    }

    /// Waits until every replica has noticed Redis is gone.
    pub async fn all_down(&self) {
        eventually("every replica sees Redis down", EVENT_WAIT, async || {
            self.replicas
                .iter()
                .all(|r| !r.gateway.shared_state().is_up())
        })
        .await;
    }

    /// Takes `created` through its liveness proof and RG documents on
    /// replica `on`, and finishes processing. A watch opened before this
    /// (with a webhook receiver, as every replica here has) waits for the
    /// notice; one opened after reads the current state at once.
    pub async fn finish_journey(&self, on: usize, created: &v1::CreateJourneyResponse) {
        let r = &self.replicas[on];
        assert!(r.pass_3d(&created.appkey).await.valid);
        r.submit_rg(&created.appkey).await;
        self.finish_processing();
    }

    /// Stops every replica and the sandbox (Redis stops on drop).
    pub async fn stop(self) {
        for r in self.replicas {
            r.stop().await;
        }
        self.sandbox.shutdown().await;
    }
}

/// Replica helpers: admin changes a fleet may refuse, notices, metrics.
impl TestGateway {
    /// Posts a completion notice with the fleet's Basic credentials;
    /// returns the HTTP status and the receiver's `status` field.
    pub async fn post_notice(&self, status: &str, appkey: &str, id: Option<&str>) -> (u16, String) {
        let mut req = http_client()
            .post(self.webhook_url())
            .basic_auth(USER, Some(PASSWORD))
            .header("content-type", "application/json")
            .body(notice(status, appkey));
        if let Some(id) = id {
            req = req.header("webhook-id", id);
        }
        let resp = req.send().await.expect("post notice");
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("answer body");
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        (code, body["status"].as_str().unwrap_or_default().to_owned())
    }

    /// Whether `ListChannels` shows channel `name` drained.
    pub async fn drained(&self, name: &str) -> bool {
        self.list_channels()
            .await
            .channels
            .iter()
            .any(|c| c.name == name && c.drained)
    }

    /// `DrainChannel`, refused or not.
    pub async fn drain(&self, name: &str) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .drain_channel(v1::DrainChannelRequest { name: name.into() })
            .await
            .map(|_| ())
    }

    /// `UndrainChannel`, refused or not.
    pub async fn undrain(&self, name: &str) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .undrain_channel(v1::UndrainChannelRequest { name: name.into() })
            .await
            .map(|_| ())
    }

    /// `SetRoutingMode` to `mode`, refused or not.
    pub async fn try_set_mode(&self, mode: v1::RoutingMode) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(v1::SetRoutingModeRequest {
                mode: mode as i32,
                channel: String::new(),
                weights: Vec::new(),
                force: false,
            })
            .await
            .map(|_| ())
    }

    /// The value of the series `written` as exposed on `/metrics`
    /// (`idgate_cluster_up`, `idgate_webhooks_total{outcome="duplicate"}`);
    /// a panic when it is not.
    pub async fn metric(&self, written: &str) -> f64 {
        super::metrics::series(&self.metrics_text().await, written)
    }
}

/// Asserts a watch stream closed with OK after a final message carrying
/// the complete journey's result.
#[track_caller]
pub fn assert_complete(items: &[v1::WatchJourneyResponse], end: &Option<tonic::Status>) {
    assert!(end.is_none(), "the stream ended with {end:?}");
    let last = items.last().expect("at least the result");
    assert_eq!(last.status(), JourneyStatus::Complete);
    assert!(
        last.result.is_some(),
        "the final message carries the result"
    );
}
