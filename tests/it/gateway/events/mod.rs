//! The completion webhook through the gateway and the sandbox: a notice
//! pushes the result to every `WatchJourney` stream. This file holds what
//! the modules share: a notice with Basic credentials and the assertion
//! that a stream ended with the complete result.

use idgate::{
    cli::journey::{DocumentChoice, JourneyPlan, LivenessMode, Person},
    proto::v1::{self, JourneyStatus},
    sandbox::samples,
};

use crate::support::{gateway::TestGateway, wait::EVENT_WAIT, webhook::USER as BASIC_USER};

mod current_state;
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

/// What `idgate journey` runs against `gw`: the sandbox's happy person,
/// 3D liveness, an RG, the result awaited up to [`EVENT_WAIT`].
fn happy_3d_plan(gw: &TestGateway) -> JourneyPlan {
    let person = samples::HAPPY_PERSON;
    let parts: Vec<&str> = person.birth_date.split('/').collect();
    JourneyPlan {
        gateway: gw.gateway.grpc_url(),
        liveness: LivenessMode::ThreeD,
        document: DocumentChoice::Rg,
        person: Person {
            cpf: person.cpf.into(),
            name: person.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "CLIREF1".into(),
        },
        operator_profile: String::new(),
        result_timeout: EVENT_WAIT,
    }
}
