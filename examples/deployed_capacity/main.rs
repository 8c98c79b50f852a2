//! One replica as deployed, whole journeys through it: the figures a
//! platform team sizes a fleet with (docs/capacity.md#a-replica-as-deployed-release-build-figures).
//!
//! ```sh
//! cargo build --release --bin idgate --example deployed_capacity
//! target/release/examples/deployed_capacity --seconds 30 --watches 10000
//! target/release/examples/deployed_capacity --seconds 3 --watches 200     # a short proof
//! ```
//!
//! `cargo test --example deployed_capacity` runs its unit tests.
//!
//! It starts, each a process of its own so that /proc tells their CPU
//! apart:
//!
//! - Redis: a `redis-server` of the run's own on a free loopback port
//!   (Debian's `redis-server` package; examples/hop/cluster.rs: ready only
//!   once the Redis answering there reports the child's own pid), stopped
//!   at the end;
//! - the sandbox standing in for the vendor: `idgate sandbox --config F`
//!   (sandbox.rs), documents processed in `--processing-ms`, its completion
//!   webhook sent to the gateway with Basic credentials;
//! - the gateway: the `idgate` binary (`--idgate-bin`, default the one
//!   beside this example: target/release/idgate for the release build) as
//!   deployed (setup.rs: the production overlay's configuration on
//!   loopback), with `[auth] mode = "jwt"` on a local JWKS and one caller
//!   granted every operation of a journey on its own journeys
//!   (`journeys = "own"`), OTLP/gRPC span export to a sink in this process
//!   (examples/hop/otlp_sink.rs), the JSON access log
//!   (`IDGATE_TELEMETRY__ACCESS_LOG=true`, `--log-format json`, stdout
//!   drained through a pipe as a container runtime does: examples/hop/child.rs),
//!   `RUST_LOG=info`, and `[cluster]` on the Redis.
//!
//! Phase 2 runs first (below), then phase 1.
//!
//! Phase 1: `--concurrency` callers over `--connections` HTTP/2
//! connections run whole journeys (examples/support/journey.rs, the
//! caller's bearer token on every call) for `--warmup-seconds`, then for
//! `--seconds` (or `--journeys` in all). It prints journeys per second,
//! p50 / p99 per RPC, the CPU per journey of the gateway, the sandbox,
//! Redis and this process (utime + stime from /proc, every thread, the
//! measured run only), Redis' commands and bytes per journey (`INFO
//! stats`, `INFO commandstats` deltas), spans received per journey, the
//! gateway's log lines per journey, and failures by code (0 in a good
//! run: it exits non-zero otherwise).
//!
//! Phase 2 (`--watches`, 0 to skip; watches.rs): that many `WatchJourney`
//! streams on journeys that stay open, and the gateway's `VmRSS` before
//! and after. The watch limits are raised to fit (setup.rs, printed). It
//! runs first, on the fresh replica: after phase 1 the allocator hands
//! phase 1's buffers back while the streams open, and the resident set
//! falls as it is counted (a first version of this example saw it fall
//! by 14 MiB with 200 streams).
//!
//! Every part shares the machine's cores: the rate is a floor of what the
//! replica carries on cores of its own; the CPU per journey is what sizes
//! it. A run longer than about four minutes meets the overlay's
//! connection age (300 s): watches in flight then end `CONNECTION_AGED`.

mod load;
mod measure;
mod report;
mod sandbox;
mod setup;
mod watches;

#[path = "../support/binary.rs"]
mod binary;
#[path = "../hop/child.rs"]
#[allow(dead_code)]
mod child;
#[path = "../../tests/it/support/child_env.rs"]
#[allow(dead_code)]
mod child_env;
#[path = "../hop/cluster.rs"]
mod cluster;
#[path = "../support/counters.rs"]
#[allow(dead_code)]
mod counters;
#[path = "../fleet_throughput/cpu.rs"]
#[allow(dead_code)]
mod cpu;
#[path = "../../tests/it/support/fixed_port.rs"]
#[allow(dead_code)]
mod fixed_port;
#[path = "../support/journey.rs"]
mod journey;
#[path = "../hop/jwt.rs"]
mod jwt;
#[path = "../support/load.rs"]
mod loads;
#[path = "../hop/otlp_sink.rs"]
#[allow(dead_code)]
mod otlp_sink;
#[path = "../../tests/it/support/redis.rs"]
#[allow(dead_code)]
mod redis_server;
#[path = "../hop/upstream.rs"]
#[allow(dead_code)]
mod upstream;

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::Parser;
use tonic::transport::Channel;

use crate::{
    child::{Hop, Setup},
    jwt::BenchCaller,
    load::Budget,
    measure::{Figures, Pids, Snapshot},
    otlp_sink::{Protocol, Sink},
    sandbox::SandboxChild,
    setup::WatchRoom,
};

#[derive(Parser)]
struct Args {
    /// Length of the measured run.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Journeys of the measured run, instead of `--seconds`.
    #[arg(long)]
    journeys: Option<u64>,
    /// Load before the measured run, not counted.
    #[arg(long, default_value_t = 5)]
    warmup_seconds: u64,
    /// Journeys in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// HTTP/2 connections the callers share (the gateway serves a
    /// connection on one of its threads: one connection would use one).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Size of each of the two document images, and of the sandbox's 3D
    /// selfie, in KiB.
    #[arg(long, default_value_t = 300)]
    image_kib: usize,
    /// The sandbox's document processing, in milliseconds.
    #[arg(long, default_value_t = 200)]
    processing_ms: u64,
    /// `WatchJourney` streams of phase 2 (0: no phase 2).
    #[arg(long, default_value_t = 10_000)]
    watches: usize,
    /// Phase 2's streams per connection (the gateway's
    /// `max_streams_per_connection`, 100 by default, is raised to it).
    #[arg(long, default_value_t = 100)]
    watches_per_connection: usize,
    /// The idgate binary; default: `idgate` beside this example.
    #[arg(long)]
    idgate_bin: Option<PathBuf>,
}

