//! What Redis costs each RPC in fleet mode (`[cluster]`): Redis round
//! trips per RPC and the p50 latency added, against a single-process
//! gateway on the same sandbox, on loopback.
//!
//! ```sh
//! cargo run --release --example fleet_cost -- --iterations 500
//! ```
//!
//! Starts its own `redis-server` (Debian's `redis-server` package) on a
//! free loopback port, one sandbox, one gateway without `[cluster]` and two
//! replicas with it (examples/support/fleet.rs). Each phase times one RPC `--iterations` times,
//! alternating the single-process gateway and the fleet replica, and counts
//! the Redis commands the replicas sent (`idgate_cluster_operations`).
//! Bounded by `--iterations`; stops everything it started.

#[path = "../tests/it/support/child_env.rs"]
#[allow(dead_code)]
mod child_env;
#[path = "support/counters.rs"]
#[allow(dead_code)]
mod counters;
#[path = "../tests/it/support/fixed_port.rs"]
#[allow(dead_code)]
mod fixed_port;
#[path = "support/fleet.rs"]
mod fleet;

use idgate::testing::GatewayParts as _;
use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use clap::Parser;
use idgate::{
    config::Config,
    proto::v1::{
        self, journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::samples,
    server::{Gateway, StartOptions},
};
use tonic::transport::Channel;

use self::fleet::{BASIC_PASSWORD, Fleet};

#[derive(Parser)]
struct Args {
    /// Calls of each RPC on each gateway.
    #[arg(long, default_value_t = 300)]
    iterations: usize,
}

struct Gw {
    gateway: Gateway,
    channel: Channel,
}

impl Gw {
    async fn start(config: Config) -> Self {
        let gateway = idgate::server::start_with(config, StartOptions::default())
            .await
            .expect("gateway starts");
        let channel = Channel::from_shared(gateway.grpc_url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self { gateway, channel }
    }

    fn journeys(&self) -> JourneyServiceClient<Channel> {
        JourneyServiceClient::new(self.channel.clone())
    }

    fn liveness(&self) -> LivenessServiceClient<Channel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    async fn create(&self) -> v1::CreateJourneyResponse {
        self.create_with_id("").await
    }

    /// `CreateJourney` with `request_id` (empty: none).
    async fn create_with_id(&self, request_id: &str) -> v1::CreateJourneyResponse {
        let p = samples::HAPPY_PERSON;
        let d: Vec<&str> = p.birth_date.split('/').collect();
        self.journeys()
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", d[2], d[1], d[0]),
                customer_reference: "BENCH1".into(),
                operator_profile: String::new(),
                request_id: request_id.into(),
            })
            .await
            .expect("create")
            .into_inner()
    }

    async fn start_3d(&self, appkey: &str) -> v1::StartSession3DResponse {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "bench".into(),
            })
            .await
            .expect("start 3D")
            .into_inner()
    }

    async fn verify(&self, appkey: &str, s: &v1::StartSession3DResponse, hint: bool) {
        self.liveness()
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.into(),
                session_token: s.session_token.clone(),
                channel: if hint {
                    s.channel.clone()
                } else {
                    String::new()
                },
            })
            .await
            .expect("verify 3D");
    }

    async fn watch_open(&self, journey_ref: &str) {
        let stream = self
            .journeys()
            .watch_journey(v1::WatchJourneyRequest {
                journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                    journey_ref.into(),
                )),
            })
            .await
            .expect("watch by ref");
        drop(stream);
    }

    async fn webhook(&self, http: &reqwest::Client, i: usize) {
        let status = http
            .post(format!(
                "http://{}/webhooks/journey",
                self.gateway.http_addr()
            ))
            .basic_auth("vendor", Some(BASIC_PASSWORD))
            .header(
                "webhook-id",
                format!("msg_bench_{i}_{}", uuid::Uuid::new_v4()),
            )
            .body(format!(
                r#"{{"Status":"Completo","Appkey":"bench-appkey-{i}"}}"#
            ))
            .send()
            .await
            .expect("webhook")
            .status();
        assert_eq!(status.as_u16(), 202);
    }

    /// Redis commands sent so far, by command.
    fn redis_commands(&self) -> BTreeMap<String, f64> {
        counters::cluster_commands(&self.gateway.metrics().encode().expect("metrics"))
    }
}

/// How long an awaited call took.
macro_rules! timed {
    ($call:expr) => {{
        let t = Instant::now();
        $call.await;
        t.elapsed()
    }};
}

