//! The hop's cost, with nothing else installed: a fixed-answer REST
//! upstream inside this process, the release `idgate` binary in front of
//! it as a child process, and a load generator over real sockets (HTTP/2
//! streams, like `h2load -c N -m M`) calling `StartSession3D`; then the
//! same load straight to the upstream (`direct`, the floor).
//!
//! ```sh
//! cargo build --release && cargo run --release --example hop -- --calls 30000
//! cargo run --release --example hop -- --calls 10000 --connections 1 --streams 1   # one caller
//! cargo run --release --example hop -- --calls 30000 --otlp   # also with span export on
//! ```
//!
//! `cargo test --release --example hop` runs its few unit tests.
//!
//! For each target it prints calls/s, failures, latency (mean, p50, p99,
//! max) and the hop process's CPU microseconds per call: utime + stime of
//! the `idgate` child, all threads, from `/proc/<pid>/stat`, read before
//! and after the measured phase (the warm-up is not counted). `bench CPU`
//! is this process's own (load generator and upstream) per call: on a
//! small machine they share the cores with the hop.
//!
//! - The upstream answers `POST /facecaptcha/service/captcha/3d/session-token`
//!   exactly like `../shared/perf/nginx-upstream.conf` (status, content
//!   type, JSON body) and anything else 404, on one thread of its own (like
//!   nginx's single worker). The load generator runs on the main thread
//!   (like `h2load -t 1`).
//! - `idgate` gets a configuration equivalent to
//!   `../shared/perf/idgate-perf.toml` (upstream, result and both channels
//!   on the upstream) on free loopback ports, the operator password in its
//!   environment, and is called once its gRPC health check says `SERVING`.
//! - `direct` sends the REST body over HTTP/1.1 keep-alive connections,
//!   `--streams` requests pipelined on each (what `h2load --h1 -m` does).
//! - `--otlp` adds a row: `idgate` again, exporting its spans over OTLP/gRPC
//!   to a collector sink in this process that counts them.
//! - `--jwt` adds a row: `idgate` again with caller authentication on
//!   (`[auth] mode = "jwt"`, an ES256 key in a local JWKS file, one
//!   `[[callers]]` entry), every call carrying the same bearer token (a
//!   caller's cached token: what a service account sends). The plain row
//!   runs with `[auth] mode = "none"`.
//!
//! Every call's answer is checked (gRPC status 0 with a message, HTTP 200);
//! the latency buffer is sized from `--calls`, and a phase gives up after
//! `--max-seconds`.

use std::{
    collections::VecDeque,
    convert::Infallible,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::{Buf as _, Bytes, BytesMut};
use clap::Parser;
use http::{Method, Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use idgate::proto::v1::StartSession3DRequest;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use prost::Message as _;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

#[derive(Parser)]
struct Args {
    /// Measured calls per target.
    #[arg(long, default_value_t = 30_000)]
    calls: usize,
    /// Connections (`h2load -c`).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Concurrent streams per connection (`h2load -m`); pipelined requests
    /// per connection for `direct`.
    #[arg(long, default_value_t = 4)]
    streams: usize,
    /// Unmeasured calls per target before the measured ones.
    #[arg(long, default_value_t = 2_000)]
    warmup: usize,
    /// Also measure idgate exporting its spans over OTLP/gRPC to a sink here.
    #[arg(long)]
    otlp: bool,
    /// Also measure idgate with caller authentication on (a JWT per call).
    #[arg(long)]
    jwt: bool,
    /// Targets, in order: `direct`, `idgate`.
    #[arg(long, default_value = "direct,idgate")]
    targets: String,
    /// The idgate binary; default: `idgate` beside this example.
    #[arg(long)]
    idgate_bin: Option<PathBuf>,
    /// Give up a phase (warm-up or measured) after this long.
    #[arg(long, default_value_t = 300)]
    max_seconds: u64,
    /// Also print the rows as one JSON line.
    #[arg(long)]
    json: bool,
}

/// What `nginx-upstream.conf` answers to `/3d/session-token`.
const SESSION_TOKEN_PATH: &str = "/facecaptcha/service/captcha/3d/session-token";
const SESSION_TOKEN_ANSWER: &str = r#"{"isContingency":false,"token":"c2Vzc2lvbi10b2tlbi0wMTIzNDU2Nzg5YWJjZGVm","vendor":"vendor-a","url":"https://vendor-a.invalid/sdk"}"#;
const GRPC_PATH: &str = "/idgate.v1.LivenessService/StartSession3D";
/// The operator password idgate is given; the fixed upstream never asks.
const OPERATOR_PASSWORD: &str = "bench";

fn appkey() -> String {
    "a".repeat(43)
}

// ---------------------------------------------------------------------------
// The fixed-answer upstream and the OTLP sink, each on a thread of its own.

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let found = req.method() == Method::POST && req.uri().path() == SESSION_TOKEN_PATH;
    // Read the body whole, as a keep-alive server must.
    let _ = req.into_body().collect().await;
    let response = if found {
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONNECTION, "keep-alive")
            .body(Full::new(Bytes::from_static(
                SESSION_TOKEN_ANSWER.as_bytes(),
            )))
    } else {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Full::new(Bytes::from_static(b"not found\n")))
    };
    Ok(response.expect("a valid response"))
}

