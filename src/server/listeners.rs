//! The three listeners: the public gRPC API (with health and reflection),
//! the HTTP listener (webhook receiver, `/metrics`, `/healthz`) and the
//! admin gRPC listener (`ChannelAdminService`, behind a bearer token).
//! Both gRPC listeners serve reflection (`reflection`) for what they serve.
//! Each is served on an already bound socket until `stopped` turns true.

use std::{net::SocketAddr, sync::Arc};

use axum::{Router, extract::State, response::Response, routing::get, serve::Listener};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::watch,
    task::JoinHandle,
};
use tokio_stream::Stream;
use tonic::{
    server::NamedService,
    transport::{Server, server::Connected},
};

use super::{StartError, reflection::add_reflection};
use crate::{
    api::{AdminServer, DocumentApi, JourneyApi, LivenessApi, admin_service},
    channels::ChannelRouter,
    domain::AdminToken,
    events::{RejectReason, WebhookReceiver},
    proto::{
        FILE_DESCRIPTOR_SET,
        v1::{
            document_service_server::{DocumentService, DocumentServiceServer},
            journey_service_server::{JourneyService, JourneyServiceServer},
            liveness_service_server::{LivenessService, LivenessServiceServer},
        },
    },
    telemetry::{self, GrpcServerLayer, HttpServerLayer, Metrics},
};

/// Binds `addr` for the listener `what`.
pub(super) async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
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

/// Serves the public API, health and reflection on `incoming` (plain TCP
/// from [`incoming`], or [`crate::tls::TlsIncoming`]).
pub(super) async fn serve_public<I, IO, IE>(
    incoming: I,
    api: PublicApi,
    layer: GrpcServerLayer,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError>
where
    I: Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
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
    let grpc = Server::builder().layer(layer).add_service(health);
    let grpc = add_reflection(
        grpc,
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
    .add_service(DocumentServiceServer::new(api.documents).limits(max))
    .serve_with_incoming_shutdown(incoming, wait(stopped));
    Ok(tokio::spawn(async move {
        if let Err(e) = grpc.await {
            tracing::error!(error = %e, "gRPC listener failed");
        }
    }))
}

/// Serves `/healthz`, `/metrics` and, when configured, the webhook
/// receiver on `listener` (a `TcpListener` tapped with `no_delay`, or
/// [`crate::tls::TlsIncoming`]).
pub(super) fn serve_http<L>(
    listener: L,
    receiver: Option<WebhookReceiver>,
    router: Arc<ChannelRouter>,
    metrics: Metrics,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<()>
where
    L: Listener<Addr = SocketAddr>,
{
    let mut http = Router::new().route("/healthz", get(|| async { "ok" }));
    if let Some(receiver) = &receiver {
        http = http.merge(receiver.router());
    }
    let scrape = Scrape {
        metrics: metrics.clone(),
        router,
        receiver,
    };
    let http = http
        .route("/metrics", get(scrape_metrics).with_state(scrape))
        .layer(HttpServerLayer::with_metrics(metrics));
    tokio::spawn(async move {
        let served = axum::serve(listener, http)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "HTTP listener failed");
        }
    })
}

/// Serves `ChannelAdminService` behind `token` on `incoming`.
pub(super) fn serve_admin<I, IO, IE>(
    incoming: I,
    router: Arc<ChannelRouter>,
    token: &AdminToken,
    layer: GrpcServerLayer,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError>
where
    I: Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let admin = Server::builder()
        .layer(layer)
        .add_service(admin_service(router, token));
    let admin = add_reflection(
        admin,
        &[<AdminServer as NamedService>::NAME],
        &[FILE_DESCRIPTOR_SET],
    )?
    .serve_with_incoming_shutdown(incoming, wait(stopped));
    Ok(tokio::spawn(async move {
        if let Err(e) = admin.await {
            tracing::error!(error = %e, "admin listener failed");
        }
    }))
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
}

/// Brings the counters kept by the router and the webhook receiver into
/// the registry, then encodes it.
async fn scrape_metrics(State(s): State<Scrape>) -> Response {
    for ch in s.router.snapshot().channels {
        s.metrics.sync_channel_failovers(&ch.name, ch.failovers);
        s.metrics
            .set_channel_circuit_state(&ch.name, ch.circuit.gauge_value());
    }
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
