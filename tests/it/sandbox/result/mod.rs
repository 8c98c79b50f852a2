//! `/document/result`: the journey result
//! (`docs/upstream.md#the-journey-result`). This file holds what the
//! modules share: a document kind and a journey processed to its result.

use idgate::sandbox::samples::{DocumentKind, DocumentType, LivenessOutcome, Side, TestPerson};
use serde_json::Value;

use crate::support::sandbox::Env;

mod access;
mod checks;
mod fields;
mod processing;

fn kind(t: DocumentType, s: Side) -> DocumentKind {
    DocumentKind::new(t, s)
}

/// 2D proof, then `images`, then the clock past the processing delay.
async fn processed_journey(env: &Env, person: TestPerson, images: &[Vec<u8>]) -> (String, Value) {
    let appkey = env.appkey(person).await;
    assert_eq!(
        env.liveness_2d(&appkey, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
    assert_eq!(env.upload(&appkey, images).await.status, 200);
    env.advance(5);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    (appkey, r.body)
}
