//! Telemetry end to end: a caller with a `traceparent` calls a tonic server
//! behind `GrpcServerLayer`; its handler calls an axum "upstream" behind
//! `HttpServerLayer` through `UpstreamCall`; spans go over real OTLP/gRPC to
//! an in-process collector, metrics to `GET /metrics`.
//!
//! Each test installs its own subscriber for its own thread and runs its
//! servers on its current-thread runtime ([`Traced::start`]), so tests do
//! not share telemetry.

use std::{collections::HashMap, net::SocketAddr, pin::Pin};

use axum::{
    Json, Router,
    extract::Query,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
};
use http::Method;
use idgate::{
    domain::Operation,
    domain::{Appkey, JourneyRef},
    proto::v1::{
        CreateJourneyRequest, CreateJourneyResponse, GetJourneyResultRequest,
        GetJourneyResultResponse, WatchJourneyRequest, WatchJourneyResponse,
        journey_service_client::JourneyServiceClient,
        journey_service_server::{JourneyService, JourneyServiceServer},
    },
    telemetry::{
        GrpcServerLayer, HttpServerLayer, Metrics, ServerSpan, UpstreamCall, UpstreamRequest,
        metrics::metrics_router, record_journey,
    },
    upstream::UpstreamError,
};
use tokio_stream::{Stream, wrappers::TcpListenerStream};
use tracing::Instrument;

use crate::support::{
    metrics,
    net::{bind_loopback, http_client, serve},
    otlp_collector::{CollectedSpan, STATUS_ERROR, kind},
    telemetry::Traced,
};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN_ID: &str = "00f067aa0ba902b7";
const SECRET_APPKEY: &str = "SECRET-APPKEY-7f3a";
const SECRET_BEARER: &str = "SECRET-BEARER-91c2";
const UPSTREAM_PATH: &str = "/service/captcha/3d/liveness";
const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

fn journey() -> JourneyRef {
    JourneyRef::from_appkey(&Appkey::new(SECRET_APPKEY))
}

/// The gateway stand-in: one upstream call per `CreateJourney`.
struct Gateway {
    http: reqwest::Client,
    upstream: String,
    metrics: Metrics,
}

#[tonic::async_trait]
impl JourneyService for Gateway {
    async fn create_journey(
        &self,
        request: tonic::Request<CreateJourneyRequest>,
    ) -> Result<tonic::Response<CreateJourneyResponse>, tonic::Status> {
        let journey = journey();
        if let Some(ServerSpan(span)) = request.extensions().get::<ServerSpan>() {
            record_journey(span, &journey);
        }
        tracing::info!(appkey = ?Appkey::new(SECRET_APPKEY), "calling upstream");
        // The query proves that URLs are recorded without theirs.
        let mut url = format!("{}{UPSTREAM_PATH}?appkey={SECRET_APPKEY}", self.upstream);
        if request.get_ref().operator_profile == "upstream-down" {
            url.push_str("&fail=1");
        }
        let call = UpstreamCall::start(
            &self.metrics,
            UpstreamRequest::new(Operation::Liveness3D, &Method::POST, &url)
                .channel("primary")
                .journey(&journey),
        );
        let sent = self
            .http
            .post(&url)
            .headers(call.headers())
            .send()
            .instrument(call.span().clone())
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                call.finish(response.status());
                Ok(tonic::Response::new(CreateJourneyResponse {
                    journey_ref: journey.to_string(),
                    ..Default::default()
                }))
            }
            Ok(response) => {
                call.finish(response.status());
                Err(tonic::Status::unavailable("upstream unavailable"))
            }
            Err(e) => {
                let op = Operation::Liveness3D;
                let err = if e.is_connect() {
                    UpstreamError::Connect { op }
                } else {
                    UpstreamError::Transport { op }
                };
                call.fail(err.class());
                Err(tonic::Status::unavailable("upstream unreachable"))
            }
        }
    }

    async fn get_journey_result(
        &self,
        _request: tonic::Request<GetJourneyResultRequest>,
    ) -> Result<tonic::Response<GetJourneyResultResponse>, tonic::Status> {
        Err(tonic::Status::not_found("no such journey"))
    }

    type WatchJourneyStream =
        Pin<Box<dyn Stream<Item = Result<WatchJourneyResponse, tonic::Status>> + Send>>;

    async fn watch_journey(
        &self,
        _request: tonic::Request<WatchJourneyRequest>,
    ) -> Result<tonic::Response<Self::WatchJourneyStream>, tonic::Status> {
        let events = (0..2).map(|_| {
            Ok(WatchJourneyResponse {
                journey_ref: journey().to_string(),
                ..Default::default()
            })
        });
        Ok(tonic::Response::new(Box::pin(tokio_stream::iter(events))))
    }
}

