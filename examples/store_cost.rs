//! What the embedded store costs `CreateJourney`, against memory: a
//! gateway binary of its own (a child process on the embedded sandbox,
//! on loopback) with `[store] backend` set, `--calls` journeys created
//! with a `request_id` each (the journey record and the idempotency
//! record written durably before each answer), `--concurrency` at once;
//! the latency quantiles, journeys a second, and the store's bytes on
//! disk once the gateway has stopped.
//!
//! ```sh
//! cargo build --release --bin idgate --example store_cost
//! for b in embedded memory embedded memory; do
//!   target/release/examples/store_cost --backend $b --calls 10000 --concurrency 32
//! done
//! target/release/examples/store_cost --backend embedded --calls 100000   # disk at 10x
//! ```

#[path = "support/binary.rs"]
mod binary;
#[path = "support/journey.rs"]
mod journey;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use binary::{free_port, idgate_binary};
use clap::Parser;
use idgate::proto::v1::journey_service_client::JourneyServiceClient;
use tokio::{sync::Semaphore, task::JoinSet};
use tonic::transport::Channel;

#[derive(Parser)]
struct Args {
    /// `[store] backend`: `embedded` or `memory`.
    #[arg(long, default_value = "embedded")]
    backend: String,
    /// Journeys created in the measured phase.
    #[arg(long, default_value_t = 10_000)]
    calls: usize,
    /// `CreateJourney` calls in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Unmeasured journeys created first.
    #[arg(long, default_value_t = 500)]
    warmup: usize,
    /// The idgate binary; default: `idgate` beside this example.
    #[arg(long)]
    idgate_bin: Option<PathBuf>,
}

/// The gateway's process: stopped by SIGTERM once measured (it drains and
/// closes its store, as on a deploy), killed if the run fails before.
struct Gateway(std::process::Child);

impl Gateway {
    fn stop(&mut self) -> anyhow::Result<()> {
        Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()?;
        self.0.wait()?;
        Ok(())
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Bytes of the files under `dir`: as listed, and as allocated on disk.
fn bytes_under(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let mut sums = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return sums;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (len, blocks) = bytes_under(&entry.path());
            sums = (sums.0 + len, sums.1 + blocks);
        } else {
            sums = (sums.0 + meta.len(), sums.1 + meta.blocks() * 512);
        }
    }
    sums
}

/// `n` journeys, `concurrency` at once, each with a request id of its
/// own; the latency of each, sorted.
async fn create(
    client: &JourneyServiceClient<Channel>,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<Duration>> {
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let permit = permits.clone().acquire_owned().await?;
        let mut client = client.clone();
        let mut request = journey::create_request(&format!("storecost{i}"));
        request.request_id = uuid::Uuid::new_v4().to_string();
        tasks.spawn(async move {
            let _permit = permit;
            let started = Instant::now();
            let answer = client.create_journey(request).await;
            answer.map(|_| started.elapsed())
        });
    }
    let mut latencies = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        latencies.push(done?.context("CreateJourney")?);
    }
    latencies.sort();
    Ok(latencies)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let binary = idgate_binary(args.idgate_bin.clone())?;
    let dir = std::env::temp_dir().join(format!("idgate-store-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = dir.join("store");
    let (grpc, http, admin) = (free_port()?, free_port()?, free_port()?);
    let records = (args.calls + args.warmup) * 2 + 1000;
    let config = format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\n\
         [store]\nbackend = \"{}\"\npath = {:?}\n\n\
         [journeys]\nmax_entries = {records}\n\n\
         [idempotency]\nmax_entries = {records}\n\n\
         [sandbox]\nmax_entries = {records}\n\n\
         [serving]\ndrain_delay_secs = 0\n",
        args.backend, store,
    );
    let config_path = dir.join("idgate.toml");
    std::fs::write(&config_path, config)?;
    let mut gateway = Gateway(
        Command::new(&binary)
            .args(["serve", "--config"])
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?,
    );

    let url = format!("http://127.0.0.1:{grpc}");
    let started = Instant::now();
    let channel = loop {
        if let Ok(channel) = Channel::from_shared(url.clone())?.connect().await {
            break channel;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "the gateway did not listen within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let client = JourneyServiceClient::new(channel);
    create(&client, args.warmup, args.concurrency).await?;
    let began = Instant::now();
    let latencies = create(&client, args.calls, args.concurrency).await?;
    let elapsed = began.elapsed();
    drop(client);

    gateway.stop()?;
    let (listed, allocated) = bytes_under(&store);
    let journeys = (args.calls + args.warmup) as u64;
    println!(
        "backend={} calls={} concurrency={} journeys/s={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.2} store_bytes={listed} store_allocated={allocated} bytes/journey={}",
        args.backend,
        args.calls,
        args.concurrency,
        args.calls as f64 / elapsed.as_secs_f64(),
        journey::pct(&latencies, 0.50).as_secs_f64() * 1e3,
        journey::pct(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        listed.checked_div(journeys).unwrap_or(0),
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
