//! The embedded store (`[store]`) over real processes: `idgate serve`
//! as a child with its state in a directory of its own, in front of a
//! sandbox that runs in this test process, so that the vendor outlives
//! each gateway it is killed and restarted under. Two JWT callers: the
//! owner of the journeys and another.
//!
//! - `restart`: a replica killed (SIGKILL, SIGTERM) mid-journey and right
//!   after a `CreateJourney` answer forgets nothing its callers were told.
//! - `failures`: what refuses a start (and `idgate check`), each naming
//!   the store's path and the cause; `store.max_bytes` reached.
//! - `at_rest`: the store file holds nothing personal in clear.

mod at_rest;
mod failures;
mod restart;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::Arc,
    time::Duration,
};

use idgate::{
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{ManualClock, SandboxConfig, SandboxHandle},
};
use tonic::transport::Channel;

use crate::support::{
    gateway::{ADMIN_TOKEN, happy_person, secret_file},
    jwt::{AUDIENCE, ISSUER, TestKey, bearer, jwks_file},
    process::{ServeProcess, child_command},
    sandbox::start_on,
};

/// The owner of the journeys, and another caller of the same rights.
const CALLERS: &str = r#"
[[callers]]
name = "owner"
jwt_subject = "svc-owner"
operator_profiles = ["default"]
operations = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]

[[callers]]
name = "other"
jwt_subject = "svc-other"
operator_profiles = ["default"]
operations = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]
"#;

/// A single replica's site: the vendor (a sandbox in this process, on a
/// manual clock), the callers' key, and a directory holding the
/// gateway's configuration and its store.
pub(super) struct Site {
    pub(super) vendor: SandboxHandle,
    pub(super) clock: Arc<ManualClock>,
    key: TestKey,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Site {
    /// A site whose configuration ends with `store_toml` (`[store]` keys
    /// beyond its `path`, the site's own directory).
    pub(super) async fn new(store_toml: &str) -> Self {
        let clock = Arc::new(ManualClock::new());
        let vendor = start_on(
            SandboxConfig {
                processing_delay_ms: 2_000,
                ..SandboxConfig::default()
            },
            clock.clone(),
        )
        .await;
        let key = TestKey::es256("store");
        let dir = crate::support::temp::dir("store");
        let config = dir.path().join("idgate.toml");
        let site = Self {
            vendor,
            clock,
            key,
            dir,
            config,
        };
        site.write_config(store_toml);
        site
    }

    fn write_config(&self, store_toml: &str) {
        let channels: String = self
            .vendor
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(c, priority)| {
                format!(
                    "[[channels]]\nname = {:?}\nbase_url = {:?}\npriority = {priority}\n",
                    c.name, c.base_url
                )
            })
            .collect();
        let text = format!(
            "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
             [serving]\ndrain_delay_secs = 0\nshutdown_grace_secs = 1\n\
             [upstream]\nbase_url = {base:?}\nresult_base_url = {result:?}\n\
             [[operators]]\nname = \"default\"\nlogin = \"sandbox\"\npassword_file = {password:?}\n\
             {channels}\
             [auth]\nmode = \"jwt\"\nallow_plaintext_tokens = true\n\
             [auth.jwt]\nissuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks_file = {jwks:?}\n\
             {CALLERS}\n\
             [store]\npath = {store:?}\n{store_toml}",
            base = self.vendor.base_url(),
            result = self.vendor.result_base_url(),
            password = secret_file("sandbox\n").display().to_string(),
            jwks = jwks_file(&[&self.key]).display().to_string(),
            store = self.store_dir().display().to_string(),
        );
        std::fs::write(&self.config, text).expect("write config");
    }

    /// The store's directory (`[store] path`).
    pub(super) fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// A caller's bearer token.
    pub(super) fn token(&self, subject: &str) -> String {
        self.key.token(subject)
    }

    /// `idgate <subcommand> --config` of this site, its state where the
    /// configuration says (not in memory, as other tests' gateways).
    pub(super) fn command(&self, subcommand: &str) -> Command {
        let mut command = child_command(env!("CARGO_BIN_EXE_idgate"), std::env::vars_os());
        command
            .args([subcommand, "--config"])
            .arg(&self.config)
            .env("IDGATE_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "info");
        command
    }

    /// Starts `idgate serve` on this site and waits until it listens.
    pub(super) async fn serve(&self) -> Replica {
        let process = ServeProcess::spawn(self.command("serve"));
        let grpc = process.field("idgate listening", "grpc");
        let channel = Channel::from_shared(format!("http://{grpc}"))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        Replica { process, channel }
    }

    /// A start that must fail: `idgate serve` run to its exit.
    pub(super) fn refused_start(&self) -> Output {
        self.command("serve").output().expect("run idgate serve")
    }

    /// Every live counter of vendor calls, summed.
    pub(super) fn vendor_calls(&self) -> u64 {
        self.vendor.all_calls().iter().map(|c| c.count).sum()
    }

    /// Moves the vendor's clock past document processing.
    pub(super) fn finish_processing(&self) {
        self.clock.advance(Duration::from_secs(3));
    }
}

/// One `idgate serve` of a site, and a connection to its gRPC listener.
pub(super) struct Replica {
    process: ServeProcess,
    channel: Channel,
}

impl Replica {
    pub(super) fn journeys(&self) -> JourneyServiceClient<Channel> {
        JourneyServiceClient::new(self.channel.clone())
    }

    pub(super) fn liveness(&self) -> LivenessServiceClient<Channel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    pub(super) fn documents(&self) -> DocumentServiceClient<Channel> {
        DocumentServiceClient::new(self.channel.clone())
    }

    /// `CreateJourney` of the sandbox's happy person with `request_id`,
    /// as the caller of `token`.
    pub(super) async fn create(
        &self,
        token: &str,
        request_id: &str,
    ) -> Result<v1::CreateJourneyResponse, tonic::Status> {
        let request = v1::CreateJourneyRequest {
            request_id: request_id.to_owned(),
            ..happy_person()
        };
        self.journeys()
            .create_journey(bearer(token, request))
            .await
            .map(tonic::Response::into_inner)
    }

    /// `StartSession3D` on `appkey` as the caller of `token`.
    pub(super) async fn start_3d(
        &self,
        token: &str,
        appkey: &str,
    ) -> Result<v1::StartSession3DResponse, tonic::Status> {
        let request = v1::StartSession3DRequest {
            appkey: appkey.to_owned(),
            user_agent: "store-test".into(),
        };
        self.liveness()
            .start_session3_d(bearer(token, request))
            .await
            .map(tonic::Response::into_inner)
    }

    /// Stops the process with `signal` (`KILL`, `TERM`) and waits for it
    /// to exit.
    pub(super) async fn stop(mut self, signal: &str) {
        self.process.signal(signal);
        self.process
            .exit_within(Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("idgate serve did not exit on SIG{signal}"));
    }
}

/// What a refused start wrote to stderr.
pub(super) fn stderr(output: &Output) -> String {
    assert!(!output.status.success(), "the start was refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether `haystack` holds `needle` anywhere.
pub(super) fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every file under `dir`, read whole.
pub(super) fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::read_dir(dir)
        .expect("read the store's directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read a store file");
            (path, bytes)
        })
        .collect()
}
