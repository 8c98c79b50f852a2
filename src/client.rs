//! A transport for Rust callers of the gateway (the generated tonic
//! clients) that loses no call when the gateway ages a connection
//! (`[serving] max_connection_age_secs`, `server/listeners/aging.rs`).
//!
//! The gateway ages a connection with HTTP/2's graceful sequence: a GOAWAY
//! that refuses nothing (last stream id 2^31-1) and a PING, then, once the
//! PING is acknowledged, the GOAWAY with the real last stream id. Every
//! stream the client has put on the wire before it read the first GOAWAY
//! is served. tonic's `Channel` still fails a call at that moment: it
//! hands a call to the connection's dispatch queue (hyper's
//! `client::conn::http2::SendRequest`) while the connection has read the
//! GOAWAY and its dispatcher has not yet noticed; the dispatcher then
//! drops what is queued, and the call ends `CANCELLED` ("operation was
//! canceled: connection closed") without a byte of it having been sent.
//! The dispatcher notices only when the connection closes or the next call
//! arrives, so while another stream (a slow call, a watch) keeps an aged
//! connection open, the next call on it fails every time.
//!
//! A call can also be written just after the GOAWAY: h2 acknowledges the
//! gateway's PING before it writes the streams its caller opened a moment
//! earlier, so they reach the gateway after the acknowledgement, above the
//! final GOAWAY's last stream id, and are not processed; the caller sees
//! `INTERNAL` ("http2 error", a GOAWAY with NO_ERROR). RFC 9113 §6.8 says
//! such a stream may be sent again: the GOAWAY proves it was never
//! processed.
//!
//! [`ResendingChannel`] sends its calls through hyper-util's pooled client,
//! which takes the first kind back and sends it again on a new connection
//! (`retry_canceled_requests`), and sends the second kind again itself,
//! from the request it kept. Both are safe for any call, `CreateJourney`
//! and the liveness proof included: neither was ever processed. grpc-go
//! and grpc-java do the same on their own ("transparent retry"); tonic's
//! `Channel` does neither.
//!
//! To send a request again, the channel keeps its body: idgate's requests
//! are each one message, so the body is read whole before the call is
//! sent. A client-streaming RPC would wait there for its last message:
//! this channel is for idgate's API, which has none.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{Request, Response, Uri, request, uri::Parts};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::{
    client::legacy::{
        Client,
        connect::{Connect, HttpConnector},
    },
    rt::{TokioExecutor, TokioTimer},
};
use tonic::{Status, body::Body};

/// How many times one call is sent at most, when the gateway's GOAWAY says
/// it was not processed: each send goes on a newer connection, and a
/// connection ages once.
const MAX_SENDS: usize = 3;

/// Why a [`ResendingChannel`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The origin lacks a scheme or an authority (`http://host:port`).
    #[error("{origin} is not an origin (scheme://host:port)")]
    NotAnOrigin {
        /// The origin as given.
        origin: Uri,
    },
}

/// A tonic transport to one gateway origin that sends again, on a new
/// connection, a call its connection handed back unsent (see the module
/// doc). Cheap to clone: clones share the connection pool. Give it to a
/// generated client: `JourneyServiceClient::new(channel)`.
#[derive(Clone, Debug)]
pub struct ResendingChannel<C = HttpConnector> {
    client: Client<C, Body>,
    origin: Uri,
}

impl ResendingChannel<HttpConnector> {
    /// A channel to `origin` (`http://host:port`) over plaintext HTTP/2
    /// (prior knowledge), with `TCP_NODELAY`.
    pub fn plaintext(origin: Uri) -> Result<Self, ChannelError> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self::with_connector(origin, connector)
    }
}

