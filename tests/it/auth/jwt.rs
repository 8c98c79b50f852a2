//! Every verification rule of a bearer token, end to end, and no token,
//! refused subject or claim value in logs, metrics or errors.

use serde_json::{Value, json};
use tonic::Code;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use super::{gateway_with, refusals};
use crate::support::{
    self,
    gateway::{assert_error, happy_person},
    jwt::{TestKey, bearer, claims, jwks_file, jwt_auth, now, unsigned},
    telemetry::quiet_telemetry_at,
};

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

const REFUSED_SUBJECT: &str = "svc-canary-subject-7f3e";

#[tokio::test]
async fn every_jwt_rule_is_enforced_and_no_token_reaches_logs_metrics_or_errors() {
    let (logs, _default) = quiet_telemetry_at("trace");
    let key = TestKey::es256("k1");
    let gw = gateway_with(jwt_auth(Some(jwks_file(&[&key])), None), |_| {}).await;

    let valid = key.token("svc-onboarding");
    gw.journeys()
        .create_journey(bearer(&valid, happy_person()))
        .await
        .expect("a valid token is served");

    // Probes need no credential.
    let channel = tonic::transport::Channel::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .expect("health is open");

    let base = || claims(REFUSED_SUBJECT);
    let impostor = TestKey::es256("k1");
    let stranger = TestKey::es256("k-unknown");
    let cases: Vec<(&str, Option<String>)> = vec![
        ("no_credential", None),
        (
            "expired",
            Some(key.sign(&with(base(), "exp", json!(now() - 120)))),
        ),
        (
            "not_yet_valid",
            Some(key.sign(&with(base(), "nbf", json!(now() + 120)))),
        ),
        (
            "audience",
            Some(key.sign(&with(base(), "aud", json!("another-service")))),
        ),
        (
            "issuer",
            Some(key.sign(&with(base(), "iss", json!("https://evil.test")))),
        ),
        ("signature", Some(impostor.sign(&base()))),
        ("malformed", Some(unsigned("k1", &base()))),
        ("algorithm", Some(key.hs256_forgery(&base()))),
        ("unknown_key", Some(stranger.sign(&base()))),
    ];
    let mut texts = Vec::new();
    let mut tokens = Vec::new();
    for (cause, token) in &cases {
        let request = match token {
            Some(t) => bearer(t, happy_person()),
            None => tonic::Request::new(happy_person()),
        };
        let status = gw
            .journeys()
            .create_journey(request)
            .await
            .expect_err(cause);
        assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
        texts.push(format!(
            "{} {:?} {:?}",
            status.message(),
            status.details(),
            status.metadata()
        ));
        tokens.extend(token.clone());
    }

    // A valid token whose subject is no caller.
    let unknown = key.token(REFUSED_SUBJECT);
    let status = gw
        .journeys()
        .create_journey(bearer(&unknown, happy_person()))
        .await
        .expect_err("unknown caller");
    assert_error(&status, Code::PermissionDenied, "CALLER_UNKNOWN");
    texts.push(format!(
        "{} {:?} {:?}",
        status.message(),
        status.details(),
        status.metadata()
    ));
    tokens.push(unknown);

    let metrics = gw.metrics_text().await;
    assert_eq!(
        support::metrics::value(&metrics, "idgate_auth_enabled", &[]),
        1.0
    );
    for (cause, _) in &cases {
        // `alg: none` is not even a JWT header to the library: malformed.
        assert!(
            refusals(&metrics, "CALLER_UNAUTHENTICATED", cause) >= 1.0,
            "{cause} counted"
        );
    }
    assert_eq!(refusals(&metrics, "CALLER_UNKNOWN", "no_caller_entry"), 1.0);

    let logs = logs.contents();
    assert!(logs.lines().count() > 50, "TRACE logging is on");
    tokens.push(valid);
    for token in &tokens {
        // The whole token, and its signature alone.
        let signature = token.rsplit('.').next().unwrap_or_default();
        for secret in [token.as_str(), signature]
            .into_iter()
            .filter(|s| s.len() > 8)
        {
            assert!(!logs.contains(secret), "a token reached the logs");
            assert!(!metrics.contains(secret), "a token reached the metrics");
            assert!(
                !texts.iter().any(|t| t.contains(secret)),
                "a token in an error"
            );
        }
    }
    for text in [&logs, &metrics] {
        assert!(
            !text.contains(REFUSED_SUBJECT),
            "a refused subject was written"
        );
    }
    assert!(!texts.iter().any(|t| t.contains(REFUSED_SUBJECT)));
    gw.stop().await;
}

#[tokio::test]
async fn the_journey_cli_runs_a_whole_journey_as_a_caller_with_token_file() {
    use idgate::cli::journey::{DocumentChoice, JourneyPlan, LivenessMode, Person};
    let key = TestKey::ed25519("ed");
    // On the system clock: the sandbox finishes processing on its own.
    let mut config = crate::support::gateway::test_config();
    config.auth = Some(jwt_auth(Some(jwks_file(&[&key])), None));
    config.callers = crate::support::jwt::callers(super::CALLERS);
    config.sandbox.processing_delay_ms = 100;
    let gw = crate::support::gateway::start_gateway(config).await;
    let p = happy_person();
    let plan = JourneyPlan {
        gateway: gw.grpc_url(),
        liveness: LivenessMode::ThreeD,
        document: DocumentChoice::Rg,
        person: Person {
            cpf: p.cpf,
            name: p.name,
            birth_date: p.birth_date,
            customer_reference: p.customer_reference,
        },
        operator_profile: String::new(),
        result_timeout: crate::support::wait::EVENT_WAIT,
    };
    let tls = idgate::cli::tls::ClientTls::default();
    let token = idgate::domain::CallerToken::new(format!("{}\n", key.token("svc-onboarding")));
    let mut out = String::new();
    idgate::cli::journey::run_as(&plan, &tls, token.as_ref(), &mut out)
        .await
        .unwrap_or_else(|e| panic!("the journey runs as its caller: {e}\n{out}"));
    let mut out = String::new();
    let refused = idgate::cli::journey::run_as(&plan, &tls, None, &mut out).await;
    let e = refused.expect_err("no token").to_string();
    assert!(e.contains("Unauthenticated"), "{e}");
    gw.shutdown().await;
}