/// How long the OTLP exporter may hold spans before it sends them (the
/// batch processor's 5 s schedule, and a second more).
const SPAN_FLUSH: Duration = Duration::from_secs(6);

/// `count` connections to `url`.
async fn connect(url: &str, count: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::new();
    for _ in 0..count.max(1) {
        channels.push(Channel::from_shared(url.to_owned())?.connect().await?);
    }
    Ok(channels)
}

/// The pid of the Redis answering `conn` (`INFO server`).
async fn redis_pid(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u32> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    redis_server::process_id(&info).ok_or_else(|| anyhow::anyhow!("INFO server: no process_id"))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let binary = child::idgate_binary(args.idgate_bin.clone())?;
    let tick = cpu::ticks_per_second()?;
    println!(
        "idgate {}; load average at the start {}; {} callers over {} connections, 2 x {} KiB images, sandbox processing {} ms",
        binary.display(),
        cpu::load_average(),
        args.concurrency,
        args.connections,
        args.image_kib,
        args.processing_ms
    );
    let redis = cluster::start_redis()?;
    let mut conn = redis.client().await;
    let redis_pid = redis_pid(&mut conn).await?;
    let sink = Sink::start(Protocol::Grpc)?;
    let caller = BenchCaller::new()?;

    let dir = child::scratch_dir()?;
    let ports = (
        fixed_port::fixed_port()?,
        fixed_port::fixed_port()?,
        fixed_port::fixed_port()?,
    );
    let webhook_password = uuid::Uuid::new_v4().simple().to_string();
    let sandbox_file = dir.join("sandbox.toml");
    std::fs::write(
        &sandbox_file,
        setup::sandbox_toml(
            args.processing_ms,
            args.image_kib * 1024,
            ports.1,
            &webhook_password,
        ),
    )?;
    let sandbox = SandboxChild::start(&binary, &sandbox_file, &dir.join("sandbox.err"))?;
    let room = WatchRoom::for_watches(args.watches, args.watches_per_connection);
    let auth = caller.config_granting(&dir, &setup::caller_grant(&room))?;
    let config = setup::gateway_toml(ports, &sandbox.addresses, &redis.url(), &room, &auth);
    let extra_env = [
        ("RUST_LOG".to_owned(), "info".to_owned()),
        (setup::WEBHOOK_PASSWORD_ENV.to_owned(), webhook_password),
    ];
    let gateway = Setup {
        binary: &binary,
        // The hop's fixed upstream; this configuration names the sandbox.
        upstream: SocketAddr::from(([127, 0, 0, 1], 0)),
        otlp: Some((sink.addr, sink.protocol)),
        caller: Some(&caller),
        access_log: true,
        redis_url: Some(redis.url()),
        log_format: "json",
        stdout_pipe: true,
        extra_env: &extra_env,
    };
    let hop = Hop::start_on(&gateway, dir, ports, &config).await?;
    let pids = Pids {
        gateway: hop.pid(),
        sandbox: sandbox.pid(),
        redis: redis_pid,
    };
    let bearer = journey::bearer_metadata(&caller.bearer()?).map_err(anyhow::Error::msg)?;
    let channels = connect(&format!("http://{}", hop.grpc), args.connections).await?;
    let images = journey::rg_images(args.image_kib);

    // Phase 2 first, on the fresh replica (the module's doc says why).
    if args.watches > 0 {
        let per_connection = args.watches_per_connection.max(1);
        let watched =
            watches::measure(&hop, &bearer, &channels, args.watches, per_connection).await?;
        report::phase2(&watched, &room);
        anyhow::ensure!(
            watched.failed.is_empty(),
            "phase 2: streams failed: {:?}",
            watched.failed
        );
    }
    // What the gateway exported before the throughput run is no journey's.
    tokio::time::sleep(SPAN_FLUSH).await;
    sink.take();

    let drive = |budget| load::drive(&channels, &bearer, &images, args.concurrency, budget);
    let warm = drive(Budget::Seconds(args.warmup_seconds)).await;
    anyhow::ensure!(
        warm.failures() == 0,
        "the warm-up failed: {:?}",
        warm.failed
    );
    let before = Snapshot::take(pids, &mut conn, &hop.output).await?;
    let budget = args
        .journeys
        .map_or(Budget::Seconds(args.seconds), Budget::Journeys);
    let measured = drive(budget).await;
    let after = Snapshot::take(pids, &mut conn, &hop.output).await?;
    let figures = Figures::of(measured.completed, &before, &after, tick);
    let rss_kib = watches::rss_kib(hop.pid())?;
    let shared = measure::shared_results(&mut conn).await?;
    tokio::time::sleep(SPAN_FLUSH).await;
    let spans = report::Spans {
        tally: sink.take(),
        journeys: warm.completed + measured.completed,
    };
    report::phase1(&measured, &figures, &spans, rss_kib, shared);
    println!("\nload average at the end {}", cpu::load_average());
    drop(channels);
    hop.stop().await;
    drop(sandbox);
    drop(redis);
    anyhow::ensure!(
        measured.failures() == 0,
        "{} journeys failed",
        measured.failures()
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    // The load generator's own threads (the OTLP sink and the stdout
    // drains run on threads of their own).
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("loadgen")
        .enable_all()
        .build()?
        .block_on(run(args))
}
