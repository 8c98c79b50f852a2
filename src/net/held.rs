//! A response body that holds what its call holds (an admission slot, the
//! connection's activity, a stream's place) until the response ends or is
//! dropped: a stream's slots must live as long as the stream, not as long
//! as the handler that opened it.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// Wraps `body` so that it holds `held` until it ends or is dropped.
pub fn holding<B, H>(body: B, held: H) -> HoldingBody<B, H> {
    HoldingBody {
        inner: body,
        _held: held,
    }
}

pin_project! {
    /// The body of [`holding`].
    pub struct HoldingBody<B, H> {
        #[pin]
        inner: B,
        _held: H,
    }
}

impl<B, H> Body for HoldingBody<B, H>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