/// The upstream stand-in (what the sandbox does with the layer).
async fn liveness(Query(q): Query<HashMap<String, String>>) -> Response {
    if q.contains_key("fail") {
        StatusCode::SERVICE_UNAVAILABLE.into_response()
    } else {
        Json(serde_json::json!({"valid": true})).into_response()
    }
}

/// Picks one expected span out of those received.
type SpanMatcher = dyn Fn(&CollectedSpan) -> bool;

struct Harness {
    traced: Traced,
    grpc: SocketAddr,
    http: SocketAddr,
}

async fn start() -> Harness {
    let traced = Traced::start("idgate-test", "info").await;
    let metrics = Metrics::new(["primary"]);

    let sandbox = Router::new()
        .route(UPSTREAM_PATH, post(liveness))
        .layer(HttpServerLayer::new());
    let upstream = serve(sandbox).await;

    let listener_router: Router =
        metrics_router(metrics.clone()).layer(HttpServerLayer::with_metrics(metrics.clone()));
    let http = serve(listener_router).await;

    let (l, grpc) = bind_loopback().await;
    let gateway = Gateway {
        http: http_client(),
        upstream: format!("http://{upstream}"),
        metrics: metrics.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(GrpcServerLayer::new(metrics))
            .add_service(JourneyServiceServer::new(gateway))
            .serve_with_incoming(TcpListenerStream::new(l)),
    );

    Harness { traced, grpc, http }
}

impl Harness {
    async fn client(&self) -> JourneyServiceClient<tonic::transport::Channel> {
        JourneyServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .expect("connect")
    }

    /// A request as a traced caller sends it, with a bearer secret beside.
    fn traced<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        let md = req.metadata_mut();
        md.insert(
            "traceparent",
            format!("00-{TRACE_ID}-{CALLER_SPAN_ID}-01")
                .parse()
                .unwrap(),
        );
        md.insert(
            "authorization",
            format!("Bearer {SECRET_BEARER}").parse().unwrap(),
        );
        req
    }

    /// Waits for spans matching each predicate (flushing meanwhile).
    async fn spans_where(&self, wanted: &[(&str, &SpanMatcher)]) -> Vec<CollectedSpan> {
        let spans = self
            .traced
            .spans_until(|spans| wanted.iter().all(|(_, p)| spans.iter().any(p)))
            .await;
        wanted
            .iter()
            .map(|(what, p)| {
                spans
                    .iter()
                    .find(|s| p(s))
                    .unwrap_or_else(|| panic!("no {what}"))
                    .clone()
            })
            .collect()
    }

    async fn metrics(&self) -> String {
        let response = reqwest::get(format!("http://{}/metrics", self.http))
            .await
            .expect("GET /metrics");
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/openmetrics-text"),
        );
        response.text().await.expect("body")
    }

    async fn finish(self) {
        self.traced.finish().await;
    }
}

fn is_grpc_server(method: &'static str) -> impl Fn(&CollectedSpan) -> bool {
    move |s| s.kind == kind::SERVER && s.name == method
}