async fn serve_upstream(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                .await;
        });
    }
}

/// Counts the spans it is sent.
struct Sink(Arc<AtomicU64>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Binds `127.0.0.1:0` and serves `serve` on a current-thread runtime of
/// its own thread; the thread lives as long as the process.
fn spawn_server<F, Fut>(name: &str, serve: F) -> anyhow::Result<SocketAddr>
where
    F: FnOnce(TcpListener) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("listener");
                serve(listener).await;
            });
        })?;
    Ok(addr)
}

// ---------------------------------------------------------------------------
// The idgate child.

/// The idgate child; killed when dropped, however the benchmark ends.
struct Hop {
    child: Child,
    dir: PathBuf,
    grpc: SocketAddr,
}

impl Drop for Hop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn idgate_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path);
    }
    // target/<profile>/examples/hop -> target/<profile>/idgate
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .context("the idgate binary beside the examples")?;
    anyhow::ensure!(
        path.exists(),
        "{} is missing: run `cargo build --release` first",
        path.display()
    );
    Ok(path)
}

impl Hop {
    /// Starts idgate with `idgate-perf.toml`'s configuration, pointed at
    /// `upstream`, and waits until its gRPC health check says `SERVING`.
    async fn start(
        binary: &Path,
        upstream: SocketAddr,
        otlp: Option<SocketAddr>,
        auth: Option<&BenchCaller>,
    ) -> anyhow::Result<Hop> {
        let dir = std::env::temp_dir().join(format!(
            "idgate-hop-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir)?;
        let (grpc, http, admin) = (free_port()?, free_port()?, free_port()?);
        let base = format!("http://{upstream}/facecaptcha");
        let config = dir.join("idgate.toml");
        let auth = match auth {
            Some(caller) => caller.config(&dir)?,
            None => "[auth]\nmode = \"none\"\n\n".to_owned(),
        };
        std::fs::write(
            &config,
            format!(
                "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\n\
                 [upstream]\nbase_url = \"{base}\"\nresult_base_url = \"{base}\"\n\n\
                 [[operators]]\nname = \"default\"\nlogin = \"bench\"\npassword_env = \"IDGATE_OPERATOR_PASSWORD\"\n\n\
                 [[channels]]\nname = \"primary\"\nbase_url = \"{base}\"\npriority = 0\n\n\
                 [[channels]]\nname = \"alternative\"\nbase_url = \"{base}\"\npriority = 1\n\n\
                 [webhook]\nallow_unauthenticated = true\n\n\
                 # Not in idgate-perf.toml: the benchmark's appkey is no journey idgate created.\n\
                 [guard]\naccept_foreign_appkeys = true\n\n\
                 # Not in idgate-perf.toml: stop at once when the benchmark is done.\n\
                 [serving]\ndrain_delay_secs = 0\n\n\
                 {auth}"
            ),
        )?;
        let stderr = std::fs::File::create(dir.join("idgate.err"))?;
        let mut command = Command::new(binary);
        command
            .args(["serve", "--config"])
            .arg(&config)
            .env("IDGATE_OPERATOR_PASSWORD", OPERATOR_PASSWORD)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(stderr);
        if let Some(sink) = otlp {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{sink}"));
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut hop = Hop {
            child,
            dir,
            grpc: SocketAddr::from(([127, 0, 0, 1], grpc)),
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

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, so it flushes its spans; then waits (bounded) for the exit.
    async fn stop(mut self) {
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

// ---------------------------------------------------------------------------
// CPU time from /proc.

/// utime + stime of `pid` (`self` for this process), all its threads,
/// those that ended included, in clock ticks.
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which sits in parentheses; utime and
    // stime are fields 14 and 15 of proc(5).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

// ---------------------------------------------------------------------------
// The load generator.

/// One worker's (or connection's) results.
#[derive(Default)]
struct Tally {
    ok: usize,
    failed: usize,
    first_error: Option<String>,
    /// Nanoseconds per call, in the order they ended.
    latencies: Vec<u64>,
}

impl Tally {
    fn with_capacity(n: usize) -> Self {
        Tally {
            latencies: Vec::with_capacity(n),
            ..Tally::default()
        }
    }

    fn record(&mut self, took: Duration, outcome: Result<(), String>) {
        self.latencies
            .push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        match outcome {
            Ok(()) => self.ok += 1,
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.ok += other.ok;
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.latencies.extend(other.latencies);
    }
}

/// Hands out call numbers until `calls` are claimed.
#[derive(Clone)]
struct Claims(Arc<AtomicUsize>, usize);

impl Claims {
    fn new(calls: usize) -> Self {
        Claims(Arc::new(AtomicUsize::new(0)), calls)
    }

    fn claim(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) < self.1
    }
}

/// The load of one phase.
#[derive(Clone, Copy)]
struct Load {
    calls: usize,
    connections: usize,
    streams: usize,
}

impl Load {
    fn per_worker(&self) -> usize {
        self.calls / (self.connections * self.streams) + 1
    }
}

/// One `StartSession3D` over an HTTP/2 connection: the pre-encoded
/// request, then the answer read whole and its gRPC status checked.
async fn grpc_call(
    send: &mut h2::client::SendRequest<Bytes>,
    uri: &Uri,
    frame: &Bytes,
    bearer: Option<&http::HeaderValue>,
) -> Result<(), String> {
    let mut request = Request::post(uri.clone())
        .header(header::CONTENT_TYPE, "application/grpc")
        .header(header::TE, "trailers");
    if let Some(bearer) = bearer {
        request = request.header(header::AUTHORIZATION, bearer.clone());
    }
    let request = request.body(()).expect("a valid request");
    std::future::poll_fn(|cx| send.poll_ready(cx))
        .await
        .map_err(|e| format!("h2 not ready: {e}"))?;
    let (response, mut body_tx) = send
        .send_request(request, false)
        .map_err(|e| format!("h2 send: {e}"))?;
    body_tx
        .send_data(frame.clone(), true)
        .map_err(|e| format!("h2 send data: {e}"))?;
    let response = response.await.map_err(|e| format!("h2 response: {e}"))?;
    if response.status() != StatusCode::OK {
        return Err(format!("HTTP {}", response.status()));
    }
    let grpc_status = |headers: &http::HeaderMap| -> Result<(), String> {
        match headers.get("grpc-status").map(|v| v.as_bytes()) {
            Some(b"0") => Ok(()),
            Some(code) => Err(format!(
                "grpc-status {} {}",
                String::from_utf8_lossy(code),
                headers
                    .get("grpc-message")
                    .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
                    .unwrap_or_default()
            )),
            None => Err("no grpc-status".to_owned()),
        }
    };
    if response.headers().contains_key("grpc-status") {
        // Trailers-only: an error, or OK without a message.
        grpc_status(response.headers())?;
        return Err("OK without a response message".to_owned());
    }
    let mut body = response.into_body();
    let mut received = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("h2 body: {e}"))?;
        received += chunk.len();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("h2 trailers: {e}"))?
        .ok_or("no trailers")?;
    grpc_status(&trailers)?;
    if received <= 5 {
        return Err("an empty response message".to_owned());
    }
    Ok(())
}

/// `load.connections` HTTP/2 connections to idgate, `load.streams`
/// concurrent `StartSession3D` calls on each.
async fn grpc_load(
    addr: SocketAddr,
    load: Load,
    bearer: Option<http::HeaderValue>,
) -> anyhow::Result<Tally> {
    let uri: Uri = format!("http://{addr}{GRPC_PATH}").parse()?;
    let message = StartSession3DRequest {
        appkey: appkey(),
        user_agent: "bench/1.0".into(),
    }
    .encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(message.len())?.to_be_bytes());
    frame.extend_from_slice(&message);
    let frame = Bytes::from(frame);
    let claims = Claims::new(load.calls);
    let mut workers = Vec::new();
    for _ in 0..load.connections {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::handshake(tcp).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        for _ in 0..load.streams {
            let (mut send, uri, frame, claims, bearer) = (
                send.clone(),
                uri.clone(),
                frame.clone(),
                claims.clone(),
                bearer.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut tally = Tally::with_capacity(load.per_worker());
                while claims.claim() {
                    let started = Instant::now();
                    let outcome = grpc_call(&mut send, &uri, &frame, bearer.as_ref()).await;
                    tally.record(started.elapsed(), outcome);
                }
                tally
            }));
        }
    }
    let mut all = Tally::with_capacity(load.calls);
    for worker in workers {
        all.merge(worker.await?);
    }
    Ok(all)
}

/// One HTTP/1.1 response from the front of `buf`: its status and length,
/// once it is all there.
fn parse_response(buf: &[u8]) -> Result<Option<(u16, usize)>, String> {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| "a non-UTF-8 head")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("a malformed status line")?;
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or("no content-length")?;
    let total = head_end + 4 + length;
    Ok((buf.len() >= total).then_some((status, total)))
}

/// One keep-alive connection to the upstream, `depth` requests pipelined.
async fn rest_connection(
    addr: SocketAddr,
    request: Bytes,
    depth: usize,
    claims: Claims,
    capacity: usize,
) -> anyhow::Result<Tally> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let mut tally = Tally::with_capacity(capacity);
    let mut in_flight: VecDeque<Instant> = VecDeque::with_capacity(depth);
    let mut out = Vec::with_capacity(request.len() * depth);
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        while in_flight.len() < depth && claims.claim() {
            out.extend_from_slice(&request);
            in_flight.push_back(Instant::now());
        }
        if in_flight.is_empty() {
            return Ok(tally);
        }
        if !out.is_empty() {
            tcp.write_all(&out).await?;
            out.clear();
        }
        loop {
            match parse_response(&buf) {
                Ok(Some((status, len))) => {
                    buf.advance(len);
                    let started = in_flight.pop_front().context("an unasked response")?;
                    let outcome = if status == 200 {
                        Ok(())
                    } else {
                        Err(format!("HTTP {status}"))
                    };
                    tally.record(started.elapsed(), outcome);
                    break;
                }
                Ok(None) => {
                    if tcp.read_buf(&mut buf).await? == 0 {
                        anyhow::bail!("the upstream closed the connection");
                    }
                }
                Err(e) => anyhow::bail!("the upstream's response: {e}"),
            }
        }
    }
}

