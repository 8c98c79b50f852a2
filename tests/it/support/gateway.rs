//! Spawns a gateway on the embedded sandbox, all on `127.0.0.1:0`, with the
//! sandbox on a manual clock, and hands back typed clients.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use idgate::{
    config::Config,
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{ManualClock, SandboxHandle, samples},
    server::{Gateway, StartOptions},
};
use tonic::transport::Channel;
use tonic_types::StatusExt;

use super::{net::http_client, wait::EVENT_WAIT};

/// The admin bearer token of test gateways.
pub const ADMIN_TOKEN: &str = "test-admin-token-7f3c-0123456789abcdef";

/// A running test gateway and what tests need around it.
pub struct TestGateway {
    /// The gateway.
    pub gateway: Gateway,
    /// The embedded sandbox's clock.
    pub clock: Arc<ManualClock>,
    channel: Channel,
}

fn loopback() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// A configuration with every listener on an ephemeral loopback port, the
/// embedded sandbox, and an admin token file.
pub fn test_config() -> Config {
    let mut config = Config::default();
    config.listen.grpc = loopback();
    config.listen.http = loopback();
    config.listen.admin = loopback();
    config.admin.token_file = Some(secret_file(ADMIN_TOKEN));
    config.sandbox.processing_delay_ms = 2_000;
    // Tests stop at once: no load balancer to tell.
    config.serving.drain_delay_secs = 0;
    // One serving thread, and no idle polling (the default): a test that
    // needs more threads, or polling, asks for them.
    config.serving.grpc_threads = 1;
    // Fallback polling quickly, so tests that lose the webhook finish fast.
    config.watch.webhook_grace_secs = 1;
    config.watch.poll_initial_ms = 50;
    config.watch.poll_max_ms = 200;
    // Reads 50 times as often as the defaults: as many more 404s before
    // a watcher started ahead of the liveness proof is given up on.
    config.watch.max_not_found = 250;
    config
}

/// Starts `config` as `idgate serve` does (the system clock), for tests
/// that run in real time or on an upstream of their own.
pub async fn start_gateway(config: Config) -> Gateway {
    idgate::server::start(config).await.expect("gateway starts")
}

/// A channel connected to `url`.
pub async fn connect(url: String) -> Channel {
    Channel::from_shared(url)
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

impl TestGateway {
    /// A gateway with the test configuration.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A gateway with the test configuration changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> Self {
        let mut config = test_config();
        edit(&mut config);
        Self::launch(config, None).await
    }

    /// Starts `config` on a manual clock; `config_path` is what
    /// [`Gateway::reload`] re-reads.
    async fn launch(config: Config, config_path: Option<std::path::PathBuf>) -> Self {
        let clock = Arc::new(ManualClock::new());
        let gateway = idgate::server::start_with(
            config,
            StartOptions {
                config_path,
                sandbox_clock: Some(clock.clone()),
                span_export: None,
            },
        )
        .await
        .expect("gateway starts");
        let channel = Channel::from_shared(gateway.grpc_url())
            .expect("url")
            .connect()
            .await
            .expect("connect to the gateway");
        TestGateway {
            gateway,
            clock,
            channel,
        }
    }

    /// The embedded sandbox.
    pub fn sandbox(&self) -> &SandboxHandle {
        self.gateway.sandbox().expect("embedded sandbox")
    }

    /// A `JourneyService` client.
    pub fn journeys(&self) -> JourneyServiceClient<Channel> {
        JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }

    /// A `LivenessService` client.
    pub fn liveness(&self) -> LivenessServiceClient<Channel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    /// A `DocumentService` client.
    pub fn documents(&self) -> DocumentServiceClient<Channel> {
        DocumentServiceClient::new(self.channel.clone()).max_encoding_message_size(64 << 20)
    }

    /// Base URL of the gateway's HTTP listener.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.gateway.http_addr())
    }

    /// Creates a journey for `person`, returning the response.
    pub async fn create_journey_for(
        &self,
        person: v1::CreateJourneyRequest,
    ) -> v1::CreateJourneyResponse {
        self.journeys()
            .create_journey(person)
            .await
            .expect("create journey")
            .into_inner()
    }

    /// Creates a journey for the sandbox's happy person; returns the appkey.
    pub async fn create_journey(&self) -> String {
        self.create_journey_for(happy_person()).await.appkey
    }

    /// Runs a valid 3D liveness proof on `appkey`.
    pub async fn pass_3d(&self, appkey: &str) -> v1::LivenessVerdict {
        let mut l = self.liveness();
        let s = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "test".into(),
            })
            .await
            .expect("start session")
            .into_inner();
        l.verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.into(),
            session_token: s.session_token,
            channel: s.channel,
        })
        .await
        .expect("verify")
        .into_inner()
        .verdict
        .expect("verdict")
    }

    /// Submits RG front and back on `appkey`.
    pub async fn submit_rg(&self, appkey: &str) -> i64 {
        self.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: rg_images(),
            })
            .await
            .expect("submit documents")
            .into_inner()
            .document_code
    }

    /// Moves the sandbox's clock past document processing.
    pub fn finish_processing(&self) {
        self.clock.advance(Duration::from_secs(3));
    }

    /// Stops the gateway and its sandbox.
    pub async fn stop(self) {
        self.gateway.shutdown().await;
    }
}

