//! Sending a [`Prepared`] request: the retry loop within the caller's
//! deadline, and one attempt under its client span.
//!
//! Retries follow [`Operation::consumes_appkey`]: operations that consume
//! nothing are retried on transient failures up to their attempts, with a
//! short jittered backoff that never runs past the deadline; operations
//! that bind or spend the appkey are retried only after a connect failure,
//! which proves the request never left.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{
    HeaderValue, Method,
    header::{ACCEPT, CONTENT_TYPE},
};
use http_body_util::Full;

use super::{UpstreamError, pool::HttpPools, read::read_bounded, request::Prepared};
use crate::{
    backoff::{Backoff, Jitter},
    context::CallContext,
    domain::Operation,
    telemetry::{Metrics, UpstreamCall, UpstreamEnd, UpstreamOutcome, UpstreamRequest},
};

/// Shortest time worth starting an attempt with: below it, a retry would
/// only turn into a timeout.
const MIN_ATTEMPT_BUDGET: Duration = Duration::from_millis(20);
/// First retry backoff; doubled per attempt, capped, then jittered down to
/// half: a retry never waits longer than planned against the deadline.
const BACKOFF_BASE: Duration = Duration::from_millis(50);
const BACKOFF_CAP: Duration = Duration::from_millis(800);
const BACKOFF_JITTER: Jitter = Jitter::Down { floor: 0.5 };
/// What the gateway accepts back.
const ACCEPTED: &str = "application/json, text/plain, */*";

/// The HTTP side of the client: where its pools are, the body bound, the
/// metrics.
pub(super) struct Sender {
    pub(super) http: Arc<dyn HttpPools>,
    pub(super) max_response_bytes: usize,
    pub(super) metrics: Metrics,
}

impl Sender {
    /// Sends `req`, retrying as its operation allows, within the caller's
    /// deadline. Returns the 2xx body.
    pub(super) async fn execute(
        &self,
        ctx: &CallContext,
        req: Prepared,
    ) -> Result<Bytes, UpstreamError> {
        let op = req.op;
        // One slot for every attempt; a full bulkhead refuses at once,
        // before anything is sent (never a queue).
        let Some(_slot) = req.bulkhead.try_enter() else {
            self.metrics.record_upstream(&UpstreamOutcome {
                operation: op,
                channel: req.channel.clone(),
                ended: UpstreamEnd::Refused,
            });
            return Err(UpstreamError::Saturated { op });
        };
        let mut backoff = retry_backoff();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let timeout = match ctx.remaining() {
                Some(left) if left < MIN_ATTEMPT_BUDGET.min(req.timeout) || left.is_zero() => {
                    return Err(UpstreamError::DeadlineExceeded { op });
                }
                Some(left) => left.min(req.timeout),
                None => req.timeout,
            };
            let err = match self.attempt(&req, timeout).await {
                Ok(body) => return Ok(body),
                Err(e) => e,
            };
            if attempt >= req.attempts || !may_retry(op, &err) {
                return Err(err);
            }
            let pause = backoff.next_delay();
            if ctx
                .remaining()
                .is_some_and(|left| left <= pause + MIN_ATTEMPT_BUDGET)
            {
                return Err(err);
            }
            tracing::debug!(
                operation = op.as_str(),
                attempt,
                error_class = err.class(),
                "retrying upstream call"
            );
            tokio::time::sleep(pause).await;
        }
    }

    /// One attempt: send, check the status, read the body within bounds,
    /// under a client span whose context travels in the request headers.
    async fn attempt(&self, req: &Prepared, timeout: Duration) -> Result<Bytes, UpstreamError> {
        let op = req.op;
        let limit = self.max_response_bytes;
        let mut request = UpstreamRequest::to(op, &Method::POST, req.target.call());
        if let Some(channel) = &req.channel {
            request = request.channel(channel);
        }
        if let Some(journey) = req.journey.as_ref() {
            request = request.journey(journey);
        }
        let mut call = UpstreamCall::start(&self.metrics, request);
        let mut http_request = http::Request::new(Full::new(req.body.clone()));
        *http_request.method_mut() = Method::POST;
        *http_request.uri_mut() = req.target.uri().clone();
        let headers = http_request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(req.content_type));
        headers.insert(ACCEPT, HeaderValue::from_static(ACCEPTED));
        call.inject(headers);
        let exchange = async {
            let response = self
                .http
                .current()
                .request(http_request)
                .await
                .map_err(|e| send_error(op, &e))?;
            let status = response.status();
            if !status.is_success() {
                return Ok::<_, UpstreamError>((
                    status,
                    Err(UpstreamError::Status {
                        op,
                        status: status.as_u16(),
                    }),
                ));
            }
            Ok((status, read_bounded(op, response, limit).await))
        };
        // The client span is not entered while the exchange runs: nothing
        // in it logs, and entering it on each poll cost a clock read and
        // registry look-ups every time (docs/performance.md). It is a child
        // of the caller's span, carried in `traceparent` above, and ends
        // when `call` is dropped.
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok((status, body))) => {
                if let (Some(learn), Ok(b)) = (req.journey_from_answer, &body) {
                    if let Some(journey) = learn(b) {
                        call.record_journey(&journey);
                    }
                }
                call.finish(status);
                body
            }
            Ok(Err(err)) => {
                call.fail(err.class());
                Err(err)
            }
            Err(_) => {
                let err = UpstreamError::Timeout { op };
                call.fail(err.class());
                Err(err)
            }
        }
    }
}