/// `load.connections` keep-alive connections straight to the upstream.
async fn rest_load(addr: SocketAddr, load: Load) -> anyhow::Result<Tally> {
    let body = serde_json::json!({"appkey": appkey(), "userAgent": "bench/1.0"}).to_string();
    let request = Bytes::from(format!(
        "POST {SESSION_TOKEN_PATH} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let claims = Claims::new(load.calls);
    let capacity = load.per_worker() * load.streams;
    let connections: Vec<_> = (0..load.connections)
        .map(|_| {
            tokio::spawn(rest_connection(
                addr,
                request.clone(),
                load.streams,
                claims.clone(),
                capacity,
            ))
        })
        .collect();
    let mut all = Tally::with_capacity(load.calls);
    for connection in connections {
        all.merge(connection.await??);
    }
    Ok(all)
}

// ---------------------------------------------------------------------------
// The caller of the `--jwt` row.

/// A service account as idgate's `[auth] mode = "jwt"` knows it: an ES256
/// key whose public half is in a JWKS file, and one token signed with it.
struct BenchCaller {
    kid: &'static str,
    key: rcgen::KeyPair,
}

impl BenchCaller {
    const SUBJECT: &'static str = "system:serviceaccount:bench:load";

    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            kid: "bench-1",
            key: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?,
        })
    }

    /// Writes the JWKS file into `dir`; the `[auth]` and `[[callers]]`
    /// sections that name it. `journeys = "any"`: the benchmark's appkey
    /// is no journey of this caller's.
    fn config(&self, dir: &Path) -> anyhow::Result<String> {
        use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD as B64};
        let raw = self.key.public_key_raw();
        let (x, y) = raw[1..].split_at(32);
        let jwks = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
            "kid": self.kid, "x": B64.encode(x), "y": B64.encode(y),
        }]});
        let path = dir.join("jwks.json");
        std::fs::write(&path, jwks.to_string())?;
        Ok(format!(
            "[auth]\nmode = \"jwt\"\n\n\
             [auth.jwt]\njwks_file = \"{}\"\nissuer = \"https://issuer.bench\"\naudience = \"idgate\"\n\n\
             [[callers]]\nname = \"bench\"\njwt_subject = \"{}\"\noperations = [\"session_3d\"]\njourneys = \"any\"\n",
            path.display(),
            Self::SUBJECT
        ))
    }

    /// `Bearer <token>`, valid for an hour.
    fn bearer(&self) -> anyhow::Result<http::HeaderValue> {
        use jsonwebtoken::{Algorithm, EncodingKey, Header};
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let claims = serde_json::json!({
            "iss": "https://issuer.bench", "aud": "idgate", "sub": Self::SUBJECT,
            "iat": now, "nbf": now, "exp": now + 3600,
        });
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.to_owned());
        let token = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_ec_der(&self.key.serialize_der()),
        )?;
        Ok(http::HeaderValue::from_str(&format!("Bearer {token}"))?)
    }
}

