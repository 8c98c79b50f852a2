//! A single replica restarted on the same configuration forgets nothing
//! its callers were told: killed (SIGKILL) or stopped (SIGTERM) once
//! mid-journey (its 3D session started) and once right after a
//! `CreateJourney` answer, it lets the owner finish and watch its journey
//! and replays the owner's `request_id`s to the same appkeys (no second
//! `/appkey`), and refuses another caller `PERMISSION_DENIED` before any
//! vendor call.

use idgate::{domain::Operation, proto::v1};
use tonic::Code;

use super::Site;
use crate::support::{
    gateway::{assert_error, by_appkey, drain, rg_images},
    jwt::bearer,
};

/// The round the tests run, with `signal` at each of the two points.
async fn restarted_by(signal: &str) {
    let site = Site::new("").await;
    let (owner, other) = (site.token("svc-owner"), site.token("svc-other"));
    let (mid, answered_id) = (new_request_id(), new_request_id());

    // Mid-journey: created, its 3D session started, then the process goes.
    let first = site.serve().await;
    let journey = first.create(&owner, &mid).await.expect("create");
    let session = first
        .start_3d(&owner, &journey.appkey)
        .await
        .expect("start a 3D session");
    first.stop(signal).await;

    // Right after a CreateJourney answer.
    let second = site.serve().await;
    let answered = second.create(&owner, &answered_id).await.expect("create");
    second.stop(signal).await;

    let third = site.serve().await;
    let appkeys_bought = site.vendor.calls(Operation::Appkey, None);

    // The owner finishes: the 3D proof of the session started before
    // (its channel from the binding the store kept), then its documents.
    let verdict = third
        .liveness()
        .verify_liveness3_d(bearer(
            &owner,
            v1::VerifyLiveness3DRequest {
                appkey: journey.appkey.clone(),
                session_token: session.session_token.clone(),
                channel: String::new(),
            },
        ))
        .await
        .expect("verify after the restart")
        .into_inner()
        .verdict
        .expect("a verdict");
    assert!(verdict.valid, "{verdict:?}");
    third
        .documents()
        .submit_document_images(bearer(
            &owner,
            v1::SubmitDocumentImagesRequest {
                appkey: journey.appkey.clone(),
                images: rg_images(),
            },
        ))
        .await
        .expect("documents after the restart");
    site.finish_processing();
    let watch = third
        .journeys()
        .watch_journey(bearer(&owner, by_appkey(&journey.appkey)))
        .await
        .expect("watch after the restart")
        .into_inner();
    let (items, end) = drain(watch).await;
    assert!(end.is_none(), "{end:?}");
    let last = items.last().expect("the watch sent the journey's state");
    assert_eq!(last.status(), v1::JourneyStatus::Complete, "{items:?}");
    assert!(last.result.is_some(), "the watch ends with the result");

    // The owner's replays: the same appkeys, none bought again.
    let replayed = third.create(&owner, &mid).await.expect("replay");
    assert_eq!(replayed.appkey, journey.appkey);
    let replayed = third.create(&owner, &answered_id).await.expect("replay");
    assert_eq!(replayed.appkey, answered.appkey);
    assert_eq!(site.vendor.calls(Operation::Appkey, None), appkeys_bought);
    // The journey answered just before the stop goes on, its owner's.
    third
        .start_3d(&owner, &answered.appkey)
        .await
        .expect("the owner's journey answered before the stop");

    // Another caller: refused as on the first replica, before any vendor
    // call.
    let vendor_calls = site.vendor_calls();
    for appkey in [&journey.appkey, &answered.appkey] {
        let refused = third
            .start_3d(&other, appkey)
            .await
            .expect_err("not its own");
        assert_error(&refused, Code::PermissionDenied, "JOURNEY_NOT_OWNED");
        let refused = third
            .journeys()
            .watch_journey(bearer(&other, by_appkey(appkey)))
            .await
            .expect_err("not its own");
        assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    }
    assert_eq!(
        site.vendor_calls(),
        vendor_calls,
        "no vendor call on another caller's refusal"
    );
    third.stop("TERM").await;
}

fn new_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[tokio::test]
async fn a_single_replica_sigkilled_mid_journey_and_after_a_create_answer_forgets_nothing() {
    restarted_by("KILL").await;
}

#[tokio::test]
async fn a_single_replica_stopped_by_sigterm_mid_journey_and_after_a_create_answer_forgets_nothing()
{
    restarted_by("TERM").await;
}
