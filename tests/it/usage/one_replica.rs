//! One replica, the binary: `idgate serve` on its embedded sandbox with
//! two JWT callers, `/metrics` scraped over HTTP and `idgate usage` run
//! against its admin listener.

use idgate::proto::v1::{
    self, journey_service_client::JourneyServiceClient,
    liveness_service_client::LivenessServiceClient,
};
use serde_json::Value;
use tonic::Code;

use super::{around_today, assert_nothing_personal, callers_on, from_metrics, from_report};
use crate::support::{
    gateway::{ADMIN_TOKEN, assert_error, happy_person},
    jwt::{AUDIENCE, ISSUER, TestKey, bearer, jwks_file},
    metrics,
    net::http_client,
    process::{ServeProcess, idgate_command, quick_serve_config},
};

/// `[auth]` (JWTs checked against `jwks`) and the two callers, on the
/// embedded sandbox's profile.
fn auth_toml(jwks: &std::path::Path) -> String {
    format!(
        "[auth]\nmode = \"jwt\"\nallow_plaintext_tokens = true\n\
         [auth.jwt]\nissuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks_file = {:?}\n{}",
        jwks.display().to_string(),
        callers_on(&[idgate::config::EMBEDDED_PROFILE]),
    )
}

/// `idgate usage --json` over yesterday to tomorrow, against `admin`.
fn usage_json(admin: &str, caller: Option<&str>) -> Value {
    let (from, to) = around_today();
    let mut command = idgate_command();
    command
        .args([
            "usage", "--admin", admin, "--from", &from, "--to", &to, "--json",
        ])
        .env("IDGATE_ADMIN_TOKEN", ADMIN_TOKEN);
    if let Some(caller) = caller {
        command.args(["--caller", caller]);
    }
    let output = command.output().expect("run idgate usage");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn each_callers_journeys_and_billed_calls_are_counted_under_its_name_and_the_report_agrees() {
    let dir = crate::support::temp::dir("usage-binary");
    let key = TestKey::es256("usage");
    let config = quick_serve_config(dir.path(), &auth_toml(&jwks_file(&[&key])));
    let serve = ServeProcess::start(&config);
    let line = serve.line("idgate listening");
    let field = |key: &str| {
        let at = line.find(&format!(" {key}=")).expect(key) + key.len() + 2;
        line[at..]
            .split_whitespace()
            .next()
            .expect("value")
            .to_owned()
    };
    let (grpc, http) = (field("grpc"), field("http"));
    let admin = field("admin")
        .trim_start_matches("Some(")
        .trim_end_matches(')')
        .to_owned();
    let url = format!("http://{grpc}");
    let mut journeys = JourneyServiceClient::connect(url.clone())
        .await
        .expect("connect");
    let mut liveness = LivenessServiceClient::connect(url).await.expect("connect");
    let (onboarding, kyc, stranger) = (
        key.token("svc-onboarding"),
        key.token("svc-kyc"),
        key.token("svc-stranger"),
    );

    let mut created = Vec::new();
    for (token, n) in [(&onboarding, 3), (&kyc, 2)] {
        for _ in 0..n {
            let journey = journeys
                .create_journey(bearer(token, happy_person()))
                .await
                .expect("create")
                .into_inner();
            created.push(journey);
        }
    }
    let session = |token: &str, appkey: &str| {
        bearer(
            token,
            v1::StartSession3DRequest {
                appkey: appkey.to_owned(),
                user_agent: "usage-test".into(),
            },
        )
    };
    liveness
        .start_session3_d(session(&onboarding, &created[0].appkey))
        .await
        .expect("3D session");
    // kyc may not start sessions; a valid identity no entry names is
    // nobody: neither is billed, the first is a refusal of kyc's.
    let refused = liveness
        .start_session3_d(session(&kyc, &created[3].appkey))
        .await
        .expect_err("kyc may not");
    assert_error(&refused, Code::PermissionDenied, "OPERATION_NOT_ALLOWED");
    let unknown = journeys
        .create_journey(bearer(&stranger, happy_person()))
        .await
        .expect_err("no entry");
    assert_error(&unknown, Code::PermissionDenied, "CALLER_UNKNOWN");

    let text = http_client()
        .get(format!("http://{http}/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    let texts = [text.clone()];
    assert_eq!(from_metrics(&texts, "onboarding"), [3, 3, 1, 0], "{text}");
    assert_eq!(from_metrics(&texts, "kyc"), [2, 2, 0, 1], "{text}");
    metrics::assert_sample(
        &text,
        r#"idgate_caller_billed_total{caller="onboarding",operator="sandbox",operation="start_session_3d"} 1"#,
    );
    metrics::assert_sample(
        &text,
        r#"idgate_caller_calls_total{caller="onboarding",operation="create_journey",outcome="ok"} 3"#,
    );
    // Each caller's live journeys against its share (a single replica's
    // store counts them exactly).
    metrics::assert_sample(
        &text,
        r#"idgate_caller_share_used{caller="onboarding",share="journeys"} 3"#,
    );
    metrics::assert_sample(
        &text,
        r#"idgate_caller_share_used{caller="kyc",share="journeys"} 2"#,
    );
    // Only configured names are caller labels.
    for family in [
        "idgate_caller_calls_total",
        "idgate_caller_billed_total",
        "idgate_caller_journeys_total",
    ] {
        for labels in metrics::label_sets(&text, family) {
            let caller = labels.iter().find(|(k, _)| k == "caller").expect("caller");
            assert!(
                ["onboarding", "kyc"].contains(&caller.1.as_str()),
                "{labels:?}"
            );
        }
    }

    let report = usage_json(&admin, None);
    assert_eq!(report["fleet"], false, "{report}");
    assert_eq!(from_report(&report, "onboarding"), [3, 3, 1, 0], "{report}");
    assert_eq!(from_report(&report, "kyc"), [2, 2, 0, 1], "{report}");
    let only_kyc = usage_json(&admin, Some("kyc"));
    let callers: Vec<&Value> = only_kyc["days"]
        .as_array()
        .expect("days")
        .iter()
        .map(|d| &d["caller"])
        .collect();
    assert!(
        !callers.is_empty() && callers.iter().all(|c| *c == "kyc"),
        "{only_kyc}"
    );

    let tokens = [onboarding.as_str(), kyc.as_str(), stranger.as_str()];
    assert_nothing_personal(&text, &created, &tokens);
    assert_nothing_personal(&report.to_string(), &created, &tokens);
}
