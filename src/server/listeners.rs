//! The three listeners: the public gRPC API (with health and reflection),
//! the HTTP listener (webhook receiver, `/metrics`, `/healthz`) and the
//! admin gRPC listener (`ChannelAdminService`, behind a bearer token).
//! Each is served on an already bound socket until `stopped` turns true.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use axum::{Router, extract::State, response::Response, routing::get};
use futures_util::StreamExt as _;
use http::StatusCode;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};
use tonic::{
    server::NamedService,
    transport::{Server, server::Router as TonicRouter},
};
use tower::{Layer, ServiceExt as _};

use super::{
    StartError,
    admission::{AdmissionLayer, EdgeLimits, holding},
    connections::{Activity, Conn, ConnectionGate},
    reflection::add_reflection,
    workers::ServingThreads,
};
use crate::{
    api::{AdminServer, DocumentApi, JourneyApi, LivenessApi, admin_service},
    channels::ChannelRouter,
    config::ServingConfig,
    domain::AdminToken,
    events::{JourneyHub, RejectReason, WebhookReceiver},
    proto::{
        FILE_DESCRIPTOR_SET,
        v1::{
            document_service_server::{DocumentService, DocumentServiceServer},
            journey_service_server::{JourneyService, JourneyServiceServer},
            liveness_service_server::{LivenessService, LivenessServiceServer},
        },
    },
    telemetry::{self, GrpcServerLayer, HttpServerLayer, Metrics, metrics::WatchCounts},
    tls::{ServerTls, TlsIncoming},
};