/// Whether a failed attempt may be repeated. Operations that consume the
/// appkey: only when the request provably never left (connect failure).
fn may_retry(op: Operation, err: &UpstreamError) -> bool {
    if op.consumes_appkey() {
        return err.request_not_sent() && matches!(err, UpstreamError::Connect { .. });
    }
    err.is_transient()
}

/// The pauses between one call's attempts: 50 ms, 100 ms, ... capped at
/// 800 ms, each scaled by a random factor in [0.5, 1.0).
fn retry_backoff() -> Backoff {
    Backoff::new(BACKOFF_BASE, BACKOFF_CAP).jittered(BACKOFF_JITTER)
}

/// Classifies a failure to get response headers. A connect failure
/// (including the connect timeout) proves the request was not sent;
/// anything else may have reached the upstream. The call's own timeout is
/// applied around the exchange, so it never shows up here.
fn send_error(op: Operation, e: &hyper_util::client::legacy::Error) -> UpstreamError {
    if e.is_connect() {
        UpstreamError::Connect { op }
    } else {
        UpstreamError::Transport { op }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consuming_operations_retry_only_after_connect_failures() {
        for op in [
            Operation::Captcha,
            Operation::Liveness3D,
            Operation::DocumentImages,
        ] {
            assert!(may_retry(op, &UpstreamError::Connect { op }));
            assert!(!may_retry(op, &UpstreamError::Timeout { op }));
            assert!(!may_retry(op, &UpstreamError::Transport { op }));
            assert!(!may_retry(op, &UpstreamError::Status { op, status: 503 }));
        }
        let op = Operation::Result;
        assert!(may_retry(op, &UpstreamError::Timeout { op }));
        assert!(may_retry(op, &UpstreamError::Status { op, status: 502 }));
        assert!(!may_retry(op, &UpstreamError::Status { op, status: 500 }));
        assert!(!may_retry(
            op,
            &UpstreamError::Malformed {
                op,
                detail: String::new()
            }
        ));
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_bounds() {
        let mut backoff = retry_backoff();
        for _ in 1..12 {
            let b = backoff.next_delay();
            assert!(b <= BACKOFF_CAP, "{b:?}");
            assert!(b >= BACKOFF_BASE / 2, "{b:?}");
        }
    }
}
