//! Issue 11: gateway replicas sharing journey state on Redis.
//!
//! Every test starts its own `redis-server` on a free loopback port (never
//! the machine's shared 6379), one sandbox, and three gateway replicas
//! pointed at both, all over real sockets. Waits are bounded polls.
//! Its fleet helpers (several replicas on one sandbox and one Redis) are
//! its own; the rest comes from `support`.

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use futures_util::StreamExt as _;
use idgate::{
    channels::ChannelSpec,
    cli::channels::AdminClient,
    config::{Config, OperatorConfig, UpstreamConfig},
    domain::{AdminToken, Operation},
    proto::v1::{
        self, JourneyStatus, journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{ManualClock, Sandbox, SandboxConfig, SandboxHandle, samples},
    server::{Gateway, StartOptions},
};
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

const ADMIN_TOKEN: &str = "fleet-admin-token-91ac-0123456789abcdef";
const BASIC_USER: &str = "vendor";
const BASIC_PASSWORD: &str = "fleet-webhook-password-5d2e";
/// Longest a test waits for anything that has no tighter bound.
const EVENT_WAIT: Duration = Duration::from_secs(20);
/// How soon a fleet-wide change must reach every replica (issue 11).
const FLEET_BOUND: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------- Redis

/// A `redis-server` of this test alone: loopback, a free port, no
/// persistence, in a temporary directory; killed on drop.
struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// `requirepass`, if any.
    password: Option<String>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl RedisServer {
    fn start() -> Self {
        Self::start_with(None)
    }

    fn start_with(password: Option<&str>) -> Self {
        let dir = std::env::temp_dir().join(format!("idgate-fleet-redis-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("redis temp dir");
        let mut server = Self {
            port: free_port(),
            dir,
            child: None,
            password: password.map(str::to_owned),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(self.password.iter().flat_map(|p| ["--requirepass", p.as_str()]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): these tests need Debian's `redis-server` package (apt-get install redis-server)"
                )
            });
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !self.answers_ping() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not answer on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        // `+PONG`, or `-NOAUTH` from a server that wants a password.
        let mut first = [0u8; 1];
        s.write_all(b"PING\r\n").is_ok()
            && s.read_exact(&mut first).is_ok()
            && matches!(&first, b"+" | b"-")
    }

    /// Stops the server (its data is gone: no persistence).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    async fn client(&self) -> redis::aio::MultiplexedConnection {
        let url = match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
            None => self.url(),
        };
        redis::Client::open(url)
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------- fleet

fn secret_file(content: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("idgate-fleet-secret-{}", uuid::Uuid::new_v4()));
    std::fs::write(&path, content).expect("write secret file");
    path
}

fn loopback() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// One sandbox, one Redis, and gateway replicas on both.
struct Fleet {
    redis: RedisServer,
    sandbox: SandboxHandle,
    clock: Arc<ManualClock>,
    replicas: Vec<Replica>,
    key_file: PathBuf,
    grace_secs: u64,
    /// The Redis password replicas started from now on are given.
    password: Option<String>,
}

struct Replica {
    gateway: Gateway,
    channel: Channel,
}

impl Fleet {
    /// `n` replicas; watchers fall back to polling after `grace_secs`
    /// without a notice.
    async fn start(n: usize, grace_secs: u64) -> Self {
        Self::start_on(RedisServer::start(), n, grace_secs).await
    }

    async fn start_on(redis: RedisServer, n: usize, grace_secs: u64) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let clock = Arc::new(ManualClock::new());
        let sandbox = Sandbox::start(
            SandboxConfig {
                processing_delay_ms: 2_000,
                ..SandboxConfig::default()
            },
            clock.clone(),
        )
        .await
        .expect("sandbox starts");
        use base64::Engine as _;
        let key: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        let key_file = secret_file(&base64::engine::general_purpose::STANDARD.encode(key));
        let redis_password = redis.password.clone();
        let mut fleet = Fleet {
            redis,
            sandbox,
            clock,
            replicas: Vec::new(),
            key_file,
            grace_secs,
            password: redis_password,
        };
        for _ in 0..n {
            fleet.add_replica().await;
        }
        fleet.all_up().await;
        fleet
    }

    fn config(&self) -> Config {
        let mut c = Config::default();
        c.listen.grpc = loopback();
        c.listen.http = loopback();
        c.listen.admin = loopback();
        c.serving.drain_delay_secs = 0;
        c.admin.token_file = Some(secret_file(ADMIN_TOKEN));
        c.upstream = Some(UpstreamConfig {
            base_url: self.sandbox.base_url(),
            result_base_url: self.sandbox.result_base_url(),
            ..UpstreamConfig::default()
        });
        c.operators = vec![OperatorConfig {
            name: "default".into(),
            login: "sandbox".into(),
            password_env: None,
            password_file: Some(secret_file("sandbox")),
        }];
        c.channels = self
            .sandbox
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(ch, priority)| ChannelSpec::new(ch.name, ch.base_url, priority))
            .collect();
        c.webhook.basic_user = Some(BASIC_USER.into());
        c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        c.routing.contingency_hold_secs = 60;
        c.watch.webhook_grace_secs = self.grace_secs;
        c.watch.poll_initial_ms = 50;
        c.watch.poll_max_ms = 200;
        c.cluster.redis_url = Some(self.redis.url());
        c.cluster.secret_key_file = Some(self.key_file.clone());
        c.cluster.password_file = self.password.as_deref().map(secret_file);
        c
    }

    /// Starts one more replica; returns its index.
    async fn add_replica(&mut self) -> usize {
        let gateway = idgate::server::start_with(self.config(), StartOptions::default())
            .await
            .expect("replica starts");
        let channel = Channel::from_shared(gateway.grpc_url())
            .expect("url")
            .connect()
            .await
            .expect("connect to the replica");
        self.replicas.push(Replica { gateway, channel });
        self.replicas.len() - 1
    }

    fn finish_processing(&self) {
        self.clock.advance(Duration::from_secs(3));
    }

    fn result_reads(&self) -> u64 {
        self.sandbox.calls(Operation::Result, None)
    }

    async fn all_up(&self) {
        eventually("every replica reaches Redis", EVENT_WAIT, async || {
            self.replicas
                .iter()
                .all(|r| r.gateway.shared_state().is_up())
        })
        .await;
    }

    /// Stops Redis and waits until every replica has noticed.
    async fn stop_redis(&mut self) {
        self.redis.stop();
        eventually("every replica sees Redis down", EVENT_WAIT, async || {
            self.replicas
                .iter()
                .all(|r| !r.gateway.shared_state().is_up())
        })
        .await;
    }

    async fn stop(self) {
        for r in self.replicas {
            r.gateway.shutdown().await;
        }
        self.sandbox.shutdown().await;
    }
}