/// Binds `addr` for the listener `what`.
pub(super) async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// Binds `addr` for the listener `what` with `SO_REUSEPORT`, so that the
/// serving threads can each bind a socket of their own to the address it
/// got (see [`super::workers`]).
pub(super) fn bind_shared(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    super::workers::reuse_port_listener(addr)
        .and_then(TcpListener::from_std)
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// The address `listener` (bound for `addr`) actually got.
pub(super) fn local(
    what: &'static str,
    listener: &TcpListener,
    addr: SocketAddr,
) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// The public API's services.
pub(super) struct PublicApi {
    pub(super) journeys: JourneyApi,
    pub(super) liveness: LivenessApi,
    pub(super) documents: DocumentApi,
    /// Largest message decoded or encoded.
    pub(super) max_message_bytes: usize,
}

/// A tonic server with the per-connection limits of `serving`.
fn grpc_server(serving: &ServingConfig) -> Server {
    let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    Server::builder()
        .max_concurrent_streams(serving.max_concurrent_streams)
        .http2_keepalive_interval(secs(serving.http2_keepalive_interval_secs))
        .http2_keepalive_timeout(secs(serving.http2_keepalive_timeout_secs))
        .http2_max_header_list_size(serving.max_header_list_bytes)
}

/// Where a listener accepts: its socket, the gate its connections pass,
/// and its TLS when configured.
pub(super) struct Accept {
    pub(super) listener: TcpListener,
    pub(super) gate: ConnectionGate,
    pub(super) tls: Option<Arc<ServerTls>>,
}

/// Serves the public API, health and reflection (v1 and v1alpha); the
/// returned reporter is what the drain flips to NOT_SERVING.
pub(super) async fn serve_public(
    accept: Accept,
    api: PublicApi,
    serving: &ServingConfig,
    layer: GrpcServerLayer,
    metrics: Metrics,
    stopped: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, tonic_health::server::HealthReporter), StartError> {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<JourneyServiceServer<JourneyApi>>()
        .await;
    health_reporter
        .set_serving::<LivenessServiceServer<LivenessApi>>()
        .await;
    health_reporter
        .set_serving::<DocumentServiceServer<DocumentApi>>()
        .await;
    let max = api.max_message_bytes;
    let edge = AdmissionLayer::new(
        EdgeLimits {
            max_in_flight: serving.max_in_flight,
            max_streams: serving.max_streams,
            request_body_timeout: Duration::from_millis(serving.request_body_timeout_ms),
            max_message_bytes: max,
        },
        metrics.clone(),
    );
    let router = grpc_server(serving)
        .layer(layer)
        .layer(edge)
        .add_service(health);
    // Reflection lists what this listener serves, and nothing else.
    let router = add_reflection(
        router,
        &[
            <JourneyServiceServer<JourneyApi> as NamedService>::NAME,
            <LivenessServiceServer<LivenessApi> as NamedService>::NAME,
            <DocumentServiceServer<DocumentApi> as NamedService>::NAME,
            "grpc.health.v1.Health",
        ],
        &[FILE_DESCRIPTOR_SET, tonic_health::pb::FILE_DESCRIPTOR_SET],
    )?
    .add_service(JourneyServiceServer::new(api.journeys).limits(max))
    .add_service(LivenessServiceServer::new(api.liveness).limits(max))
    .add_service(DocumentServiceServer::new(api.documents).limits(max));
    Ok((
        serve_grpc(
            "gRPC",
            router,
            accept,
            stopped,
            Some(ServingThreads::from_config(serving, &metrics)),
        )?,
        health_reporter,
    ))
}

/// Serves `ChannelAdminService` behind `token`, with reflection of it
/// alone.
pub(super) fn serve_admin(
    accept: Accept,
    router: Arc<ChannelRouter>,
    token: &AdminToken,
    serving: &ServingConfig,
    layer: GrpcServerLayer,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError> {
    let router = grpc_server(serving)
        .layer(layer)
        .add_service(admin_service(router, token));
    let router = add_reflection(
        router,
        &[<AdminServer as NamedService>::NAME],
        &[FILE_DESCRIPTOR_SET],
    )?;
    serve_grpc("admin", router, accept, stopped, None)
}

/// Runs a tonic router on the connections the gate admits (after their TLS
/// handshake, when configured) until `stopped`, then drains: no new
/// connections, GOAWAY on open ones, and the task ends when they have
/// closed (the caller bounds that wait). With `threads`, on serving
/// threads of their own ([`super::workers`]); without, on the runtime of
/// the caller.
fn serve_grpc<L, ResBody>(
    what: &'static str,
    router: TonicRouter<L>,
    accept: Accept,
    stopped: watch::Receiver<bool>,
    threads: Option<ServingThreads>,
) -> Result<JoinHandle<()>, StartError>
where
    L: Layer<tonic::service::Routes> + Clone + Send + 'static,
    L::Service: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Future: Send,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Error:
        Into<tonic::codegen::StdError> + Send,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    let Some(threads) = threads else {
        let served = tokio::spawn(serve_incoming(
            router,
            accept.gate,
            accept.listener,
            accept.tls,
            stopped,
        ));
        return Ok(tokio::spawn(async move {
            if let Ok(Err(e)) = served.await {
                tracing::error!(listener = what, error = %e, "listener failed");
            }
        }));
    };
    let addr = accept.listener.local_addr().ok();
    let (gate, tls) = (accept.gate, accept.tls);
    super::workers::spawn("idgate-grpc", accept.listener, threads, move |listener| {
        let (router, gate, tls, stopped) =
            (router.clone(), gate.clone(), tls.clone(), stopped.clone());
        async move {
            if let Err(e) = serve_incoming(router, gate, listener, tls, stopped).await {
                tracing::error!(listener = what, error = %e, "listener failed");
            }
        }
    })
    .map_err(|source| StartError::Bind {
        what,
        addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        source,
    })
}

/// Serves `router` on what `gate` admits from `listener` until `stopped`.
async fn serve_incoming<L, ResBody>(
    router: TonicRouter<L>,
    gate: ConnectionGate,
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    stopped: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error>
where
    L: Layer<tonic::service::Routes> + Send + 'static,
    L::Service: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Future: Send,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Error:
        Into<tonic::codegen::StdError> + Send,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    let accepted = gate.incoming(listener);
    match tls {
        None => {
            router
                .serve_with_incoming_shutdown(accepted, wait(stopped))
                .await
        }
        Some(tls) => {
            router
                .serve_with_incoming_shutdown(
                    TlsIncoming::from_stream(accepted, tls),
                    wait(stopped),
                )
                .await
        }
    }
}

/// A connection the HTTP listener serves: plain, or after TLS.
trait Served: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {
    /// The connection's requests in flight, for its idle timeout.
    fn activity(&self) -> Arc<Activity>;
}

impl Served for Conn {
    fn activity(&self) -> Arc<Activity> {
        self.info().activity
    }
}

impl Served for tokio_rustls::server::TlsStream<Conn> {
    fn activity(&self) -> Arc<Activity> {
        self.get_ref().0.info().activity
    }
}

/// Whether the HTTP listener reports healthy: false from the stop signal.
pub(super) type Readiness = watch::Receiver<bool>;

/// Serves `/healthz`, `/metrics` and, when configured, the webhook
/// receiver on the connections `gate` admits, with HTTP/1's head read
/// bounded by `header_read_timeout`.
#[allow(clippy::too_many_arguments)]
pub(super) fn serve_http(
    accept: Accept,
    receiver: Option<WebhookReceiver>,
    router: Arc<ChannelRouter>,
    hub: JourneyHub,
    serving: &ServingConfig,
    metrics: Metrics,
    ready: Readiness,
    stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let mut http = Router::new().route("/healthz", get(healthz).with_state(ready));
    if let Some(receiver) = &receiver {
        http = http.merge(receiver.router());
    }
    let scrape = Scrape {
        metrics: metrics.clone(),
        router,
        receiver,
        hub,
    };
    let app = http
        .route("/metrics", get(scrape_metrics).with_state(scrape))
        .layer(HttpServerLayer::with_metrics(metrics));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(serving.header_read_timeout_ms));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(serving.max_concurrent_streams)
        .max_header_list_size(serving.max_header_list_bytes);
    let accepted = accept.gate.incoming(accept.listener);
    match accept.tls {
        // With TLS configured, never plain text: every connection goes
        // through the handshake.
        Some(tls) => tokio::spawn(serve_http_connections(
            TlsIncoming::from_stream(accepted, tls),
            app,
            builder,
            stopped,
        )),
        None => tokio::spawn(serve_http_connections(accepted, app, builder, stopped)),
    }
}