/// The sandbox's default person (registry positive) as a request.
pub fn happy_person() -> v1::CreateJourneyRequest {
    person(samples::HAPPY_PERSON)
}

/// A sandbox test person as a request.
pub fn person(p: samples::TestPerson) -> v1::CreateJourneyRequest {
    let parts: Vec<&str> = p.birth_date.split('/').collect();
    v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
        customer_reference: "TESTREF1".into(),
        operator_profile: String::new(),
        request_id: String::new(),
    }
}

/// RG front and back images with sandbox markers.
pub fn rg_images() -> Vec<v1::DocumentImage> {
    use samples::{DocumentKind, DocumentType, Side};
    Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
        })
        .collect()
}

/// The `ErrorInfo.reason` of a status.
pub fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default()
}

/// The fields named by a status's `BadRequest`.
pub fn bad_fields(status: &tonic::Status) -> Vec<String> {
    status
        .get_details_bad_request()
        .map(|b| b.field_violations.into_iter().map(|v| v.field).collect())
        .unwrap_or_default()
}

/// True when the status carries a `RetryInfo`.
pub fn retryable(status: &tonic::Status) -> bool {
    status.get_details_retry_info().is_some()
}

// journey tests

use idgate::{
    config::{OperatorConfig, UpstreamConfig},
    domain::Operation,
    sandbox::{
        SandboxConfig,
        samples::{DocumentKind, DocumentType, LivenessOutcome, Side},
    },
};

impl TestGateway {
    /// Reads the journey result of `appkey`.
    pub async fn result(&self, appkey: &str) -> Result<v1::JourneyResult, tonic::Status> {
        self.journeys()
            .get_journey_result(v1::GetJourneyResultRequest {
                appkey: appkey.into(),
            })
            .await
            .map(|r| r.into_inner().result.expect("result set"))
    }

    /// Generates 2D challenges on `appkey`.
    pub async fn challenges(
        &self,
        appkey: &str,
    ) -> Result<v1::CreateChallengesResponse, tonic::Status> {
        self.liveness()
            .create_challenges(v1::CreateChallengesRequest {
                appkey: appkey.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Submits `snapshots` for the challenges `challenge_key` of `appkey`.
    pub async fn submit_snapshots(
        &self,
        appkey: &str,
        challenge_key: &str,
        snapshots: Vec<v1::Snapshot>,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.liveness()
            .submit_challenge_response(v1::SubmitChallengeResponseRequest {
                appkey: appkey.into(),
                challenge_key: challenge_key.into(),
                snapshots,
            })
            .await
            .map(|r| r.into_inner().verdict.expect("verdict set"))
    }

    /// Answers the challenges `ch` of `appkey` with one snapshot per
    /// challenge, all showing `outcome`.
    pub async fn answer_challenges(
        &self,
        appkey: &str,
        ch: &v1::CreateChallengesResponse,
        outcome: LivenessOutcome,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.submit_snapshots(appkey, &ch.challenge_key, snapshots_for(ch, outcome))
            .await
    }

    /// A whole 2D proof on `appkey` ending with `outcome`: challenges, then
    /// one snapshot per challenge. Returns the verdict and the first
    /// snapshot sent (the frontal photo of the result).
    pub async fn pass_2d(
        &self,
        appkey: &str,
        outcome: LivenessOutcome,
    ) -> (v1::LivenessVerdict, Vec<u8>) {
        let ch = self.challenges(appkey).await.expect("create challenges");
        let snapshots = snapshots_for(&ch, outcome);
        let first = snapshots[0].image.to_vec();
        let verdict = self
            .submit_snapshots(appkey, &ch.challenge_key, snapshots)
            .await
            .expect("submit snapshots");
        (verdict, first)
    }

    /// Starts a 3D session with `user_agent` and verifies it.
    pub async fn run_3d(
        &self,
        appkey: &str,
        user_agent: &str,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        let mut l = self.liveness();
        let s = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: user_agent.into(),
            })
            .await?
            .into_inner();
        l.verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.into(),
            session_token: s.session_token,
            channel: s.channel,
        })
        .await
        .map(|r| r.into_inner().verdict.expect("verdict set"))
    }

    /// Submits `images` as document images of `appkey`.
    pub async fn submit_images(
        &self,
        appkey: &str,
        images: &[Vec<u8>],
    ) -> Result<i64, tonic::Status> {
        self.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: images
                    .iter()
                    .map(|i| v1::DocumentImage {
                        content: i.clone().into(),
                    })
                    .collect(),
            })
            .await
            .map(|r| r.into_inner().document_code)
    }

    /// Submits a digital licence in one of its forms.
    pub async fn submit_licence(
        &self,
        appkey: &str,
        licence: v1::submit_digital_licence_request::Licence,
    ) -> Result<i64, tonic::Status> {
        self.documents()
            .submit_digital_licence(v1::SubmitDigitalLicenceRequest {
                appkey: appkey.into(),
                licence: Some(licence),
            })
            .await
            .map(|r| r.into_inner().document_code)
    }

    /// Calls of `op` on the embedded sandbox (not on a 3D channel).
    pub fn calls(&self, op: Operation) -> u64 {
        self.sandbox().calls(op, None)
    }

    /// Every call the embedded sandbox received, on any channel.
    pub fn total_calls(&self) -> u64 {
        self.sandbox().all_calls().iter().map(|c| c.count).sum()
    }
}

