//! Whole journeys through the gateway: 3D and 2D liveness, every
//! document type, the digital licence in its three forms, and the business
//! outcomes (negative liveness, registry and face match) as OK responses.
//! The helpers that read a completed journey's result live here.
//!
//! - `completion`: a journey completes through either liveness proof;
//! - `documents`: each document form yields its own OCR and file kinds;
//! - `outcomes`: negative verdicts are results, not errors.

mod completion;
mod documents;
mod outcomes;

use crate::support::gateway::*;
use idgate::proto::v1;

/// Submits `images`, lets processing finish and reads the result, which
/// must be `Completo`.
async fn complete_with(gw: &TestGateway, appkey: &str, images: &[Vec<u8>]) -> v1::JourneyResult {
    gw.submit_images(appkey, images)
        .await
        .expect("documents accepted");
    gw.finish_processing();
    let result = gw.result(appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    assert_eq!(result.raw_status, "Completo");
    result
}

fn journey_liveness(result: &v1::JourneyResult) -> &v1::LivenessVerdict {
    match result.liveness.as_ref().and_then(|l| l.variant.as_ref()) {
        Some(v1::liveness_result::Variant::Journey(j)) => j,
        other => panic!("expected the full-journey liveness variant, got {other:?}"),
    }
}

fn biometrics(result: &v1::JourneyResult) -> &v1::DocumentBiometrics {
    result
        .document_analysis
        .as_ref()
        .and_then(|a| a.biometrics.as_ref())
        .expect("biometrics")
}

fn document_photos(result: &v1::JourneyResult) -> Vec<Vec<u8>> {
    result
        .photos
        .as_ref()
        .expect("photos")
        .documents
        .iter()
        .map(|d| d.image.to_vec())
        .collect()
}
