//! The load generator: runs whole journeys through a gateway with many
//! concurrent callers and reports throughput and per-step latency. A
//! journey counts once `WatchJourney` delivered its completed result (and
//! `GetJourneyResult` then reads it complete), not when its documents were
//! merely accepted.
//!
//! ```sh
//! cargo run --release --example loadgen -- --journeys 2000 --concurrency 32
//! cargo run --release --example loadgen -- --gateway http://127.0.0.1:50051
//! ```
//!
//! Without `--gateway` it starts a gateway on the embedded sandbox in
//! process, on loopback. Every run is bounded by `--journeys` and
//! `--max-seconds`.

#[path = "support/journey.rs"]
mod journey;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use idgate::config::Config;
use tonic::transport::Channel;

use self::journey::{Latencies, journey, pct, rg_images};

#[derive(Parser)]
struct Args {
    /// Gateway address; absent: an in-process gateway on the embedded sandbox.
    #[arg(long)]
    gateway: Option<String>,
    /// Journeys to run in all.
    #[arg(long, default_value_t = 1000)]
    journeys: usize,
    /// Journeys in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Size of each of the two document images, in KiB.
    #[arg(long, default_value_t = 300)]
    image_kib: usize,
    /// Stop after this long, whatever is left.
    #[arg(long, default_value_t = 120)]
    max_seconds: u64,
    /// Document processing time of the in-process sandbox, in milliseconds
    /// (ignored with `--gateway`).
    #[arg(long, default_value_t = 200)]
    processing_ms: u64,
    /// Longest wait for a journey's completed result, in seconds.
    #[arg(long, default_value_t = 60)]
    result_timeout_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut embedded = None;
    let url = match &args.gateway {
        Some(u) => u.clone(),
        None => {
            let mut config = Config::default();
            config.listen.grpc = ([127, 0, 0, 1], 0).into();
            config.listen.http = ([127, 0, 0, 1], 0).into();
            config.sandbox.max_body_bytes = 64 << 20;
            config.sandbox.max_entries = 1_000_000;
            config.sandbox.processing_delay_ms = args.processing_ms;
            let gw = idgate::server::start(config).await?;
            let url = gw.grpc_url();
            embedded = Some(gw);
            url
        }
    };
    let ch = Channel::from_shared(url.clone())?.connect().await?;
    let images = rg_images(args.image_kib);
    let lat: Latencies = Arc::default();
    let sem = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let result_timeout = Duration::from_secs(args.result_timeout_seconds);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.journeys {
        if Instant::now() >= deadline {
            break;
        }
        let permit = sem.clone().acquire_owned().await?;
        let (ch, images, lat) = (ch.clone(), images.clone(), lat.clone());
        tasks.spawn(async move {
            let r = journey(ch, images, lat, result_timeout).await;
            drop(permit);
            r
        });
    }
    let (mut ok, mut failed) = (0usize, BTreeMap::<String, usize>::new());
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(())) => ok += 1,
            Ok(Err(s)) => *failed.entry(format!("{:?}", s.code())).or_default() += 1,
            Err(_) => *failed.entry("task panicked".into()).or_default() += 1,
        }
    }
    let elapsed = started.elapsed();
    println!(
        "target {url}\n{ok} journeys completed in {:.2}s = {:.1} journeys/s ({} concurrent, 2 x {} KiB images)",
        elapsed.as_secs_f64(),
        ok as f64 / elapsed.as_secs_f64(),
        args.concurrency,
        args.image_kib
    );
    if !failed.is_empty() {
        println!("failed: {failed:?}");
    }
    println!(
        "{:<24} {:>9} {:>9} {:>9} {:>9}",
        "step", "p50", "p90", "p99", "max"
    );
    let map = lat.lock().map(|m| m.clone()).unwrap_or_default();
    for (step, mut v) in map {
        v.sort();
        println!(
            "{step:<24} {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms",
            pct(&v, 0.5).as_secs_f64() * 1e3,
            pct(&v, 0.9).as_secs_f64() * 1e3,
            pct(&v, 0.99).as_secs_f64() * 1e3,
            v.last().copied().unwrap_or_default().as_secs_f64() * 1e3
        );
    }
    if let Some(gw) = embedded {
        gw.shutdown().await;
    }
    Ok(())
}
