//! Per-caller limits over real sockets: a caller at its
//! `max_watch_streams` is refused `RESOURCE_EXHAUSTED` /
//! `CALLER_LIMIT_REACHED` at once, while another caller still watches;
//! a closed stream gives its slot back. A `[[budgets]]` entry naming a
//! caller counts that caller's calls only.

use idgate::{
    domain::Operation,
    proto::v1,
    spend::{BilledOperation, BudgetConfig},
};
use tonic::Code;

use super::owners::with_owners_text;
use crate::gateway::spend::budget;
use crate::support::{
    gateway::{TestGateway, assert_error, by_ref, happy_person, retryable},
    jwt::{TestKey, bearer, jwks_file, jwt_auth},
    wait::eventually,
};

const LIMITED: &str = r#"
    [[callers]]
    name = "greedy"
    jwt_subject = "svc-greedy"
    operator_profiles = ["sandbox"]
    operations = ["create_journey", "watch"]
    max_watch_streams = 2

    [[callers]]
    name = "neighbour"
    jwt_subject = "svc-neighbour"
    operator_profiles = ["sandbox"]
    operations = ["create_journey", "watch"]
"#;

#[tokio::test]
async fn a_caller_past_its_stream_cap_is_refused_and_others_are_not() {
    let key = TestKey::es256("limits");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| with_owners_text(c, auth, LIMITED)).await;
    let (greedy, neighbour) = (key.token("svc-greedy"), key.token("svc-neighbour"));
    let create = async |token: &str| {
        gw.journeys()
            .create_journey(bearer(token, happy_person()))
            .await
            .expect("create")
            .into_inner()
    };
    let watch = async |token: &str, created: &v1::CreateJourneyResponse| {
        gw.journeys()
            .watch_journey(bearer(token, by_ref(&created.journey_ref)))
            .await
    };
    let mine = create(&greedy).await;
    let first = watch(&greedy, &mine).await.expect("first stream");
    let _second = watch(&greedy, &mine).await.expect("second stream");
    let err = watch(&greedy, &mine).await.expect_err("third stream");
    assert_error(&err, Code::ResourceExhausted, "CALLER_LIMIT_REACHED");
    assert!(retryable(&err), "{err:?}");

    // The neighbour's slots are its own.
    let theirs = create(&neighbour).await;
    let _other = watch(&neighbour, &theirs)
        .await
        .expect("another caller watches");

    // A closed stream gives its slot back.
    drop(first);
    eventually(
        "the slot comes back",
        std::time::Duration::from_secs(5),
        async || watch(&greedy, &mine).await.is_ok(),
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_budget_naming_a_caller_limits_that_caller_only() {
    let key = TestKey::es256("caller-budget");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| {
        with_owners_text(c, auth, LIMITED);
        c.budgets = vec![BudgetConfig {
            caller: Some("greedy".into()),
            ..budget("sandbox", BilledOperation::CreateJourney, Some(1), None)
        }];
    })
    .await;
    let create = async |token: &str| {
        gw.journeys()
            .create_journey(bearer(token, happy_person()))
            .await
    };
    let (greedy, neighbour) = (key.token("svc-greedy"), key.token("svc-neighbour"));
    create(&greedy).await.expect("the caller's one journey");
    let before = gw.calls(Operation::Appkey);
    let err = create(&greedy).await.expect_err("its budget is spent");
    assert_error(&err, Code::ResourceExhausted, "BUDGET_EXCEEDED");
    assert_eq!(
        gw.calls(Operation::Appkey),
        before,
        "refused before the vendor"
    );
    for _ in 0..3 {
        create(&neighbour)
            .await
            .expect("another caller's calls are not counted");
    }
    gw.stop().await;
}
