//! The end of a call: its response future and body, which finish the
//! span and the metrics once, when the status passes by (headers of a
//! trailers-only response, or trailers), when the body ends without one
//! (`UNKNOWN`), or when either is dropped first (`CANCELLED`).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::Instant,
};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;
use tracing::Span;

use super::status::{code_of_http_status, record_status, status_in};
use crate::telemetry::{
    logs::access,
    metrics::{InFlight, Metrics},
};

/// Finishes one call's span and metrics, exactly once: with the status
/// when it is seen, else as `CANCELLED` when dropped (the client went away
/// before the handler answered or before the body ended).
pub(super) struct Finisher {
    pub(super) metrics: Metrics,
    pub(super) method: &'static str,
    pub(super) started: Instant,
    pub(super) span: Span,
    /// The method streams its response: the handler's work happens while
    /// the body is polled, so the body is polled in the span. (A unary
    /// body only carries the answer out: entering the span for each of
    /// its frames would cost a call a few hundred instructions for nothing.)
    pub(super) streams: bool,
    pub(super) in_flight: Option<InFlight>,
    /// With the access log on: the peer's address as text, if known.
    pub(super) access: Option<Option<Arc<str>>>,
}

impl Finisher {
    fn finish(mut self, code: Code) {
        self.record(code);
    }

    fn record(&mut self, code: Code) {
        if let Some(in_flight) = self.in_flight.take() {
            record_status(&self.span, code);
            let elapsed = self.started.elapsed();
            self.metrics.record_rpc(self.method, code, elapsed);
            if let Some(peer) = &self.access {
                access(&self.span, self.method, code, elapsed, peer.as_deref());
            }
            drop(in_flight);
        }
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

pin_project! {
    /// Future of [`GrpcServerService`].
    pub struct ResponseFuture<F> {
        #[pin]
        pub(super) inner: F,
        pub(super) finisher: Option<Finisher>,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<GrpcBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = match this.finisher {
            Some(f) => {
                let _entered = f.span.enter();
                ready!(this.inner.poll(cx))
            }
            None => ready!(this.inner.poll(cx)),
        };
        let finisher = this.finisher.take();
        Poll::Ready(match result {
            Ok(response) => {
                let code = status_in(response.headers()).or_else(|| {
                    (response.status() != http::StatusCode::OK)
                        .then(|| code_of_http_status(response.status()))
                });
                let finisher = match (code, finisher) {
                    (Some(code), Some(f)) => {
                        f.finish(code);
                        None
                    }
                    (_, f) => f,
                };
                Ok(response.map(|inner| GrpcBody { inner, finisher }))
            }
            Err(e) => {
                if let Some(f) = finisher {
                    f.finish(Code::Unknown);
                }
                Err(e)
            }
        })
    }
}

pin_project! {
    /// Response body of [`GrpcServerService`]: finishes the call when its
    /// status passes by.
    pub struct GrpcBody<B> {
        #[pin]
        inner: B,
        finisher: Option<Finisher>,
    }
}

impl<B> Body for GrpcBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = match this.finisher {
            // A streaming handler's work happens here: keep it in the span.
            Some(f) if f.streams => {
                let _entered = f.span.enter();
                ready!(this.inner.poll_frame(cx))
            }
            _ => ready!(this.inner.poll_frame(cx)),
        };
        let code = match &polled {
            Some(Ok(frame)) => frame.trailers_ref().and_then(status_in),
            Some(Err(_)) => Some(Code::Unknown),
            // The body ended without trailers: no status was sent.
            None => Some(Code::Unknown),
        };
        if let Some(code) = code {
            if let Some(f) = this.finisher.take() {
                f.finish(code);
            }
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::exposition::assert_sample;

    #[test]
    fn a_dropped_body_counts_as_cancelled() {
        let metrics = Metrics::default();
        let finisher = Finisher {
            in_flight: Some(metrics.rpc_in_flight("grpc.health.v1.Health/Watch")),
            metrics: metrics.clone(),
            method: "grpc.health.v1.Health/Watch",
            started: Instant::now(),
            span: Span::none(),
            streams: true,
            access: None,
        };
        let body = GrpcBody {
            inner: http_body_util::Empty::<Bytes>::new(),
            finisher: Some(finisher),
        };
        drop(body);
        let text = metrics.encode().unwrap();
        assert_sample(
            &text,
            r#"idgate_rpc_requests_total{method="grpc.health.v1.Health/Watch",code="CANCELLED"} 1"#,
        );
        assert_sample(
            &text,
            r#"idgate_rpc_in_flight{method="grpc.health.v1.Health/Watch"} 0"#,
        );
    }
}
