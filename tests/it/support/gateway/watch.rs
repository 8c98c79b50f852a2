//! `WatchJourney` streams: the requests that name a journey, opening a
//! stream, and reading it to its end within a bound.

use std::time::Duration;

use idgate::proto::v1;

use super::TestGateway;
use crate::support::wait::EVENT_WAIT;

impl TestGateway {
    /// Opens a `WatchJourney` stream (the watcher is registered once this
    /// returns: the gateway answers the headers after subscribing).
    pub async fn watch(
        &self,
        request: v1::WatchJourneyRequest,
    ) -> tonic::Streaming<v1::WatchJourneyResponse> {
        self.journeys()
            .watch_journey(request)
            .await
            .expect("watch journey")
            .into_inner()
    }
}

/// Everything a watch stream sends until it closes: its messages and the
/// status it ended with (`None`: closed with OK). Bounded by [`EVENT_WAIT`].
pub async fn drain(
    stream: tonic::Streaming<v1::WatchJourneyResponse>,
) -> (Vec<v1::WatchJourneyResponse>, Option<tonic::Status>) {
    drain_within(stream, EVENT_WAIT).await
}

/// [`drain`] bounded by `within`: the stream must end in that time.
pub async fn drain_within(
    mut stream: tonic::Streaming<v1::WatchJourneyResponse>,
    within: Duration,
) -> (Vec<v1::WatchJourneyResponse>, Option<tonic::Status>) {
    let mut items = Vec::new();
    let end = tokio::time::timeout(within, async {
        loop {
            match stream.message().await {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the watch stream did not end within {within:?}"));
    (items, end)
}

/// Asserts `items` hold at most the journey's current state while it is
/// processing (a watch reads it at once once the proof went through the
/// gateway), and never a result.
pub fn assert_only_processing(items: &[v1::WatchJourneyResponse]) {
    assert!(
        items
            .iter()
            .all(|i| i.status() == v1::JourneyStatus::Processing && i.result.is_none()),
        "{items:?}"
    );
}

/// The statuses of a stream's messages, in order.
pub fn statuses(items: &[v1::WatchJourneyResponse]) -> Vec<v1::JourneyStatus> {
    items.iter().map(|i| i.status()).collect()
}

/// A watch request by appkey.
pub fn by_appkey(appkey: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.into())),
    }
}

/// A watch request by the reference CreateJourney returned.
pub fn by_ref(journey_ref: &str) -> v1::WatchJourneyRequest {
    v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::JourneyRef(
            journey_ref.into(),
        )),
    }
}
