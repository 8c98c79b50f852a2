//! Overload: thousands of concurrent callers against a slow vendor, and
//! what the gateway's memory and answers do. The gateway runs as its own
//! process (the release `idgate` binary beside this example, with the
//! default `[serving]` limits), so its peak RSS is its own.
//!
//! ```sh
//! cargo build --release && cargo run --release --example overload -- --callers 6000 --vendor-delay-ms 2000
//! ```
//!
//! The example starts the sandbox in process with every `/appkey` delayed
//! by `--vendor-delay-ms`, writes a configuration pointing a gateway at
//! it, starts the gateway, fires `--callers` concurrent `CreateJourney`
//! calls over `--connections` HTTP/2 connections, and reports: how the
//! calls ended (code and reason), how long the refusals took to arrive
//! (median and max), the gateway's peak RSS (`VmHWM`) and its RSS after
//! the run, and the sandbox's `/appkey` calls. Bounded by `--max-seconds`.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use futures_util::{StreamExt as _, stream::FuturesUnordered};
use idgate::{
    domain::Operation,
    proto::v1::{self, journey_service_client::JourneyServiceClient},
    sandbox::{FaultAction, FaultRule, Sandbox, SandboxConfig, SystemClock, samples},
};
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

#[derive(Parser)]
struct Args {
    /// Concurrent CreateJourney calls.
    #[arg(long, default_value_t = 6000)]
    callers: usize,
    /// HTTP/2 connections they share (the gateway allows 256 streams each).
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Latency the vendor adds to every `/appkey`.
    #[arg(long, default_value_t = 2000)]
    vendor_delay_ms: u64,
    /// Stop waiting after this long.
    #[arg(long, default_value_t = 60)]
    max_seconds: u64,
}

/// Kills the gateway process when the example ends, however it ends.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn gateway_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/overload -> target/<profile>/idgate
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .expect("the idgate binary beside the examples")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sandbox_config = SandboxConfig::default();
    let operator = sandbox_config.operators[0].clone();
    let sandbox = Sandbox::start(sandbox_config, Arc::new(SystemClock)).await?;
    sandbox.add_fault(FaultRule {
        operation: Some(Operation::Appkey.as_str().to_owned()),
        latency_ms: args.vendor_delay_ms,
        ..FaultRule::new(FaultAction::Delay)
    })?;

    let dir = std::env::temp_dir().join(format!("idgate-overload-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let password = dir.join("operator-password");
    std::fs::write(&password, &operator.password)?;
    let (grpc, http, admin) = (free_port(), free_port(), free_port());
    let config = dir.join("idgate.toml");
    std::fs::write(
        &config,
        format!(
            "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
             [auth]\nmode = \"none\"\n\
             [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\ntimeout_ms = 30000\n\
             [[operators]]\nname = \"default\"\nlogin = \"{}\"\npassword_file = \"{}\"\n\
             [webhook]\nallow_unauthenticated = true\n",
            sandbox.base_url(),
            sandbox.result_base_url(),
            operator.login,
            password.display(),
        ),
    )?;
    let child = Command::new(gateway_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let pid = child.id();
    let _gateway = Gateway(child);

    let url = format!("http://127.0.0.1:{grpc}");
    let started = Instant::now();
    let mut channels = Vec::new();
    for _ in 0..args.connections.max(1) {
        loop {
            match Channel::from_shared(url.clone())?.connect().await {
                Ok(c) => {
                    channels.push(c);
                    break;
                }
                Err(_) if started.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => anyhow::bail!("the gateway did not start: {e}"),
            }
        }
    }
    let (rss_idle, _) = memory(pid);

    let request = {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "overload".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        }
    };
    let fired = Instant::now();
    let mut calls: FuturesUnordered<_> = (0..args.callers)
        .map(|i| {
            let mut client = JourneyServiceClient::new(channels[i % channels.len()].clone());
            let request = request.clone();
            async move {
                let result = client.create_journey(request).await;
                (result, fired.elapsed())
            }
        })
        .collect();
    let mut outcomes: BTreeMap<String, (usize, Vec<Duration>)> = BTreeMap::new();
    let mut peak_during = 0;
    let deadline = tokio::time::sleep(Duration::from_secs(args.max_seconds));
    tokio::pin!(deadline);
    let mut sample = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            next = calls.next() => {
                let Some((result, took)) = next else { break };
                let key = match result {
                    Ok(_) => "OK".to_owned(),
                    Err(status) => format!(
                        "{:?}/{}",
                        status.code(),
                        status.get_details_error_info().map(|i| i.reason).unwrap_or_default()
                    ),
                };
                let entry = outcomes.entry(key).or_default();
                entry.0 += 1;
                entry.1.push(took);
            }
            _ = sample.tick() => peak_during = peak_during.max(memory(pid).0),
            () = &mut deadline => break,
        }
    }
    let unfinished = calls.len();
    let (rss_after, hwm) = memory(pid);

    println!(
        "{} concurrent CreateJourney over {} connections, vendor /appkey delayed {} ms, default [serving] limits",
        args.callers, args.connections, args.vendor_delay_ms
    );
    for (outcome, (count, mut took)) in outcomes {
        took.sort();
        println!(
            "  {outcome:<40} {count:>6}   answered after: median {:>7.1} ms, max {:>7.1} ms",
            took[took.len() / 2].as_secs_f64() * 1e3,
            took[took.len() - 1].as_secs_f64() * 1e3
        );
    }
    if unfinished > 0 {
        println!("  unfinished at --max-seconds: {unfinished}");
    }
    println!(
        "gateway RSS: idle {} MiB, peak sampled {} MiB, VmHWM {} MiB, after {} MiB",
        rss_idle / 1024,
        peak_during / 1024,
        hwm / 1024,
        rss_after / 1024
    );
    println!(
        "sandbox /appkey calls: {}",
        sandbox.calls(Operation::Appkey, None)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