fn p50(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// Commands the replicas sent between two readings, per call.
fn per_call(before: &[BTreeMap<String, f64>], after: &[BTreeMap<String, f64>], n: usize) -> String {
    let mut total: BTreeMap<String, f64> = BTreeMap::new();
    for (b, a) in before.iter().zip(after) {
        for (command, v) in a {
            let d = v - b.get(command).copied().unwrap_or(0.0);
            if d > 0.0 {
                *total.entry(command.clone()).or_default() += d;
            }
        }
    }
    total.retain(|_, v| *v / n as f64 >= 0.005);
    if total.is_empty() {
        return "0".to_owned();
    }
    total
        .iter()
        .map(|(c, v)| format!("{:.2} {c}", v / n as f64))
        .collect::<Vec<_>>()
        .join(" + ")
}

struct Row {
    rpc: &'static str,
    single: Duration,
    fleet: Duration,
    commands: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let n = args.iterations.max(10);
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Redis answers before the replicas start (`Fleet::start` waits).
    let fleet_setup = Fleet::start().await;
    let mut raw = fleet_setup.redis.client().await;
    let single = Gw::start(fleet_setup.config(false)).await;
    let a = Gw::start(fleet_setup.config(true)).await;
    let b = Gw::start(fleet_setup.config(true)).await;
    let http = reqwest::Client::new();
    let fleet = [&a, &b];
    let reading = || fleet.iter().map(|g| g.redis_commands()).collect::<Vec<_>>();

    // Raw Redis round trip, for scale.
    let mut pings = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut raw).await.unwrap();
        pings.push(t.elapsed());
    }

    // Warm-up: connections, credentials, code paths.
    for _ in 0..20 {
        for g in [&single, &a, &b] {
            let c = g.create().await;
            let s = g.start_3d(&c.appkey).await;
            g.verify(&c.appkey, &s, true).await;
        }
    }

    // The warm-up's background unbinds land before the first reading.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rows = Vec::new();

    // CreateJourney.
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    let mut journeys = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        journeys.0.push(single.create().await);
        s_t.push(t.elapsed());
        let t = Instant::now();
        journeys.1.push(a.create().await);
        f_t.push(t.elapsed());
    }
    rows.push(Row {
        rpc: "CreateJourney",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    // CreateJourney with a new request_id (claim, /appkey, complete), then
    // the same request_id again (a replay: no upstream call).
    let ids: Vec<String> = (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    for (rpc, phase) in [
        ("CreateJourney, new request_id", 0),
        ("CreateJourney, replayed request_id (no /appkey)", 1),
    ] {
        let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
        let before = reading();
        for id in &ids {
            let t = Instant::now();
            single.create_with_id(id).await;
            s_t.push(t.elapsed());
            let t = Instant::now();
            // The replay goes to the other replica: it reads the record
            // from Redis.
            let replica = if phase == 0 { &a } else { &b };
            replica.create_with_id(id).await;
            f_t.push(t.elapsed());
        }
        rows.push(Row {
            rpc,
            single: p50(&mut s_t),
            fleet: p50(&mut f_t),
            commands: per_call(&before, &reading(), n),
        });
    }

    // StartSession3D.
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    let mut sessions = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        sessions
            .0
            .push(single.start_3d(&journeys.0[i].appkey).await);
        s_t.push(t.elapsed());
        let t = Instant::now();
        sessions.1.push(a.start_3d(&journeys.1[i].appkey).await);
        f_t.push(t.elapsed());
    }
    rows.push(Row {
        rpc: "StartSession3D",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    // VerifyLiveness3D on the replica that started the session, with the hint.
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    for i in 0..n {
        s_t.push(timed!(single.verify(
            &journeys.0[i].appkey,
            &sessions.0[i],
            true
        )));
        f_t.push(timed!(a.verify(
            &journeys.1[i].appkey,
            &sessions.1[i],
            true
        )));
    }
    tokio::time::sleep(Duration::from_millis(200)).await; // background unbinds land
    rows.push(Row {
        rpc: "VerifyLiveness3D, same replica, channel hint (unbind in background)",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    // VerifyLiveness3D on another replica without the hint (single: same
    // gateway with the hint, the only way it works there).
    let mut setup = (Vec::new(), Vec::new());
    for _ in 0..n {
        let c = single.create().await;
        let s = single.start_3d(&c.appkey).await;
        setup.0.push((c, s));
        let c = a.create().await;
        let s = a.start_3d(&c.appkey).await;
        setup.1.push((c, s));
    }
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    for i in 0..n {
        let (c, s) = &setup.0[i];
        s_t.push(timed!(single.verify(&c.appkey, s, true)));
        let (c, s) = &setup.1[i];
        f_t.push(timed!(b.verify(&c.appkey, s, false)));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    rows.push(Row {
        rpc: "VerifyLiveness3D, another replica, no hint (unbind in background)",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    // WatchJourney by reference on another replica, until the stream opens.
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    for i in 0..n {
        s_t.push(timed!(single.watch_open(&journeys.0[i].journey_ref)));
        f_t.push(timed!(b.watch_open(&journeys.1[i].journey_ref)));
    }
    rows.push(Row {
        rpc: "WatchJourney by journey_ref, another replica (stream opened)",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    // Completion webhook (answered 202; fan-out included).
    let (mut s_t, mut f_t) = (Vec::new(), Vec::new());
    let before = reading();
    for i in 0..n {
        s_t.push(timed!(single.webhook(&http, i)));
        f_t.push(timed!(a.webhook(&http, i)));
    }
    rows.push(Row {
        rpc: "webhook POST (dedupe + fan-out)",
        single: p50(&mut s_t),
        fleet: p50(&mut f_t),
        commands: per_call(&before, &reading(), n),
    });

    println!(
        "Redis PING round trip on loopback: p50 {} ms ({n} pings)\n",
        ms(p50(&mut pings))
    );
    println!(
        "| RPC | Redis commands per call | p50 single process | p50 fleet replica | added p50 |"
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        let added = r.fleet.as_secs_f64() - r.single.as_secs_f64();
        println!(
            "| {} | {} | {} ms | {} ms | {:+.3} ms |",
            r.rpc,
            r.commands,
            ms(r.single),
            ms(r.fleet),
            added * 1e3
        );
    }
    println!("\n{n} calls of each RPC on each gateway, alternating.");

    for g in [single, a, b] {
        g.gateway.shutdown().await;
    }
    fleet_setup.shutdown().await;
}
