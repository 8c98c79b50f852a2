//! Serving the two gRPC listeners: the public API (with health and
//! reflection, behind admission and caller authentication, on the serving
//! runtime's threads) and
//! the admin listener (on the process runtime).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle};
use tonic::{
    server::NamedService,
    transport::{Server, server::Router as TonicRouter},
};
use tower::Layer;

use super::{
    Accept,
    aging::{AgedCount, serve_each},
};
use crate::{
    api::{
        AdminServer, AdmissionLayer, ChannelAdmin, DocumentApi, JourneyApi, LivenessApi,
        admin_auth_interceptor,
    },
    auth::AuthLayer,
    config::ServingConfig,
    domain::AdminToken,
    proto::{
        FILE_DESCRIPTOR_SET,
        services::{
            ChannelAdminServiceServer, DocumentService, DocumentServiceServer, JourneyService,
            JourneyServiceServer, LivenessService, LivenessServiceServer,
        },
    },
    server::{
        StartError,
        connections::ConnectionGate,
        edge::{EdgeLayer, EdgeLimits},
        reflection::{add_reflection, add_reflection_behind},
        runtime::ServingRuntime,
    },
    telemetry::{GrpcServerLayer, Metrics},
    tls::{ServerTls, TlsIncoming},
};

/// The public API's services.
pub(in crate::server) struct PublicApi {
    pub(in crate::server) journeys: JourneyApi,
    pub(in crate::server) liveness: LivenessApi,
    pub(in crate::server) documents: DocumentApi,
    /// Caller authentication, before every handler but health.
    pub(in crate::server) auth: AuthLayer,
    /// The one door of the public RPCs, after authentication.
    pub(in crate::server) admission: AdmissionLayer,
    /// Largest message decoded (the document service) or encoded (every
    /// service: a result carries images).
    pub(in crate::server) max_message_bytes: usize,
    /// Largest message the journey and liveness services decode.
    pub(in crate::server) max_small_message_bytes: usize,
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

/// Serves the public API, health and reflection (v1 and v1alpha) on the
/// threads of `runtime`; the returned reporter is what the drain flips to
/// NOT_SERVING.
pub(in crate::server) async fn serve_public(
    accept: Accept,
    api: PublicApi,
    serving: &ServingConfig,
    runtime: &ServingRuntime,
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
    let (max, small) = (api.max_message_bytes, api.max_small_message_bytes);
    let edge = EdgeLayer::new(
        EdgeLimits {
            max_in_flight: serving.max_in_flight,
            max_streams: serving.max_streams,
            max_streams_per_connection: serving.max_streams_per_connection,
            max_service_streams: serving.max_service_streams,
            max_service_streams_per_connection: serving.max_service_streams_per_connection,
            request_body_timeout: Duration::from_millis(serving.request_body_timeout_ms),
            max_message_bytes: max,
            max_small_message_bytes: api.max_small_message_bytes,
        },
        metrics,
        runtime.call_events(),
    );
    let router = grpc_server(serving)
        .layer(layer)
        .layer(edge)
        .layer(api.auth)
        .layer(api.admission)
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
    .add_service(JourneyServiceServer::new(api.journeys).limits(small, max))
    .add_service(LivenessServiceServer::new(api.liveness).limits(small, max))
    .add_service(DocumentServiceServer::new(api.documents).limits(max, max));
    Ok((
        serve_grpc("gRPC", router, accept, stopped, Some(runtime))?,
        health_reporter,
    ))
}

/// Serves `ChannelAdminService` behind `token`, with reflection of it
/// alone, behind the same token; refusals of either counted in `metrics`.
pub(in crate::server) fn serve_admin(
    accept: Accept,
    admin: ChannelAdmin,
    token: &AdminToken,
    serving: &ServingConfig,
    layer: GrpcServerLayer,
    metrics: Metrics,
    stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError> {
    let auth = admin_auth_interceptor(token).counted(metrics);
    let router =
        grpc_server(serving)
            .layer(layer)
            .add_service(ChannelAdminServiceServer::with_interceptor(
                admin,
                auth.clone(),
            ));
    let router = add_reflection_behind(
        router,
        &[<AdminServer as NamedService>::NAME],
        &[FILE_DESCRIPTOR_SET],
        auth,
    )?;
    serve_grpc("admin", router, accept, stopped, None)
}

/// Runs a tonic router on the connections the gate admits (after their TLS
/// handshake, when configured) until `stopped`, then drains: no new
/// connections, GOAWAY on open ones, and the task ends when they have
/// closed (the caller bounds that wait). Each connection also goes away
/// at its age (`aging`). With `runtime`, on its serving
/// threads; without, on the runtime of the caller.
fn serve_grpc<L, ResBody>(
    what: &'static str,
    router: TonicRouter<L>,
    accept: Accept,
    stopped: watch::Receiver<bool>,
    runtime: Option<&ServingRuntime>,
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
    let Some(runtime) = runtime else {
        return Ok(tokio::spawn(serve_incoming(
            router,
            accept.gate,
            accept.listener,
            accept.tls,
            stopped,
        )));
    };
    let addr = accept.listener.local_addr().ok();
    let (gate, tls) = (accept.gate, accept.tls);
    runtime
        .serve("idgate-grpc", accept.listener, move |listener| {
            let (router, gate, tls, stopped) =
                (router.clone(), gate.clone(), tls.clone(), stopped.clone());
            serve_incoming(router, gate, listener, tls, stopped)
        })
        .map_err(|source| StartError::Bind {
            what,
            addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        })
}

/// Serves `router` on what `gate` admits from `listener` (after the TLS
/// handshake, when configured) until `stopped`, each connection until its
/// age (`aging`).
async fn serve_incoming<L, ResBody>(
    router: TonicRouter<L>,
    gate: ConnectionGate,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<ServerTls>>,
    stopped: watch::Receiver<bool>,
) where
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
    let aged = AgedCount::of(&gate);
    let handshakes = gate.handshake_events();
    let accepted = gate.incoming(listener);
    match tls {
        None => serve_each(router, accepted, aged, stopped).await,
        Some(tls) => {
            serve_each(
                router,
                TlsIncoming::from_stream(accepted, tls, handshakes),
                aged,
                stopped,
            )
            .await;
        }
    }
}

/// The generated servers' size setters, behind one name. The admission
/// door refuses a message over its RPC's limit from its length prefix;
/// tonic's decoding limit is the same, and also bounds a compressed
/// message once decompressed.
trait MessageLimits {
    /// Caps decoded messages at `decoded` bytes, encoded ones at
    /// `encoded`.
    fn limits(self, decoded: usize, encoded: usize) -> Self;
}

macro_rules! message_limits {
    ($($server:ident<$svc:ident>),*) => {$(
        impl<T: $svc> MessageLimits for $server<T> {
            fn limits(self, decoded: usize, encoded: usize) -> Self {
                self.max_decoding_message_size(decoded).max_encoding_message_size(encoded)
            }
        }
    )*};
}

message_limits!(
    JourneyServiceServer<JourneyService>,
    LivenessServiceServer<LivenessService>,
    DocumentServiceServer<DocumentService>
);
