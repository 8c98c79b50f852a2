//! The idgate child: its configuration (`../shared/perf/idgate-perf.toml`
//! on free loopback ports, plus what a row turns on), its environment,
//! its stdout drained by a thread, its `/metrics`.

use std::{
    io::Read as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

pub use crate::binary::{free_port, idgate_binary};
use crate::{jwt::BenchCaller, otlp_sink::Protocol};

/// The operator password idgate is given; the fixed upstream never asks
/// (examples/deployed_capacity's sandbox is given it too).
pub const OPERATOR_PASSWORD: &str = "bench";
/// The variable holding the `[cluster]` sealing key. Not `IDGATE_*`: those
/// are configuration overrides.
pub const SEALING_KEY_ENV: &str = "HOP_SEALING_KEY";

/// What one row's idgate runs with.
pub struct Setup<'a> {
    pub binary: &'a Path,
    pub upstream: SocketAddr,
    /// The sink spans go to, and how.
    pub otlp: Option<(SocketAddr, Protocol)>,
    /// Caller authentication (`[auth] mode = "jwt"`) for this caller.
    pub caller: Option<&'a BenchCaller>,
    /// `IDGATE_TELEMETRY__ACCESS_LOG=true`.
    pub access_log: bool,
    /// `[cluster] redis_url`.
    pub redis_url: Option<String>,
    /// `--log-format`.
    pub log_format: &'a str,
    /// Its stdout into a pipe this process drains (else `/dev/null`).
    pub stdout_pipe: bool,
    /// `--idgate-env`, applied last.
    pub extra_env: &'a [(String, String)],
}

/// The configuration file: `idgate-perf.toml`'s, on these ports, with the
/// row's `[auth]` (and `[[callers]]`) and `[cluster]` sections.
pub fn config_toml(
    (grpc, http, admin): (u16, u16, u16),
    upstream: SocketAddr,
    auth: &str,
    redis_url: Option<&str>,
) -> String {
    let base = format!("http://{upstream}/facecaptcha");
    let cluster = match redis_url {
        Some(url) => {
            format!("[cluster]\nredis_url = \"{url}\"\nsecret_key_env = \"{SEALING_KEY_ENV}\"\n\n")
        }
        None => String::new(),
    };
    format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\n\
         [upstream]\nbase_url = \"{base}\"\nresult_base_url = \"{base}\"\n\n\
         [[operators]]\nname = \"default\"\nlogin = \"bench\"\npassword_env = \"IDGATE_OPERATOR_PASSWORD\"\n\n\
         [[channels]]\nname = \"primary\"\nbase_url = \"{base}\"\npriority = 0\n\n\
         [[channels]]\nname = \"alternative\"\nbase_url = \"{base}\"\npriority = 1\n\n\
         [webhook]\nallow_unauthenticated = true\n\n\
         # Not in idgate-perf.toml: the benchmark's appkey is no journey idgate created.\n\
         [journeys]\naccept_foreign_appkeys = true\n\n\
         # Not in idgate-perf.toml: stop at once when the benchmark is done.\n\
         [serving]\ndrain_delay_secs = 0\n\n\
         {cluster}{auth}"
    )
}

/// The child's environment on top of this process's, minus every
/// inherited `OTEL_*` and `IDGATE_*` variable: the row's switches, then
/// `--idgate-env`.
pub fn child_env(setup: &Setup<'_>, sealing_key: &str) -> Vec<(String, String)> {
    let mut env = vec![(
        "IDGATE_OPERATOR_PASSWORD".to_owned(),
        OPERATOR_PASSWORD.to_owned(),
    )];
    if let Some((sink, protocol)) = setup.otlp {
        env.push((
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
            format!("http://{sink}"),
        ));
        env.push((
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
            protocol.name().to_owned(),
        ));
    }
    if setup.access_log {
        env.push(("IDGATE_TELEMETRY__ACCESS_LOG".to_owned(), "true".to_owned()));
    }
    if setup.redis_url.is_some() {
        env.push((SEALING_KEY_ENV.to_owned(), sealing_key.to_owned()));
    }
    env.extend(setup.extra_env.iter().cloned());
    env
}

