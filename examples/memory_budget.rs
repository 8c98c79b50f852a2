//! Memory under the request-byte budget: the gateway's RSS while large
//! document uploads keep `[serving] max_body_bytes_in_flight` full, with
//! the budget and message limit of a shipped configuration (by default the
//! Kubernetes overlays' `idgate.toml`), for docs/capacity.md#memory-per-pod.
//!
//! ```sh
//! cargo build --release && cargo run --release --example memory_budget -- \
//!     --config deploy/kubernetes/overlays/dev/idgate.toml --callers 12 --seconds 30
//! ```
//!
//! The example reads the budget and the image limits from `--config`,
//! starts the sandbox in process with every `/document` upload delayed by
//! `--vendor-delay-ms` (so each call holds its bytes while the next ones
//! arrive), starts the gateway binary beside it (its own process, so its
//! RSS is its own) with those limits, then keeps `--callers` concurrent
//! `SubmitDocumentImages` calls going for `--seconds`, each with
//! `max_images` images of `max_image_bytes` (the largest valid request;
//! `--images` sends fewer, so more calls fit in the budget at once).
//! It reports how the calls ended, and the gateway's RSS idle, sampled
//! every 50 ms (peak), its `VmHWM` and its RSS after.

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
    config::Config,
    domain::Operation,
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
    },
    sandbox::{FaultAction, FaultRule, Sandbox, SandboxConfig, SystemClock, samples},
};
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

#[derive(Parser)]
struct Args {
    /// The configuration whose `[serving]` budget and `[limits]` apply.
    #[arg(long, default_value = "deploy/kubernetes/overlays/dev/idgate.toml")]
    config: PathBuf,
    /// Images per upload (default: the configuration's `max_images`, the
    /// largest request; fewer make smaller messages, more of which fit in
    /// the budget at once).
    #[arg(long)]
    images: Option<usize>,
    /// Concurrent uploads kept going.
    #[arg(long, default_value_t = 12)]
    callers: usize,
    /// HTTP/2 connections they share.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Latency the vendor adds to every `/document`.
    #[arg(long, default_value_t = 1000)]
    vendor_delay_ms: u64,
    /// How long to keep uploading.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
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
    // target/<profile>/examples/memory_budget -> target/<profile>/idgate
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .expect("the idgate binary beside the examples")
}

/// Bytes as MiB, for the report.
fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let shipped = Config::from_toml_and_env(&std::fs::read_to_string(&args.config)?, Vec::new())?;
    let budget = shipped.serving.max_body_bytes_in_flight;
    let limits = &shipped.limits;
    let message = limits.grpc_message_bytes();

    let sandbox_config = SandboxConfig::default();
    let operator = sandbox_config.operators[0].clone();
    let sandbox = Sandbox::start(sandbox_config, Arc::new(SystemClock)).await?;
    sandbox.add_fault(FaultRule {
        operation: Some(Operation::DocumentImages.as_str().to_owned()),
        latency_ms: args.vendor_delay_ms,
        ..FaultRule::new(FaultAction::Delay)
    })?;

    let dir = std::env::temp_dir().join(format!("idgate-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let password = dir.join("operator-password");
    std::fs::write(&password, &operator.password)?;
    let (grpc, http, admin) = (free_port(), free_port(), free_port());
    let config = dir.join("idgate.toml");
    std::fs::write(
        &config,
        format!(
            "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
             [serving]\nmax_body_bytes_in_flight = {budget}\n\
             [limits]\nmax_images = {}\nmax_image_bytes = {}\nmax_grpc_message_bytes = {message}\n\
             [auth]\nmode = \"none\"\n\
             [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\ntimeout_ms = 60000\n\
             [[operators]]\nname = \"default\"\nlogin = \"{}\"\npassword_file = \"{}\"\n\
             [webhook]\nallow_unauthenticated = true\n",
            limits.max_images,
            limits.max_image_bytes,
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

    // One journey per caller: an upload binds its appkey.
    let person = {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "memory".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        }
    };
    let mut journeys = JourneyServiceClient::new(channels[0].clone());
    let mut appkeys = Vec::new();
    for _ in 0..args.callers {
        let created = journeys.create_journey(person.clone()).await?.into_inner();
        appkeys.push(created.appkey);
    }
    let (rss_idle, _) = memory(pid);

    // The largest valid request: every image at the size limit (bytes that
    // vary, so nothing along the way can share or compress them).
    // A JPEG by its magic bytes (what the gateway checks).
    let mut image: Vec<u8> = (0..limits.max_image_bytes)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    image[..4].copy_from_slice(&[0xFF, 0xD8, 0xFF, 0xE0]);
    let count = args.images.unwrap_or(limits.max_images);
    let images: Vec<v1::DocumentImage> = (0..count)
        .map(|_| v1::DocumentImage {
            content: image.clone().into(),
        })
        .collect();
    let upload = |i: usize| {
        let mut client = DocumentServiceClient::new(channels[i % channels.len()].clone())
            .max_encoding_message_size(usize::MAX);
        let request = v1::SubmitDocumentImagesRequest {
            appkey: appkeys[i].clone(),
            images: images.clone(),
        };
        async move { (i, client.submit_document_images(request).await) }
    };
    let mut calls: FuturesUnordered<_> = (0..args.callers).map(upload).collect();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let mut sample = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            next = calls.next() => {
                let Some((i, result)) = next else { break };
                let key = match result {
                    Ok(_) => "OK".to_owned(),
                    Err(status) => format!(
                        "{:?}/{}",
                        status.code(),
                        status.get_details_error_info().map(|i| i.reason).unwrap_or_default()
                    ),
                };
                *outcomes.entry(key).or_default() += 1;
                if Instant::now() < until {
                    calls.push(upload(i));
                }
            }
            _ = sample.tick() => peak = peak.max(memory(pid).0),
        }
    }
    let (rss_after, hwm) = memory(pid);

    println!(
        "{} concurrent SubmitDocumentImages of {} × {:.0} MiB (limit {:.0} MiB a message) for {} s over {} connections, \
         budget {:.0} MiB (from {}), vendor /document delayed {} ms",
        args.callers,
        count,
        mib(limits.max_image_bytes),
        mib(message),
        args.seconds,
        args.connections,
        mib(budget),
        args.config.display(),
        args.vendor_delay_ms
    );
    for (outcome, count) in outcomes {
        println!("  {outcome:<40} {count:>6}");
    }
    println!(
        "gateway RSS: idle {} MiB, peak sampled {} MiB, VmHWM {} MiB, after {} MiB",
        rss_idle / 1024,
        peak / 1024,
        hwm / 1024,
        rss_after / 1024
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
