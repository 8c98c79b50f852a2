//! The completion webhook through the gateway and the sandbox: a notice
//! pushes the result to every `WatchJourney` stream. This file holds what
//! the modules share: a notice with Basic credentials and the assertion
//! that a stream ended with the complete result.

use idgate::proto::v1::{self, JourneyStatus};

use crate::support::webhook::USER as BASIC_USER;

mod receiver;
mod results;
mod scale;
mod streams;

/// A notice with HTTP Basic credentials, as the service sends it.
fn basic(
    client: &reqwest::Client,
    url: &str,
    password: &str,
    body: &str,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .basic_auth(BASIC_USER, Some(password))
        .body(body.to_owned())
}

/// Asserts a stream's messages end with exactly one final message with
/// the complete result, and the stream closed with OK.
fn assert_ends_complete(
    (items, end): &(Vec<v1::WatchJourneyResponse>, Option<tonic::Status>),
    journey_ref: &str,
) {
    assert!(end.is_none(), "stream ended with {end:?}");
    let (last, before) = items.split_last().expect("at least the result");
    assert_eq!(last.status(), JourneyStatus::Complete);
    assert_eq!(last.raw_status, "Completo");
    assert_eq!(last.journey_ref, journey_ref);
    let result = last
        .result
        .as_ref()
        .expect("the last message has the result");
    assert_eq!(result.status(), JourneyStatus::Complete);
    assert!(result.document_analysis.is_some());
    assert!(
        before.iter().all(|i| i.result.is_none()),
        "only the last message carries the result"
    );
}
