//! The edge of the public gRPC listener: what is admitted, for how long a
//! request body may take, and which statuses blame the caller.
//!
//! - Admission: unary calls share one cap (`max_in_flight`), `WatchJourney`
//!   streams another (`max_streams`: long-lived and cheap, they must not
//!   starve unary calls nor be starved by them); health and reflection are
//!   never refused, so a load balancer still sees the truth under load.
//!   Past a cap the call is answered at once with `RESOURCE_EXHAUSTED` /
//!   `OVERLOADED` and a `RetryInfo`: no queue, bounded or not.
//! - The request body must arrive within `request_body_timeout`, or the
//!   caller's deadline when sooner; a stalled upload is answered
//!   `DEADLINE_EXCEEDED` / `REQUEST_BODY_TIMEOUT` and frees its slot.
//! - Health `Watch` and reflection streams (the infrastructure's, open to
//!   load balancers and tools) are counted per connection and per process
//!   (`max_service_streams_per_connection`, `max_service_streams`); past
//!   either the stream is refused at once with `RESOURCE_EXHAUSTED` /
//!   `OVERLOADED`, so that no peer, authenticated or not, can hold the
//!   gateway's memory with streams. Health `Check` is never refused.
//! - Request bytes are bounded after authentication, by the admission
//!   door (`api::request_bytes`: each RPC's message limit, the caller's
//!   share, the process's budget). A message tonic itself refuses (its
//!   decompressed size over the service's limit) is `RESOURCE_EXHAUSTED` /
//!   `MESSAGE_TOO_LARGE` naming the RPC's limit (tonic says
//!   `OUT_OF_RANGE`, which no handler of this API returns).
//!
//! A `WatchJourney` response ends with `UNAVAILABLE` / `CONNECTION_AGED`
//! when its connection reaches its maximum age ([`stream_age`](super::stream_age)).
//!
//! Each admitted request also counts on its connection's [`Activity`], for
//! the connection's idle timeout, and each unary call is told to the
//! [`CallEvents`] hook the serving runtime passed in (its idle poller:
//! whether the thread polls or sleeps). Admission knows nothing of
//! threads.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::{Instant, Sleep},
};
use tonic::Code;
use tower::{Layer, Service};

use super::{
    connections::{ActiveRequest, ConnInfo, WatchSlot},
    stream_age::ended_when_aged,
};
use crate::{
    Error,
    api::rpc::{MessageSize, rpc_of},
    context::CallContext,
    net::{
        ServiceStreamSlot,
        body::{FrameHook, HookedBody, LastFrame},
        held::holding,
    },
    telemetry::Metrics,
};

/// The long-lived streaming method, admitted under its own cap.
const STREAMING: &str = "/idgate.v1.JourneyService/WatchJourney";
/// Prefixes of the infrastructure's services: no call slot (never shed
/// with the API's calls), counted only when a stream.
const SERVICES: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];
/// The infrastructure's streams: health `Watch` and every reflection
/// method (`ServerReflectionInfo`, a bidirectional stream).
fn is_service_stream(path: &str) -> bool {
    path == "/grpc.health.v1.Health/Watch" || SERVICES[1..].iter().any(|p| path.starts_with(p))
}

/// The limits the edge enforces.
#[derive(Debug, Clone)]
pub(super) struct EdgeLimits {
    /// Unary calls in flight at once.
    pub(super) max_in_flight: usize,
    /// `WatchJourney` streams open at once.
    pub(super) max_streams: usize,
    /// `WatchJourney` streams open at once on one connection.
    pub(super) max_streams_per_connection: usize,
    /// Health `Watch` and reflection streams open at once.
    pub(super) max_service_streams: usize,
    /// Health `Watch` and reflection streams open at once on one
    /// connection.
    pub(super) max_service_streams_per_connection: usize,
    /// Longest a request body may take to arrive.
    pub(super) request_body_timeout: Duration,
    /// The document RPCs' message limit, for the `MESSAGE_TOO_LARGE`
    /// answer.
    pub(super) max_message_bytes: usize,
    /// Every other RPC's message limit.
    pub(super) max_small_message_bytes: usize,
}

/// Told when a unary call is admitted: the serving runtime's hook (its
/// idle poller), passed in where the layer is built.
pub(super) trait CallEvents: Send + Sync + 'static {
    /// A unary call was admitted at `now` on the calling thread. What is
    /// returned, if anything, is told when the call's response ends.
    fn began(&self, now: std::time::Instant) -> Option<Arc<dyn CallEnd>>;
}

/// Told when a call [`CallEvents::began`] reported has ended.
pub(super) trait CallEnd: Send + Sync {
    /// The call's response ended (or was dropped) at `now`.
    fn ended(&self, now: std::time::Instant);
}