impl<C> ResendingChannel<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// A channel to `origin` whose connections `connector` opens (a
    /// `hyper_rustls::HttpsConnector` with HTTP/2 enabled for TLS).
    pub fn with_connector(origin: Uri, connector: C) -> Result<Self, ChannelError> {
        if origin.scheme().is_none() || origin.authority().is_none() {
            return Err(ChannelError::NotAnOrigin { origin });
        }
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            // The point of this type; hyper-util's default, said here.
            .retry_canceled_requests(true)
            .build(connector);
        Ok(Self { client, origin })
    }

    /// `uri` (a generated client's `/package.Service/Method`) on this
    /// channel's origin.
    fn on_origin(&self, uri: &Uri) -> Result<Uri, Status> {
        let mut parts = Parts::default();
        parts.scheme = self.origin.scheme().cloned();
        parts.authority = self.origin.authority().cloned();
        parts.path_and_query = uri.path_and_query().cloned();
        Uri::from_parts(parts).map_err(|e| Status::internal(format!("request path: {e}")))
    }
}

/// True when `error` says the gateway never processed the call: a GOAWAY
/// without error whose last stream id is below the call's stream (h2
/// gives a stream that error only then, and to a stream it never opened
/// once the GOAWAY was read).
fn never_processed(error: &hyper_util::client::legacy::Error) -> bool {
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR);
        }
        cause = e.source();
    }
    false
}

/// The status a caller sees for a call the transport could not complete:
/// a connection that could not be opened is `UNAVAILABLE` (as with
/// tonic's `Channel`); anything else is read from the error's causes by
/// tonic (a reset stream, a keepalive timeout).
fn status_of(error: hyper_util::client::legacy::Error) -> Status {
    if error.is_connect() {
        return Status::unavailable(format!("cannot connect: {error}"));
    }
    Status::from_error(Box::new(error))
}

/// One send of a kept request: its head and its whole body.
fn again(head: &request::Parts, body: &Bytes) -> Request<Body> {
    let mut request = Request::new(Body::new(Full::new(body.clone())));
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = head.uri.clone();
    *request.version_mut() = head.version;
    *request.headers_mut() = head.headers.clone();
    request
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Incoming>, Status>> + Send>>;

impl<C> tower::Service<Request<Body>> for ResendingChannel<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    type Response = Response<Incoming>;
    type Error = Status;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        // The pool opens or picks a connection for each call.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> ResponseFuture {
        let (mut head, body) = request.into_parts();
        match self.on_origin(&head.uri) {
            Ok(uri) => head.uri = uri,
            Err(status) => return Box::pin(std::future::ready(Err(status))),
        }
        let client = self.client.clone();
        Box::pin(async move {
            // The request's own encoding error, as tonic would report it.
            let body = body.collect().await?.to_bytes();
            let mut sends = 1;
            loop {
                match client.request(again(&head, &body)).await {
                    Err(e) if sends < MAX_SENDS && never_processed(&e) => sends += 1,
                    sent => return sent.map_err(status_of),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_goes_to_the_channel_s_origin() {
        let channel = ResendingChannel::plaintext(Uri::from_static("http://127.0.0.1:50051"))
            .expect("an origin");
        let uri = channel
            .on_origin(&Uri::from_static("/grpc.health.v1.Health/Check"))
            .expect("a uri");
        assert_eq!(uri, "http://127.0.0.1:50051/grpc.health.v1.Health/Check");
    }

    #[test]
    fn an_address_without_a_scheme_is_not_an_origin() {
        let refused = ResendingChannel::plaintext(Uri::from_static("127.0.0.1:50051"));
        assert!(matches!(refused, Err(ChannelError::NotAnOrigin { .. })));
    }

    #[tokio::test]
    async fn a_gateway_that_cannot_be_reached_is_unavailable() {
        // Nothing ever listens on port 0: the connect is refused at once.
        let origin = Uri::from_static("http://127.0.0.1:0");
        let mut channel = ResendingChannel::plaintext(origin).expect("a channel");
        let request = Request::builder()
            .uri("/grpc.health.v1.Health/Check")
            .body(Body::empty())
            .expect("a request");
        let status = tower::Service::call(&mut channel, request)
            .await
            .expect_err("nothing listens");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}
