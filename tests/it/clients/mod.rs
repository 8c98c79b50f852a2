//! The client quickstarts of `examples/clients/` run as a calling team
//! would run them: a real gateway on its embedded sandbox (system clock),
//! JWT callers in front, and the program in its own language as a child
//! process with a bearer token. Each must take a 3D journey to `Completo`,
//! retry the one `CreateJourney` that fails with `RetryInfo` (the sandbox
//! answers 503 to the first `/appkey`, once), and handle
//! `DOCUMENT_UNUSABLE` by its reason (its first photo holds no document).
//!
//! Their packages are installed by `scripts/test` (PyPI's into
//! `target/test-venv`, npm's into `examples/clients/node/node_modules`);
//! without them these tests fail, naming what to install.

mod node;
mod python;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use idgate::{
    domain::Operation,
    sandbox::{FaultAction, FaultRule},
    server::Gateway,
};
use serde_json::json;

use crate::support::{
    gateway::{start_gateway, test_config},
    jwt::{TestKey, callers, claims, jwks_file, jwt_auth, now},
};

/// The checkout: the examples, `proto/` and `target/` are found from it.
pub const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// How long a quickstart may take, start to end. Its own deadlines (30 s a
/// call, 120 s for the watch) end it first; this bound only keeps a hung
/// interpreter from hanging the suite.
const RUN_BOUND: Duration = Duration::from_secs(600);

const SUBJECT: &str = "svc-quickstart";

/// A gateway as a calling team meets it: JWT callers, one caller allowed
/// every journey operation on the sandbox's operator profile.
pub struct QuickstartGateway {
    gateway: Gateway,
    token: String,
}

impl QuickstartGateway {
    pub async fn start() -> Self {
        let key = TestKey::es256("quickstart");
        let mut config = test_config();
        config.auth = Some(jwt_auth(Some(jwks_file(&[&key])), None));
        config.callers = callers(&format!(
            r#"
            [[callers]]
            name = "quickstart"
            jwt_subject = "{SUBJECT}"
            operator_profiles = ["sandbox"]
            operations = ["create_journey", "session_3d", "verify_3d", "documents", "watch"]
            "#
        ));
        // Real time: the result is ready a fifth of a second after the
        // document, without a test moving a clock.
        config.sandbox.processing_delay_ms = 200;
        let gateway = start_gateway(config).await;
        // The first /appkey answers 503: CreateJourney fails UNAVAILABLE
        // with RetryInfo (nothing was created), and the client retries.
        gateway
            .sandbox()
            .expect("embedded sandbox")
            .add_fault(
                FaultRule::new(FaultAction::Status { status: 503 })
                    .on(Operation::Appkey)
                    .times(1),
            )
            .expect("valid fault rule");
        // An hour, not the usual five minutes: a loaded machine may take
        // long to start an interpreter.
        let mut claims = claims(SUBJECT);
        claims["exp"] = json!(now() + 3600);
        Self {
            token: key.sign(&claims),
            gateway,
        }
    }

    /// Runs `command` (a quickstart) against this gateway: its address, the
    /// token and the proto files in its environment. Returns its output
    /// once it has ended.
    pub async fn run(&self, mut command: Command) -> Output {
        command
            .env("IDGATE_GATEWAY", self.gateway.grpc_addr().to_string())
            .env("IDGATE_TOKEN", &self.token)
            .env("IDGATE_PROTO", Path::new(REPO).join("proto"));
        // The gateway serves on this test's runtime: wait off it.
        let run = tokio::task::spawn_blocking(move || command.output());
        tokio::time::timeout(RUN_BOUND, run)
            .await
            .unwrap_or_else(|_| panic!("the quickstart did not end within {RUN_BOUND:?}"))
            .expect("join")
            .expect("run the quickstart")
    }

    /// Asserts what every quickstart must have done, from its `output` and
    /// the sandbox's call counters, then stops the gateway.
    pub async fn assert_journey_completed(self, language: &str, output: &Output) {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        // What the program printed, for `--nocapture` readers.
        print!("{language} quickstart:\n{stdout}");
        assert!(
            output.status.success(),
            "the {language} quickstart failed ({}):\n{text}",
            output.status
        );
        for expected in [
            "UNAVAILABLE / UPSTREAM_UNAVAILABLE; RetryInfo says retry after 1s: retrying",
            "INVALID_ARGUMENT / DOCUMENT_UNUSABLE: no document in the photo",
            "[3] document accepted",
            "finished: Completo",
        ] {
            assert!(
                stdout.contains(expected),
                "the {language} quickstart did not print {expected:?}:\n{text}"
            );
        }
        let sandbox = self.gateway.sandbox().expect("embedded sandbox");
        assert_eq!(
            sandbox.calls(Operation::Appkey, None),
            2,
            "one refused /appkey, one retried: {text}"
        );
        assert_eq!(
            sandbox.calls(Operation::DocumentImages, None),
            2,
            "the photo with no document, then the RG: {text}"
        );
        self.gateway.shutdown().await;
    }
}

/// `path` under the checkout.
pub fn in_repo(path: &str) -> PathBuf {
    Path::new(REPO).join(path)
}
