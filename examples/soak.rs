//! The fault-matrix soak: whole journeys through a gateway while one-shot
//! faults of every kind land on random operations of the sandbox behind
//! it, then the invariants that must hold whatever the faults did.
//!
//! ```sh
//! cargo build --release && cargo run --release --example soak -- --journeys 2000 --concurrency 32
//! ```
//!
//! The gateway runs as its own process (the release `idgate` binary beside
//! this example), so its memory is its own; the sandbox runs in this
//! process, where the faults are installed and its calls counted.
//!
//! Before each step of each journey, with probability `--fault-percent`,
//! a one-shot fault is installed on that step's operation: a status (400,
//! 401, 404, 429, 500, 502, 503, 504), a dropped connection, a malformed or
//! oversize body, or a delay; answering before or after the operation ran.
//! The journey goes on as a caller would (a failed step ends it).
//!
//! Two kinds of hostile caller ride along (issue 25): with `--fake-percent`
//! chance per journey, a caller on a random 32-hex appkey the gateway never
//! issued sends every appkey-taking RPC once (`StartSession3D`,
//! `VerifyLiveness3D`, `SubmitDocumentImages`) and opens a `WatchJourney`
//! on it that it abandons; with `--abandon-percent` chance, the journey's
//! own caller also opens a second `WatchJourney` and drops it after a few
//! milliseconds. Their outcomes are tallied as `<method>[fake]` and
//! `WatchJourney[abandoned]`. At the end it prints and checks:
//!
//! 1. no appkey-consuming operation reached the sandbox more often than
//!    the journeys and the fake callers asked for it (the gateway never
//!    sent one twice);
//! 2. every RPC ended OK or with an `ErrorInfo` of domain `idgate` whose
//!    reason is one of the documented reasons (`Reason::ALL`);
//! 3. no watcher or watched journey (hence no result-reading task) is left
//!    (`idgate_watch_*` on the gateway's `/metrics`), abandoned ones and
//!    those on fake appkeys included;
//! 4. the gateway's RSS is back within 1.5x of where it started (measured
//!    after `--warmup` fault-free journeys, which bring the allocator's and
//!    the pools' steady state).
//!
//! Exits non-zero when an invariant fails. Bounded by `--max-seconds`.

use std::{
    collections::BTreeMap,
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use idgate::{
    domain::Operation,
    error::{ERROR_DOMAIN, Reason},
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{
        FaultAction, FaultPhase, FaultRule, Sandbox, SandboxConfig, SandboxHandle, SystemClock,
        samples::{self, DocumentKind, DocumentType, Side},
    },
};
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

#[derive(Parser)]
struct Args {
    /// Journeys to run in all.
    #[arg(long, default_value_t = 2000)]
    journeys: usize,
    /// Journeys in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Chance, per step, that a one-shot fault is installed first.
    #[arg(long, default_value_t = 20)]
    fault_percent: u64,
    /// Fault-free journeys first, so that the RSS baseline includes the
    /// pools and buffers any traffic brings (a leak grows past them).
    #[arg(long, default_value_t = 64)]
    warmup: usize,
    /// Stop after this long, whatever is left.
    #[arg(long, default_value_t = 300)]
    max_seconds: u64,
    /// Chance, per journey, of a caller on a random appkey (every
    /// appkey-taking RPC once, then an abandoned watcher).
    #[arg(long, default_value_t = 10)]
    fake_percent: u64,
    /// Chance, per journey, of an extra watcher opened and dropped.
    #[arg(long, default_value_t = 10)]
    abandon_percent: u64,
}

/// The RPCs a journey makes that consume its appkey, with the upstream
/// operation each one sends.
const CONSUMING: [(&str, Operation); 2] = [
    ("VerifyLiveness3D", Operation::Liveness3D),
    ("SubmitDocumentImages", Operation::DocumentImages),
];

/// A tiny xorshift: reproducible faults without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the run saw.
#[derive(Default)]
struct Tally {
    /// `code/reason` of every RPC.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// RPCs whose error had no idgate `ErrorInfo` or an undocumented reason.
    undocumented: Mutex<Vec<String>>,
    /// RPCs sent, by method.
    sent: Mutex<BTreeMap<&'static str, u64>>,
    faults: AtomicU64,
    completed: AtomicU64,
    /// Callers on appkeys the gateway never issued.
    fake_callers: AtomicU64,
    /// `WatchJourney` streams opened, then dropped before their end.
    abandoned: AtomicU64,
}

impl Tally {
    fn record<T>(&self, method: &'static str, result: &Result<T, tonic::Status>) {
        *crate_lock(&self.sent).entry(method).or_default() += 1;
        let key = match result {
            Ok(_) => format!("{method} OK"),
            Err(status) => {
                let info = status.get_details_error_info();
                let documented = info.as_ref().is_some_and(|i| {
                    i.domain == ERROR_DOMAIN && Reason::ALL.iter().any(|r| r.as_str() == i.reason)
                });
                let reason = info.map(|i| i.reason).unwrap_or_else(|| "-".into());
                let key = format!("{method} {:?}/{reason}", status.code());
                if !documented {
                    crate_lock(&self.undocumented).push(key.clone());
                }
                key
            }
        };
        *crate_lock(&self.outcomes).entry(key).or_default() += 1;
    }
}

fn crate_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Installs, with the configured chance, a one-shot fault on `op`.
fn maybe_fault(
    sandbox: &SandboxHandle,
    rng: &Mutex<Rng>,
    percent: u64,
    op: Operation,
    tally: &Tally,
) {
    let mut rng = crate_lock(rng);
    if rng.below(100) >= percent {
        return;
    }
    let action = match rng.below(6) {
        0 | 1 => FaultAction::Status {
            status: [400, 401, 404, 429, 500, 502, 503, 504][rng.below(8) as usize],
        },
        2 => FaultAction::Drop,
        3 => FaultAction::Malformed,
        4 => FaultAction::Oversize { bytes: 40 << 20 },
        _ => FaultAction::Delay,
    };
    let phase = if rng.below(2) == 0 {
        FaultPhase::Before
    } else {
        FaultPhase::After
    };
    let rule = FaultRule {
        operation: Some(op.as_str().to_owned()),
        latency_ms: rng.below(50),
        phase,
        times: Some(1),
        ..FaultRule::new(action)
    };
    if sandbox.add_fault(rule).is_ok() {
        tally.faults.fetch_add(1, Ordering::Relaxed);
    }
}

/// `VmRSS` of process `pid`, in KiB.
fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

struct Journey {
    channel: Channel,
    sandbox: Arc<SandboxHandle>,
    rng: Arc<Mutex<Rng>>,
    percent: u64,
    fake_percent: u64,
    abandon_percent: u64,
    tally: Arc<Tally>,
}

/// The RG images of the sample document, as a request carries them.
fn rg_images() -> Vec<v1::DocumentImage> {
    Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
        })
        .collect()
}

