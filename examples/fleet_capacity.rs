//! How far one Redis and one replica carry a fleet: Redis commands, bytes
//! and memory per whole journey by path, vendor result reads per journey,
//! and journeys per second through the fleet, on loopback
//! (`docs/capacity.md`).
//!
//! ```sh
//! cargo run --release --example fleet_capacity -- --journeys 300 --seconds 10 --concurrency 32
//! ```
//!
//! Starts its own `redis-server` (Debian's `redis-server` package) on a
//! free loopback port, one sandbox and two replicas sharing that Redis
//! (examples/support/fleet.rs). The sandbox's results carry two photos of
//! `--photo-kib` (its 3D selfie, `selfie_bytes`, and the document's front
//! the watched path submits), as real captures do, and it processes
//! documents at once.
//! Phase 1 runs `--journeys` whole journeys one at a time on each path and
//! reads what Redis saw (`INFO stats`: commands and bytes; `INFO memory`)
//! and what the replicas sent (`idgate_cluster_operations_total`, the
//! event stream's `XREAD` and the figures' `HINCRBY` included). Phase 2
//! runs `--concurrency` journeys at a time for `--seconds` through both
//! replicas, then through one. The sandbox, Redis and this load generator
//! share the machine's cores with the replicas: the rate is a floor of
//! what a replica on its own cores carries. Stops everything it started.

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
#[allow(dead_code)]
mod fleet;

use idgate::{domain::Operation, testing::GatewayParts as _};
use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::Parser;
use idgate::{
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{SandboxConfig, samples},
    server::{Gateway, StartOptions},
};
use tonic::transport::Channel;

use self::fleet::{BASIC_PASSWORD, Fleet};

#[derive(Parser)]
struct Args {
    /// Journeys of each path in phase 1.
    #[arg(long, default_value_t = 300)]
    journeys: usize,
    /// Length of each throughput run in phase 2.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Journeys in flight at once in phase 2.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Size of each of a result's two photos (the selfie, the document's
    /// front), in KiB.
    #[arg(long, default_value_t = 300)]
    photo_kib: usize,
}

#[derive(Clone)]
struct Gw {
    channel: Channel,
    http: SocketAddr,
}

