//! Observability end to end, on the real gateway and its embedded sandbox:
//! one trace per call from the caller down to the sandbox, the journey
//! reference on every span of a journey, the webhook linked to the result
//! read it triggers ([`traces`]), no personal data or secret anywhere in
//! logs, spans, metrics or errors ([`privacy`]), and `/metrics` after a
//! journey ([`exposition`]).
//!
//! Each test installs its subscriber for its own thread
//! ([`Traced::start`]) on the current-thread runtime of `#[tokio::test]`:
//! every task the gateway and the sandbox spawn runs on that thread and
//! reports to that test's collector, and [`Traced::start`] keeps the other
//! tests of the process from switching its spans off.
//!
//! This module holds what the submodules share: a test's telemetry with
//! its gateway, and a whole 3D journey run through it.

mod exposition;
mod privacy;
mod traces;

use std::time::Duration;

use idgate::{config::Config, proto::v1, sandbox::samples};
use tokio_stream::StreamExt as _;

use crate::support::{gateway::TestGateway, otlp_collector::CollectedSpan, telemetry::Traced};

const WAIT: Duration = Duration::from_secs(20);

/// A test's telemetry and its gateway.
struct Observed {
    traced: Traced,
    gw: TestGateway,
}

/// Telemetry to an in-process collector and logs at TRACE into memory,
/// installed for this thread, then a gateway on the embedded sandbox.
async fn observe(edit: impl FnOnce(&mut Config)) -> Observed {
    let traced = Traced::start("idgate-e2e", "trace").await;
    let gw = TestGateway::start_with(edit).await;
    Observed { traced, gw }
}

impl Observed {
    /// Flushes until `done` holds for the spans received.
    async fn spans_until(&self, done: impl Fn(&[CollectedSpan]) -> bool) -> Vec<CollectedSpan> {
        self.traced.spans_until(done).await
    }

    async fn finish(self) {
        let Observed { gw, traced } = self;
        gw.stop().await;
        traced.finish().await;
    }
}

/// Runs a whole 3D journey with documents, the result and a watch (which
/// ends after the webhook). Returns the appkey and the session token.
async fn run_3d_journey(
    gw: &TestGateway,
    person: v1::CreateJourneyRequest,
    images: Vec<v1::DocumentImage>,
) -> (String, String) {
    let appkey = gw.create_journey_for(person).await.appkey;
    let mut l = gw.liveness();
    let session = l
        .start_session3_d(v1::StartSession3DRequest {
            appkey: appkey.clone(),
            user_agent: samples::USER_AGENT_VALID.into(),
        })
        .await
        .expect("StartSession3D")
        .into_inner();
    let token = session.session_token.clone();
    let verdict = l
        .verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: session.session_token,
            channel: session.channel,
        })
        .await
        .expect("VerifyLiveness3D")
        .into_inner();
    assert!(verdict.verdict.expect("verdict").valid);
    gw.documents()
        .submit_document_images(v1::SubmitDocumentImagesRequest {
            appkey: appkey.clone(),
            images,
        })
        .await
        .expect("SubmitDocumentImages");
    let mut stream = gw
        .journeys()
        .watch_journey(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.clone())),
        })
        .await
        .expect("WatchJourney")
        .into_inner();
    let mut delivered = gw.sandbox().watch_webhook_stats();
    let before = delivered.borrow().delivered;
    gw.finish_processing();
    tokio::time::timeout(WAIT, delivered.wait_for(|s| s.delivered > before))
        .await
        .expect("webhook delivered in time")
        .expect("sandbox running");
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = event.expect("watch event").result;
    }
    assert_eq!(
        last.expect("final result").status(),
        v1::JourneyStatus::Complete
    );
    let result = gw
        .journeys()
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: appkey.clone(),
        })
        .await
        .expect("GetJourneyResult")
        .into_inner();
    assert_eq!(
        result.result.expect("result").status(),
        v1::JourneyStatus::Complete
    );
    (appkey, token)
}
