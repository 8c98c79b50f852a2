//! A body that passes another body's frames on under a [`FrameHook`]: the
//! pinned plumbing of a wrapping body (its projection, its end, its size)
//! written once, each use saying only what it adds.
//!
//! The gateway's uses: what a call holds, kept until its response ends
//! ([`held`](super::held)); a request body's deadline (`server::edge`); a
//! stream ended when its connection ages (`server::stream_age`); request
//! bytes held to their RPC's limit and charged while received
//! (`api::request_bytes`).

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// The error of a hooked body: the inner body's, or the hook's own (a
/// `tonic::Status`, which tonic hands to the caller as it is).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The frame a hook ends a body with: trailers, or an error.
pub type LastFrame = Result<Frame<Bytes>, BoxError>;

/// What a [`HookedBody`] adds to the body it wraps. Each method's default
/// adds nothing.
pub trait FrameHook {
    /// A frame is asked for, before the inner body is: `Some` ends the
    /// body with that frame instead (a stream cut short at once, between
    /// two of its frames).
    fn asked(&mut self, _cx: &mut Context<'_>) -> Option<LastFrame> {
        None
    }

    /// The inner body has no frame ready: `Some` ends the body with that
    /// frame instead (a deadline passed while waiting; a frame that did
    /// arrive is passed first).
    fn waiting(&mut self, _cx: &mut Context<'_>) -> Option<LastFrame> {
        None
    }

    /// A frame of the inner body passes: `Err` ends the body with that
    /// error instead of the frame.
    fn passing(&mut self, _frame: &Frame<Bytes>) -> Result<(), BoxError> {
        Ok(())
    }

    /// The body's size hint, from the inner body's: a hook that may end
    /// the body early cannot promise the inner body's bytes.
    fn size_hint(&self, inner: SizeHint) -> SizeHint {
        inner
    }
}

pin_project! {
    /// `inner`'s frames, passed on under `hook`, which lives as long as
    /// the body. Once ended (by the inner body's end or trailers, or by
    /// the hook) it gives nothing more.
    pub struct HookedBody<B, H> {
        #[pin]
        inner: B,
        hook: H,
        ended: bool,
    }
}

impl<B, H> HookedBody<B, H> {
    /// `inner` under `hook`.
    pub fn new(inner: B, hook: H) -> Self {
        Self {
            inner,
            hook,
            ended: false,
        }
    }
}

impl<B, H> Body for HookedBody<B, H>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
    H: FrameHook,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        if let Some(last) = this.hook.asked(cx) {
            *this.ended = true;
            return Poll::Ready(Some(last));
        }
        let frame = match this.inner.poll_frame(cx) {
            Poll::Pending => {
                return match this.hook.waiting(cx) {
                    Some(last) => {
                        *this.ended = true;
                        Poll::Ready(Some(last))
                    }
                    None => Poll::Pending,
                };
            }
            Poll::Ready(None) => {
                *this.ended = true;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Err(e) = this.hook.passing(&frame) {
            *this.ended = true;
            return Poll::Ready(Some(Err(e)));
        }
        // Trailers are a body's last frame: nothing may follow them.
        if frame.is_trailers() {
            *this.ended = true;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            SizeHint::with_exact(0)
        } else {
            self.hook.size_hint(self.inner.size_hint())
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt as _, StreamBody};

    use super::*;

    /// A body of `frames`, then its end.
    fn frames(
        frames: Vec<Frame<Bytes>>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        StreamBody::new(futures_util::stream::iter(frames.into_iter().map(Ok)))
    }

    fn data(text: &'static str) -> Frame<Bytes> {
        Frame::data(Bytes::from_static(text.as_bytes()))
    }

    /// Refuses the data frame `refused`, counting what it was asked.
    #[derive(Default)]
    struct Refusing {
        refused: Option<&'static str>,
        asked: usize,
    }

    impl FrameHook for Refusing {
        fn asked(&mut self, _cx: &mut Context<'_>) -> Option<LastFrame> {
            self.asked += 1;
            None
        }

        fn passing(&mut self, frame: &Frame<Bytes>) -> Result<(), BoxError> {
            match (frame.data_ref(), self.refused) {
                (Some(data), Some(refused)) if data == refused.as_bytes() => Err("refused".into()),
                _ => Ok(()),
            }
        }
    }

    #[tokio::test]
    async fn a_hook_that_adds_nothing_passes_every_frame_and_the_size_on() {
        let inner = http_body_util::Full::new(Bytes::from_static(b"answer"));
        let body = HookedBody::new(inner, Refusing::default());
        assert_eq!(body.size_hint().exact(), Some(6));
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"answer");
    }

    #[tokio::test]
    async fn a_frame_the_hook_refuses_ends_the_body_with_its_error() {
        let hook = Refusing {
            refused: Some("b"),
            ..Refusing::default()
        };
        let mut body = HookedBody::new(frames(vec![data("a"), data("b"), data("c")]), hook);
        assert!(body.frame().await.unwrap().is_ok());
        assert!(body.frame().await.unwrap().is_err());
        assert!(body.frame().await.is_none(), "nothing after the refusal");
        assert!(body.is_end_stream());
        assert_eq!(body.hook.asked, 2, "not asked once ended");
    }

    #[tokio::test]
    async fn nothing_follows_the_inner_body_s_trailers() {
        let trailers = Frame::trailers(http::HeaderMap::new());
        let mut body = HookedBody::new(
            frames(vec![data("a"), trailers, data("late")]),
            Refusing::default(),
        );
        assert!(body.frame().await.unwrap().unwrap().is_data());
        assert!(body.frame().await.unwrap().unwrap().is_trailers());
        assert!(body.frame().await.is_none());
        assert_eq!(body.size_hint().exact(), Some(0));
    }
}
