//! The rolling-restart proof: replicas of the `idgate` binary on one Redis,
//! behind Envoy, restarted one by one (SIGTERM, drain, exit, start again)
//! while journeys and watchers run without pause; then what was lost.
//!
//! Shared by examples/rolling_restart (the full run, figures in
//! docs/operations.md) and tests/it/deploy/rolling_restart.rs (one
//! shorter round in CI).

pub mod envoy;
pub mod load;
pub mod pinned;
pub mod replica;

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use idgate::{
    domain::Operation,
    sandbox::{Sandbox, SystemClock},
};

use self::{
    envoy::Envoy,
    load::Tally,
    replica::{Replica, Settings, fixed_port, sandbox_config},
};

/// How long a replica has to start and be seen healthy by Envoy.
const START_WAIT: Duration = Duration::from_secs(30);
/// How long the load has to finish the journeys in flight once asked to.
const FINISH_WAIT: Duration = Duration::from_secs(180);

/// What to run.
pub struct Options {
    /// The `idgate` binary the replicas run.
    pub idgate: PathBuf,
    /// The `envoy` binary ([`envoy::envoy_binary`]).
    pub envoy: PathBuf,
    /// `redis://127.0.0.1:<port>` of a Redis of this run alone.
    pub redis_url: String,
    pub replicas: usize,
    /// Each round restarts every replica once, one after the other.
    pub rounds: usize,
    /// Callers running journeys back to back.
    pub workers: usize,
    pub drain_delay_secs: u64,
    pub shutdown_grace_secs: u64,
    /// The sandbox's document processing: longer than the drain delay, so
    /// that watchers are open on a replica when it stops (and end
    /// `SHUTTING_DOWN`), not only before.
    pub processing_delay_ms: u64,
}

/// What the run saw.
pub struct Report {
    pub tally: Arc<Tally>,
    pub restarts: usize,
    /// Replicas that did not exit 0 within their drain, or did not return.
    pub bad_restarts: Vec<String>,
    /// Longest SIGTERM-to-exit, and longest exit-to-healthy-in-Envoy.
    pub slowest_stop: Duration,
    pub slowest_return: Duration,
    /// Upstream calls that consumed an appkey beyond one per journey.
    pub consumed_twice: Vec<(Operation, u64)>,
    /// Envoy's retries on the gRPC cluster (`upstream_rq_retry`).
    pub envoy_retries: u64,
    pub elapsed: Duration,
}

impl Report {
    pub fn journeys_failed(&self) -> u64 {
        let t = &self.tally;
        t.journeys_started.load(Relaxed) - t.journeys_completed.load(Relaxed)
    }

    pub fn watchers_without_result(&self) -> u64 {
        let t = &self.tally;
        t.watchers_opened.load(Relaxed) - t.watchers_with_result.load(Relaxed)
    }

    /// What broke the promise; empty when nothing was lost.
    pub fn problems(&self) -> Vec<String> {
        let mut out = self.bad_restarts.clone();
        if self.tally.journeys_completed.load(Relaxed) == 0 {
            out.push("no journey completed".into());
        }
        if self.journeys_failed() > 0 {
            out.push(format!("{} journeys failed", self.journeys_failed()));
        }
        if self.watchers_without_result() > 0 {
            out.push(format!(
                "{} watchers without the result",
                self.watchers_without_result()
            ));
        }
        let cut = self.tally.held_watchers_cut.load(Relaxed);
        if cut < self.restarts as u64 {
            out.push(format!(
                "{} of {} watchers held on a stopping replica ended SHUTTING_DOWN",
                cut, self.restarts
            ));
        }
        for (op, n) in &self.consumed_twice {
            out.push(format!("{n} {} calls beyond one per journey", op.as_str()));
        }
        out.extend(
            load::lock(&self.tally.not_retryable)
                .iter()
                .map(|e| format!("not retryable: {e}")),
        );
        out
    }

    pub fn print(&self) {
        let t = &self.tally;
        println!(
            "{} restarts in {:.1} s (slowest stop {:.1} s, slowest return to Envoy {:.1} s)",
            self.restarts,
            self.elapsed.as_secs_f64(),
            self.slowest_stop.as_secs_f64(),
            self.slowest_return.as_secs_f64()
        );
        println!(
            "RPCs sent (retries included)        {}",
            t.sent.load(Relaxed)
        );
        let failed = load::lock(&t.failed);
        println!(
            "RPCs failed                         {}",
            failed.values().sum::<u64>()
        );
        for (code, n) in failed.iter() {
            println!("  {code:<50} {n}");
        }
        println!(
            "  of which not retryable            {}",
            load::lock(&t.not_retryable).len()
        );
        println!(
            "retried by the client (RetryInfo)   {}",
            t.retried.load(Relaxed)
        );
        println!("retried by Envoy                    {}", self.envoy_retries);
        println!(
            "journeys completed                  {} of {} ({} failed)",
            t.journeys_completed.load(Relaxed),
            t.journeys_started.load(Relaxed),
            self.journeys_failed()
        );
        println!(
            "watchers ended with the result      {} of {} ({} without)",
            t.watchers_with_result.load(Relaxed),
            t.watchers_opened.load(Relaxed),
            self.watchers_without_result()
        );
        println!(
            "watchers held across a stop, cut    {} of {} (ended SHUTTING_DOWN, then the result)",
            t.held_watchers_cut.load(Relaxed),
            self.restarts
        );
        println!(
            "consuming calls sent twice          {}",
            self.consumed_twice.iter().map(|(_, n)| n).sum::<u64>()
        );
    }
}