/// The HTTP listener's accept loop: each connection served by `builder`
/// with `app`, every request counted on its connection's activity; on
/// `stopped`, stop accepting and let open connections finish.
async fn serve_http_connections<I, IO, E>(
    incoming: I,
    app: Router,
    builder: auto::Builder<TokioExecutor>,
    mut stopped: watch::Receiver<bool>,
) where
    I: futures_util::Stream<Item = Result<IO, E>> + Send + 'static,
    IO: Served,
{
    {
        let graceful = GracefulShutdown::new();
        let mut incoming = Box::pin(incoming);
        loop {
            let conn = tokio::select! {
                conn = incoming.next() => conn,
                _ = stopped.wait_for(|s| *s) => break,
            };
            let Some(Ok(conn)) = conn else { break };
            let activity = conn.activity();
            let app = app.clone();
            let service =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let active = activity.start();
                    let call = app.clone().oneshot(request.map(axum::body::Body::new));
                    async move {
                        let response = call.await?;
                        Ok::<_, Infallible>(
                            response.map(|b| axum::body::Body::new(holding(b, active))),
                        )
                    }
                });
            let connection = builder
                .serve_connection(TokioIo::new(conn), service)
                .into_owned();
            let watched = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = watched.await {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
            });
        }
        // Stop accepting (the listener is dropped with `incoming`), ask
        // open connections to finish, and wait for them.
        drop(incoming);
        graceful.shutdown().await;
    }
}

/// `GET /healthz`: 200 while serving, 503 once draining.
async fn healthz(State(ready): State<Readiness>) -> (StatusCode, &'static str) {
    if *ready.borrow() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    }
}

/// The generated servers' size setters, behind one name.
trait MessageLimits {
    /// Caps decoded and encoded messages at `max` bytes.
    fn limits(self, max: usize) -> Self;
}

macro_rules! message_limits {
    ($($server:ident<$svc:ident>),*) => {$(
        impl<T: $svc> MessageLimits for $server<T> {
            fn limits(self, max: usize) -> Self {
                self.max_decoding_message_size(max).max_encoding_message_size(max)
            }
        }
    )*};
}

message_limits!(
    JourneyServiceServer<JourneyService>,
    LivenessServiceServer<LivenessService>,
    DocumentServiceServer<DocumentService>
);

async fn wait(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// What `/metrics` reads at scrape time.
#[derive(Clone)]
struct Scrape {
    metrics: Metrics,
    router: Arc<ChannelRouter>,
    receiver: Option<WebhookReceiver>,
    hub: JourneyHub,
}

/// Sets the channels' circuit states and brings the counters kept by the
/// webhook receiver and the journey hub into the registry, then encodes
/// it. (The router counts its channel series as each call ends.)
async fn scrape_metrics(State(s): State<Scrape>) -> Response {
    for ch in s.router.snapshot().channels {
        s.metrics
            .set_channel_circuit_state(&ch.name, ch.circuit.gauge_value());
    }
    let hub = s.hub.stats();
    s.metrics.sync_watch(WatchCounts {
        journeys: hub.journeys,
        watchers: hub.watchers,
        result_reads: hub.result_reads,
        notice_timeouts: hub.notice_timeouts,
    });
    if let Some(r) = &s.receiver {
        let stats = r.stats();
        s.metrics.sync_webhooks("received", stats.received);
        s.metrics.sync_webhooks("accepted", stats.accepted);
        s.metrics.sync_webhooks("duplicate", stats.duplicates);
        for reason in RejectReason::ALL {
            s.metrics
                .sync_webhooks(reason.metric_label(), stats.rejected(reason));
        }
    }
    telemetry::metrics_handler(State(s.metrics)).await
}
