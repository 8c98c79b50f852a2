//! Telemetry end to end: a caller with a `traceparent` calls a tonic server
//! behind `GrpcServerLayer`; its handler calls an axum "upstream" behind
//! `HttpServerLayer` through `UpstreamCall`; spans go over real OTLP/gRPC to
//! an in-process collector, metrics to `GET /metrics`.
//!
//! Each test installs its own subscriber for its own thread and runs its
//! servers on its current-thread runtime ([`Traced::start`]), so tests do
//! not share telemetry. This file holds what the modules share: the
//! gateway and upstream stand-ins, the harness and the span matchers.

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
    net::{bind_loopback, http_client, serve},
    otlp_collector::{CollectedSpan, kind},
    telemetry::Traced,
};

mod metrics;
mod redaction;
mod traces;

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