fn is_upstream_client(s: &CollectedSpan) -> bool {
    s.kind == kind::CLIENT && s.str("idgate.operation") == Some("liveness_3d")
}

fn is_upstream_server(s: &CollectedSpan) -> bool {
    s.kind == kind::SERVER && s.str("http.route") == Some(UPSTREAM_PATH)
}

#[tokio::test]
async fn one_trace_links_the_caller_the_gateway_and_the_upstream() {
    let h = start().await;
    let response = h
        .client()
        .await
        .create_journey(h.traced(CreateJourneyRequest::default()))
        .await
        .expect("CreateJourney");
    assert_eq!(response.get_ref().journey_ref, journey().to_string());

    let spans = h
        .spans_where(&[
            ("gRPC server span", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
        ])
        .await;
    let [server, client, upstream] = &spans[..] else {
        unreachable!()
    };

    for span in &spans {
        assert_eq!(span.trace_id, TRACE_ID, "{span:#?}");
        assert_eq!(span.str("idgate.journey_ref"), Some(journey().as_str()));
        assert_eq!(span.resource_str("service.name"), Some("idgate-test"));
        assert_eq!(
            span.resource_str("service.version"),
            Some(env!("CARGO_PKG_VERSION"))
        );
    }
    assert_eq!(server.parent_span_id, CALLER_SPAN_ID);
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(upstream.parent_span_id, client.span_id);

    assert_eq!(server.str("rpc.system"), Some("grpc"));
    assert_eq!(server.str("rpc.service"), Some("idgate.v1.JourneyService"));
    assert_eq!(server.str("rpc.method"), Some("CreateJourney"));
    assert_eq!(server.int("rpc.grpc.status_code"), Some(0));
    assert_ne!(server.status_code, STATUS_ERROR);

    assert_eq!(client.name, format!("POST {UPSTREAM_PATH}"));
    assert_eq!(client.str("http.request.method"), Some("POST"));
    assert_eq!(client.str("url.path"), Some(UPSTREAM_PATH));
    assert_eq!(client.str("server.address"), Some("127.0.0.1"));
    assert!(client.int("server.port").is_some_and(|p| p > 0));
    assert_eq!(client.int("http.response.status_code"), Some(200));
    assert_eq!(client.str("idgate.channel"), Some("primary"));

    assert_eq!(upstream.name, format!("POST {UPSTREAM_PATH}"));
    assert_eq!(upstream.str("http.request.method"), Some("POST"));
    assert_eq!(upstream.int("http.response.status_code"), Some(200));
    h.finish().await;
}

#[tokio::test]
async fn failures_mark_spans_by_the_conventions() {
    let h = start().await;
    let mut client = h.client().await;
    let err = client
        .create_journey(h.traced(CreateJourneyRequest {
            operator_profile: "upstream-down".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    let err = client
        .get_journey_result(h.traced(GetJourneyResultRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    let spans = h
        .spans_where(&[
            ("failed CreateJourney", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
            (
                "GetJourneyResult",
                &is_grpc_server("idgate.v1.JourneyService/GetJourneyResult"),
            ),
        ])
        .await;
    let [create, client, upstream, get] = &spans[..] else {
        unreachable!()
    };
    // A server failure (UNAVAILABLE) is an error span...
    assert_eq!(create.int("rpc.grpc.status_code"), Some(14));
    assert_eq!(create.status_code, STATUS_ERROR);
    // ...a caller's mistake (NOT_FOUND, sent in headers only) is not.
    assert_eq!(get.int("rpc.grpc.status_code"), Some(5));
    assert_ne!(get.status_code, STATUS_ERROR);
    // A 503 is an error on both sides of the upstream call.
    assert_eq!(client.int("http.response.status_code"), Some(503));
    assert_eq!(client.str("error.type"), Some("503"));
    assert_eq!(client.status_code, STATUS_ERROR);
    assert_eq!(upstream.int("http.response.status_code"), Some(503));
    assert_eq!(upstream.status_code, STATUS_ERROR);
    h.finish().await;
}

#[tokio::test]
async fn metrics_count_rpcs_and_upstream_calls_with_fixed_labels() {
    let h = start().await;
    let mut client = h.client().await;
    for _ in 0..2 {
        client
            .create_journey(CreateJourneyRequest::default())
            .await
            .expect("ok");
    }
    client
        .create_journey(CreateJourneyRequest {
            operator_profile: "upstream-down".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    client
        .get_journey_result(GetJourneyResultRequest::default())
        .await
        .unwrap_err();
    let mut stream = client
        .watch_journey(WatchJourneyRequest::default())
        .await
        .expect("watch")
        .into_inner();
    let mut events = 0;
    while stream.message().await.expect("stream").is_some() {
        events += 1;
    }
    assert_eq!(events, 2);
    // A path outside the API: labelled _OTHER, never by the path.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", h.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let unknown = raw
        .unary(
            tonic::Request::new(()),
            http::uri::PathAndQuery::from_static("/idgate.v1.JourneyService/j-made-up"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::Unimplemented);

    let m = h.metrics().await;
    let get = |series: &str| -> f64 { metrics::series(&m, series) };
    let create = |code: &str| format!(r#"method="{CREATE}",code="{code}""#);
    assert_eq!(
        get(&format!("idgate_rpc_requests_total{{{}}}", create("OK"))),
        2.0
    );
    assert_eq!(
        get(&format!(
            "idgate_rpc_requests_total{{{}}}",
            create("UNAVAILABLE")
        )),
        1.0
    );
    assert_eq!(
        get(&format!(
            "idgate_rpc_duration_seconds_count{{{}}}",
            create("OK")
        )),
        2.0
    );
    assert!(
        get(&format!(
            "idgate_rpc_duration_seconds_sum{{{}}}",
            create("OK")
        )) > 0.0
    );
    assert_eq!(
        get(
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/GetJourneyResult",code="NOT_FOUND"}"#
        ),
        1.0
    );
    // The stream's OK arrives in its trailers.
    assert_eq!(
        get(
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/WatchJourney",code="OK"}"#
        ),
        1.0
    );
    assert_eq!(
        get(r#"idgate_rpc_requests_total{method="_OTHER",code="UNIMPLEMENTED"}"#),
        1.0
    );
    assert!(!m.contains("j-made-up"), "{m}");
    assert_eq!(
        get(&format!(r#"idgate_rpc_in_flight{{method="{CREATE}"}}"#)),
        0.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="200"}"#
        ),
        2.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="503"}"#
        ),
        1.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_duration_seconds_count{operation="liveness_3d",channel="primary",status="200"}"#
        ),
        2.0
    );
    assert_eq!(
        get(r#"idgate_channel_circuit_state{channel="primary"}"#),
        0.0
    );
    // The /metrics request itself is in flight while it is answered.
    assert_eq!(get("idgate_http_in_flight"), 1.0);
    h.finish().await;
}

#[tokio::test]
async fn secrets_in_metadata_urls_and_values_reach_no_log_or_span() {
    let h = start().await;
    h.client()
        .await
        .create_journey(h.traced(CreateJourneyRequest::default()))
        .await
        .expect("CreateJourney");
    let spans = h
        .spans_where(&[
            ("gRPC server span", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
        ])
        .await;

    let logs = h.traced.logs.contents();
    // The logs are there, with the journey and the span context...
    assert!(logs.contains("calling upstream"), "{logs}");
    assert!(logs.contains(journey().as_str()), "{logs}");
    // ...and nothing secret.
    for secret in [SECRET_APPKEY, SECRET_BEARER] {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
        for span in &spans {
            let dump = format!("{span:?}");
            assert!(!dump.contains(secret), "{secret} on span {dump}");
        }
    }
    h.finish().await;
}