/// One snapshot per challenge of `ch`, tagged with its face type code,
/// each making the proof end with `outcome`.
pub fn snapshots_for(
    ch: &v1::CreateChallengesResponse,
    outcome: LivenessOutcome,
) -> Vec<v1::Snapshot> {
    assert!(!ch.challenges.is_empty(), "challenges were generated");
    ch.challenges
        .iter()
        .map(|c| v1::Snapshot {
            image: samples::snapshot(outcome).into(),
            face_type_code: c.face_type.as_ref().expect("face type").code.clone(),
        })
        .collect()
}

/// Front and back images of `doc_type`.
pub fn document_pair(doc_type: DocumentType) -> Vec<Vec<u8>> {
    Side::ALL
        .into_iter()
        .map(|side| samples::document_image(DocumentKind::new(doc_type, side)))
        .collect()
}

/// Asserts `status` has `code` and `ErrorInfo.reason` `reason`.
#[track_caller]
pub fn assert_error(status: &tonic::Status, code: tonic::Code, reason_: &str) {
    assert_eq!(
        (status.code(), reason(status).as_str()),
        (code, reason_),
        "unexpected status: {status:?}"
    );
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.domain, "idgate");
}

/// A gateway pointed at a sandbox started on its own (not embedded), so
/// the gateway's `[upstream]` settings (timeouts, body bounds) apply.
pub struct ExternalGateway {
    /// The gateway.
    pub gw: TestGateway,
    /// The sandbox it talks to.
    pub sandbox: SandboxHandle,
    /// A second gateway on the same sandbox with the default `[upstream]`
    /// settings: the calls a test needs to succeed go through it, so that
    /// the settings under test (a short timeout) cannot fail them.
    pub patient: TestGateway,
}

impl ExternalGateway {
    /// Starts a sandbox, then a gateway on it whose upstream settings are
    /// changed by `edit`.
    pub async fn start(edit: impl FnOnce(&mut UpstreamConfig)) -> Self {
        let sandbox =
            super::sandbox::start_on(SandboxConfig::default(), Arc::new(ManualClock::new())).await;
        let mut upstream = UpstreamConfig {
            base_url: sandbox.base_url(),
            result_base_url: sandbox.result_base_url(),
            ..UpstreamConfig::default()
        };
        let patient_upstream = upstream.clone();
        edit(&mut upstream);
        // `gw` acts on journeys `patient` created: foreign to it.
        let gw = TestGateway::start_with(move |c| {
            use_upstream(c, upstream);
            c.guard.accept_foreign_appkeys = true;
        })
        .await;
        let patient = TestGateway::start_with(move |c| use_upstream(c, patient_upstream)).await;
        ExternalGateway {
            gw,
            sandbox,
            patient,
        }
    }
}

/// Points `config` at the external `upstream`, with the sandbox's operator
/// as the default profile (its password in a file), open to every caller
/// as it says explicitly (`[auth] mode = "none"`; tests/it/auth puts
/// callers in front).
pub fn use_upstream(config: &mut Config, upstream: UpstreamConfig) {
    config.upstream = Some(upstream);
    run_open(config);
    config.operators = vec![OperatorConfig {
        name: "default".into(),
        login: "sandbox".into(),
        password_env: None,
        password_file: Some(secret_file("sandbox\n")),
    }];
}

