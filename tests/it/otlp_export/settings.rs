//! The exporter's `OTEL_EXPORTER_OTLP_*` settings as a platform team sets
//! them on `idgate serve`: a backend's API key in the headers, gzip, a
//! timeout against a collector that never answers.

use std::net::SocketAddr;

use idgate::proto::v1::journey_service_client::JourneyServiceClient;
use tokio::net::TcpListener;

use crate::support::{
    gateway::{ADMIN_TOKEN, connect, happy_person},
    otlp_collector::Collector,
    process::{ServeProcess, idgate_command, quick_serve_config},
    wait::{EVENT_WAIT, eventually},
};

const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

/// A value no log line may ever show.
const API_KEY: &str = "s3cr3t-backend-key";

/// `idgate serve` exporting spans with the `OTEL_*` variables `otel`.
fn serve_exporting(dir: &std::path::Path, otel: &[(&str, String)]) -> ServeProcess {
    let config = quick_serve_config(dir, "");
    let mut command = idgate_command();
    command
        .args(["serve", "--config"])
        .arg(&config)
        .env("IDGATE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("RUST_LOG", "info")
        // A batch leaves within 50 ms rather than the default 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    for (key, value) in otel {
        command.env(key, value);
    }
    ServeProcess::spawn(command)
}

/// The gRPC and HTTP addresses of a started `idgate serve`.
fn listening(serve: &ServeProcess) -> (SocketAddr, SocketAddr) {
    let line = serve.line("idgate listening");
    let field = |key: &str| -> SocketAddr {
        let at = line.find(&format!(" {key}=")).expect(key) + key.len() + 2;
        line[at..]
            .split_whitespace()
            .next()
            .expect("value")
            .parse()
            .expect("address")
    };
    (field("grpc"), field("http"))
}

async fn create_journey(grpc: SocketAddr) {
    JourneyServiceClient::new(connect(format!("http://{grpc}")).await)
        .create_journey(happy_person())
        .await
        .expect("create journey");
}

#[tokio::test]
async fn spans_carry_the_configured_headers_gzip_compressed_over_grpc_and_http() {
    for protocol in ["grpc", "http/protobuf"] {
        let collector = match protocol {
            "grpc" => Collector::start().await,
            _ => Collector::start_http().await,
        };
        let dir = crate::support::temp::dir("otlp-headers");
        let mut serve = serve_exporting(
            dir.path(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    format!("Authorization=Bearer%20{API_KEY},x-tenant=ops"),
                ),
                ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip".to_owned()),
            ],
        );
        let (grpc, _) = listening(&serve);
        create_journey(grpc).await;
        eventually(
            &format!("the CreateJourney span arrives over {protocol}"),
            EVENT_WAIT,
            async || collector.spans().iter().any(|s| s.name == CREATE),
        )
        .await;

        let exports = collector.exports();
        assert!(!exports.is_empty());
        for export in &exports {
            assert!(export.gzip, "{protocol}: {export:?}");
            assert_eq!(
                export.header("authorization"),
                Some(format!("Bearer {API_KEY}").as_str()),
                "{protocol}"
            );
            assert_eq!(export.header("x-tenant"), Some("ops"), "{protocol}");
        }
        serve.signal("TERM");
        serve.exit_within(EVENT_WAIT).await.expect("exits");
        let lines = serve.lines_to_end(EVENT_WAIT);
        assert!(
            lines.iter().all(|l| !l.contains(API_KEY)),
            "{protocol}: the key was logged"
        );
    }
}

/// Accepts connections and never answers on them.
async fn deaf_collector() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (addr, task)
}

async fn scrape(http: SocketAddr) -> String {
    reqwest::get(format!("http://{http}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body")
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_failed_spans_after_the_timeout_not_the_calls() {
    for protocol in ["grpc", "http/protobuf"] {
        let (collector, task) = deaf_collector().await;
        let dir = crate::support::temp::dir("otlp-deaf");
        let mut serve = serve_exporting(
            dir.path(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}")),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "200".to_owned()),
            ],
        );
        let (grpc, http) = listening(&serve);
        // The calls are answered while their spans cannot leave.
        for _ in 0..3 {
            create_journey(grpc).await;
        }
        let warned = serve.line("span export failed");
        assert!(warned.contains("did not answer within 200ms"), "{warned}");
        eventually(
            &format!("{protocol}: the spans are counted failed"),
            EVENT_WAIT,
            async || {
                let text = scrape(http).await;
                crate::support::metrics::value(
                    &text,
                    "idgate_trace_spans_total",
                    &[("outcome", "failed")],
                ) >= 6.0
            },
        )
        .await;
        let text = scrape(http).await;
        assert_eq!(
            crate::support::metrics::value(
                &text,
                "idgate_trace_spans_total",
                &[("outcome", "exported")]
            ),
            0.0,
            "{protocol}"
        );
        serve.signal("TERM");
        let status = serve
            .exit_within(EVENT_WAIT)
            .await
            .expect("exits with its collector deaf");
        assert!(status.success(), "{protocol}: {status}");
        task.abort();
    }
}