impl Replica {
    fn journeys(&self) -> JourneyServiceClient<Channel> {
        JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }

    fn liveness(&self) -> LivenessServiceClient<Channel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    async fn admin(&self) -> AdminClient {
        let addr = self
            .gateway
            .admin_addr()
            .expect("admin listener")
            .to_string();
        idgate::cli::channels::connect(&addr, &AdminToken::new(ADMIN_TOKEN).unwrap())
            .await
            .expect("connect to the admin listener")
    }

    async fn create_journey(&self) -> v1::CreateJourneyResponse {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        self.journeys()
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
                customer_reference: "FLEETREF1".into(),
                operator_profile: String::new(),
                request_id: String::new(),
            })
            .await
            .expect("create journey")
            .into_inner()
    }

    async fn start_3d(&self, appkey: &str) -> Result<v1::StartSession3DResponse, tonic::Status> {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "fleet-test".into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn verify_3d(
        &self,
        appkey: &str,
        token: &str,
        channel: &str,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.liveness()
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.into(),
                session_token: token.into(),
                channel: channel.into(),
            })
            .await
            .map(|r| r.into_inner().verdict.expect("verdict"))
    }

    /// A 3D proof started and verified here, with the channel hint.
    async fn pass_3d(&self, appkey: &str) {
        let s = self.start_3d(appkey).await.expect("start 3D");
        let v = self
            .verify_3d(appkey, &s.session_token, &s.channel)
            .await
            .expect("verify 3D");
        assert!(v.valid);
    }

    async fn submit_rg(&self, appkey: &str) {
        use samples::{DocumentKind, DocumentType, Side};
        let images = Side::ALL
            .into_iter()
            .map(|side| v1::DocumentImage {
                content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
            })
            .collect();
        idgate::proto::v1::document_service_client::DocumentServiceClient::new(
            self.channel.clone(),
        )
        .max_encoding_message_size(64 << 20)
        .submit_document_images(v1::SubmitDocumentImagesRequest {
            appkey: appkey.into(),
            images,
        })
        .await
        .expect("submit documents");
    }

    async fn result(&self, appkey: &str) -> Result<v1::JourneyResult, tonic::Status> {
        self.journeys()
            .get_journey_result(v1::GetJourneyResultRequest {
                appkey: appkey.into(),
            })
            .await
            .map(|r| r.into_inner().result.expect("result"))
    }

    async fn watch(
        &self,
        request: v1::WatchJourneyRequest,
    ) -> tonic::Streaming<v1::WatchJourneyResponse> {
        self.journeys()
            .watch_journey(request)
            .await
            .expect("watch journey")
            .into_inner()
    }

    /// Posts a completion notice; returns the HTTP status and the
    /// receiver's `status` field.
    async fn post_notice(&self, status: &str, appkey: &str, id: Option<&str>) -> (u16, String) {
        let url = format!("http://{}/webhooks/journey", self.gateway.http_addr());
        let mut req = reqwest::Client::new()
            .post(url)
            .basic_auth(BASIC_USER, Some(BASIC_PASSWORD))
            .header("content-type", "application/json")
            .body(serde_json::json!({ "Status": status, "Appkey": appkey }).to_string());
        if let Some(id) = id {
            req = req.header("webhook-id", id);
        }
        let resp = req.send().await.expect("post notice");
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("answer body");
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        (code, body["status"].as_str().unwrap_or_default().to_owned())
    }

    async fn list_channels(&self) -> v1::ListChannelsResponse {
        self.admin()
            .await
            .list_channels(v1::ListChannelsRequest {})
            .await
            .expect("list channels")
            .into_inner()
    }

    async fn drained(&self, name: &str) -> bool {
        self.list_channels()
            .await
            .channels
            .iter()
            .any(|c| c.name == name && c.drained)
    }

    async fn drain(&self, name: &str) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .drain_channel(v1::DrainChannelRequest { name: name.into() })
            .await
            .map(|_| ())
    }

    async fn undrain(&self, name: &str) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .undrain_channel(v1::UndrainChannelRequest { name: name.into() })
            .await
            .map(|_| ())
    }

    async fn set_mode(&self, mode: v1::RoutingMode) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(v1::SetRoutingModeRequest {
                mode: mode as i32,
                channel: String::new(),
                weights: Vec::new(),
            })
            .await
            .map(|_| ())
    }

    /// A sample of `/metrics` (first line starting with `prefix`).
    async fn metric(&self, prefix: &str) -> Option<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.gateway.http_addr()))
            .await
            .expect("scrape")
            .text()
            .await
            .expect("metrics body");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// Polls `check` every 10 ms until it holds, for at most `within`.