impl Gw {
    async fn of(gateway: &Gateway) -> Self {
        let channel = Channel::from_shared(gateway.grpc_url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self {
            channel,
            http: gateway.http_addr(),
        }
    }

    async fn create(&self, request_id: &str) -> Result<v1::CreateJourneyResponse, tonic::Status> {
        let p = samples::HAPPY_PERSON;
        let d: Vec<&str> = p.birth_date.split('/').collect();
        JourneyServiceClient::new(self.channel.clone())
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", d[2], d[1], d[0]),
                customer_reference: "BENCH1".into(),
                operator_profile: String::new(),
                request_id: request_id.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn start_3d(&self, appkey: &str) -> Result<v1::StartSession3DResponse, tonic::Status> {
        LivenessServiceClient::new(self.channel.clone())
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "bench".into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn verify(
        &self,
        appkey: &str,
        s: &v1::StartSession3DResponse,
        hint: bool,
    ) -> Result<(), tonic::Status> {
        LivenessServiceClient::new(self.channel.clone())
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
            .map(|_| ())
    }

    async fn watch_open(&self, journey_ref: &str) -> Result<(), tonic::Status> {
        drop(self.watch(journey_ref).await?);
        Ok(())
    }

    async fn watch(
        &self,
        journey_ref: &str,
    ) -> Result<tonic::Streaming<v1::WatchJourneyResponse>, tonic::Status> {
        JourneyServiceClient::new(self.channel.clone())
            .watch_journey(v1::WatchJourneyRequest {
                journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                    journey_ref.into(),
                )),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn submit_documents(&self, appkey: &str, images: &[Bytes]) -> Result<(), tonic::Status> {
        DocumentServiceClient::new(self.channel.clone())
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: images
                    .iter()
                    .map(|i| v1::DocumentImage { content: i.clone() })
                    .collect(),
            })
            .await
            .map(|_| ())
    }

    async fn webhook(&self, http: &reqwest::Client, appkey: &str) -> Result<(), tonic::Status> {
        let status = http
            .post(format!("http://{}/webhooks/journey", self.http))
            .basic_auth("vendor", Some(BASIC_PASSWORD))
            .header("webhook-id", format!("msg_{}", uuid::Uuid::new_v4()))
            .body(format!(r#"{{"Status":"Completo","Appkey":"{appkey}"}}"#))
            .send()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?
            .status();
        if status.as_u16() == 202 {
            Ok(())
        } else {
            Err(tonic::Status::unknown(format!("webhook answered {status}")))
        }
    }
}

/// Reads a watch to its end: the final message must carry the complete
/// result with both photos of `photo_bytes`.
async fn watched_to_result(
    mut stream: tonic::Streaming<v1::WatchJourneyResponse>,
    photo_bytes: usize,
) -> Result<(), tonic::Status> {
    let mut last = None;
    while let Some(message) = stream.message().await? {
        last = Some(message);
    }
    let photos = last
        .filter(|m| m.status() == v1::JourneyStatus::Complete)
        .and_then(|m| m.result)
        .and_then(|r| r.photos)
        .ok_or_else(|| tonic::Status::unknown("the watch ended without the complete result"))?;
    let full = photos.liveness_frontal.len() == photo_bytes
        && photos
            .documents
            .iter()
            .any(|d| d.image.len() == photo_bytes);
    if full {
        Ok(())
    } else {
        Err(tonic::Status::unknown("the result lacks its photos"))
    }
}

/// RG front (padded after its image data to `bytes`) and back.
fn rg_images(bytes: usize) -> Vec<Bytes> {
    use idgate::sandbox::samples::{DocumentKind, DocumentType, Side};
    Side::ALL
        .into_iter()
        .map(|side| {
            let mut image = samples::document_image(DocumentKind::new(DocumentType::Rg, side));
            if side == Side::Front {
                image.resize(image.len().max(bytes), 0);
            }
            Bytes::from(image)
        })
        .collect()
}

/// The paths of a whole journey through the fleet.
#[derive(Clone, Copy)]
enum Route {
    /// Every call on replica A, the 3D verification with the channel hint;
    /// the completion webhook to A.
    OneReplica,
    /// `CreateJourney` with a `request_id` and the 3D session on A, the
    /// verification on B without the hint, `WatchJourney` by reference on
    /// B, the webhook to A.
    AcrossReplicas,
    /// Created and watched (until the result) on B, the proof and the
    /// documents on B, the webhook to A only: the result, with its two
    /// photos, reaches B's watcher; A watches nothing.
    Watched,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::OneReplica => "one replica, channel hint",
            Route::AcrossReplicas => "across replicas: request_id, no hint, watch by ref",
            Route::Watched => "watched on B until the result (two photos), webhook to A",
        }
    }

    async fn run(self, a: &Gw, b: &Gw, http: &reqwest::Client) -> Result<(), tonic::Status> {
        self.run_with(a, b, http, &Photos::default()).await
    }

    async fn run_with(
        self,
        a: &Gw,
        b: &Gw,
        http: &reqwest::Client,
        photos: &Photos,
    ) -> Result<(), tonic::Status> {
        match self {
            Route::OneReplica => {
                let j = a.create("").await?;
                let s = a.start_3d(&j.appkey).await?;
                a.verify(&j.appkey, &s, true).await?;
                a.webhook(http, &j.appkey).await
            }
            Route::AcrossReplicas => {
                let j = a.create(&uuid::Uuid::new_v4().to_string()).await?;
                let s = a.start_3d(&j.appkey).await?;
                b.verify(&j.appkey, &s, false).await?;
                b.watch_open(&j.journey_ref).await?;
                a.webhook(http, &j.appkey).await
            }
            Route::Watched => {
                let j = b.create("").await?;
                // Opened before the proof: it waits for the notice.
                let watch = b.watch(&j.journey_ref).await?;
                let s = b.start_3d(&j.appkey).await?;
                b.verify(&j.appkey, &s, true).await?;
                b.submit_documents(&j.appkey, &photos.documents).await?;
                a.webhook(http, &j.appkey).await?;
                watched_to_result(watch, photos.bytes).await
            }
        }
    }
}

/// The documents the watched path submits, and the size of each photo of
/// its result.
#[derive(Default)]
struct Photos {
    documents: Vec<Bytes>,
    bytes: usize,
}

/// `field:value` of `INFO section`, as numbers.
async fn info(
    conn: &mut redis::aio::MultiplexedConnection,
    section: &str,
) -> BTreeMap<String, f64> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .unwrap();
    counters::info_numbers(&text)
}

/// Redis commands the replicas sent so far, by command.
fn replica_commands(gateways: &[&Gateway]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for g in gateways {
        let text = g.metrics().encode().expect("metrics");
        for (command, n) in counters::cluster_commands(&text) {
            *out.entry(command).or_default() += n;
        }
    }
    out
}

/// Journeys per second on `path` with `concurrency` in flight for `secs`,
/// and the journeys that failed (a call refused or timed out).
async fn throughput(path: Route, a: &Gw, b: &Gw, concurrency: usize, secs: u64) -> (f64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..concurrency {
        let (a, b, done, failed) = (a.clone(), b.clone(), done.clone(), failed.clone());
        // Half the tasks start on B, so both replicas serve.
        let (a, b) = if i % 2 == 0 { (a, b) } else { (b, a) };
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            while Instant::now() < until {
                match path.run(&a, &b, &http).await {
                    Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                    Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (
        done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(),
        failed.load(Ordering::Relaxed),
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let photo_bytes = args.photo_kib * 1024;
    let fleet = Fleet::start_with(SandboxConfig {
        processing_delay_ms: 0,
        selfie_bytes: photo_bytes,
        ..SandboxConfig::default()
    })
    .await;
    let photos = Photos {
        documents: rg_images(photo_bytes),
        bytes: photo_bytes,
    };
    let mut raw = fleet.redis.client().await;
    let start = || idgate::server::start_with(fleet.config(true), StartOptions::default());
    let (ga, gb) = (
        start().await.expect("replica A"),
        start().await.expect("replica B"),
    );
    let (a, b) = (Gw::of(&ga).await, Gw::of(&gb).await);
    let http = reqwest::Client::new();
    for _ in 0..20 {
        Route::AcrossReplicas
            .run(&a, &b, &http)
            .await
            .expect("warm-up");
    }

    Route::Watched
        .run_with(&a, &b, &http, &photos)
        .await
        .expect("warm-up of the watched path");

    println!(
        "| path | Redis commands per journey (as the replicas count them) | Redis commands per journey (INFO) | bytes in / out per journey | Redis memory per journey | vendor result reads per journey |"
    );
    println!("|---|---|---|---|---|---|");
    for path in [Route::OneReplica, Route::AcrossReplicas, Route::Watched] {
        // Let the figures' flush and background unbinds of earlier calls land.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let (stats, memory) = (
            info(&mut raw, "stats").await,
            info(&mut raw, "memory").await,
        );
        let commands = replica_commands(&[&ga, &gb]);
        let reads = fleet.sandbox.calls(Operation::Result, None);
        let started = Instant::now();
        for _ in 0..args.journeys {
            path.run_with(&a, &b, &http, &photos)
                .await
                .expect("a journey");
        }
        let reads = fleet.sandbox.calls(Operation::Result, None) - reads;
        // One more flush interval, so the figures of these journeys count.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let elapsed = started.elapsed().as_secs_f64();
        let n = args.journeys as f64;
        let (stats2, memory2) = (
            info(&mut raw, "stats").await,
            info(&mut raw, "memory").await,
        );
        let d = |m: &BTreeMap<String, f64>, m2: &BTreeMap<String, f64>, k: &str| m2[k] - m[k];
        let after = replica_commands(&[&ga, &gb]);
        let by_command = after
            .iter()
            .map(|(c, v)| (c, (v - commands.get(c).copied().unwrap_or(0.0)) / n))
            .filter(|(_, v)| *v >= 0.005)
            .map(|(c, v)| format!("{v:.2} `{c}`"))
            .collect::<Vec<_>>()
            .join(" + ");
        // INFO's own command and the two INFO calls are not the journeys'.
        let redis_commands = (d(&stats, &stats2, "total_commands_processed") - 2.0) / n;
        println!(
            "| {} | {by_command} | {redis_commands:.2} | {:.0} / {:.0} B | {:.0} B | {:.2} |",
            path.name(),
            d(&stats, &stats2, "total_net_input_bytes") / n,
            d(&stats, &stats2, "total_net_output_bytes") / n,
            d(&memory, &memory2, "used_memory") / n,
            reads as f64 / n,
        );
        eprintln!(
            "({} journeys in {elapsed:.1} s, one at a time)",
            args.journeys
        );
    }

    println!("\n| run | journeys per second | journeys failed |");
    println!("|---|---|---|");
    for path in [Route::OneReplica, Route::AcrossReplicas] {
        let (rate, failed) = throughput(path, &a, &b, args.concurrency, args.seconds).await;
        println!(
            "| two replicas, {}, {} in flight | {rate:.0} | {failed} |",
            path.name(),
            args.concurrency
        );
    }
    let (rate, failed) =
        throughput(Route::OneReplica, &a, &a, args.concurrency, args.seconds).await;
    println!(
        "| one replica alone, {}, {} in flight | {rate:.0} | {failed} |",
        Route::OneReplica.name(),
        args.concurrency
    );
    let stream_len: u64 = redis::cmd("XLEN")
        .arg("idgate:{fleet}:events")
        .query_async(&mut raw)
        .await
        .unwrap();
    println!("\nevent stream length at the end: {stream_len} entries");

    ga.shutdown().await;
    gb.shutdown().await;
    fleet.shutdown().await;
}
