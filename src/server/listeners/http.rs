//! The HTTP listener: its routes (`/healthz`, `/metrics`, the webhook
//! receiver when configured) and its accept loop, each connection served
//! by hyper and counted on its connection's activity.
//!
//! Requests in flight share one cap (`[serving] http_max_in_flight`), as
//! gRPC calls do at admission: past it a request is answered 503 with
//! `Retry-After` at once, nothing queued. `/healthz` is never refused, so
//! a load balancer still sees the truth under load.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::{Request, State},
    middleware::{self, Next},
    response::{IntoResponse as _, Response},
    routing::get,
};
use futures_util::StreamExt as _;
use http::StatusCode;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{
    sync::{Semaphore, watch},
    task::JoinHandle,
};
use tower::ServiceExt as _;

use super::{Accept, scrape::Scrape};
use crate::{
    config::ServingConfig,
    events::WebhookReceiver,
    net::held::holding,
    server::connections::{Activity, Conn},
    telemetry::{HttpServerLayer, Metrics},
    tls::TlsIncoming,
};

/// Whether the HTTP listener reports healthy: false from the stop signal.
pub(in crate::server) type Readiness = watch::Receiver<bool>;

/// The path never refused by the in-flight cap.
const HEALTHZ: &str = "/healthz";

/// The HTTP listener's routes: `/healthz` (`ready`), `/metrics`
/// (`scrape`), and the webhook receiver when there is one; at most
/// `max_in_flight` requests at once but for `/healthz`; every request
/// traced and counted in `metrics`.
pub(in crate::server) fn app(
    ready: Readiness,
    receiver: Option<&WebhookReceiver>,
    scrape: Scrape,
    metrics: Metrics,
    max_in_flight: usize,
) -> Router {
    let mut http = Router::new().route(HEALTHZ, get(healthz).with_state(ready));
    if let Some(receiver) = receiver {
        http = http.merge(receiver.router());
    }
    let cap = InFlightCap {
        slots: Arc::new(Semaphore::new(
            max_in_flight.clamp(1, Semaphore::MAX_PERMITS),
        )),
        metrics: metrics.clone(),
    };
    http.route("/metrics", scrape.route())
        .layer(middleware::from_fn_with_state(cap, in_flight_cap))
        .layer(HttpServerLayer::with_metrics(metrics))
}

/// The HTTP listener's slots for requests in flight.
#[derive(Clone)]
struct InFlightCap {
    slots: Arc<Semaphore>,
    metrics: Metrics,
}

/// Admits a request if a slot is free (held until its response body ends),
/// else answers 503 at once; `/healthz` always passes.
async fn in_flight_cap(State(cap): State<InFlightCap>, request: Request, next: Next) -> Response {
    if request.uri().path() == HEALTHZ {
        return next.run(request).await;
    }
    let Ok(slot) = cap.slots.try_acquire_owned() else {
        cap.metrics.record_http_shed();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(http::header::RETRY_AFTER, "1")],
            "overloaded: too many requests in flight; retry later\n",
        )
            .into_response();
    };
    next.run(request)
        .await
        .map(|body| axum::body::Body::new(holding(body, slot)))
}

/// Serves `app` on the connections `accept`'s gate admits, with HTTP/1's
/// head read bounded by `header_read_timeout`, until `stopped`.
pub(in crate::server) fn serve_http(
    accept: Accept,
    app: Router,
    serving: &ServingConfig,
    stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
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
    let handshakes = accept.gate.handshake_events();
    let accepted = accept.gate.incoming(accept.listener);
    match accept.tls {
        // With TLS configured, never plain text: every connection goes
        // through the handshake.
        Some(tls) => tokio::spawn(serve_connections(
            TlsIncoming::from_stream(accepted, tls, handshakes),
            app,
            builder,
            stopped,
        )),
        None => tokio::spawn(serve_connections(accepted, app, builder, stopped)),
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

/// The accept loop: each connection served by `builder` with `app`, every
/// request counted on its connection's activity; on `stopped`, stop
/// accepting and let open connections finish.
async fn serve_connections<I, IO, E>(
    incoming: I,
    app: Router,
    builder: auto::Builder<TokioExecutor>,
    mut stopped: watch::Receiver<bool>,
) where
    I: futures_util::Stream<Item = Result<IO, E>> + Send + 'static,
    IO: Served,
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
                    Ok::<_, Infallible>(response.map(|b| axum::body::Body::new(holding(b, active))))
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
    // Stop accepting (the listener is dropped with `incoming`), ask open
    // connections to finish, and wait for them.
    drop(incoming);
    graceful.shutdown().await;
}

/// `GET /healthz`: 200 while serving, 503 once draining.
async fn healthz(State(ready): State<Readiness>) -> (StatusCode, &'static str) {
    if *ready.borrow() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    }
}
