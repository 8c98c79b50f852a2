//! Reloading the configuration file (what SIGHUP runs) on a gateway with
//! JWT callers: a reload is all or nothing (a broken JWKS file leaves the
//! callers and the channels as they were, and is counted refused), and it
//! reaches open streams (a caller removed, or no longer granted `watch`,
//! has her open `WatchJourney` ended `PERMISSION_DENIED` /
//! `CALLER_REVOKED` while another caller's watch goes on; a narrowed view
//! applies to the next result).

use std::path::PathBuf;

use idgate::{config::Config, proto::v1};
use tonic::Code;
use tonic_types::StatusExt as _;

use crate::support::{
    gateway::{TestGateway, assert_error, by_ref, drain, happy_person, rg_images},
    jwt::{AUDIENCE, ISSUER, TestKey, bearer, jwks_of},
    metrics::{counted, series},
    temp,
    wait::EVENT_WAIT,
};

/// `alice` creates and watches her journeys; `bob` works on any journey
/// in the full view.
const ALICE: &str = r#"
    [[callers]]
    name = "alice"
    jwt_subject = "svc-alice"
    operator_profiles = ["sandbox"]
    operations = ["create_journey", "watch"]
"#;
const BOB: &str = r#"
    [[callers]]
    name = "bob"
    jwt_subject = "svc-bob"
    operations = ["session_3d", "verify_3d", "documents", "read_result", "watch"]
    journeys = "any"
"#;

const RELOADS_APPLIED: &str = r#"idgate_config_reloads_total{outcome="applied"}"#;
const RELOADS_REFUSED: &str = r#"idgate_config_reloads_total{outcome="refused"}"#;
const APPLIED_AT: &str = "idgate_config_last_reload_success_timestamp_seconds";

/// A configuration file with JWT callers and its JWKS file, both
/// rewritten by the tests, and the key that signs the callers' tokens.
struct CallersFile {
    _dir: tempfile::TempDir,
    file: PathBuf,
    keys: PathBuf,
    key: TestKey,
}

impl CallersFile {
    fn new(callers: &str) -> Self {
        let dir = temp::dir("reloads");
        let key = TestKey::es256("reloads");
        let keys = dir.path().join("jwks.json");
        std::fs::write(&keys, jwks_of(&[&key])).expect("write the JWKS file");
        let file = dir.path().join("idgate.toml");
        let this = Self {
            _dir: dir,
            file,
            keys,
            key,
        };
        this.write(callers, "");
        this
    }

    /// The file: `[auth]`, `[[callers]]` and `more` (e.g. channels).
    fn write(&self, callers: &str, more: &str) {
        let text = format!(
            "[auth]\nmode = \"jwt\"\nallow_plaintext_tokens = true\n\
             [auth.jwt]\njwks_file = {:?}\nissuer = {ISSUER:?}\naudience = {AUDIENCE:?}\n\
             {callers}\n{more}\n",
            self.keys.display().to_string(),
        );
        std::fs::write(&self.file, text).expect("write the configuration file");
    }

    /// A gateway started on the file's callers, reloading the file.
    async fn start(&self) -> TestGateway {
        let loaded = Config::load(Some(&self.file)).expect("the file loads");
        TestGateway::start_reloadable_with(&self.file, |c| {
            c.auth = loaded.auth;
            c.callers = loaded.callers;
        })
        .await
    }

    fn token(&self, subject: &str) -> String {
        self.key.token(subject)
    }
}

async fn channel_names(gw: &TestGateway) -> Vec<String> {
    gw.list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect()
}

async fn create(gw: &TestGateway, token: &str) -> Result<v1::CreateJourneyResponse, tonic::Status> {
    gw.journeys()
        .create_journey(bearer(token, happy_person()))
        .await
        .map(tonic::Response::into_inner)
}

async fn watch(
    gw: &TestGateway,
    token: &str,
    journey_ref: &str,
) -> tonic::Streaming<v1::WatchJourneyResponse> {
    gw.journeys()
        .watch_journey(bearer(token, by_ref(journey_ref)))
        .await
        .expect("watch")
        .into_inner()
}

/// The status an open watch ends with, within [`EVENT_WAIT`].
async fn ended(stream: &mut tonic::Streaming<v1::WatchJourneyResponse>) -> tonic::Status {
    tokio::time::timeout(EVENT_WAIT, stream.message())
        .await
        .expect("the watch ended within the wait")
        .expect_err("the watch ended with an error")
}

/// Takes the journey of `appkey` to its result as `token`'s caller: a
/// liveness proof, RG documents, processing finished.
async fn complete(gw: &TestGateway, token: &str, appkey: &str) {
    let mut liveness = gw.liveness();
    let session = liveness
        .start_session3_d(bearer(
            token,
            v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "test".into(),
            },
        ))
        .await
        .expect("session")
        .into_inner();
    liveness
        .verify_liveness3_d(bearer(
            token,
            v1::VerifyLiveness3DRequest {
                appkey: appkey.into(),
                session_token: session.session_token,
                channel: session.channel,
            },
        ))
        .await
        .expect("verify");
    gw.documents()
        .submit_document_images(bearer(
            token,
            v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: rg_images(),
            },
        ))
        .await
        .expect("documents");
    gw.finish_processing();
}

/// The final result a watch ends with (OK), within [`EVENT_WAIT`].
async fn final_result(stream: tonic::Streaming<v1::WatchJourneyResponse>) -> v1::JourneyResult {
    let (items, end) = drain(stream).await;
    assert!(end.is_none(), "the watch ended with {end:?}");
    items
        .last()
        .and_then(|last| last.result.clone())
        .expect("the watch ends with the result")
}

