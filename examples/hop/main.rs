//! The hop's cost: a fixed-answer REST upstream inside this process, the
//! release `idgate` binary in front of it as a child process, and a load
//! generator over real sockets (HTTP/2 streams, like `h2load -c N -m M`)
//! calling `StartSession3D`; the same load straight to the upstream
//! (`direct`, the floor); and idgate again with what a deployment turns
//! on: OTLP export, the access log, JWT callers, `[cluster]` on Redis.
//!
//! ```sh
//! cargo build --release && cargo run --release --example hop -- --calls 30000
//! cargo run --release --example hop -- --calls 10000 --connections 1 --streams 1   # one caller
//! cargo run --release --example hop -- --calls 30000 --otlp   # also with span export on
//! # each switch alone, then all four together, three times in turn:
//! cargo run --release --example hop -- --rows idgate,otlp,access-log,jwt,cluster,deployed --repeat 3
//! ```
//!
//! `cargo test --release --example hop` runs its unit tests.
//!
//! For each row it prints calls/s, failures, latency (mean, p50, p99,
//! max), the hop process's CPU microseconds per call (utime + stime of the
//! `idgate` child, all threads, from `/proc/<pid>/stat`, read before and
//! after the measured phase: the warm-up is not counted), `bench CPU`,
//! this process's own per call (load generator, upstream, OTLP sink,
//! stdout drain: on a small machine they share the cores with the hop),
//! and the spans per call the OTLP sink received.
//!
//! - The upstream (`upstream.rs`) answers `POST
//!   /facecaptcha/service/captcha/3d/session-token` exactly like
//!   `../shared/perf/nginx-upstream.conf` and anything else 404, on one
//!   thread of its own (like nginx's single worker). The load generator
//!   (`load.rs`) runs on the main thread (like `h2load -t 1`).
//! - `idgate` (`child.rs`) gets a configuration equivalent to
//!   `../shared/perf/idgate-perf.toml` on free loopback ports, the
//!   operator password in its environment, `--log-format json` (what
//!   `deploy/kubernetes/base/deployment.yaml` runs; `--log-format text` to
//!   change), none of this process's `OTEL_*` or `IDGATE_*` variables, and
//!   is called once its gRPC health check says `SERVING`. Its stdout is a
//!   pipe a thread of this process reads and counts, as a container
//!   runtime reads a container's: a log line costs idgate the write into
//!   a pipe, not into `/dev/null` (`--child-stdout null` and `--log-format
//!   text`: the setup of the figures taken before these options).
//! - `direct` sends the REST body over HTTP/1.1 keep-alive connections,
//!   `--streams` requests pipelined on each (what `h2load --h1 -m` does).
//! - Rows (`rows.rs`): `--rows` lists them, `direct`, `idgate`, or idgate
//!   with any of `otlp`, `access-log`, `jwt`, `cluster` joined by `+`
//!   (`deployed`: all four); `--otlp`, `--access-log`, `--jwt`,
//!   `--cluster` and `--deployed` each add the row of that name; `--repeat
//!   N` measures the list N times in turn.
//! - `otlp`: idgate exports its spans to a collector sink in this process
//!   (`otlp_sink.rs`), over OTLP/gRPC or, with `--otlp-protocol
//!   http/protobuf`, over OTLP/HTTP (what `../shared/perf/run.py
//!   --otlp-sink` receives). The sink counts spans per trace (traces
//!   rooted in no call left out: health checks, background Redis
//!   commands): the largest
//!   trace is one call's spans, and the report says how many of calls ×
//!   that many never arrived (the batch processor's queue drops spans
//!   when full). idgate's `/metrics` series about span export, if it has
//!   any, are printed beside it. SIGTERM flushes the queue before the count
//!   is read.
//! - `access-log`: `IDGATE_TELEMETRY__ACCESS_LOG=true`, one line per RPC
//!   (target `idgate::access`). The report gives every idgate row's stdout
//!   lines and bytes per call: without it, the audit line each
//!   `StartSession3D` writes (target `idgate::audit`).
//! - `jwt` (`jwt.rs`): caller authentication on (`[auth] mode = "jwt"`,
//!   an ES256 key in a local JWKS file, one `[[callers]]` entry), every
//!   call carrying the same bearer token (a caller's cached token: what a
//!   service account sends). Other rows run with `[auth] mode = "none"`.
//! - `cluster` (`cluster.rs`): `[cluster] redis_url` on a `redis-server`
//!   this benchmark starts for the row on a free loopback port (Debian's
//!   `redis-server` package), with a sealing key of the row's own.
//! - `--idgate-env KEY=VALUE` (repeatable) adds to every idgate child's
//!   environment, after the row's own settings (`OTEL_BSP_MAX_QUEUE_SIZE`,
//!   `IDGATE_*` overrides, `RUST_LOG`).
//!
//! Every call's answer is checked (gRPC status 0 with a message, HTTP 200);
//! the latency buffer is sized from `--calls`, and a phase gives up after
//! `--max-seconds`.