/// Runs the whole proof; `progress` is told of each restart.
pub async fn run(opts: Options, progress: impl Fn(&str)) -> anyhow::Result<Report> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("idgate-rolling-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let result = run_in(&opts, &dir, &progress).await;
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        progress(&format!("logs kept in {}", dir.display()));
    }
    result
}

async fn run_in(
    opts: &Options,
    dir: &std::path::Path,
    progress: &impl Fn(&str),
) -> anyhow::Result<Report> {
    let envoy_ports = [fixed_port()?, fixed_port()?, fixed_port()?];
    let sandbox_config = sandbox_config(opts.processing_delay_ms, envoy_ports[2]);
    let sandbox = Sandbox::start(sandbox_config, Arc::new(SystemClock)).await?;

    let settings = Settings {
        redis_url: opts.redis_url.clone(),
        drain_delay_secs: opts.drain_delay_secs,
        shutdown_grace_secs: opts.shutdown_grace_secs,
    };
    let mut replicas = Vec::new();
    for i in 0..opts.replicas {
        let ports = (fixed_port()?, fixed_port()?, fixed_port()?);
        let config = replica::write_config(&settings, &sandbox, dir, ports)?;
        let log = dir.join(format!("replica-{i}.log"));
        let mut r = Replica::new(&opts.idgate, config, log, ports.0, ports.1);
        r.spawn()?;
        replicas.push(r);
    }
    for r in &mut replicas {
        r.wait_serving(START_WAIT).await?;
    }
    let grpc_ports: Vec<u16> = replicas.iter().map(|r| r.grpc).collect();
    let http_ports: Vec<u16> = replicas.iter().map(|r| r.http).collect();
    let mut envoy = Envoy::start(&opts.envoy, dir, envoy_ports, &grpc_ports, &http_ports)?;
    for port in &grpc_ports {
        envoy.wait_healthy(*port, START_WAIT).await?;
    }
    let channel =
        tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{}", envoy.grpc))?
            .connect()
            .await?;

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(load::run(
        channel.clone(),
        tally.clone(),
        opts.workers,
        stop.clone(),
    ));
    // Restarts begin once journeys are flowing end to end.
    let flowing = Instant::now() + START_WAIT;
    while tally.journeys_completed.load(Relaxed) == 0 {
        if Instant::now() >= flowing || load.is_finished() {
            stop.store(true, Relaxed);
            let seen = load::lock(&tally.failed).clone();
            anyhow::bail!("no journey completed before the restarts: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let started = Instant::now();
    let stop_bound = Duration::from_secs(opts.drain_delay_secs + opts.shutdown_grace_secs + 10);
    let (mut bad, mut slowest_stop, mut slowest_return, mut restarts) =
        (Vec::new(), Duration::ZERO, Duration::ZERO, 0);
    let mut held = Vec::new();
    for round in 1..=opts.rounds {
        for (i, r) in replicas.iter_mut().enumerate() {
            held.push(pinned::hold_watch(&channel, r.grpc, &tally).await?);
            let t0 = Instant::now();
            r.terminate()?;
            match r.wait_exit(stop_bound).await {
                Ok(status) if status.success() => {}
                Ok(status) => bad.push(format!("replica {i} exited {status}")),
                Err(e) => bad.push(format!("replica {i}: {e}")),
            }
            let stopped = t0.elapsed();
            let t1 = Instant::now();
            r.spawn()?;
            r.wait_serving(START_WAIT).await?;
            envoy.wait_healthy(r.grpc, START_WAIT).await?;
            let back = t1.elapsed();
            slowest_stop = slowest_stop.max(stopped);
            slowest_return = slowest_return.max(back);
            restarts += 1;
            progress(&format!(
                "round {round}, replica {i}: stopped in {:.1} s, healthy again in {:.1} s; {} journeys completed so far",
                stopped.as_secs_f64(),
                back.as_secs_f64(),
                tally.journeys_completed.load(Relaxed)
            ));
        }
    }
    stop.store(true, Relaxed);
    let finished = async {
        load.await?;
        for task in held {
            task.await?;
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(FINISH_WAIT, finished)
        .await
        .map_err(|_| {
            anyhow::anyhow!("journeys in flight did not finish within {FINISH_WAIT:?}")
        })??;
    let elapsed = started.elapsed();

    // One consuming call per journey that sent it: the sandbox's own count.
    let mut consumed_twice = Vec::new();
    for (op, journeys) in [
        (
            Operation::Liveness3D,
            tally.verifying_journeys.load(Relaxed),
        ),
        (
            Operation::DocumentImages,
            tally.submitting_journeys.load(Relaxed),
        ),
    ] {
        let calls = sandbox.calls(op, None);
        if calls > journeys {
            consumed_twice.push((op, calls - journeys));
        }
    }
    let envoy_retries = envoy.counter("cluster.idgate_grpc.upstream_rq_retry").await;
    drop(envoy);
    drop(replicas);
    sandbox.shutdown().await;
    Ok(Report {
        tally,
        restarts,
        bad_restarts: bad,
        slowest_stop,
        slowest_return,
        consumed_twice,
        envoy_retries,
        elapsed,
    })
}
