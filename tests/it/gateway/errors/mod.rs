//! Every upstream status code of the REST interface, and every broken
//! answer, mapped to the gRPC error that `docs/upstream.md#status-codes` and
//! the error model of `docs/api.md` promise; calls
//! that consume the appkey are sent exactly once; safe calls are retried.
//! Faults are injected in the sandbox; counters prove what was sent. Every
//! upstream status row of the error table (400, 401, 403, 404, 409, 429,
//! 5xx, any other) is driven here. This file holds what the modules
//! share: fault injection, and each consuming operation driven on a fresh
//! appkey to prove it is sent once.

use idgate::{
    domain::Operation,
    proto::v1::{self, submit_digital_licence_request::Licence},
    sandbox::{
        FaultAction, FaultRule, SandboxHandle,
        samples::{self, DocumentType, LivenessOutcome},
    },
};
use tonic::Code;
use tonic_types::StatusExt;

use crate::support::gateway::*;

mod malformed;
mod outages;
mod refusals;

fn inject(sandbox: &SandboxHandle, op: Operation, action: FaultAction) {
    sandbox
        .add_fault(FaultRule::new(action).on(op))
        .expect("valid fault");
}

/// Forgets faults and counters, for the next case on the same sandbox.
fn reset(sandbox: &SandboxHandle) {
    sandbox.clear_faults();
    sandbox.reset_calls();
}

/// `ErrorInfo.metadata[key]`.
fn meta(status: &tonic::Status, key: &str) -> Option<String> {
    status
        .get_details_error_info()
        .and_then(|i| i.metadata.get(key).cloned())
}

/// The operations that consume the appkey, each driven through the
/// gateway on a fresh appkey of `gw`; returns the gRPC outcome.
#[derive(Debug, Clone, Copy)]
enum Consuming {
    Captcha,
    Liveness3D,
    DocumentImages,
    DigitalLicence,
}

impl Consuming {
    const ALL: [Consuming; 4] = [
        Consuming::Captcha,
        Consuming::Liveness3D,
        Consuming::DocumentImages,
        Consuming::DigitalLicence,
    ];

    fn op(self) -> Operation {
        match self {
            Consuming::Captcha => Operation::Captcha,
            Consuming::Liveness3D => Operation::Liveness3D,
            Consuming::DocumentImages => Operation::DocumentImages,
            Consuming::DigitalLicence => Operation::DigitalLicence,
        }
    }

    /// Prepares a fresh appkey up to the operation (no fault installed
    /// yet), then returns a closure-like call of the operation.
    async fn prepare(self, gw: &TestGateway) -> Prepared {
        let appkey = gw.create_journey().await;
        match self {
            Consuming::Captcha => {
                let ch = gw.challenges(&appkey).await.expect("challenges");
                Prepared::Captcha(appkey, ch)
            }
            Consuming::Liveness3D => {
                let s = gw
                    .liveness()
                    .start_session3_d(v1::StartSession3DRequest {
                        appkey: appkey.clone(),
                        user_agent: samples::USER_AGENT_VALID.into(),
                    })
                    .await
                    .expect("session")
                    .into_inner();
                Prepared::Liveness3D(v1::VerifyLiveness3DRequest {
                    appkey,
                    session_token: s.session_token,
                    channel: s.channel,
                })
            }
            Consuming::DocumentImages | Consuming::DigitalLicence => {
                gw.pass_3d(&appkey).await;
                if matches!(self, Consuming::DocumentImages) {
                    Prepared::Documents(appkey)
                } else {
                    Prepared::Licence(appkey)
                }
            }
        }
    }
}

enum Prepared {
    Captcha(String, v1::CreateChallengesResponse),
    Liveness3D(v1::VerifyLiveness3DRequest),
    Documents(String),
    Licence(String),
}

impl Prepared {
    fn appkey(&self) -> &str {
        match self {
            Prepared::Captcha(a, _) | Prepared::Documents(a) | Prepared::Licence(a) => a,
            Prepared::Liveness3D(r) => &r.appkey,
        }
    }

    /// Sends the consuming call; `Ok(())` on success.
    async fn send(&self, gw: &TestGateway) -> Result<(), tonic::Status> {
        match self {
            Prepared::Captcha(appkey, ch) => gw
                .answer_challenges(appkey, ch, LivenessOutcome::Valid)
                .await
                .map(drop),
            Prepared::Liveness3D(req) => gw
                .liveness()
                .verify_liveness3_d(req.clone())
                .await
                .map(drop),
            Prepared::Documents(appkey) => gw
                .submit_images(appkey, &document_pair(DocumentType::Rg))
                .await
                .map(drop),
            Prepared::Licence(appkey) => gw
                .submit_licence(
                    appkey,
                    Licence::QrImage(samples::digital_licence_image().into()),
                )
                .await
                .map(drop),
        }
    }
}

/// Calls of `op` on every channel (and none).
fn calls_any_channel(sandbox: &SandboxHandle, op: Operation) -> u64 {
    sandbox
        .all_calls()
        .iter()
        .filter(|c| c.operation == op.as_str())
        .map(|c| c.count)
        .sum()
}

/// Installs `action` on each consuming operation in turn and asserts the
/// call fails with `code`/`reason`, without RetryInfo, sent exactly once.
async fn assert_consuming_sent_once(
    gw: &TestGateway,
    action: FaultAction,
    code: Code,
    reason_: &str,
) {
    assert_consuming_sent_once_on(gw, gw, gw.sandbox(), action, code, reason_).await;
}

/// [`assert_consuming_sent_once`] with the journeys prepared through
/// `prepare` and the consuming calls sent through `gw`, both on `sb`.
async fn assert_consuming_sent_once_on(
    prepare: &TestGateway,
    gw: &TestGateway,
    sb: &SandboxHandle,
    action: FaultAction,
    code: Code,
    reason_: &str,
) {
    for c in Consuming::ALL {
        let prepared = c.prepare(prepare).await;
        reset(sb);
        inject(sb, c.op(), action);
        let err = prepared.send(gw).await.expect_err("fault answers");
        assert_error(&err, code, reason_);
        assert!(!retryable(&err), "{c:?} {action:?}: no RetryInfo");
        assert_eq!(meta(&err, "operation").as_deref(), Some(c.op().as_str()));
        assert!(!err.message().contains(prepared.appkey()));
        assert_eq!(
            calls_any_channel(sb, c.op()),
            1,
            "{c:?} {action:?}: sent exactly once"
        );
        reset(sb);
    }
}
