//! `WatchJourney` streams end when their connection ages
//! (`[serving] max_connection_age_secs`): at the age the connection is
//! sent a GOAWAY and its calls get a grace to finish, but a watch may stay
//! open for an hour, so the grace would end it with a transport error.
//! Instead the stream ends at once, between two messages, with
//! `UNAVAILABLE` / `CONNECTION_AGED` (and a `RetryInfo`): the caller
//! watches again, on the new connection its channel opens, and the new
//! stream starts from the journey's latest status.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::{Error, net::ConnectionAge};

type Aged = Pin<Box<dyn Future<Output = crate::net::AgePhase> + Send>>;

pin_project! {
    /// A streaming response body that ends with `CONNECTION_AGED` when its
    /// connection ages.
    pub(super) struct AgedBody<B> {
        #[pin]
        inner: B,
        aged: Option<Aged>,
        done: bool,
    }
}

impl<B> AgedBody<B> {
    /// `inner`, ended when the connection of `age` ages.
    pub(super) fn new(inner: B, age: &ConnectionAge) -> Self {
        Self {
            inner,
            aged: age.aged_at.map(|_| Box::pin(age.past_open()) as Aged),
            done: false,
        }
    }
}

/// The trailers of a stream ended by its connection's age.
fn aged_trailers() -> HeaderMap {
    let status: tonic::Status = Error::ConnectionAged.into();
    let mut trailers = HeaderMap::new();
    // Only fails on a message that is not a valid header value, which the
    // fixed English message is not; the code alone still says UNAVAILABLE.
    if status.add_header(&mut trailers).is_err() {
        trailers.insert("grpc-status", http::HeaderValue::from_static("14"));
    }
    trailers
}

impl<B> Body for AgedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        if let Some(aged) = this.aged.as_mut() {
            if aged.as_mut().poll(cx).is_ready() {
                *this.done = true;
                *this.aged = None;
                return Poll::Ready(Some(Ok(Frame::trailers(aged_trailers()))));
            }
        }
        let frame = this.inner.poll_frame(cx);
        if let Poll::Ready(None) = frame {
            *this.done = true;
        } else if let Poll::Ready(Some(Ok(f))) = &frame {
            // The stream's own trailers end it: nothing may follow them.
            if f.is_trailers() {
                *this.done = true;
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.done {
            SizeHint::with_exact(0)
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::{BodyExt, StreamBody};
    use tokio::time::Instant;

    use super::*;

    fn endless() -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        StreamBody::new(futures_util::stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >())
    }

    #[tokio::test]
    async fn an_open_stream_ends_with_connection_aged_when_its_connection_ages() {
        let age = ConnectionAge::new(Some(Instant::now() + Duration::from_secs(3600)));
        let mut body = AgedBody::new(endless(), &age);
        assert!(age.age());
        let frame = body.frame().await.unwrap().unwrap();
        let trailers = frame.into_trailers().unwrap();
        assert_eq!(trailers["grpc-status"], "14");
        let status = tonic::Status::from_header_map(&trailers).unwrap();
        let details = tonic_types::StatusExt::get_error_details(&status);
        assert_eq!(details.error_info().unwrap().reason, "CONNECTION_AGED");
        assert!(body.frame().await.is_none());
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn without_an_age_the_body_is_left_alone() {
        let age = ConnectionAge::new(None);
        let body = AgedBody::new(http_body_util::Full::new(Bytes::from_static(b"x")), &age);
        assert!(body.aged.is_none());
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"x");
    }
}
