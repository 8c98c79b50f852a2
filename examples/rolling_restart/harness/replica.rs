//! One gateway replica: `idgate serve` as a child process on fixed ports
//! (Envoy's static endpoints), stopped with SIGTERM and started again.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

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
        let mut command = Command::new(&self.binary);
        // The replica runs on its config file alone: no `IDGATE_*` override
        // or `OTEL_*` setting of the shell that started the run.
        for (key, _) in std::env::vars_os() {
            let key_text = key.to_string_lossy();
            if key_text.starts_with("IDGATE_") || key_text.starts_with("OTEL_") {
                command.env_remove(&key);
            }
        }
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

    /// Sends SIGTERM, as the kubelet does.
    pub fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.as_ref().context("not running")?.id();
        let status = Command::new("kill")
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
