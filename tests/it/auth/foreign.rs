//! Appkeys this gateway did not issue (issue 25): refused
//! `NOT_FOUND`/`JOURNEY_UNKNOWN` before any vendor call or billing, unless
//! `[journeys] accept_foreign_appkeys` (then they reach the vendor and are
//! billed to the default profile).

use idgate::{
    config::{Config, UpstreamConfig},
    proto::v1,
    spend::BilledOperation,
};
use tonic::Code;

use crate::{
    gateway::spend::budget,
    support::gateway::{TestGateway, assert_error, rg_images, use_upstream},
};

/// A budget of one 3D session and one document submission a minute.
fn tight_budgets(c: &mut Config) {
    c.budgets = vec![
        budget("sandbox", BilledOperation::StartSession3D, Some(1), None),
        budget("sandbox", BilledOperation::SubmitDocuments, Some(1), None),
    ];
}

fn random_appkey() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn start_3d(gw: &TestGateway, appkey: String) -> Result<(), tonic::Status> {
    gw.liveness()
        .start_session3_d(v1::StartSession3DRequest {
            appkey,
            user_agent: "test".into(),
        })
        .await
        .map(drop)
}

#[tokio::test]
async fn a_thousand_random_appkeys_make_no_vendor_call_and_leave_the_budget_untouched() {
    let gw = TestGateway::start_with(tight_budgets).await;
    for round in 0..250 {
        let calls = [
            start_3d(&gw, random_appkey()).await,
            gw.documents()
                .submit_document_images(v1::SubmitDocumentImagesRequest {
                    appkey: random_appkey(),
                    images: rg_images(),
                })
                .await
                .map(drop),
            gw.result(&random_appkey()).await.map(drop),
            gw.challenges(&random_appkey()).await.map(drop),
        ];
        for status in calls {
            let err = status.expect_err("a foreign appkey is refused");
            assert_error(&err, Code::NotFound, "JOURNEY_UNKNOWN");
            if round == 0 {
                assert!(err.message().contains("did not issue"), "{err:?}");
            }
        }
    }
    assert_eq!(
        gw.total_calls(),
        0,
        "no vendor call for 1,000 foreign appkeys"
    );

    // The budget is whole: the one session and the one submission of the
    // minute go to a journey of this gateway; the next are refused.
    let appkey = gw.create_journey().await;
    start_3d(&gw, appkey.clone())
        .await
        .expect("the budget's one session");
    let submit = async || {
        gw.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            })
            .await
    };
    submit().await.expect("the budget's one submission");
    let err = start_3d(&gw, appkey.clone())
        .await
        .expect_err("budget spent");
    assert_error(&err, Code::ResourceExhausted, "BUDGET_EXCEEDED");
    let err = submit().await.expect_err("budget spent");
    assert_error(&err, Code::ResourceExhausted, "BUDGET_EXCEEDED");
    gw.stop().await;
}

#[tokio::test]
async fn accepted_foreign_appkeys_reach_the_vendor_and_are_billed() {
    // A journey another gateway issued on the same sandbox.
    let issuer = TestGateway::start().await;
    let appkey = issuer.create_journey().await;
    let sandbox = issuer.sandbox();
    let upstream = UpstreamConfig {
        base_url: sandbox.base_url(),
        result_base_url: sandbox.result_base_url(),
        ..UpstreamConfig::default()
    };
    let channels = issuer.sandbox_channel_specs();
    let gw = TestGateway::start_with(move |c| {
        use_upstream(c, upstream);
        c.channels = channels;
        c.journeys.accept_foreign_appkeys = true;
        // Billed to the default profile (the open caller names none).
        c.budgets = vec![budget(
            "default",
            BilledOperation::StartSession3D,
            Some(1),
            None,
        )];
    })
    .await;
    let before = issuer.total_calls();
    start_3d(&gw, appkey.clone())
        .await
        .expect("a foreign session");
    assert!(issuer.total_calls() > before, "it reached the vendor");
    let err = start_3d(&gw, appkey)
        .await
        .expect_err("billed: budget spent");
    assert_error(&err, Code::ResourceExhausted, "BUDGET_EXCEEDED");
    gw.stop().await;
    issuer.stop().await;
}

#[tokio::test]
async fn an_appkey_issued_here_is_never_foreign_even_when_foreign_appkeys_are_accepted() {
    use super::owners::{create, key_and_auth, refused_everywhere, tokens, with_owners};
    let (key, auth) = key_and_auth();
    let gw = TestGateway::start_with(|c| {
        with_owners(c, auth);
        c.journeys.accept_foreign_appkeys = true;
    })
    .await;
    let t = tokens(&key);
    let of_a = create(&gw, &t.a).await;
    // Issued here: checked against its owner, whatever the setting says.
    refused_everywhere(&gw, gw.sandbox(), &t.b, &of_a).await;
    // Made up: served as documented (it reaches the vendor, which knows
    // no such appkey).
    let err = gw
        .journeys()
        .get_journey_result(crate::support::jwt::bearer(
            &t.b,
            v1::GetJourneyResultRequest {
                appkey: random_appkey(),
            },
        ))
        .await
        .expect_err("the vendor knows no such appkey");
    assert_ne!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(gw.sandbox().calls(idgate::domain::Operation::Result, None) >= 1);
    gw.stop().await;
}
