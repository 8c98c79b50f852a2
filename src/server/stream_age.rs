//! `WatchJourney` streams end when their connection ages
//! (`[serving] max_connection_age_secs`): at the age the connection is
//! sent a GOAWAY and its calls get a grace to finish, but a watch may stay
//! open for an hour, so the grace would end it with a transport error.
//! Instead the stream ends at once, between two messages, with
//! `UNAVAILABLE` / `CONNECTION_AGED` (and a `RetryInfo`): the caller
//! watches again, on the new connection its channel opens, and the new
//! stream starts from the journey's latest status.

use std::{future::Future, pin::Pin, task::Context};

use http::HeaderMap;
use http_body::{Frame, SizeHint};

use crate::{
    Error,
    net::{
        ConnectionAge,
        body::{FrameHook, HookedBody, LastFrame},
    },
};

type Aged = Pin<Box<dyn Future<Output = crate::net::AgePhase> + Send>>;

/// `body`, a streaming response, ended with `CONNECTION_AGED` when the
/// connection of `age` ages.
pub(super) fn ended_when_aged<B>(body: B, age: &ConnectionAge) -> HookedBody<B, EndWhenAged> {
    HookedBody::new(body, EndWhenAged::new(age))
}

/// The hook of [`ended_when_aged`]: asked for a frame once the connection
/// has aged, it ends the stream with the aged trailers instead, between
/// two messages, however many more the stream has ready.
pub(super) struct EndWhenAged {
    aged: Option<Aged>,
}

impl EndWhenAged {
    fn new(age: &ConnectionAge) -> Self {
        Self {
            aged: age.aged_at.map(|_| Box::pin(age.past_open()) as Aged),
        }
    }
}

impl FrameHook for EndWhenAged {
    fn asked(&mut self, cx: &mut Context<'_>) -> Option<LastFrame> {
        let aged = self.aged.as_mut()?;
        aged.as_mut().poll(cx).is_ready().then(|| {
            self.aged = None;
            Ok(Frame::trailers(aged_trailers()))
        })
    }

    fn size_hint(&self, _inner: SizeHint) -> SizeHint {
        // It may end before the inner body does.
        SizeHint::default()
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body::Body;
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
        let mut body = ended_when_aged(endless(), &age);
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
        assert!(EndWhenAged::new(&age).aged.is_none());
        let body = ended_when_aged(http_body_util::Full::new(Bytes::from_static(b"x")), &age);
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"x");
    }
}