/// Tells its [`CallEnd`] when dropped with the response body.
struct EndOnDrop(Arc<dyn CallEnd>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.ended(std::time::Instant::now());
    }
}

/// The edge as a tower layer (inside the telemetry layer, so that what it
/// answers is counted and traced like any answer).
#[derive(Clone)]
pub(super) struct EdgeLayer {
    unary: Arc<Semaphore>,
    streams: Arc<Semaphore>,
    service_streams: Arc<Semaphore>,
    limits: Arc<EdgeLimits>,
    metrics: Metrics,
    calls: Arc<dyn CallEvents>,
}

impl EdgeLayer {
    /// The edge enforcing `limits`, counting what it sheds in `metrics`
    /// and telling `calls` of each unary call admitted.
    pub(super) fn new(limits: EdgeLimits, metrics: Metrics, calls: Arc<dyn CallEvents>) -> Self {
        Self {
            unary: Arc::new(Semaphore::new(
                limits.max_in_flight.clamp(1, Semaphore::MAX_PERMITS),
            )),
            streams: Arc::new(Semaphore::new(
                limits.max_streams.clamp(1, Semaphore::MAX_PERMITS),
            )),
            service_streams: Arc::new(Semaphore::new(
                limits.max_service_streams.clamp(1, Semaphore::MAX_PERMITS),
            )),
            limits: Arc::new(limits),
            metrics,
            calls,
        }
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Edge {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`EdgeLayer`].
#[derive(Clone)]
pub(super) struct Edge<S> {
    inner: S,
    layer: EdgeLayer,
}

/// What an admitted call holds until its response body ends.
struct Held {
    _slot: Option<OwnedSemaphorePermit>,
    _watch: Option<WatchSlot>,
    _service: Option<ServiceStreamSlot>,
    _active: Option<ActiveRequest>,
    _call: Option<EndOnDrop>,
}

/// A refusal answered at once, before anything runs, counted under
/// `limit`.
fn refused<E: 'static>(
    metrics: &Metrics,
    limit: &'static str,
    error: Error,
) -> BoxFuture<Result<Response<tonic::body::Body>, E>> {
    metrics.record_rpc_shed(limit);
    let status: tonic::Status = error.into();
    Box::pin(async move { Ok(status.into_http()) })
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ResBody> Service<Request<tonic::body::Body>> for Edge<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        let layer = &self.layer;
        let path = request.uri().path();
        let now = Instant::now();
        let extensions = request.extensions();
        let conn = ConnInfo::of(extensions);
        let service = SERVICES.iter().any(|p| path.starts_with(p));
        let metrics = &layer.metrics;
        // One connection may not hold every watch slot of the process (a
        // caller's own cap is the admission door's).
        let watch = match conn {
            Some(conn) if path == STREAMING => {
                match conn
                    .activity
                    .try_watch(layer.limits.max_streams_per_connection)
                {
                    Some(slot) => Some(slot),
                    None => {
                        return refused(
                            metrics,
                            "streams_per_connection",
                            Error::WatchLimit(
                                "this connection has the most WatchJourney streams allowed",
                            ),
                        );
                    }
                }
            }
            _ => None,
        };
        // The infrastructure's streams: bounded per connection, then per
        // process, whoever opens them.
        let (service_slot, slot) = if service && is_service_stream(path) {
            let on_connection = match conn {
                Some(conn) => match conn
                    .activity
                    .try_service_stream(layer.limits.max_service_streams_per_connection)
                {
                    Some(slot) => Some(slot),
                    None => {
                        return refused(
                            metrics,
                            "service_streams_per_connection",
                            Error::Overloaded("health and reflection streams on this connection"),
                        );
                    }
                },
                None => None,
            };
            match Arc::clone(&layer.service_streams).try_acquire_owned() {
                Ok(permit) => (on_connection, Some(permit)),
                Err(_) => {
                    return refused(
                        metrics,
                        "service_streams",
                        Error::Overloaded("health and reflection streams"),
                    );
                }
            }
        } else if service {
            (None, None)
        } else {
            let (pool, limit, what) = if path == STREAMING {
                (&layer.streams, "streams", "WatchJourney streams")
            } else {
                (&layer.unary, "in_flight", "calls in flight")
            };
            match Arc::clone(pool).try_acquire_owned() {
                Ok(permit) => (None, Some(permit)),
                Err(_) => return refused(metrics, limit, Error::Overloaded(what)),
            }
        };
        // Unary calls only: a watcher waits for long, not for a reply due
        // within microseconds.
        let call_end = if !service && path != STREAMING {
            layer.calls.began(now.into_std()).map(EndOnDrop)
        } else {
            None
        };
        let active = conn.map(|c| c.activity.start());
        // A watch ends when its connection ages (`stream_age`).
        let age = conn
            .filter(|_| path == STREAMING)
            .map(|c| Arc::clone(&c.age));
        let own = now + layer.limits.request_body_timeout;
        let deadline = CallContext::from_headers(request.headers())
            .deadline()
            .map_or(own, |d| d.min(own));
        let timeout_ms =
            u64::try_from(deadline.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX);
        let message_bytes = match rpc_of(path).map(|r| r.message) {
            Some(MessageSize::Small) => layer.limits.max_small_message_bytes,
            _ => layer.limits.max_message_bytes,
        };
        let request = request.map(|body| {
            tonic::body::Body::new(HookedBody::new(
                body,
                BodyDeadline {
                    at: Box::pin(tokio::time::sleep_until(deadline)),
                    timeout_ms,
                },
            ))
        });
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            let held = Held {
                _slot: slot,
                _watch: watch,
                _service: service_slot,
                _active: active,
                _call: call_end,
            };
            if grpc_status(&response) == Some(Code::OutOfRange) {
                // Trailers-only: tonic refused the request message's size.
                let status: tonic::Status = Error::MessageTooLarge(message_bytes).into();
                return Ok(status.into_http());
            }
            Ok(response.map(|body| match age {
                Some(age) => tonic::body::Body::new(holding(ended_when_aged(body, &age), held)),
                None => tonic::body::Body::new(holding(body, held)),
            }))
        })
    }
}

