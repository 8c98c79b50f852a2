//! Who may read a result, where and until when: unknown appkeys, a result
//! before any proof, a missing or malformed appkey field, the result port
//! only, and reads after the appkey expires (until retention ends, or 401
//! when so configured).

use idgate::sandbox::{
    SandboxConfig,
    samples::{self, DocumentType, HAPPY_PERSON, LivenessOutcome, Side},
};

use super::kind;
use crate::support::sandbox::{config, start, start_with};

#[tokio::test]
async fn result_answers_404_for_an_unknown_appkey() {
    let env = start().await;
    assert_eq!(env.result("unknown").await.status, 404);
}

#[tokio::test]
async fn result_answers_404_before_a_liveness_proof() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.upload(
        &appkey,
        &[samples::document_image(kind(DocumentType::Rg, Side::Front))],
    )
    .await;
    assert_eq!(env.result(&appkey).await.status, 404);
}

#[tokio::test]
async fn result_answers_400_when_the_appkey_field_is_missing_or_malformed() {
    let env = start().await;
    assert_eq!(
        env.post_form(&env.result_url(), &[("other", "x")])
            .await
            .status,
        400
    );
    assert_eq!(
        env.post_form(&env.result_url(), &[("appkey", " ")])
            .await
            .status,
        400
    );
    let json = env
        .post_json(&env.result_url(), &serde_json::json!({"appkey": "x"}))
        .await;
    assert_eq!(json.status, 400);
}

#[tokio::test]
async fn result_is_served_only_on_the_result_port() {
    let env = start().await;
    let r = env
        .post_form(&env.core("/document/result"), &[("appkey", "x")])
        .await;
    assert_eq!(r.status, 404);
    assert_ne!(env.sandbox.base_url(), env.sandbox.result_base_url());
}

#[tokio::test]
async fn result_stays_readable_after_the_appkey_expires_until_retention_ends() {
    let cfg = SandboxConfig {
        result_retention_secs: 3600,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Invalid).await;
    env.advance(5 * 60);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["livenessResult"]["codID"].as_f64(), Some(300.1));
    env.advance(3600);
    assert_eq!(env.result(&appkey).await.status, 404);
    assert_eq!(env.sandbox.store_sizes().appkeys, 0);
}

#[tokio::test]
async fn result_answers_401_after_the_appkey_expires_when_so_configured() {
    let cfg = SandboxConfig {
        result_readable_after_expiry: false,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    assert_eq!(
        env.result(&appkey).await.status,
        200,
        "readable while valid"
    );
    env.advance(5 * 60);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert!(r.body.to_string().contains("expired"), "{:?}", r.body);
    // Unknown appkeys are still 404, not 401.
    assert_eq!(env.result("unknown").await.status, 404);
}