#[path = "../support/binary.rs"]
mod binary;
mod child;
#[path = "../../tests/it/support/child_env.rs"]
#[allow(dead_code)]
mod child_env;
mod cluster;
#[path = "../../tests/it/support/fixed_port.rs"]
#[allow(dead_code)]
mod fixed_port;
mod jwt;
mod load;
mod otlp_sink;
#[path = "../../tests/it/support/redis.rs"]
#[allow(dead_code)]
mod redis_server;
mod report;
mod rows;
mod upstream;

use std::path::PathBuf;

use clap::Parser;

use crate::{
    child::{Hop, Setup},
    jwt::BenchCaller,
    load::Target,
    otlp_sink::{Protocol, Sink},
    report::{Row, measure},
    rows::{DEPLOYED, Features, RowSpec},
};

#[derive(Parser)]
pub struct Args {
    /// Measured calls per row.
    #[arg(long, default_value_t = 30_000)]
    calls: usize,
    /// Connections (`h2load -c`).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Concurrent streams per connection (`h2load -m`); pipelined requests
    /// per connection for `direct`.
    #[arg(long, default_value_t = 4)]
    streams: usize,
    /// Unmeasured calls per row before the measured ones.
    #[arg(long, default_value_t = 2_000)]
    warmup: usize,
    /// Rows, in order: `direct`, `idgate`, `deployed`, or idgate with
    /// `otlp`, `access-log`, `jwt`, `cluster` joined by `+`.
    #[arg(long, alias = "targets", default_value = "direct,idgate")]
    rows: String,
    /// Also measure idgate exporting its spans to a sink here.
    #[arg(long)]
    otlp: bool,
    /// Also measure idgate writing its access log.
    #[arg(long)]
    access_log: bool,
    /// Also measure idgate with caller authentication on (a JWT per call).
    #[arg(long)]
    jwt: bool,
    /// Also measure idgate with `[cluster]` on a local Redis.
    #[arg(long)]
    cluster: bool,
    /// Also measure idgate with all four on.
    #[arg(long)]
    deployed: bool,
    /// Measure the rows this many times, in turn.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// How idgate exports spans: `grpc` or `http/protobuf`.
    #[arg(long, default_value = "grpc", value_parser = Protocol::parse)]
    otlp_protocol: Protocol,
    /// idgate's `--log-format`: `json` or `text`.
    #[arg(long, default_value = "json")]
    log_format: String,
    /// idgate's stdout: `pipe` (drained here, as a container runtime does)
    /// or `null` (`/dev/null`, as before these rows: comparable with older
    /// figures).
    #[arg(long, default_value = "pipe", value_parser = ["pipe", "null"])]
    child_stdout: String,
    /// Extra environment for every idgate child, `KEY=VALUE` (repeatable).
    #[arg(long = "idgate-env", value_parser = child::parse_env)]
    idgate_env: Vec<(String, String)>,
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

impl Args {
    /// The rows the switches add.
    fn switched_rows(&self) -> Vec<RowSpec> {
        let alone = |f: fn(&mut Features)| {
            let mut features = Features::default();
            f(&mut features);
            RowSpec::Idgate(features)
        };
        [
            (self.otlp, alone(|f| f.otlp = true)),
            (self.access_log, alone(|f| f.access_log = true)),
            (self.jwt, alone(|f| f.jwt = true)),
            (self.cluster, alone(|f| f.cluster = true)),
            (self.deployed, RowSpec::Idgate(DEPLOYED)),
        ]
        .into_iter()
        .filter_map(|(on, row)| on.then_some(row))
        .collect()
    }
}

/// What the idgate rows share: the binary, the caller, the sink.
struct Bench {
    upstream: std::net::SocketAddr,
    binary: Option<PathBuf>,
    caller: Option<BenchCaller>,
    sink: Option<Sink>,
}

impl Bench {
    /// One idgate row: its Redis and child started, measured, stopped.
    async fn idgate_row(&mut self, name: &str, f: Features, args: &Args) -> anyhow::Result<Row> {
        let binary = match &self.binary {
            Some(binary) => binary.clone(),
            None => self
                .binary
                .insert(child::idgate_binary(args.idgate_bin.clone())?)
                .clone(),
        };
        if f.jwt && self.caller.is_none() {
            self.caller = Some(BenchCaller::new()?);
        }
        if f.otlp && self.sink.is_none() {
            self.sink = Some(Sink::start(args.otlp_protocol)?);
        }
        let redis = f.cluster.then(cluster::start_redis).transpose()?;
        let caller = self.caller.as_ref().filter(|_| f.jwt);
        let sink = self.sink.as_ref().filter(|_| f.otlp);
        if let Some(sink) = sink {
            // Whatever arrived since (a late flush) is not this row's.
            sink.take();
        }
        let setup = Setup {
            binary: &binary,
            upstream: self.upstream,
            otlp: sink.map(|s| (s.addr, s.protocol)),
            caller,
            access_log: f.access_log,
            redis_url: redis.as_ref().map(|r| r.url()),
            log_format: &args.log_format,
            stdout_pipe: args.child_stdout == "pipe",
            extra_env: &args.idgate_env,
        };
        let hop = Hop::start(&setup).await?;
        let (lines_before, bytes_before) = hop.output.read();
        let bearer = caller.map(BenchCaller::bearer).transpose()?;
        let mut row = measure(
            name,
            Target::Idgate(bearer),
            hop.grpc,
            Some(hop.pid()),
            args,
        )
        .await?;
        if f.otlp {
            row.exporter_series = child::exporter_series(&hop.metrics().await?);
        }
        let output = hop.output.clone();
        // SIGTERM flushes what the batch processor still holds.
        hop.stop().await;
        drop(redis);
        let (lines, bytes) = output.read();
        row.log =
            (args.child_stdout == "pipe").then(|| (lines - lines_before, bytes - bytes_before));
        row.spans = sink.map(Sink::take);
        Ok(row)
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let plan =
        rows::plan(&args.rows, &args.switched_rows(), args.repeat).map_err(anyhow::Error::msg)?;
    let load_before = report::load_average();
    let mut bench = Bench {
        upstream: upstream::spawn_server("upstream", upstream::serve_upstream)?,
        binary: None,
        caller: None,
        sink: None,
    };
    let mut rows = Vec::new();
    for spec in plan {
        let name = spec.name();
        let row = match spec {
            RowSpec::Direct => measure(&name, Target::Direct, bench.upstream, None, &args).await?,
            RowSpec::Idgate(f) => bench.idgate_row(&name, f, &args).await?,
        };
        rows.push(row);
    }
    report::print_rows(&rows, args.json, &load_before);
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