/// The `grpc-status` of a trailers-only response.
fn grpc_status<B>(response: &Response<B>) -> Option<Code> {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    let raw = response.headers().get(&GRPC_STATUS)?.to_str().ok()?;
    raw.parse::<i32>().ok().map(Code::from)
}

/// A request body's deadline: past it, the body fails with
/// `DEADLINE_EXCEEDED` / `REQUEST_BODY_TIMEOUT` (tonic hands a `Status`
/// body error to the caller as it is). A frame that arrived in time is
/// passed first.
struct BodyDeadline {
    at: Pin<Box<Sleep>>,
    timeout_ms: u64,
}

impl FrameHook for BodyDeadline {
    fn waiting(&mut self, cx: &mut Context<'_>) -> Option<LastFrame> {
        self.at.as_mut().poll(cx).is_ready().then(|| {
            let status: tonic::Status = Error::RequestBodyTimeout(self.timeout_ms).into();
            Err(status.into())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    use super::*;

    /// Counts what admission tells the runtime.
    #[derive(Default)]
    struct Counted {
        began: AtomicUsize,
        ended: AtomicUsize,
    }

    struct Hook(Arc<Counted>);

    impl CallEvents for Hook {
        fn began(&self, _: std::time::Instant) -> Option<Arc<dyn CallEnd>> {
            self.0.began.fetch_add(1, Relaxed);
            Some(self.0.clone())
        }
    }

    impl CallEnd for Counted {
        fn ended(&self, _: std::time::Instant) {
            self.ended.fetch_add(1, Relaxed);
        }
    }

    #[tokio::test]
    async fn the_runtime_hears_of_unary_calls_until_their_response_ends_and_of_nothing_else() {
        let counted = Arc::new(Counted::default());
        let layer = EdgeLayer::new(
            EdgeLimits {
                max_in_flight: 8,
                max_streams: 8,
                max_streams_per_connection: 8,
                request_body_timeout: Duration::from_secs(5),
                max_service_streams: 8,
                max_service_streams_per_connection: 8,
                max_message_bytes: 1024,
                max_small_message_bytes: 1024,
            },
            Metrics::default(),
            Arc::new(Hook(counted.clone())),
        );
        // A body with something in it (an empty one ends at once).
        let mut service = layer.layer(tower::service_fn(|_: Request<tonic::body::Body>| async {
            let body = http_body_util::Full::new(Bytes::from_static(b"answer"));
            Ok::<_, std::convert::Infallible>(Response::new(tonic::body::Body::new(body)))
        }));
        let call = |path: &str| {
            Request::builder()
                .uri(format!("http://gateway{path}"))
                .body(tonic::body::Body::empty())
                .unwrap()
        };

        let response = service
            .call(call("/idgate.v1.JourneyService/CreateJourney"))
            .await
            .unwrap();
        assert_eq!(counted.began.load(Relaxed), 1);
        assert_eq!(counted.ended.load(Relaxed), 0, "held by the response body");
        drop(response);
        assert_eq!(counted.ended.load(Relaxed), 1);

        for path in [STREAMING, "/grpc.health.v1.Health/Check"] {
            drop(service.call(call(path)).await.unwrap());
        }
        assert_eq!(
            counted.began.load(Relaxed),
            1,
            "streams and health are not calls"
        );
    }
}