impl Journey {
    fn fault(&self, op: Operation) {
        maybe_fault(&self.sandbox, &self.rng, self.percent, op, &self.tally);
    }

    /// True with `percent` chance.
    fn chance(&self, percent: u64) -> bool {
        crate_lock(&self.rng).below(100) < percent
    }

    /// Opens a `WatchJourney` on `target`, reads for a few milliseconds,
    /// and drops the stream: a caller that went away.
    async fn abandon_watch(&self, target: v1::watch_journey_request::Journey) {
        let wait = Duration::from_millis(crate_lock(&self.rng).below(50));
        let mut request = tonic::Request::new(v1::WatchJourneyRequest {
            journey: Some(target),
        });
        request.set_timeout(Duration::from_secs(30));
        self.tally.abandoned.fetch_add(1, Ordering::Relaxed);
        match JourneyServiceClient::new(self.channel.clone())
            .watch_journey(request)
            .await
        {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                let _ = tokio::time::timeout(wait, stream.message()).await;
                self.tally.record::<()>("WatchJourney[abandoned]", &Ok(()));
            }
            Err(status) => self
                .tally
                .record::<()>("WatchJourney[abandoned]", &Err(status)),
        }
    }

    /// A caller on a random appkey the gateway never issued: every
    /// appkey-taking RPC once, then a watcher it abandons.
    async fn fake_caller(&self) {
        let appkey = {
            let mut rng = crate_lock(&self.rng);
            format!("{:016x}{:016x}", rng.next(), rng.next())
        };
        self.tally.fake_callers.fetch_add(1, Ordering::Relaxed);
        let mut l = LivenessServiceClient::new(self.channel.clone());
        let mut d = DocumentServiceClient::new(self.channel.clone());
        let started = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "soak".into(),
            })
            .await;
        self.tally.record("StartSession3D[fake]", &started);
        let verdict = l
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: "fake-session-token".into(),
                channel: String::new(),
            })
            .await;
        self.tally.record("VerifyLiveness3D[fake]", &verdict);
        let submitted = d
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            })
            .await;
        self.tally.record("SubmitDocumentImages[fake]", &submitted);
        self.abandon_watch(v1::watch_journey_request::Journey::Appkey(appkey))
            .await;
    }

    /// One journey, ended by its first failed step.
    async fn run(self) -> Option<()> {
        let mut j =
            JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20);
        let mut l = LivenessServiceClient::new(self.channel.clone());
        let mut d = DocumentServiceClient::new(self.channel.clone());
        if self.chance(self.fake_percent) {
            self.fake_caller().await;
        }
        let p = samples::HAPPY_PERSON;
        let b: Vec<&str> = p.birth_date.split('/').collect();
        self.fault(Operation::Appkey);
        let created = j
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", b[2], b[1], b[0]),
                customer_reference: "SOAK".into(),
                operator_profile: String::new(),
                request_id: String::new(),
            })
            .await;
        self.tally.record("CreateJourney", &created);
        let created = created.ok()?.into_inner();
        let appkey = created.appkey;
        if self.chance(self.abandon_percent) {
            self.abandon_watch(v1::watch_journey_request::Journey::Appkey(appkey.clone()))
                .await;
        }

        self.fault(Operation::SessionToken3D);
        let session = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "soak".into(),
            })
            .await;
        self.tally.record("StartSession3D", &session);
        let session = session.ok()?.into_inner();

        self.fault(Operation::Liveness3D);
        let verdict = l
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: session.session_token,
                channel: session.channel,
            })
            .await;
        self.tally.record("VerifyLiveness3D", &verdict);
        verdict.ok()?;

        self.fault(Operation::DocumentImages);
        let images = rg_images();
        let submitted = d
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images,
            })
            .await;
        self.tally.record("SubmitDocumentImages", &submitted);
        submitted.ok()?;

        self.fault(Operation::Result);
        let mut watch = tonic::Request::new(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                created.journey_ref,
            )),
        });
        watch.set_timeout(Duration::from_secs(30));
        let stream = j.watch_journey(watch).await;
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(status) => {
                self.tally.record::<()>("WatchJourney", &Err(status));
                return None;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(event)) if event.result.is_some() => {
                    self.tally.record("WatchJourney", &Ok(()));
                    self.tally.completed.fetch_add(1, Ordering::Relaxed);
                    return Some(());
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.tally.record::<()>(
                        "WatchJourney",
                        &Err(tonic::Status::internal("stream ended without a result")),
                    );
                    return None;
                }
                Err(status) => {
                    self.tally.record::<()>("WatchJourney", &Err(status));
                    return None;
                }
            }
        }
    }
}