/// `KEY=VALUE`, for `--idgate-env`.
pub fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// Lines and bytes idgate wrote to stdout (its logs).
#[derive(Clone, Default)]
pub struct Output {
    lines: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl Output {
    /// Lines and bytes so far.
    pub fn read(&self) -> (u64, u64) {
        (
            self.lines.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }

    /// Reads `stdout` to its end on a thread of its own, counting: the log
    /// lines are written into a pipe someone reads, as in a container.
    fn drain(stdout: ChildStdout) -> anyhow::Result<Output> {
        let output = Output::default();
        let counts = output.clone();
        std::thread::Builder::new()
            .name("idgate-stdout".to_owned())
            .spawn(move || {
                let mut stdout = stdout;
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n @ 1..) = stdout.read(&mut buf) {
                    let lines = buf[..n].iter().filter(|&&b| b == b'\n').count();
                    counts.lines.fetch_add(lines as u64, Ordering::Relaxed);
                    counts.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            })?;
        Ok(output)
    }
}

/// The idgate child; killed when dropped, however the benchmark ends.
pub struct Hop {
    child: Child,
    dir: PathBuf,
    pub grpc: SocketAddr,
    http: SocketAddr,
    pub output: Output,
}

impl Drop for Hop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new directory of this run's own for idgate's files (configuration,
/// JWKS, stderr); the [`Hop`] started in it removes it.
pub fn scratch_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "idgate-hop-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl Hop {
    /// Starts idgate as `setup` says and waits until its gRPC health check
    /// says `SERVING`.
    pub async fn start(setup: &Setup<'_>) -> anyhow::Result<Hop> {
        let dir = scratch_dir()?;
        let ports = (free_port()?, free_port()?, free_port()?);
        let auth = match setup.caller {
            Some(caller) => caller.config(&dir)?,
            None => "[auth]\nmode = \"none\"\n\n".to_owned(),
        };
        let config = config_toml(ports, setup.upstream, &auth, setup.redis_url.as_deref());
        Self::start_on(setup, dir, ports, &config).await
    }

    /// Starts idgate on `config`, a whole configuration file whose
    /// listeners are `ports` (gRPC, HTTP, admin), with `setup`'s
    /// environment, log format and stdout; `dir` ([`scratch_dir`]) holds
    /// the files it names and is removed with the [`Hop`]. For a
    /// configuration other than the hop's own (examples/deployed_capacity).
    pub async fn start_on(
        setup: &Setup<'_>,
        dir: PathBuf,
        ports: (u16, u16, u16),
        config: &str,
    ) -> anyhow::Result<Hop> {
        let config_file = dir.join("idgate.toml");
        std::fs::write(&config_file, config)?;
        let key = [
            *uuid::Uuid::new_v4().as_bytes(),
            *uuid::Uuid::new_v4().as_bytes(),
        ]
        .concat();
        let key = base64::engine::general_purpose::STANDARD.encode(key);
        let stderr = std::fs::File::create(dir.join("idgate.err"))?;
        let mut command = Command::new(setup.binary);
        command
            .args(["serve", "--config"])
            .arg(&config_file)
            .args(["--log-format", setup.log_format])
            .stdout(if setup.stdout_pipe {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(stderr);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("OTEL_") || name.starts_with("IDGATE_") {
                command.env_remove(&*name);
            }
        }
        command.envs(child_env(setup, &key));
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", setup.binary.display()))?;
        let output = match child.stdout.take() {
            Some(stdout) => Output::drain(stdout)?,
            None => Output::default(),
        };
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let mut hop = Hop {
            child,
            dir,
            grpc: loopback(ports.0),
            http: loopback(ports.1),
            output,
        };
        hop.wait_serving().await?;
        Ok(hop)
    }

    async fn wait_serving(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("http://{}", self.grpc);
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("idgate exited ({status}): {}", self.stderr_tail());
            }
            let serving = async {
                let channel = tonic::transport::Channel::from_shared(url.clone())?
                    .connect()
                    .await?;
                let answer = HealthClient::new(channel)
                    .check(HealthCheckRequest::default())
                    .await?;
                anyhow::Ok(answer.into_inner().status() == ServingStatus::Serving)
            };
            if matches!(serving.await, Ok(true)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("idgate did not serve in 30 s: {}", self.stderr_tail());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("idgate.err")).unwrap_or_default();
        let start = text.len().saturating_sub(800);
        text.get(start..).unwrap_or_default().to_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET /metrics` on the HTTP listener, the OpenMetrics text whole.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let mut tcp = tokio::net::TcpStream::connect(self.http).await?;
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.http
        );
        tcp.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer))
            .await
            .context("/metrics did not answer in 10 s")??;
        let answer = String::from_utf8_lossy(&answer);
        let (head, body) = answer.split_once("\r\n\r\n").context("an HTTP answer")?;
        anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "/metrics: {head}");
        Ok(body.to_owned())
    }

    /// SIGTERM, so it flushes its spans; then waits (bounded) for the exit.
    pub async fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The samples of `/metrics` about span export: series whose name says
/// `span`, `export`, `otlp` or `dropped` (none exist yet; the exporter's
/// counters, once idgate has them, show up here without a change).
pub fn exporter_series(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            let name = line
                .split(['{', ' '])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            ["span", "export", "otlp", "dropped"]
                .iter()
                .any(|word| name.contains(word))
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup<'a>(redis_url: Option<String>, extra_env: &'a [(String, String)]) -> Setup<'a> {
        Setup {
            binary: Path::new("idgate"),
            upstream: SocketAddr::from(([127, 0, 0, 1], 9)),
            otlp: Some((
                SocketAddr::from(([127, 0, 0, 1], 4318)),
                Protocol::HttpProtobuf,
            )),
            caller: None,
            access_log: true,
            redis_url,
            log_format: "json",
            stdout_pipe: true,
            extra_env,
        }
    }

    #[test]
    fn the_deployed_configuration_is_one_idgate_accepts() {
        let extra = [("OTEL_BSP_MAX_QUEUE_SIZE".to_owned(), "8192".to_owned())];
        let setup = setup(Some("redis://127.0.0.1:6399".to_owned()), &extra);
        let dir = tempfile::tempdir().expect("temp dir");
        let caller = BenchCaller::new().expect("a key");
        let auth = caller.config(dir.path()).expect("jwks");
        let toml = config_toml((1, 2, 3), setup.upstream, &auth, setup.redis_url.as_deref());
        let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let env = child_env(&setup, &key);
        let config = idgate::config::Config::from_toml_and_env(&toml, env.clone())
            .expect("a valid configuration");
        assert!(config.telemetry.access_log);
        assert!(config.cluster.is_enabled());
        assert!(config.auth.is_some());
        assert!(env.contains(&(
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
            "http/protobuf".to_owned()
        )));
        assert_eq!(env.last(), Some(&extra[0]), "--idgate-env comes last");
    }

    #[test]
    fn the_plain_row_sets_only_the_operator_password() {
        let mut plain = setup(None, &[]);
        plain.otlp = None;
        plain.access_log = false;
        let env = child_env(&plain, "unused");
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].0, "IDGATE_OPERATOR_PASSWORD");
    }

    #[test]
    fn idgate_env_is_key_equals_value() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".to_owned(), "b=c".to_owned())));
        assert_eq!(parse_env("A="), Ok(("A".to_owned(), String::new())));
        assert!(parse_env("=b").is_err());
        assert!(parse_env("A").is_err());
    }

    #[test]
    fn only_the_export_series_are_picked_from_metrics() {
        let text = "# HELP idgate_rpc_requests_total RPCs\n\
                    idgate_rpc_requests_total{method=\"x\"} 3\n\
                    idgate_plaintext_hops{kind=\"otlp\"} 0\n\
                    idgate_otlp_spans_dropped_total 5\n\
                    # EOF\n";
        assert_eq!(
            exporter_series(text),
            vec!["idgate_otlp_spans_dropped_total 5".to_owned()]
        );
    }
}