/// `[auth] mode = "none"`: what a gateway in front of a real upstream
/// must say to run open.
pub fn run_open(config: &mut Config) {
    config.auth = Some(idgate::auth::AuthConfig {
        mode: idgate::auth::AuthMode::None,
        jwt: None,
    });
}

// channel tests

use idgate::{
    channels::ChannelSpec,
    cli::channels::AdminClient,
    domain::AdminToken,
    proto::v1::{ChannelStatus, ListChannelsResponse, RoutingMode, SetRoutingModeRequest},
};

/// A weighted split as `SetRoutingMode` weights: `[("primary", 90), ...]`.
pub fn weights(split: &[(&str, u32)]) -> Vec<v1::ChannelWeight> {
    split
        .iter()
        .map(|(channel, weight)| v1::ChannelWeight {
            channel: (*channel).into(),
            weight: *weight,
        })
        .collect()
}

/// The admin token of test gateways, typed.
pub fn admin_token() -> AdminToken {
    AdminToken::new(ADMIN_TOKEN).expect("non-empty token")
}

impl TestGateway {
    /// The admin listener's `host:port`.
    pub fn admin_addr(&self) -> String {
        self.gateway
            .admin_addr()
            .expect("admin listener (token configured)")
            .to_string()
    }

    /// A `ChannelAdminService` client sending the right bearer token.
    pub async fn admin(&self) -> AdminClient {
        idgate::cli::channels::connect(&self.admin_addr(), &admin_token())
            .await
            .expect("connect to the admin listener")
    }

    /// `ListChannels` over the admin listener.
    pub async fn list_channels(&self) -> ListChannelsResponse {
        self.admin()
            .await
            .list_channels(v1::ListChannelsRequest {})
            .await
            .expect("list channels")
            .into_inner()
    }

    /// One channel of `ListChannels`.
    pub async fn channel_status(&self, name: &str) -> ChannelStatus {
        self.list_channels()
            .await
            .channels
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("channel {name} listed"))
    }

    /// `SetRoutingMode` over the admin listener.
    pub async fn set_mode(&self, mode: RoutingMode) {
        self.admin()
            .await
            .set_routing_mode(SetRoutingModeRequest {
                mode: mode as i32,
                channel: String::new(),
                weights: Vec::new(),
                force: false,
            })
            .await
            .expect("set routing mode");
    }

    /// `SetRoutingMode` to a weighted split, refused or not.
    pub async fn set_weighted(
        &self,
        split: &[(&str, u32)],
    ) -> Result<v1::SetRoutingModeResponse, tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(SetRoutingModeRequest {
                mode: RoutingMode::Weighted as i32,
                channel: String::new(),
                weights: weights(split),
                force: false,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// `StartSession3D` for `appkey`.
    pub async fn start_3d(
        &self,
        appkey: &str,
    ) -> Result<v1::StartSession3DResponse, tonic::Status> {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "test".into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// `VerifyLiveness3D`, naming `channel` (empty: none).
    pub async fn verify_3d(
        &self,
        appkey: &str,
        session_token: &str,
        channel: &str,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.liveness()
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.into(),
                session_token: session_token.into(),
                channel: channel.into(),
            })
            .await
            .map(|r| r.into_inner().verdict.expect("verdict"))
    }

    /// Calls the embedded sandbox received for `op` on `channel`.
    pub fn sandbox_calls(&self, op: Operation, channel: &str) -> u64 {
        self.sandbox().calls(op, Some(channel))
    }

    /// The text of `GET /metrics`.
    pub async fn metrics_text(&self) -> String {
        http_client()
            .get(format!("{}/metrics", self.http_url()))
            .send()
            .await
            .expect("scrape /metrics")
            .text()
            .await
            .expect("metrics body")
    }

    /// The embedded sandbox's channels as `[[channels]]` entries (own
    /// listeners, priority in sandbox order, default timeout and breaker).
    pub fn sandbox_channel_specs(&self) -> Vec<ChannelSpec> {
        self.sandbox()
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(c, priority)| ChannelSpec::new(c.name, c.base_url, priority))
            .collect()
    }

    /// Reloads the channels as [`TestGateway::sandbox_channel_specs`]
    /// changed by `edit` (e.g. one channel's timeout).
    pub fn reload_channels(&self, edit: impl FnOnce(&mut Vec<ChannelSpec>)) {
        let mut config = test_config();
        config.channels = self.sandbox_channel_specs();
        edit(&mut config.channels);
        self.gateway.reload_from(&config).expect("reload channels");
    }

    /// A second gateway on this gateway's sandbox, as a deployment with an
    /// external upstream and explicit `[[channels]]` would run.
    pub async fn sibling(&self) -> TestGateway {
        let sandbox = self.sandbox();
        let upstream = UpstreamConfig {
            base_url: sandbox.base_url(),
            result_base_url: sandbox.result_base_url(),
            ..UpstreamConfig::default()
        };
        let channels = self.sandbox_channel_specs();
        TestGateway::start_with(move |config| {
            use_upstream(config, upstream);
            config.channels = channels;
            // The first gateway's journeys are foreign to this one.
            config.guard.accept_foreign_appkeys = true;
        })
        .await
    }
}

