//! A journey runs to `Completo` through either liveness proof, and its
//! result carries the liveness verdict, the face bureau, the biometrics
//! and the very photos that were sent.

use super::{biometrics, complete_with, document_photos, journey_liveness};
use crate::support::gateway::*;
use idgate::{
    proto::v1,
    sandbox::samples::{self, DocumentType, LivenessOutcome},
};

fn journey_bureau(result: &v1::JourneyResult) -> &v1::FaceBureauJourney {
    match result.face_bureau.as_ref().and_then(|b| b.variant.as_ref()) {
        Some(v1::face_bureau_result::Variant::Journey(j)) => j,
        other => panic!("expected the full-journey face bureau variant, got {other:?}"),
    }
}

#[tokio::test]
async fn a_3d_journey_completes_with_liveness_bureau_biometrics_and_photos() {
    let gw = TestGateway::start().await;
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let created = gw.create_journey_for(happy_person()).await;
    let after = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!(!created.appkey.is_empty());
    assert!(!created.journey_ref.is_empty());
    assert!(!created.journey_ref.contains(&created.appkey));
    // The appkey's validity from its creation: the embedded sandbox's
    // upstream settings are the defaults ([upstream] appkey_ttl_secs).
    let ttl = idgate::upstream::UpstreamConfig::default().appkey_ttl_secs as i64;
    let expires = created.expire_time.expect("expire_time").seconds;
    assert!(
        (before + ttl..=after + ttl).contains(&expires),
        "{expires} not within [{}, {}]",
        before + ttl,
        after + ttl
    );
    let appkey = created.appkey;

    let verdict = gw
        .run_3d(&appkey, samples::USER_AGENT_VALID)
        .await
        .expect("3D proof");
    assert!(verdict.valid);
    assert_eq!(verdict.code(), v1::LivenessCode::Valid);
    assert!(!verdict.protocol.is_empty());

    let images = document_pair(DocumentType::Rg);
    let result = complete_with(&gw, &appkey, &images).await;

    assert_eq!(result.customer_reference, "TESTREF1");
    assert!(!result.raw_appkey_create_time.is_empty());
    assert!(
        result.appkey_create_time.is_some(),
        "the sandbox's time parses into a timestamp"
    );
    let liveness = journey_liveness(&result);
    assert!(liveness.valid);
    assert_eq!(liveness.code(), v1::LivenessCode::Valid);
    assert_eq!(liveness.protocol, verdict.protocol);
    let bureau = journey_bureau(&result);
    assert_eq!(bureau.code(), v1::FaceBureauCode::Success);
    assert_eq!(bureau.raw_code, 200);
    assert!(samples::RISK_CLASSES.contains(&bureau.raw_score.as_str()));
    assert_ne!(bureau.risk_class(), v1::RiskClass::Unspecified);

    let analysis = result.document_analysis.as_ref().expect("analysis");
    assert_eq!(
        analysis.processing_status(),
        v1::ProcessingStatus::Processed
    );
    assert_eq!(
        analysis.score,
        Some(f64::from(samples::NORMAL_FORENSICS_SCORE))
    );
    let bio = biometrics(&result);
    let face_match = bio.face_match.as_ref().expect("face match");
    assert_eq!(face_match.code(), v1::BiometricCode::Positive);
    let registry = bio.registry.as_ref().expect("registry");
    assert_eq!(registry.code(), v1::BiometricCode::Positive);

    // The photos come back as the bytes that were sent (3D: the sandbox's
    // frontal capture).
    let photos = result.photos.as_ref().expect("photos");
    assert_eq!(
        photos.liveness_frontal.as_ref(),
        samples::selfie().as_slice()
    );
    assert_eq!(document_photos(&result), images);
    gw.stop().await;
}

#[tokio::test]
async fn a_2d_journey_completes_and_returns_the_sent_snapshot_as_frontal_photo() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;

    let ch = gw.challenges(&appkey).await.expect("challenges");
    assert!(!ch.challenge_key.is_empty());
    assert!(!ch.challenges.is_empty());
    assert_eq!(ch.challenge_count as usize, ch.challenges.len());
    assert!(ch.expire_time.is_some());
    assert!(ch.total_duration.is_some_and(|d| d.seconds > 0));
    for c in &ch.challenges {
        let face = c.face_type.as_ref().expect("face type");
        assert!(!face.code.is_empty());
        assert!(!face.icon.is_empty(), "icon decoded from Base64");
    }
    let snapshots = snapshots_for(&ch, LivenessOutcome::Valid);
    let frontal = snapshots[0].image.to_vec();
    let verdict = gw
        .submit_snapshots(&appkey, &ch.challenge_key, snapshots)
        .await
        .expect("2D proof");
    assert!(verdict.valid);
    assert_eq!(verdict.code(), v1::LivenessCode::Valid);

    let images = document_pair(DocumentType::Cnh);
    let result = complete_with(&gw, &appkey, &images).await;
    let liveness = journey_liveness(&result);
    assert!(liveness.valid);
    assert_eq!(liveness.protocol, verdict.protocol);
    let photos = result.photos.as_ref().expect("photos");
    assert_eq!(photos.liveness_frontal.as_ref(), frontal.as_slice());
    assert_eq!(document_photos(&result), images);
    gw.stop().await;
}
