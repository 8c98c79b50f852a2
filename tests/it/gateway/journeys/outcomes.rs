//! A negative business outcome (liveness refused or blocked, registry or
//! face match negative, a face or document that cannot be read) is an OK
//! response carrying its code, never a gRPC error: the check ran, and its
//! answer is the caller's to act on.

use super::{biometrics, complete_with, journey_liveness};
use crate::support::gateway::*;
use idgate::{
    proto::v1,
    sandbox::samples::{self, DocumentKind, DocumentType, LivenessOutcome, Side},
};

#[tokio::test]
async fn negative_2d_liveness_outcomes_are_ok_responses_with_their_codes() {
    let gw = TestGateway::start().await;
    for (outcome, code, raw) in [
        (LivenessOutcome::Invalid, v1::LivenessCode::Invalid, "300.1"),
        (
            LivenessOutcome::Blocked,
            v1::LivenessCode::UserBlocked,
            "300.2",
        ),
    ] {
        let appkey = gw.create_journey().await;
        let (verdict, _) = gw.pass_2d(&appkey, outcome).await;
        assert!(!verdict.valid, "{outcome:?}");
        assert_eq!(verdict.code(), code);
        assert_eq!(verdict.raw_code, raw);
        assert!(!verdict.cause.is_empty(), "{outcome:?}: a cause is given");

        let result = complete_with(&gw, &appkey, &document_pair(DocumentType::Rg)).await;
        let liveness = journey_liveness(&result);
        assert!(!liveness.valid);
        assert_eq!(liveness.code(), code);
        assert_eq!(liveness.raw_code, raw);
    }
    gw.stop().await;
}

#[tokio::test]
async fn negative_3d_liveness_outcomes_are_ok_responses_with_their_codes() {
    let gw = TestGateway::start().await;
    for (user_agent, code, raw) in [
        (
            samples::USER_AGENT_INVALID,
            v1::LivenessCode::Invalid,
            "300.1",
        ),
        (
            samples::USER_AGENT_BLOCKED,
            v1::LivenessCode::UserBlocked,
            "300.2",
        ),
    ] {
        let appkey = gw.create_journey().await;
        let verdict = gw.run_3d(&appkey, user_agent).await.expect("3D verdict");
        assert!(!verdict.valid, "{user_agent}");
        assert_eq!(verdict.code(), code);
        assert_eq!(verdict.raw_code, raw);

        let result = gw.result(&appkey).await.expect("result");
        assert_eq!(result.status(), v1::JourneyStatus::NotProcessed);
        let liveness = journey_liveness(&result);
        assert!(!liveness.valid);
        assert_eq!(liveness.code(), code);
    }
    gw.stop().await;
}

#[tokio::test]
async fn registry_and_face_match_outcomes_follow_the_test_persons() {
    use v1::BiometricCode as B;
    let gw = TestGateway::start().await;
    let cases = [
        (
            samples::REGISTRY_POSITIVE[1],
            B::Positive,
            Some(0.93),
            B::Positive,
        ),
        (
            samples::REGISTRY_NEGATIVE[0],
            B::Negative,
            Some(0.21),
            B::Positive,
        ),
        (
            samples::REGISTRY_NOT_FOUND,
            B::TaxIdNotRegistered,
            None,
            B::Positive,
        ),
        (
            samples::FACE_MATCH_NEGATIVE[0],
            B::TaxIdNotRegistered,
            None,
            B::Negative,
        ),
    ];
    for (who, registry_code, registry_score, face_code) in cases {
        let appkey = gw.create_journey_for(person(who)).await.appkey;
        gw.pass_3d(&appkey).await;
        let result = complete_with(&gw, &appkey, &document_pair(DocumentType::Rg)).await;
        let bio = biometrics(&result);
        let registry = bio.registry.as_ref().expect("registry");
        assert_eq!(registry.code(), registry_code, "{}", who.name);
        assert_eq!(registry.raw_code, (registry_code as i32).to_string());
        assert_eq!(registry.score, registry_score, "{}", who.name);
        assert!(!registry.cause.is_empty());
        let face = bio.face_match.as_ref().expect("face match");
        assert_eq!(face.code(), face_code, "{}", who.name);
    }

    // A document without a face: face match 400, still a complete journey.
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let no_face = vec![samples::face_not_found_image(DocumentKind::new(
        DocumentType::Rg,
        Side::Front,
    ))];
    let result = complete_with(&gw, &appkey, &no_face).await;
    let face = biometrics(&result).face_match.clone().expect("face match");
    assert_eq!(face.code(), B::FaceNotFound);
    assert_eq!(face.score, None);
    gw.stop().await;
}

#[tokio::test]
async fn an_unreadable_document_ends_the_journey_in_error_without_ocr() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let image =
        samples::unreadable_document_image(DocumentKind::new(DocumentType::Cin, Side::Front));
    gw.submit_images(&appkey, &[image]).await.expect("accepted");
    gw.finish_processing();
    let result = gw.result(&appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Error);
    let analysis = result.document_analysis.expect("analysis");
    assert_eq!(analysis.processing_status(), v1::ProcessingStatus::Failed);
    assert!(analysis.ocr.is_none());
    assert_eq!(
        analysis.files[0].status(),
        v1::FileStatus::IdentificationFailed
    );
    gw.stop().await;
}
