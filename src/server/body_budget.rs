//! A process-wide budget for gRPC request bytes in flight, as Envoy's
//! overload manager bounds its buffers: admission caps calls, the message
//! limit caps one call, and this caps what all calls together may hold.
//! Without it 1,024 calls in flight × a message limit of 100 MiB and more
//! would be tens of GiB in theory.
//!
//! Each request body's data frames are charged to the budget as they
//! arrive and stay charged until the call ends (its response body ends or
//! is dropped, and its request body is gone): the message decoded from
//! them lives as long as the call. A frame that does not fit fails the
//! body with `RESOURCE_EXHAUSTED` / `OVERLOADED` at once; nothing waits
//! for room. Health and reflection are never charged (admission never
//! wraps them), so they still answer when the budget is spent.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::{Error, telemetry::Metrics};

/// The `limit` label of `idgate_rpc_shed_total` for refusals by the budget.
pub(super) const SHED_LABEL: &str = "body_bytes";

/// The bytes all request bodies may hold at once.
#[derive(Debug)]
pub(super) struct BodyBudget {
    limit: usize,
    in_flight: AtomicUsize,
}

impl BodyBudget {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// True when not one more byte fits: a new call is refused at once.
    pub(super) fn is_spent(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) >= self.limit
    }

    /// Charges `n` bytes if they fit.
    fn try_charge(&self, n: usize) -> bool {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes charged now, for tests.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// What one call has charged; released when the last holder (its request
/// body, and what the call holds until its response ends) drops it.
#[derive(Debug)]
pub(super) struct CallBytes {
    budget: Arc<BodyBudget>,
    held: AtomicUsize,
}

impl CallBytes {
    pub(super) fn new(budget: &Arc<BodyBudget>) -> Arc<Self> {
        Arc::new(Self {
            budget: Arc::clone(budget),
            held: AtomicUsize::new(0),
        })
    }

    fn charge(&self, n: usize) -> bool {
        if !self.budget.try_charge(n) {
            return false;
        }
        self.held.fetch_add(n, Ordering::AcqRel);
        true
    }
}

impl Drop for CallBytes {
    fn drop(&mut self) {
        self.budget.release(*self.held.get_mut());
    }
}

pin_project! {
    /// A request body charged to the budget frame by frame.
    pub(super) struct BudgetBody<B> {
        #[pin]
        inner: B,
        bytes: Arc<CallBytes>,
        metrics: Metrics,
        refused: bool,
    }
}

impl<B> BudgetBody<B> {
    pub(super) fn new(inner: B, bytes: Arc<CallBytes>, metrics: Metrics) -> Self {
        Self {
            inner,
            bytes,
            metrics,
            refused: false,
        }
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Data = Bytes;
    type Error = tonic::codegen::StdError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.refused {
            return Poll::Ready(None);
        }
        let frame = match std::task::ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            other => return Poll::Ready(other.map(|r| r.map_err(Into::into))),
        };
        let size = frame.data_ref().map_or(0, Bytes::len);
        if size > 0 && !this.bytes.charge(size) {
            *this.refused = true;
            this.metrics.record_rpc_shed(SHED_LABEL);
            let status: tonic::Status = Error::Overloaded("request bytes in flight").into();
            return Poll::Ready(Some(Err(Box::new(status))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.refused || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    fn body(chunks: &[usize]) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = chunks
            .iter()
            .map(|n| Ok(Frame::data(Bytes::from(vec![0u8; *n]))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn bytes_stay_charged_until_the_call_ends_and_a_body_past_the_budget_fails() {
        let budget = Arc::new(BodyBudget::new(100));
        let first = CallBytes::new(&budget);
        let read = BudgetBody::new(body(&[30, 30]), first.clone(), Metrics::default())
            .collect()
            .await;
        assert!(read.is_ok());
        assert_eq!(budget.in_flight(), 60, "held while the call lives");

        let second = CallBytes::new(&budget);
        let err = BudgetBody::new(body(&[20, 30]), second.clone(), Metrics::default())
            .collect()
            .await
            .unwrap_err();
        let status = err.downcast::<tonic::Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        drop(second);
        assert_eq!(budget.in_flight(), 60, "the refused call's bytes are back");
        drop(first);
        assert_eq!(budget.in_flight(), 0);
        assert!(!budget.is_spent());
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            /// Whatever calls charge, the budget never holds more than its
            /// limit, and nothing stays charged once every call ended.
            #[test]
            fn the_budget_never_exceeds_its_limit_and_returns_to_zero(
                limit in 1usize..10_000,
                charges in proptest::collection::vec((0usize..8, 0usize..4_000), 0..64),
            ) {
                let budget = Arc::new(BodyBudget::new(limit));
                let calls: Vec<Arc<CallBytes>> = (0..8).map(|_| CallBytes::new(&budget)).collect();
                for (call, n) in charges {
                    let before = budget.in_flight();
                    let fitted = calls[call].charge(n);
                    prop_assert_eq!(fitted, before + n <= limit);
                    prop_assert!(budget.in_flight() <= limit);
                }
                drop(calls);
                prop_assert_eq!(budget.in_flight(), 0);
            }
        }
    }
}
