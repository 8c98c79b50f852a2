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
    // reqwest is built without a crypto provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
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

async fn failed_and_exported(http: SocketAddr) -> (f64, f64) {
    let text = scrape(http).await;
    let count = |outcome| {
        crate::support::metrics::value(&text, "idgate_trace_spans_total", &[("outcome", outcome)])
    };
    (count("failed"), count("exported"))
}

#[tokio::test]
async fn a_collector_restarting_costs_no_span_and_one_refusing_is_not_asked_twice() {
    for protocol in ["grpc", "http/protobuf"] {
        for transient in [true, false] {
            let collector = match protocol {
                "grpc" => Collector::start().await,
                _ => Collector::start_http().await,
            };
            // Transient: two refusals, within the three retries of one
            // export. Otherwise every export is refused.
            collector.refuse_next(if transient { 2 } else { usize::MAX }, transient);
            let dir = crate::support::temp::dir("otlp-retry");
            let mut serve = serve_exporting(
                dir.path(),
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
                ],
            );
            let (grpc, http) = listening(&serve);
            create_journey(grpc).await;
            let case = format!("{protocol}, transient {transient}");
            if transient {
                eventually(&case, EVENT_WAIT, async || {
                    let (failed, exported) = failed_and_exported(http).await;
                    collector.spans().iter().any(|s| s.name == CREATE)
                        && failed == 0.0
                        && exported as usize == collector.spans().len()
                })
                .await;
                let exports = collector.exports();
                assert!(
                    exports[0].digest == exports[1].digest
                        && exports[1].digest == exports[2].digest,
                    "{case}: the refused export was sent again, as it was"
                );
            } else {
                eventually(&case, EVENT_WAIT, async || {
                    let refused: usize = collector.exports().iter().map(|e| e.spans).sum();
                    refused > 0 && failed_and_exported(http).await.0 == refused as f64
                })
                .await;
                let exports = collector.exports();
                let mut digests: Vec<_> = exports.iter().map(|e| e.digest).collect();
                digests.sort_unstable();
                digests.dedup();
                assert_eq!(
                    digests.len(),
                    exports.len(),
                    "{case}: a rejected export is not sent again"
                );
                assert!(collector.spans().is_empty(), "{case}");
            }
            serve.signal("TERM");
            serve.exit_within(EVENT_WAIT).await.expect("exits");
        }
    }
}

#[tokio::test]
async fn at_shutdown_a_collector_that_never_answers_costs_the_flush_bound_not_the_export_timeout() {
    let (collector, task) = deaf_collector().await;
    let dir = crate::support::temp::dir("otlp-deaf-exit");
    let mut serve = serve_exporting(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}")),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
            // Longer than the test waits: only the flush's own bound
            // (5 s) can end the exit in time.
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000".to_owned()),
            // Nothing leaves on schedule: the spans wait for the flush.
            ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
        ],
    );
    let (grpc, _) = listening(&serve);
    create_journey(grpc).await;
    serve.signal("TERM");
    let status = serve
        .exit_within(EVENT_WAIT)
        .await
        .expect("idgate serve exits although its collector never answers");
    assert!(status.success(), "{status}");
    task.abort();
}

#[tokio::test]
async fn at_shutdown_the_spans_still_queued_reach_the_collector() {
    let collector = Collector::start().await;
    let dir = crate::support::temp::dir("otlp-exit-flush");
    let mut serve = serve_exporting(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
            // Nothing leaves on schedule: only the flush at exit sends them.
            ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
        ],
    );
    let (grpc, _) = listening(&serve);
    create_journey(grpc).await;
    serve.signal("TERM");
    let status = serve.exit_within(EVENT_WAIT).await.expect("exits");
    assert!(status.success(), "{status}");
    assert!(
        collector.spans().iter().any(|s| s.name == CREATE),
        "the call's span was sent at exit: {:?}",
        collector.exports()
    );
}
