//! A `request_id` belongs to the caller that sent it (like Stripe's
//! idempotency keys, scoped to the account): another caller sending the
//! same `request_id` gets a journey of its own, never the first caller's
//! appkey, right after, concurrently, or after the appkey expired at the
//! vendor; the first caller's replay returns its own appkey every time.
//! On one replica and across two sharing a real `redis-server`.

use std::time::Duration;

use futures_util::future::join_all;
use idgate::{domain::Operation, proto::v1};

use super::owners::{key_and_auth, refused_everywhere, tokens, with_owners};
use crate::support::{
    fleet::Fleet,
    gateway::{TestGateway, happy_person},
    jwt::bearer,
};

const REQUEST_ID: &str = "5d1f0a7e-2b9c-4c1e-8f3a-6a7b8c9d0e1f";

fn with_request_id() -> v1::CreateJourneyRequest {
    v1::CreateJourneyRequest {
        request_id: REQUEST_ID.into(),
        ..happy_person()
    }
}

async fn create_with_id(gw: &TestGateway, token: &str) -> v1::CreateJourneyResponse {
    gw.journeys()
        .create_journey(bearer(token, with_request_id()))
        .await
        .expect("CreateJourney with a request_id")
        .into_inner()
}

#[tokio::test]
async fn another_callers_request_id_never_returns_the_first_callers_journey() {
    let (key, auth) = key_and_auth();
    let gw = TestGateway::start_with(|c| with_owners(c, auth)).await;
    let t = tokens(&key);
    let appkeys = || gw.sandbox().calls(Operation::Appkey, None);

    // (a) Right after A.
    let of_a = create_with_id(&gw, &t.a).await;
    let of_b = create_with_id(&gw, &t.b).await;
    assert_ne!(of_b.appkey, of_a.appkey, "B gets a journey of its own");
    assert_eq!(appkeys(), 2, "B's journey is bought like any other");
    refused_everywhere(&gw, gw.sandbox(), &t.b, &of_a).await;
    // Each replay returns its own caller's journey, with no vendor call.
    assert_eq!(create_with_id(&gw, &t.a).await.appkey, of_a.appkey);
    assert_eq!(create_with_id(&gw, &t.b).await.appkey, of_b.appkey);
    assert_eq!(appkeys(), 2);

    // (c) After A's appkey expired at the vendor (the old 30-minute
    // directory would have forgotten A long before its replay window
    // closed): B still never gets A's appkey, and A's replay still does.
    gw.clock.advance(Duration::from_secs(301));
    assert_eq!(create_with_id(&gw, &t.b).await.appkey, of_b.appkey);
    assert_eq!(create_with_id(&gw, &t.a).await.appkey, of_a.appkey);
    refused_everywhere(&gw, gw.sandbox(), &t.b, &of_a).await;
    assert_eq!(appkeys(), 2);
    gw.stop().await;
}

/// A and 50 of B's calls with the same `request_id` at once: two journeys
/// bought, A's to A, one of B's own to every B.
async fn concurrent(a_on: &TestGateway, b_on: &[&TestGateway], t: &super::owners::Tokens) {
    let a = create_with_id(a_on, &t.a);
    let bs = join_all((0..50).map(|i| create_with_id(b_on[i % b_on.len()], &t.b)));
    let (of_a, of_bs) = tokio::join!(a, bs);
    for of_b in &of_bs {
        assert_ne!(of_b.appkey, of_a.appkey, "no B ever gets A's appkey");
        assert_eq!(of_b.appkey, of_bs[0].appkey, "B's calls share B's journey");
    }
    assert_eq!(create_with_id(a_on, &t.a).await.appkey, of_a.appkey);
}

#[tokio::test]
async fn concurrent_calls_of_two_callers_with_one_request_id_stay_apart() {
    let (key, auth) = key_and_auth();
    let gw = TestGateway::start_with(|c| with_owners(c, auth)).await;
    let t = tokens(&key);
    concurrent(&gw, &[&gw], &t).await;
    assert_eq!(gw.sandbox().calls(Operation::Appkey, None), 2);
    gw.stop().await;
}

#[tokio::test]
async fn concurrent_calls_of_two_callers_with_one_request_id_stay_apart_across_replicas() {
    let (key, auth) = key_and_auth();
    let mut fleet = Fleet::start(0, 1).await;
    fleet
        .add_replicas_with(2, |c| with_owners(c, auth.clone()))
        .await;
    let t = tokens(&key);
    let (one, other) = (&fleet.replicas[0], &fleet.replicas[1]);
    concurrent(one, &[one, other], &t).await;
    assert_eq!(fleet.sandbox.calls(Operation::Appkey, None), 2);
    // A's journey, created on one replica, is A's on the other too.
    let of_a = create_with_id(other, &t.a).await;
    refused_everywhere(other, &fleet.sandbox, &t.b, &of_a).await;
    refused_everywhere(one, &fleet.sandbox, &t.b, &of_a).await;
    fleet.stop().await;
}