/// Kills the gateway process when the soak ends, however it ends.
struct GatewayProcess(Child);

impl Drop for GatewayProcess {
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

/// The value of an unlabelled gauge in a Prometheus text exposition.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

const WEBHOOK_USER: &str = "sandbox";
const WEBHOOK_PASSWORD: &str = "soak-webhook-password-0123456789";

/// Starts the gateway binary in front of `sandbox`; its gRPC and HTTP URLs.
fn start_gateway(
    sandbox: &SandboxHandle,
    operator: &idgate::sandbox::OperatorConfig,
    dir: &std::path::Path,
    http: u16,
) -> anyhow::Result<(GatewayProcess, String)> {
    let (grpc, admin) = (free_port(), free_port());
    let secret = |name: &str, value: &str| -> anyhow::Result<String> {
        let path = dir.join(name);
        std::fs::write(&path, value)?;
        Ok(path.display().to_string())
    };
    let mut toml = format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [serving]\ndrain_delay_secs = 0\n\
         [auth]\nmode = \"none\"\n\
         [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\n\
         [[operators]]\nname = \"default\"\nlogin = \"{}\"\npassword_file = \"{}\"\n\
         [webhook]\nbasic_user = \"{WEBHOOK_USER}\"\nbasic_password_file = \"{}\"\n\
         [watch]\nwebhook_grace_secs = 2\npoll_initial_ms = 100\npoll_max_ms = 500\n",
        sandbox.base_url(),
        sandbox.result_base_url(),
        operator.login,
        secret("operator-password", &operator.password)?,
        secret("webhook-password", WEBHOOK_PASSWORD)?,
    );
    for (i, channel) in sandbox.channels().into_iter().enumerate() {
        toml.push_str(&format!(
            "[[channels]]\nname = \"{}\"\nbase_url = \"{}\"\npriority = {i}\n",
            channel.name, channel.base_url
        ));
    }
    let config = dir.join("idgate.toml");
    std::fs::write(&config, toml)?;
    let exe = std::env::current_exe()?;
    let binary = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .ok_or_else(|| anyhow::anyhow!("no idgate binary beside the examples"))?;
    let child = Command::new(binary)
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok((GatewayProcess(child), format!("http://127.0.0.1:{grpc}")))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = std::env::temp_dir().join(format!("idgate-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let http = free_port();
    let mut sandbox_config = SandboxConfig {
        processing_delay_ms: 100,
        max_entries: 1_000_000,
        ..SandboxConfig::default()
    };
    sandbox_config.webhook.url = Some(format!("http://127.0.0.1:{http}/webhooks/journey"));
    sandbox_config.webhook.basic_user = Some(WEBHOOK_USER.into());
    sandbox_config.webhook.basic_password = Some(WEBHOOK_PASSWORD.into());
    let operator = sandbox_config.operators[0].clone();
    let sandbox = Arc::new(Sandbox::start(sandbox_config, Arc::new(SystemClock)).await?);
    let (gateway, url) = start_gateway(&sandbox, &operator, &dir, http)?;
    let pid = gateway.0.id();
    let started = Instant::now();
    let channel = loop {
        match Channel::from_shared(url.clone())?.connect().await {
            Ok(c) => break c,
            Err(_) if started.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => anyhow::bail!("the gateway did not start: {e}"),
        }
    };

    let warmup = Arc::new(Tally::default());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.warmup {
        let journey = Journey {
            channel: channel.clone(),
            sandbox: sandbox.clone(),
            rng: Arc::new(Mutex::new(Rng(1))),
            percent: 0,
            fake_percent: 0,
            abandon_percent: 0,
            tally: warmup.clone(),
        };
        tasks.spawn(journey.run());
        if tasks.len() >= args.concurrency.max(1) {
            tasks.join_next().await;
        }
    }
    while tasks.join_next().await.is_some() {}
    sandbox.reset_calls();
    let rss_start = vm_rss_kib(pid);

    let tally = Arc::new(Tally::default());
    let rng = Arc::new(Mutex::new(Rng(0x9E37_79B9_7F4A_7C15)));
    let gate = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let started = Instant::now();
    for _ in 0..args.journeys {
        if Instant::now() >= deadline {
            break;
        }
        let permit = gate.clone().acquire_owned().await?;
        let journey = Journey {
            channel: channel.clone(),
            sandbox: sandbox.clone(),
            rng: rng.clone(),
            percent: args.fault_percent,
            fake_percent: args.fake_percent,
            abandon_percent: args.abandon_percent,
            tally: tally.clone(),
        };
        tasks.spawn(async move {
            let _permit = permit;
            journey.run().await
        });
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed();
    sandbox.clear_faults();

    // Invariant 3: nothing left watching (a journey's reading task lives
    // only while it is watched). Bounded wait for the last streams to close.
    let metrics_url = format!("http://127.0.0.1:{http}/metrics");
    let mut left = (f64::NAN, f64::NAN);
    for _ in 0..100 {
        let text = reqwest::get(&metrics_url).await?.text().await?;
        left = (
            gauge(&text, "idgate_watch_journeys").unwrap_or(f64::NAN),
            gauge(&text, "idgate_watch_watchers").unwrap_or(f64::NAN),
        );
        if left == (0.0, 0.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Invariant 1: consuming operations never sent more often than asked.
    let sent = crate_lock(&tally.sent).clone();
    let mut twice = Vec::new();
    for (method, op) in CONSUMING {
        let fake = format!("{method}[fake]");
        let asked =
            sent.get(method).copied().unwrap_or(0) + sent.get(fake.as_str()).copied().unwrap_or(0);
        let reached = sandbox.calls(op, None);
        if reached > asked {
            twice.push(format!(
                "{method}: {reached} upstream calls for {asked} RPCs"
            ));
        }
    }
    // Invariant 4: the gateway's memory back near where it started.
    let rss_end = vm_rss_kib(pid);
    drop(channel);
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "{} journeys ({} completed) in {:.1} s, {} one-shot faults installed, \
         {} callers on fake appkeys, {} watchers abandoned",
        sent.get("CreateJourney").copied().unwrap_or(0),
        tally.completed.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
        tally.faults.load(Ordering::Relaxed),
        tally.fake_callers.load(Ordering::Relaxed),
        tally.abandoned.load(Ordering::Relaxed),
    );
    for (outcome, n) in crate_lock(&tally.outcomes).iter() {
        println!("  {outcome:<60} {n:>6}");
    }
    let undocumented = crate_lock(&tally.undocumented).clone();
    let rss_ok = rss_end * 2 <= rss_start * 3;
    println!("invariants:");
    println!(
        "  consuming operations sent twice: {} {}",
        twice.len(),
        twice.join("; ")
    );
    println!(
        "  RPCs ended with an undocumented code: {}",
        undocumented.len()
    );
    println!(
        "  left on the gateway: {} watched journeys, {} watchers \
         (after {} abandoned, fake appkeys' included)",
        left.0,
        left.1,
        tally.abandoned.load(Ordering::Relaxed)
    );
    println!(
        "  gateway RSS: {} MiB after the warm-up, {} MiB at the end ({:.2}x)",
        rss_start / 1024,
        rss_end / 1024,
        rss_end as f64 / rss_start.max(1) as f64
    );
    let ok = twice.is_empty() && undocumented.is_empty() && left == (0.0, 0.0) && rss_ok;
    if !ok {
        for u in undocumented.iter().take(10) {
            eprintln!("undocumented: {u}");
        }
        anyhow::bail!("an invariant failed");
    }
    println!("all invariants hold");
    Ok(())
}
