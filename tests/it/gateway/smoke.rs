//! The product's first promise: a whole journey through the gateway.

use crate::support::gateway::*;
use idgate::proto::v1;

#[tokio::test]
async fn a_3d_journey_completes_with_the_typed_result() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let verdict = gw.pass_3d(&appkey).await;
    assert!(verdict.valid);
    assert_eq!(verdict.code(), v1::LivenessCode::Valid);
    gw.submit_rg(&appkey).await;
    gw.finish_processing();
    let result = gw
        .journeys()
        .get_journey_result(v1::GetJourneyResultRequest { appkey })
        .await
        .expect("result")
        .into_inner()
        .result
        .expect("result set");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    let analysis = result.document_analysis.expect("analysis");
    assert!(analysis.ocr.expect("ocr").rg.is_some());
    gw.stop().await;
}
