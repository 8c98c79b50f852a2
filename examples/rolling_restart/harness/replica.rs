//! One gateway replica: `idgate serve` as a child process on fixed ports
//! (Envoy's static endpoints), stopped with SIGTERM and started again, and
//! the configuration file it runs on.
//!
//! Shared by the rolling restart and examples/fleet_throughput (included
//! by path: examples cannot share a library).

use std::{
    path::{Path, PathBuf},
    process::{Child, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use idgate::sandbox::{SandboxConfig, SandboxHandle};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// The fleet's webhook credentials: the sandbox sends them, every replica
/// checks them.
pub const WEBHOOK_USER: &str = "vendor";
pub const WEBHOOK_PASSWORD: &str = "rolling-webhook-password-0123456789";

/// The sandbox's configuration behind the replicas: documents processed in
/// `processing_delay_ms`, completion notices posted with the replicas'
/// webhook credentials to `webhook_port` (the balancer's listener for
/// them), room for every journey of a run.
pub fn sandbox_config(processing_delay_ms: u64, webhook_port: u16) -> SandboxConfig {
    let mut config = SandboxConfig {
        processing_delay_ms,
        max_entries: 1_000_000,
        ..SandboxConfig::default()
    };
    config.webhook.url = Some(format!("http://127.0.0.1:{webhook_port}/webhooks/journey"));
    config.webhook.basic_user = Some(WEBHOOK_USER.into());
    config.webhook.basic_password = Some(WEBHOOK_PASSWORD.into());
    config
}

/// A free loopback port below the ephemeral range, for a process that
/// binds it itself, later: a replica and Envoy have theirs fixed in their
/// configuration files, and a replica binds its own again as it restarts
/// (`tests/it/support/fixed_port.rs`, declared at the crate's root).
pub use crate::fixed_port::fixed_port;

/// What every replica of a fleet shares in its configuration.
pub struct Settings {
    /// `redis://127.0.0.1:<port>` of the fleet's Redis.
    pub redis_url: String,
    pub drain_delay_secs: u64,
    pub shutdown_grace_secs: u64,
}

/// Writes a replica's configuration to `dir` and returns its path: the
/// shared sandbox as its upstream, open (`[auth] mode = "none"`: the load
/// runs without tokens), the fleet's Redis and key, the fleet's webhook
/// credentials, listening on `ports` (gRPC, HTTP, admin).
pub fn write_config(
    settings: &Settings,
    sandbox: &SandboxHandle,
    dir: &Path,
    ports: (u16, u16, u16),
) -> anyhow::Result<PathBuf> {
    let (grpc, http, admin) = ports;
    // Files of this replica alone: a replica already running reads its
    // files while the next one's are written, and a shared file rewritten
    // (truncated, then filled) can be read empty.
    let secret = |name: &str, value: &str| -> anyhow::Result<String> {
        let path = dir.join(format!("idgate-{grpc}-{name}"));
        std::fs::write(&path, value)?;
        Ok(path.display().to_string())
    };
    let operator = &SandboxConfig::default().operators[0];
    let mut toml = format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [serving]\ndrain_delay_secs = {}\nshutdown_grace_secs = {}\n\
         [auth]\nmode = \"none\"\n\
         [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\n\
         [[operators]]\nname = \"default\"\nlogin = \"{}\"\npassword_file = \"{}\"\n\
         [webhook]\nbasic_user = \"{WEBHOOK_USER}\"\nbasic_password_file = \"{}\"\n\
         [watch]\nwebhook_grace_secs = 5\npoll_initial_ms = 200\npoll_max_ms = 1000\n\
         [cluster]\nredis_url = \"{}\"\nsecret_key_file = \"{}\"\n",
        settings.drain_delay_secs,
        settings.shutdown_grace_secs,
        sandbox.base_url(),
        sandbox.result_base_url(),
        operator.login,
        secret("operator-password", &operator.password)?,
        secret("webhook-password", WEBHOOK_PASSWORD)?,
        settings.redis_url,
        secret(
            "cluster-key",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
        )?,
    );
    for (i, channel) in sandbox.channels().into_iter().enumerate() {
        toml.push_str(&format!(
            "[[channels]]\nname = \"{}\"\nbase_url = \"{}\"\npriority = {i}\n",
            channel.name, channel.base_url
        ));
    }
    let path = dir.join(format!("idgate-{grpc}.toml"));
    std::fs::write(&path, toml)?;
    Ok(path)
}

/// A replica's process and the ports it listens on.
pub struct Replica {
    pub grpc: u16,
    pub http: u16,
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Replica {
    /// A replica of `binary` on `config` (not started); its output is
    /// appended to `log`.
    pub fn new(binary: &Path, config: PathBuf, log: PathBuf, grpc: u16, http: u16) -> Self {
        Self {
            grpc,
            http,
            binary: binary.to_owned(),
            config,
            log,
            child: None,
        }
    }

    /// Starts the process.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        // The replica runs on its config file alone: no `IDGATE_*` override
        // or `OTEL_*` setting of the shell that started the run.
        let mut command = crate::child_env::command(&self.binary);
        let child = command
            .args(["serve", "--config"])
            .arg(&self.config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("running {}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the replica's own gRPC health says SERVING.
    pub async fn wait_serving(&mut self, within: Duration) -> anyhow::Result<()> {
        let give_up = Instant::now() + within;
        let url = format!("http://127.0.0.1:{}", self.grpc);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok())
                .flatten()
            {
                anyhow::bail!(
                    "replica :{} exited at start ({status}); see {}",
                    self.grpc,
                    self.log.display()
                );
            }
            if let Ok(channel) = tonic::transport::Channel::from_shared(url.clone())?
                .connect()
                .await
            {
                let answer = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                if answer.is_ok_and(|a| a.into_inner().status() == ServingStatus::Serving) {
                    return Ok(());
                }
            }
            if Instant::now() >= give_up {
                anyhow::bail!("replica :{} not SERVING within {within:?}", self.grpc);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id while it runs (examples/fleet_throughput reads its
    /// CPU time).
    #[allow(dead_code)]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM, as the kubelet does.
    pub fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.as_ref().context("not running")?.id();
        let status = crate::child_env::command("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .context("running kill (Debian's procps)")?;
        anyhow::ensure!(status.success(), "kill -TERM {pid}: {status}");
        Ok(())
    }

    /// Waits for the process to exit, at most `within` (then kills it, as
    /// the kubelet's SIGKILL after the grace period, and says so).
    pub async fn wait_exit(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let give_up = Instant::now() + within;
        let child = self.child.as_mut().context("not running")?;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() >= give_up {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                anyhow::bail!(
                    "replica :{} still running {within:?} after SIGTERM: killed",
                    self.grpc
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