// ---------------------------------------------------------------------------
// Phases and the report.

#[derive(Clone)]
enum Target {
    Direct,
    /// With the bearer token every call carries, if any.
    Idgate(Option<http::HeaderValue>),
}

struct Row {
    target: String,
    load: Load,
    elapsed: Duration,
    tally: Tally,
    hop_cpu_us: Option<f64>,
    bench_cpu_us: f64,
    /// Spans the sink received, and calls idgate served (warm-up included).
    spans: Option<(u64, usize)>,
}

impl Row {
    fn calls_per_second(&self) -> f64 {
        self.tally.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// Mean, p50, p99 and max, in milliseconds.
    fn latency_ms(&self) -> [f64; 4] {
        let l = &self.tally.latencies;
        if l.is_empty() {
            return [0.0; 4];
        }
        let at = |q: f64| l[((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1];
        let mean = l.iter().map(|&n| n as f64).sum::<f64>() / l.len() as f64;
        [mean, at(0.50) as f64, at(0.99) as f64, at(1.0) as f64].map(|n| n / 1e6)
    }
}

async fn drive(
    target: Target,
    addr: SocketAddr,
    load: Load,
    limit: Duration,
) -> anyhow::Result<Tally> {
    let run = async {
        match target {
            Target::Direct => rest_load(addr, load).await,
            Target::Idgate(bearer) => grpc_load(addr, load, bearer).await,
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .context("the phase ran past --max-seconds")?
}

/// Warm-up, then the measured phase, reading CPU around it.
async fn measure(
    name: &str,
    target: Target,
    addr: SocketAddr,
    hop_pid: Option<u32>,
    args: &Args,
) -> anyhow::Result<Row> {
    let load = |calls| Load {
        calls,
        connections: args.connections.max(1),
        streams: args.streams.max(1),
    };
    let limit = Duration::from_secs(args.max_seconds);
    if args.warmup > 0 {
        drive(target.clone(), addr, load(args.warmup), limit).await?;
    }
    let hz = clock_ticks_per_second() as f64;
    let hop_pid = hop_pid.map(|p| p.to_string());
    let hop_before = hop_pid.as_deref().map(cpu_ticks);
    let bench_before = cpu_ticks("self");
    let started = Instant::now();
    let mut tally = drive(target, addr, load(args.calls), limit).await?;
    let elapsed = started.elapsed();
    let bench_ticks = cpu_ticks("self") - bench_before;
    let hop_ticks = hop_pid
        .as_deref()
        .map(cpu_ticks)
        .zip(hop_before)
        .map(|(a, b)| a - b);
    tally.latencies.sort_unstable();
    let per_call = |ticks: u64| ticks as f64 / hz * 1e6 / tally.ok.max(1) as f64;
    Ok(Row {
        target: name.to_owned(),
        load: load(args.calls),
        elapsed,
        hop_cpu_us: hop_ticks.map(per_call),
        bench_cpu_us: per_call(bench_ticks),
        spans: None,
        tally,
    })
}

fn print_rows(rows: &[Row], json: bool) {
    println!(
        "{:<12} {:>9} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>15} {:>16}",
        "target",
        "calls/s",
        "ok",
        "failed",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "max ms",
        "hop CPU us/call",
        "bench CPU us/call"
    );
    for r in rows {
        let [mean, p50, p99, max] = r.latency_ms();
        let hop = r
            .hop_cpu_us
            .map(|c| format!("{c:.1}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<12} {:>9.0} {:>7} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>15} {:>16.1}",
            r.target,
            r.calls_per_second(),
            r.tally.ok,
            r.tally.failed,
            mean,
            p50,
            p99,
            max,
            hop,
            r.bench_cpu_us
        );
    }
    if let Some(r) = rows.first() {
        println!(
            "{} calls per target over {} connections x {} streams (one process: load generator + upstream; idgate: a child process)",
            r.load.calls, r.load.connections, r.load.streams
        );
    }
    for r in rows {
        if let Some((spans, served)) = r.spans {
            println!(
                "{}: the OTLP sink received {spans} spans for {served} calls served ({:.2} per call)",
                r.target,
                spans as f64 / served.max(1) as f64
            );
        }
        if let Some(e) = &r.tally.first_error {
            println!("{}: first failure: {e}", r.target);
        }
    }
    if json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                let [mean, p50, p99, max] = r.latency_ms();
                serde_json::json!({
                    "target": r.target,
                    "calls": r.load.calls,
                    "connections": r.load.connections,
                    "streams": r.load.streams,
                    "ok": r.tally.ok,
                    "failed": r.tally.failed,
                    "calls_per_second": r.calls_per_second(),
                    "latency_ms": {"mean": mean, "p50": p50, "p99": p99, "max": max},
                    "hop_cpu_us_per_call": r.hop_cpu_us,
                    "bench_cpu_us_per_call": r.bench_cpu_us,
                    "otlp_spans_received": r.spans.map(|(s, _)| s),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let upstream = spawn_server("upstream", serve_upstream)?;
    let mut rows = Vec::new();
    for target in args.targets.split(',').map(str::trim) {
        match target {
            "direct" => rows.push(measure("direct", Target::Direct, upstream, None, &args).await?),
            "idgate" => {
                let binary = idgate_binary(args.idgate_bin.clone())?;
                let hop = Hop::start(&binary, upstream, None, None).await?;
                rows.push(
                    measure(
                        "idgate",
                        Target::Idgate(None),
                        hop.grpc,
                        Some(hop.pid()),
                        &args,
                    )
                    .await?,
                );
                hop.stop().await;
                if args.jwt {
                    let caller = BenchCaller::new()?;
                    let hop = Hop::start(&binary, upstream, None, Some(&caller)).await?;
                    let target = Target::Idgate(Some(caller.bearer()?));
                    rows.push(
                        measure("idgate+jwt", target, hop.grpc, Some(hop.pid()), &args).await?,
                    );
                    hop.stop().await;
                }
                if args.otlp {
                    let spans = Arc::new(AtomicU64::new(0));
                    let sink = Sink(spans.clone());
                    let collector = spawn_server("otlp-sink", move |listener| async move {
                        let _ = tonic::transport::Server::builder()
                            .add_service(TraceServiceServer::new(sink))
                            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                                listener,
                            ))
                            .await;
                    })?;
                    let hop = Hop::start(&binary, upstream, Some(collector), None).await?;
                    let mut row = measure(
                        "idgate+otlp",
                        Target::Idgate(None),
                        hop.grpc,
                        Some(hop.pid()),
                        &args,
                    )
                    .await?;
                    // SIGTERM flushes what the batch processor still holds.
                    hop.stop().await;
                    row.spans = Some((spans.load(Ordering::Relaxed), args.warmup + args.calls));
                    rows.push(row);
                }
            }
            other => anyhow::bail!("unknown target {other:?} (direct, idgate)"),
        }
    }
    print_rows(&rows, args.json);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.calls > 0, "--calls must be at least 1");
    anyhow::ensure!(args.calls <= 10_000_000, "--calls is at most 10,000,000");
    // The load generator: one thread, like `h2load -t 1`.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

// `cargo test --release --example hop`: the pieces that parse.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_read_once_it_is_all_there() {
        let one = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(&one[..one.len() - 1]), Ok(None));
        assert_eq!(parse_response(one), Ok(Some((200, one.len()))));
        let two = [
            &one[..],
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        ]
        .concat();
        assert_eq!(parse_response(&two), Ok(Some((200, one.len()))));
        assert_eq!(
            parse_response(&two[one.len()..]),
            Ok(Some((404, two.len() - one.len())))
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    #[test]
    fn this_process_has_spent_cpu() {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_ticks("self") > 0);
        assert_eq!(cpu_ticks("no-such-process"), 0);
        assert!(clock_ticks_per_second() > 0);
    }
}