impl TestGateway {
    /// A gateway with the test configuration whose [`Gateway::reload`]
    /// re-reads `config_path` (what SIGHUP does in `idgate serve`).
    pub async fn start_reloadable(config_path: &std::path::Path) -> Self {
        Self::launch(test_config(), Some(config_path.to_owned())).await
    }
}

// event tests

/// The path of the gateway's webhook receiver in test gateways.
pub const WEBHOOK_PATH: &str = "/webhooks/journey";

/// Writes `content` to a fresh temporary file (a secret for the config),
/// removed with the test ([`super::temp::file`]).
pub fn secret_file(content: &str) -> std::path::PathBuf {
    super::temp::file("secret", content.as_bytes())
}

/// Everything a watch stream sends until it closes: its messages and the
/// status it ended with (`None`: closed with OK). Bounded by [`EVENT_WAIT`].
pub async fn drain(
    stream: tonic::Streaming<v1::WatchJourneyResponse>,
) -> (Vec<v1::WatchJourneyResponse>, Option<tonic::Status>) {
    drain_within(stream, EVENT_WAIT).await
}

/// [`drain`] bounded by `within`: the stream must end in that time.
pub async fn drain_within(
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

/// The statuses of a stream's messages, in order.
pub fn statuses(items: &[v1::WatchJourneyResponse]) -> Vec<v1::JourneyStatus> {
    items.iter().map(|i| i.status()).collect()
}

/// A watch request by appkey.
pub fn by_appkey(appkey: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.into())),
    }
}

/// A watch request by the reference CreateJourney returned.
pub fn by_ref(journey_ref: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::JourneyRef(
            journey_ref.into(),
        )),
    }
}

impl TestGateway {
    /// Opens a `WatchJourney` stream (the watcher is registered once this
    /// returns: the gateway answers the headers after subscribing).
    pub async fn watch(
        &self,
        request: v1::WatchJourneyRequest,
    ) -> tonic::Streaming<v1::WatchJourneyResponse> {
        self.journeys()
            .watch_journey(request)
            .await
            .expect("watch journey")
            .into_inner()
    }

    /// A journey with a liveness proof and RG documents submitted:
    /// processing runs until [`TestGateway::finish_processing`].
    pub async fn journey_in_processing(&self) -> v1::CreateJourneyResponse {
        let created = self.create_journey_for(happy_person()).await;
        assert!(self.pass_3d(&created.appkey).await.valid);
        self.submit_rg(&created.appkey).await;
        created
    }

    /// `/document/result` calls the sandbox has received.
    pub fn result_reads(&self) -> u64 {
        self.sandbox()
            .calls(idgate::domain::Operation::Result, None)
    }

    /// Waits until the sandbox's webhook counters satisfy `check`.
    pub async fn webhook_stats_until(
        &self,
        check: impl FnMut(&idgate::sandbox::WebhookStats) -> bool,
    ) -> idgate::sandbox::WebhookStats {
        let mut rx = self.sandbox().watch_webhook_stats();
        let stats = tokio::time::timeout(EVENT_WAIT, rx.wait_for(check))
            .await
            .expect("sandbox webhook counters in time")
            .expect("sandbox running");
        *stats
    }

    /// The webhook URL of the gateway.
    pub fn webhook_url(&self) -> String {
        format!("{}{WEBHOOK_PATH}", self.http_url())
    }

    /// The value of `idgate_webhooks_total{outcome=...}` on `/metrics`.
    /// 0 for an outcome never counted; a panic if the metric is not
    /// declared at all.
    pub async fn webhook_metric(&self, outcome: &str) -> u64 {
        let text = self.metrics_text().await;
        super::metrics::counted(
            &text,
            &format!("idgate_webhooks_total{{outcome=\"{outcome}\"}}"),
        ) as u64
    }
}