async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let give_up = Instant::now() + within;
    while !check().await {
        assert!(
            Instant::now() < give_up,
            "not reached within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Everything a watch stream sends until it closes, bounded by `within`.
async fn drain_within(
    mut stream: tonic::Streaming<v1::WatchJourneyResponse>,
    within: Duration,
) -> (Vec<v1::WatchJourneyResponse>, Option<tonic::Status>) {
    let mut items = Vec::new();
    let end = tokio::time::timeout(within, async {
        loop {
            match stream.message().await {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the watch stream did not end within {within:?}"));
    (items, end)
}

fn by_appkey(appkey: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.into())),
    }
}

fn by_ref(journey_ref: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::JourneyRef(
            journey_ref.into(),
        )),
    }
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default()
}

#[track_caller]
fn assert_complete(items: &[v1::WatchJourneyResponse], end: &Option<tonic::Status>) {
    assert!(end.is_none(), "the stream ended with {end:?}");
    let last = items.last().expect("at least the result");
    assert_eq!(last.status(), JourneyStatus::Complete);
    assert!(
        last.result.is_some(),
        "the final message carries the result"
    );
}

/// A journey created on `on`, with its liveness proof and RG documents
/// submitted and processing finished.
async fn finished_journey(fleet: &Fleet, on: usize) -> v1::CreateJourneyResponse {
    let r = &fleet.replicas[on];
    let created = r.create_journey().await;
    r.pass_3d(&created.appkey).await;
    r.submit_rg(&created.appkey).await;
    fleet.finish_processing();
    created
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_one_replica_ends_the_watches_on_the_others_with_one_read_per_replica() {
    // A 30 s grace: only the fanned-out notice can end these watches in time.
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    let created = finished_journey(&fleet, 0).await;
    let reads_before = fleet.result_reads();

    // Two watchers on B (one result read serves both), one on C.
    let b1 = b.watch(by_ref(&created.journey_ref)).await;
    let b2 = b.watch(by_appkey(&created.appkey)).await;
    let c1 = c.watch(by_appkey(&created.appkey)).await;

    let posted = Instant::now();
    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_fleet_1"))
            .await,
        (202, "accepted".to_owned())
    );
    for stream in [b1, b2, c1] {
        let (items, end) = drain_within(stream, FLEET_BOUND).await;
        assert_complete(&items, &end);
    }
    let elapsed = posted.elapsed();
    assert!(elapsed < FLEET_BOUND, "{elapsed:?}");
    assert_eq!(
        fleet.result_reads() - reads_before,
        2,
        "one result read per watching replica (B and C), none on A, none per watcher"
    );

    // The same delivery again, to B: not processed again anywhere.
    assert_eq!(
        b.post_notice("Completo", &created.appkey, Some("msg_fleet_1"))
            .await,
        (202, "duplicate".to_owned())
    );
    // A later, distinct notice posted to B reaches C; had the duplicate
    // been fanned out, C would have heard one more (pub/sub keeps order).
    let heard_on_c = c.gateway.hub().stats().notices_received;
    let other = b.create_journey().await;
    assert_eq!(b.post_notice("Erro", &other.appkey, None).await.0, 202);
    eventually("C hears the later notice", FLEET_BOUND, async || {
        c.gateway.hub().stats().notices_received > heard_on_c
    })
    .await;
    assert_eq!(c.gateway.hub().stats().notices_received, heard_on_c + 1);
    assert_eq!(
        b.gateway.hub().stats().notices_received,
        2,
        "B: the first (fleet) and its own"
    );
    assert_eq!(
        b.metric("idgate_webhooks_total{outcome=\"duplicate\"} ")
            .await,
        Some(1.0)
    );
    assert_eq!(
        fleet.result_reads() - reads_before,
        2,
        "no read for the duplicate"
    );
    // Without a webhook-id, the same journey and status is the duplicate.
    assert_eq!(
        c.post_notice("Erro", &other.appkey, None).await,
        (202, "duplicate".to_owned())
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_or_mode_change_on_one_replica_applies_to_all_and_to_a_replica_started_later() {
    let mut fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert!(
        a.list_channels().await.fleet_control,
        "the mode and drains are the fleet's"
    );

    a.drain("primary").await.expect("drain on A");
    eventually("B and C see the drain", FLEET_BOUND, async || {
        b.drained("primary").await && c.drained("primary").await
    })
    .await;
    for r in [b, c] {
        let created = r.create_journey().await;
        let s = r.start_3d(&created.appkey).await.expect("start 3D");
        assert_eq!(
            s.channel, "alternative",
            "no new session on the drained channel"
        );
    }

    // A mode set on C applies to A and B.
    c.set_mode(v1::RoutingMode::ForceAlternative)
        .await
        .expect("mode on C");
    eventually("A and B take the mode", FLEET_BOUND, async || {
        a.list_channels().await.mode() == v1::RoutingMode::ForceAlternative
            && b.list_channels().await.mode() == v1::RoutingMode::ForceAlternative
    })
    .await;

    // A replica started now serves with the fleet's state from its first call.
    let d = fleet.add_replica().await;
    let d = &fleet.replicas[d];
    let listed = d.list_channels().await;
    assert!(listed.fleet_control);
    assert_eq!(listed.mode(), v1::RoutingMode::ForceAlternative);
    assert!(d.drained("primary").await);
    let created = d.create_journey().await;
    assert_eq!(
        d.start_3d(&created.appkey).await.unwrap().channel,
        "alternative"
    );

    // And an undrain from the newcomer reaches everyone.
    d.set_mode(v1::RoutingMode::Auto).await.unwrap();
    d.undrain("primary").await.unwrap();
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    eventually("A, B and C see the undrain", FLEET_BOUND, async || {
        !a.drained("primary").await && !b.drained("primary").await && !c.drained("primary").await
    })
    .await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journey_refs_and_3d_sessions_resolve_on_a_replica_other_than_the_creator() {
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    let created = a.create_journey().await;
    // The session starts on A; C verifies it without a channel hint.
    let s = a.start_3d(&created.appkey).await.expect("start on A");
    // A wrong hint on B is refused by the fleet's binding, before sending.
    let wrong = if s.channel == "primary" {
        "alternative"
    } else {
        "primary"
    };
    let err = b
        .verify_3d(&created.appkey, &s.session_token, wrong)
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "CHANNEL_MISMATCH");
    let v = c
        .verify_3d(&created.appkey, &s.session_token, "")
        .await
        .expect("verify on C with no hint");
    assert!(v.valid);
    assert_eq!(
        fleet.sandbox.calls(Operation::Liveness3D, Some(&s.channel)),
        1
    );

    // WatchJourney by reference on B, a journey B never saw.
    a.submit_rg(&created.appkey).await;
    let watcher = b.watch(by_ref(&created.journey_ref)).await;
    fleet.finish_processing();
    assert_eq!(
        a.post_notice("Completo", &created.appkey, None).await.0,
        202
    );
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    assert_eq!(items.last().unwrap().journey_ref, created.journey_ref);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_core_rpcs_work_admin_changes_are_refused_and_the_fleet_converges_after()
{
    // A 1 s grace: with Redis down, watchers on other replicas poll.
    let mut fleet = Fleet::start(3, 1).await;
    assert_eq!(
        fleet.replicas[0].metric("idgate_cluster_up ").await,
        Some(1.0)
    );

    fleet.stop_redis().await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert_eq!(a.metric("idgate_cluster_up ").await, Some(0.0));

    // Core RPCs: create, liveness (with the hint), documents, result.
    let created = b.create_journey().await;
    b.pass_3d(&created.appkey).await;
    b.submit_rg(&created.appkey).await;
    fleet.finish_processing();
    b.result(&created.appkey)
        .await
        .expect("result with Redis down");

    // Admin changes are refused, and applied nowhere.
    for err in [
        a.drain("primary").await.unwrap_err(),
        b.set_mode(v1::RoutingMode::ForceAlternative)
            .await
            .unwrap_err(),
        c.undrain("alternative").await.unwrap_err(),
    ] {
        assert_eq!(err.code(), tonic::Code::Unavailable);
        assert_eq!(reason(&err), "CLUSTER_UNAVAILABLE");
    }
    assert!(!a.drained("primary").await);
    assert_eq!(b.list_channels().await.mode(), v1::RoutingMode::Auto);

    // Watchers still finish: B by its own notice, C by polling.
    let on_b = b.watch(by_appkey(&created.appkey)).await;
    let on_c = c.watch(by_appkey(&created.appkey)).await;
    assert_eq!(
        b.post_notice("Completo", &created.appkey, None).await.0,
        202
    );
    for stream in [on_b, on_c] {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }

    // Redis returns (empty): the replicas reconnect and converge.
    fleet.redis.restart();
    fleet.all_up().await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert_eq!(a.metric("idgate_cluster_up ").await, Some(1.0));
    a.drain("primary").await.expect("drain once Redis is back");
    eventually("B and C see the drain", FLEET_BOUND, async || {
        b.drained("primary").await && c.drained("primary").await
    })
    .await;
    let again = a.create_journey().await;
    let watcher = c.watch(by_ref(&again.journey_ref)).await;
    drop(watcher);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holds_no_appkey_cpf_name_or_token_in_clear() {
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    // Everything that crosses the pub/sub channel, too.
    let mut pubsub = redis::Client::open(fleet.redis.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .expect("pubsub");
    pubsub.subscribe("idgate:events").await.expect("subscribe");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::spawn(async move {
        let mut messages = pubsub.into_on_message();
        while let Some(m) = messages.next().await {
            let _ = tx.send(m.get_payload_bytes().to_vec());
        }
    });

    let created = a.create_journey().await;
    let session = a.start_3d(&created.appkey).await.unwrap();
    let held_session = b.create_journey().await;
    let open_session = b.start_3d(&held_session.appkey).await.unwrap();
    c.verify_3d(&created.appkey, &session.session_token, "")
        .await
        .unwrap();
    a.submit_rg(&created.appkey).await;
    fleet.finish_processing();
    let watcher = c.watch(by_ref(&created.journey_ref)).await;
    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_scan"))
            .await
            .0,
        202
    );
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    b.drain("alternative").await.unwrap();

    let person = samples::HAPPY_PERSON;
    let formatted_cpf = format!(
        "{}.{}.{}-{}",
        &person.cpf[..3],
        &person.cpf[3..6],
        &person.cpf[6..9],
        &person.cpf[9..]
    );
    let secrets = [
        ("appkey", created.appkey.as_str()),
        ("appkey", held_session.appkey.as_str()),
        ("session token", session.session_token.as_str()),
        ("session token", open_session.session_token.as_str()),
        ("CPF", person.cpf),
        ("CPF", formatted_cpf.as_str()),
        ("name", person.name),
        ("birth date", person.birth_date),
        ("webhook password", BASIC_PASSWORD),
        ("admin token", ADMIN_TOKEN),
    ];
    let first_name = person.name.split(' ').next().unwrap();
    let check = |what: &str, text: &str| {
        for (kind, secret) in &secrets {
            assert!(!text.contains(secret), "{kind} in clear in {what}");
        }
        // As a word: a sealed value's Base64 may contain the letters of a
        // short first name by chance, which is not the name in clear.
        assert!(
            !text
                .split(|c: char| !c.is_alphanumeric())
                .any(|word| word.eq_ignore_ascii_case(first_name)),
            "name in clear in {what}"
        );
    };

    // `redis-cli --scan`, then every value by its type.
    let mut conn = fleet.redis.client().await;
    let keys: Vec<String> = {
        let mut iter: redis::AsyncIter<String> =
            redis::AsyncCommands::scan(&mut conn).await.unwrap();
        let mut keys = Vec::new();
        while let Some(k) = iter.next_item().await {
            keys.push(k.expect("key"));
        }
        keys
    };
    let kinds = [
        "journey:",
        "binding:",
        "dedupe:",
        "control:drained",
        "control:mode",
    ];
    for kind in kinds {
        assert!(
            keys.iter()
                .any(|k| k.starts_with(&format!("idgate:{kind}"))),
            "a key of kind {kind} in {keys:?}"
        );
    }
    for key in &keys {
        check("a key", key);
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let values: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![
                redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap(),
            ],
            "set" => redis::cmd("SMEMBERS")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap(),
            other => panic!("unexpected type {other} of {key}"),
        };
        for v in values {
            check(key, &String::from_utf8_lossy(&v));
        }
    }
    // Every journey key holds a sealed value, not the appkey.
    let journey_key = format!("idgate:journey:{}", created.journey_ref);
    let sealed: String = redis::cmd("GET")
        .arg(&journey_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(sealed.len() > created.appkey.len());

    // The notice and the drain crossed pub/sub.
    let mut messages = Vec::new();
    eventually("two pub/sub messages", EVENT_WAIT, async || {
        while let Ok(m) = rx.try_recv() {
            messages.push(m);
        }
        messages.len() >= 2
    })
    .await;
    for m in &messages {
        check("a pub/sub message", &String::from_utf8_lossy(m));
    }
    listener.abort();
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_protected_redis_admits_replicas_with_the_password_only() {
    let redis = RedisServer::start_with(Some("fleet-redis-password-0c41"));
    let mut fleet = Fleet::start_on(redis, 2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.drain("primary").await.expect("drain with the password");
    eventually("B sees the drain", FLEET_BOUND, async || {
        b.drained("primary").await
    })
    .await;

    // A replica with the wrong password starts, on its own state, and
    // refuses fleet-wide changes rather than applying them alone.
    fleet.password = Some("not-the-password".into());
    let c = fleet.add_replica().await;
    let c = &fleet.replicas[c];
    assert!(!c.gateway.shared_state().is_up());
    assert!(!c.list_channels().await.fleet_control);
    let err = c.undrain("primary").await.unwrap_err();
    assert_eq!(reason(&err), "CLUSTER_UNAVAILABLE");
    assert!(fleet.replicas[0].drained("primary").await);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contingency_hold_started_on_one_replica_steers_every_replica_to_the_alternative() {
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    fleet.sandbox.set_contingency("primary", true).unwrap();
    let created = a.create_journey().await;
    let s = a.start_3d(&created.appkey).await.unwrap();
    assert_eq!((s.channel.as_str(), s.contingency), ("primary", true));
    fleet.sandbox.set_contingency("primary", false).unwrap();

    eventually("B and C hold off the primary", FLEET_BOUND, async || {
        b.gateway.router().snapshot().contingency_hold_active
            && c.gateway.router().snapshot().contingency_hold_active
    })
    .await;
    for r in [b, c] {
        let created = r.create_journey().await;
        assert_eq!(
            r.start_3d(&created.appkey).await.unwrap().channel,
            "alternative"
        );
    }
    fleet.stop().await;
}

/// Every span the process opens with a `db.system` field: name and fields.
type RecordedSpans = Arc<std::sync::Mutex<Vec<(String, BTreeMap<String, String>)>>>;

struct DbSpans(RecordedSpans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for DbSpans {
    /// Only the Redis spans are enabled: the rest of the binary's tests
    /// run as without a subscriber.
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if metadata.is_span() && metadata.fields().field("db.system").is_some() {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().fields().field("db.system").is_none() {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }
}

/// Records the Redis spans made on this thread (the test runs on a
/// current-thread runtime, so every replica's span is made here) until the
/// guard drops. The test binary's global dispatcher keeps every callsite
/// asking the current thread's subscriber.
fn record_db_spans() -> (RecordedSpans, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt as _;
    crate::support::telemetry::keep_callsites_asking();
    let spans = RecordedSpans::default();
    let guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(DbSpans(spans.clone())),
    );
    tracing::callsite::rebuild_interest_cache();
    (spans, guard)
}

#[tokio::test]
async fn redis_calls_are_client_spans_named_by_command_without_keys_or_values() {
    let (spans, _recording) = record_db_spans();
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let created = a.create_journey().await;
    let s = a.start_3d(&created.appkey).await.unwrap();
    b.verify_3d(&created.appkey, &s.session_token, "")
        .await
        .unwrap();
    let port = fleet.redis.port.to_string();
    let ours: Vec<_> = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, f)| f.get("server.port") == Some(&port))
        .cloned()
        .collect();
    let commands: Vec<&str> = ours
        .iter()
        .map(|(_, f)| f["db.operation.name"].as_str())
        .collect();
    assert!(
        commands.contains(&"SET") && commands.contains(&"GET"),
        "{commands:?}"
    );
    for (name, fields) in &ours {
        assert_eq!(name, "redis");
        assert_eq!(fields["db.system"], "redis");
        assert_eq!(fields["otel.kind"], "client");
        assert_eq!(fields["otel.name"], fields["db.operation.name"]);
        let text = format!("{fields:?}");
        for secret in [
            created.appkey.as_str(),
            created.journey_ref.as_str(),
            "idgate:",
        ] {
            assert!(!text.contains(secret), "{secret} in a Redis span: {text}");
        }
    }
    fleet.stop().await;
}

mod guard;
impl Replica {
    /// `SetRoutingMode` to a weighted split.
    async fn set_weighted(&self, split: &[(&str, u32)]) -> Result<(), tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(v1::SetRoutingModeRequest {
                mode: v1::RoutingMode::Weighted as i32,
                channel: String::new(),
                weights: split
                    .iter()
                    .map(|(channel, weight)| v1::ChannelWeight {
                        channel: (*channel).into(),
                        weight: *weight,
                    })
                    .collect(),
            })
            .await
            .map(|_| ())
    }

    /// The weighted split this replica routes by, as `name=weight` text.
    async fn split(&self) -> String {
        let listed = self.list_channels().await;
        if listed.mode() != v1::RoutingMode::Weighted {
            return String::new();
        }
        let entries: Vec<String> = listed
            .weights
            .iter()
            .map(|w| format!("{}={}", w.channel, w.weight))
            .collect();
        entries.join(",")
    }

    /// A journey of its own (a customer reference per journey).
    async fn own_journey(&self, i: usize) -> String {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        self.journeys()
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
                customer_reference: format!("FLEETW{i:04}"),
                operator_profile: String::new(),
                request_id: String::new(),
            })
            .await
            .expect("create journey")
            .into_inner()
            .appkey
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_split_set_on_one_replica_applies_to_all_and_a_journey_picks_the_same_channel_on_each()
 {
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.set_weighted(&[("primary", 50), ("alternative", 50)])
        .await
        .expect("weighted mode on A");
    eventually("B takes the split", FLEET_BOUND, async || {
        b.split().await == "primary=50,alternative=50"
    })
    .await;

    let mut on_primary = None;
    let mut seen = BTreeMap::new();
    for i in 0..40 {
        let appkey = a.own_journey(i).await;
        let first = a.start_3d(&appkey).await.expect("start on A");
        let again = b.start_3d(&appkey).await.expect("start on B");
        assert_eq!(first.channel, again.channel, "one journey, one channel");
        *seen.entry(first.channel.clone()).or_insert(0) += 1;
        if first.channel == "primary" {
            on_primary = Some((appkey, again.session_token));
        }
    }
    assert_eq!(seen.len(), 2, "both channels get a share: {seen:?}");

    // New weights from B reach A; new sessions follow them, a started
    // session still verifies on its channel.
    b.set_weighted(&[("primary", 0), ("alternative", 1)])
        .await
        .expect("weights on B");
    eventually("A takes the new weights", FLEET_BOUND, async || {
        a.split().await == "primary=0,alternative=1"
    })
    .await;
    for i in 100..110 {
        let appkey = a.own_journey(i).await;
        assert_eq!(a.start_3d(&appkey).await.unwrap().channel, "alternative");
    }
    let (appkey, token) = on_primary.expect("a session on the primary");
    let before = fleet.sandbox.calls(Operation::Liveness3D, Some("primary"));
    let verdict = a.verify_3d(&appkey, &token, "").await.expect("verify");
    assert!(verdict.valid);
    assert_eq!(
        fleet.sandbox.calls(Operation::Liveness3D, Some("primary")),
        before + 1
    );
    fleet.stop().await;
}
