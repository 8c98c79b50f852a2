//! Connection age (`[serving] max_connection_age_secs`): gRPC callers keep
//! one HTTP/2 connection for hours, so without an age every caller stays
//! on the replica it first reached and replicas added later (by the HPA,
//! by a rollout) never see it. At its age, give or take 10 %, a connection
//! is told to go away: the caller's channel opens a new connection for its
//! next call, which the Service spreads like any other. This is grpc-go's
//! `MaxConnectionAge` / `MaxConnectionAgeGrace` (gRFC A9).
//!
//! # The rotation sequence
//!
//! What goes on the wire (HTTP/2's graceful shutdown, RFC 9113 §6.8, as
//! h2 implements it behind hyper's `graceful_shutdown`):
//!
//! 1. At the age, the connection's `WatchJourney` streams end between two
//!    messages with `UNAVAILABLE` / `CONNECTION_AGED` trailers
//!    (`server/stream_age.rs`), and the connection sends a GOAWAY whose
//!    last stream id is 2^31-1 (it refuses nothing: it says "open no new
//!    stream here") and a PING.
//! 2. Every stream that arrives before the PING's acknowledgement is
//!    served: the client sent it before it read the GOAWAY. (A stream
//!    opened on an aged connection is served as usual; a `WatchJourney`
//!    among them ends `CONNECTION_AGED` at once.)
//! 3. On the acknowledgement, a second GOAWAY with the real last stream
//!    id. A conformant client sends nothing after the first, so none is
//!    above it; one that did would know from it that the stream was never
//!    processed, and may send it again elsewhere.
//! 4. The calls in flight finish, and the connection closes when the last
//!    has. A client that never acknowledges the PING, or calls that run
//!    past `max_connection_age_grace_secs`, are cut when the grace ends:
//!    the connection's [`Conn`](super::super::connections) closes its
//!    socket outright. That is the only place the gateway closes a
//!    connection under a stream it accepted.
//!
//! So no stream fails that the client put on the wire before it read the
//! GOAWAY. A client may still lose a call it had only queued: tonic's
//! `Channel` queues it on the connection that has just read the GOAWAY,
//! and hyper drops it there unsent (`CANCELLED`, "connection closed");
//! `idgate::client` says why, and its `ResendingChannel` sends such a call
//! again on a new connection. No server can prevent that loss: the call
//! never reaches it.
//!
//! Each connection is served by a tonic server of its own, whose shutdown
//! signal is that connection's age (or the listener's stop): the server
//! then calls `graceful_shutdown` on its one connection and returns when
//! the connection has closed. tonic's own `max_connection_age` gives every
//! connection the same age and, with a grace set, closes the connection
//! without a GOAWAY first.

use std::{
    future::{Future, pending},
    io,
    pin::pin,
    sync::Arc,
};

use futures_util::{Stream, StreamExt, stream};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
    task::JoinSet,
};
use tonic::transport::server::{Connected, Router as TonicRouter};
use tower::Layer;

use crate::{
    net::ConnectionAge,
    server::connections::{Conn, ConnectionGate},
    telemetry::Metrics,
};

/// A connection whose age the accept loop reads: a plain [`Conn`], or one
/// after its TLS handshake.
pub(super) trait Aging {
    /// The connection's age and phase.
    fn age(&self) -> Arc<ConnectionAge>;
}

impl Aging for Conn {
    fn age(&self) -> Arc<ConnectionAge> {
        self.info().age
    }
}

impl Aging for tokio_rustls::server::TlsStream<Conn> {
    fn age(&self) -> Arc<ConnectionAge> {
        self.get_ref().0.info().age
    }
}

/// Counts the connections of one listener that reached their age open.
#[derive(Clone)]
pub(super) struct AgedCount {
    listener: &'static str,
    metrics: Metrics,
}

impl AgedCount {
    /// The count of `gate`'s listener.
    pub(super) fn of(gate: &ConnectionGate) -> Self {
        let (listener, metrics) = gate.metrics();
        Self { listener, metrics }
    }
}

/// Serves `router` on each connection `incoming` yields, one tonic server
/// per connection whose shutdown is that connection's age or `stopped`;
/// on `stopped`, stops accepting (dropping `incoming` closes the socket)
/// and returns when every connection has closed (the caller bounds that
/// wait with the shutdown grace and the kill switch).
pub(super) async fn serve_each<L, ResBody, I, IO>(
    router: TonicRouter<L>,
    incoming: I,
    aged: AgedCount,
    stopped: watch::Receiver<bool>,
) where
    I: Stream<Item = io::Result<IO>>,
    IO: AsyncRead + AsyncWrite + Connected + Aging + Unpin + Send + 'static,
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
    let mut connections = JoinSet::new();
    {
        let mut incoming = pin!(incoming);
        let mut stop = pin!(until_stopped(stopped.clone()));
        loop {
            tokio::select! {
                () = &mut stop => break,
                // Reaps the tasks of closed connections as they end.
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                next = incoming.next() => match next {
                    Some(Ok(io)) => {
                        connections.spawn(serve_one(
                            router.clone(),
                            io,
                            aged.clone(),
                            stopped.clone(),
                        ));
                    }
                    Some(Err(e)) => tracing::debug!(error = %e, "accept failed"),
                    None => break,
                },
            }
        }
    }
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until it closes: at its age (or on `stopped`)
/// the server's graceful shutdown sends GOAWAY and waits for the calls in
/// flight, which the connection's own expiry bounds.
async fn serve_one<L, ResBody, IO>(
    router: TonicRouter<L>,
    io: IO,
    aged: AgedCount,
    stopped: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Connected + Aging + Unpin + Send + 'static,
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
    let age = io.age();
    // One connection, then nothing more: the server keeps serving it until
    // the signal (an ended stream would shut it down at once).
    let one = stream::once(async { Ok::<_, io::Error>(io) }).chain(stream::pending());
    let signal = go_away_when(age, aged, stopped);
    if let Err(e) = router.serve_with_incoming_shutdown(one, signal).await {
        tracing::debug!(error = %e, "connection failed");
    }
}

/// Resolves when the connection must be told to go away (its age, counted;
/// told sooner, by [`ConnectionAge::go_away`]; or the listener's stop), or
/// has closed by itself.
fn go_away_when(
    age: Arc<ConnectionAge>,
    aged: AgedCount,
    stopped: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let past_open = age.past_open();
    async move {
        let until_aged = async {
            match age.aged_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => pending().await,
            }
        };
        tokio::select! {
            () = until_aged => {
                if age.age() {
                    aged.metrics.record_connection_aged(aged.listener);
                    tracing::debug!(listener = aged.listener, "connection aged: GOAWAY");
                }
            }
            () = until_stopped(stopped) => {}
            _ = past_open => {}
        }
    }
}

async fn until_stopped(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}