#[tokio::test]
async fn a_reload_with_a_broken_jwks_file_changes_neither_callers_nor_channels_and_is_counted_refused()
 {
    let file = CallersFile::new(&format!("{ALICE}{BOB}"));
    let gw = file.start().await;
    let alice = file.token("svc-alice");
    let started = gw.metrics_text().await;
    let applied_at = series(&started, APPLIED_AT);
    assert!(applied_at > 0.0, "set at start");
    assert_eq!(counted(&started, RELOADS_REFUSED), 0.0);

    // The edit: alice removed, the alternative channel alone, and a key
    // file that is no key set. The file parses; the keys do not.
    let alternative = gw.sandbox_channel_specs()[1].base_url.clone();
    let alone = format!("[[channels]]\nname = \"alternative\"\nbase_url = \"{alternative}\"\n");
    file.write(BOB, &alone);
    std::fs::write(&file.keys, "not a key set").expect("break the JWKS file");
    gw.gateway.reload().await.expect_err("refused");

    create(&gw, &alice)
        .await
        .expect("alice is still a caller, with the keys in use");
    assert_eq!(channel_names(&gw).await, ["primary", "alternative"]);
    let refused = gw.metrics_text().await;
    assert_eq!(counted(&refused, RELOADS_REFUSED), 1.0);
    assert_eq!(counted(&refused, RELOADS_APPLIED), 0.0);
    assert_eq!(series(&refused, APPLIED_AT), applied_at);

    // The key file mended: the same edit applies, all of it.
    std::fs::write(&file.keys, jwks_of(&[&file.key])).expect("mend the JWKS file");
    gw.gateway.reload().await.expect("applied");
    let status = create(&gw, &alice).await.expect_err("alice is removed");
    assert_error(&status, Code::PermissionDenied, "CALLER_UNKNOWN");
    assert_eq!(channel_names(&gw).await, ["alternative"]);
    let applied = gw.metrics_text().await;
    assert_eq!(counted(&applied, RELOADS_APPLIED), 1.0);
    assert!(series(&applied, APPLIED_AT) >= applied_at);
    gw.stop().await;
}

/// Alice's journey watched by alice and by bob; the file rewritten as
/// `alice_now` (her entry, or none) beside bob, and reloaded. Returns
/// how alice's watch ended and checks that bob's went on to the result.
async fn alice_s_watch_after_a_reload_to(alice_now: &str) -> tonic::Status {
    let file = CallersFile::new(&format!("{ALICE}{BOB}"));
    let gw = file.start().await;
    let (alice, bob) = (file.token("svc-alice"), file.token("svc-bob"));
    let journey = create(&gw, &alice).await.expect("alice creates");
    let mut hers = watch(&gw, &alice, &journey.journey_ref).await;
    let his = watch(&gw, &bob, &journey.journey_ref).await;

    file.write(&format!("{alice_now}{BOB}"), "");
    gw.gateway.reload().await.expect("reload");
    let status = ended(&mut hers).await;

    complete(&gw, &bob, &journey.appkey).await;
    let result = final_result(his).await;
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    let metrics = gw.metrics_text().await;
    assert_eq!(
        super::refusals(&metrics, "CALLER_REVOKED", &cause(&status)),
        1.0,
        "counted with the refusals, by cause"
    );
    gw.stop().await;
    status
}

fn cause(status: &tonic::Status) -> String {
    let info = status.get_details_error_info().expect("ErrorInfo");
    info.metadata.get("cause").cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_reload_that_removes_a_caller_ends_her_open_watch_permission_denied_while_another_caller_s_goes_on()
 {
    let status = alice_s_watch_after_a_reload_to("").await;
    assert_error(&status, Code::PermissionDenied, "CALLER_REVOKED");
    assert_eq!(cause(&status), "removed");
}

#[tokio::test]
async fn a_reload_that_takes_watch_from_a_caller_s_operations_ends_her_open_watch_permission_denied()
 {
    let without_watch = ALICE.replace(r#"["create_journey", "watch"]"#, r#"["create_journey"]"#);
    assert_ne!(without_watch, ALICE);
    let status = alice_s_watch_after_a_reload_to(&without_watch).await;
    assert_error(&status, Code::PermissionDenied, "CALLER_REVOKED");
    assert_eq!(cause(&status), "operation");
}

#[tokio::test]
async fn a_reload_that_narrows_a_caller_s_view_gives_her_open_watch_the_narrower_result() {
    let file = CallersFile::new(&format!("{ALICE}{BOB}"));
    let gw = file.start().await;
    let (alice, bob) = (file.token("svc-alice"), file.token("svc-bob"));
    let journey = create(&gw, &alice).await.expect("alice creates");
    let hers = watch(&gw, &alice, &journey.journey_ref).await;
    let his = watch(&gw, &bob, &journey.journey_ref).await;

    let status_only = format!("{BOB}    result_view = \"status_only\"\n");
    file.write(&format!("{ALICE}{status_only}"), "");
    gw.gateway.reload().await.expect("reload");
    complete(&gw, &bob, &journey.appkey).await;
    // Alice's full view holds the photos and the OCR bob is no longer given.
    let full = final_result(hers).await;
    assert!(full.photos.is_some(), "photos in the full view");
    assert!(
        full.document_analysis
            .as_ref()
            .is_some_and(|d| d.ocr.is_some()),
        "OCR in the full view"
    );
    let result = final_result(his).await;
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    assert!(result.photos.is_none(), "no photo in status_only");
    assert!(
        result
            .document_analysis
            .as_ref()
            .is_none_or(|d| d.ocr.is_none()),
        "no OCR in status_only"
    );
    gw.stop().await;
}
