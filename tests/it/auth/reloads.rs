//! Reloading the configuration file (what SIGHUP runs) on a gateway with
//! JWT callers: a reload is all or nothing (a broken JWKS file leaves the
//! callers and the channels as they were, and is counted refused).

use std::path::PathBuf;

use idgate::{config::Config, proto::v1};
use tonic::Code;

use crate::support::{
    gateway::{TestGateway, assert_error, happy_person},
    jwt::{AUDIENCE, ISSUER, TestKey, bearer, jwks_of},
    metrics::{counted, series},
    temp,
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
