//! Secure by default: a gateway in front of a real `[upstream]` with no
//! `[auth]` refuses to start, naming the explicit way to run open; run
//! open on purpose (or on the embedded sandbox) it warns and says so in
//! `idgate_auth_enabled`.

use idgate::testing::GatewayParts as _;
use idgate::{
    auth::AuthMode,
    config::{Config, UpstreamConfig},
};

use crate::support::{
    gateway::{TestGateway, start_gateway, test_config, use_upstream},
    metrics,
    telemetry::quiet_telemetry,
};

fn real_upstream() -> UpstreamConfig {
    UpstreamConfig {
        base_url: "http://127.0.0.1:9/facecaptcha".into(),
        result_base_url: "http://127.0.0.1:9/facecaptcha".into(),
        ..UpstreamConfig::default()
    }
}

#[tokio::test]
async fn a_real_upstream_without_auth_refuses_to_start_naming_mode_none() {
    let mut config = test_config();
    use_upstream(&mut config, real_upstream());
    config.auth = None;
    let error = match idgate::server::start(config).await {
        Ok(_) => panic!("started open in front of a real upstream"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("[auth] mode = \"none\""), "{error}");
}

#[tokio::test]
async fn the_env_override_runs_open_on_purpose_with_a_warning_and_the_gauge_at_0() {
    let (logs, _default) = quiet_telemetry();
    let text = "[upstream]\nbase_url = \"http://127.0.0.1:9/facecaptcha\"\nresult_base_url = \"http://127.0.0.1:9/facecaptcha\"\n";
    let parsed =
        Config::from_toml_and_env(text, [("IDGATE_AUTH__MODE".to_owned(), "none".to_owned())])
            .expect("config");
    assert_eq!(parsed.auth.as_ref().map(|a| a.mode), Some(AuthMode::None));
    let gw = TestGateway::start_with(|c| {
        use_upstream(c, parsed.upstream.clone().expect("upstream"));
        c.auth = parsed.auth.clone();
    })
    .await;
    let metrics = gw.metrics_text().await;
    assert_eq!(metrics::value(&metrics, "idgate_auth_enabled", &[]), 0.0);
    assert!(logs.contents().contains("runs open"), "a WARN at start");
    gw.stop().await;

    // The embedded sandbox stays open too, with the same warning.
    let gw = TestGateway::start().await;
    assert_eq!(
        metrics::value(&gw.metrics_text().await, "idgate_auth_enabled", &[]),
        0.0
    );
    gw.stop().await;
}

/// The public listener bound to every address, as a pod's is.
fn reachable_from_other_machines(config: &mut Config) {
    config.listen.grpc = ([0, 0, 0, 0], 0).into();
}

#[tokio::test]
async fn bearer_tokens_without_tls_off_loopback_refuse_to_start_unless_asked_for_and_then_count_as_a_plaintext_hop()
 {
    let keys = crate::support::jwt::jwks_file(&[&crate::support::jwt::TestKey::es256("k")]);
    let mut auth = crate::support::jwt::jwt_auth(Some(keys), None);
    auth.allow_plaintext_tokens = false;
    let mut config = test_config();
    reachable_from_other_machines(&mut config);
    config.auth = Some(auth.clone());
    config.callers = crate::support::jwt::callers(super::CALLERS);
    let error = match idgate::server::start(config.clone()).await {
        Ok(_) => panic!("took bearer tokens over plaintext without being asked to"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("[tls.grpc]"), "{error}");
    assert!(error.contains("loopback"), "{error}");
    assert!(error.contains("allow_plaintext_tokens"), "{error}");

    // Asked for (a mesh sidecar terminates TLS in the pod): served, with a
    // WARN and the hop counted. Nothing calls it: the listener is bound to
    // every address only to be judged.
    let (logs, _default) = quiet_telemetry();
    auth.allow_plaintext_tokens = true;
    config.auth = Some(auth);
    let gw = start_gateway(config).await;
    assert_eq!(
        metrics::value(
            &metrics::of(gw.metrics()),
            "idgate_plaintext_hops",
            &[("hop", "grpc_tokens")]
        ),
        1.0
    );
    assert!(
        logs.contents().contains("auth.allow_plaintext_tokens"),
        "the WARN names the key"
    );
    gw.shutdown().await;
}

/// A listener bound to loopback takes calls from this host only: its
/// tokens never cross a network, so it needs neither TLS nor the switch,
/// and counts no hop.
#[tokio::test]
async fn bearer_tokens_on_a_loopback_listener_are_served_without_tls_and_count_no_hop() {
    let (logs, _default) = quiet_telemetry();
    let keys = crate::support::jwt::jwks_file(&[&crate::support::jwt::TestKey::es256("k")]);
    let mut auth = crate::support::jwt::jwt_auth(Some(keys), None);
    auth.allow_plaintext_tokens = false;
    let gw = TestGateway::start_with(|c| {
        c.auth = Some(auth);
        c.callers = crate::support::jwt::callers(super::CALLERS);
    })
    .await;
    let text = gw.metrics_text().await;
    assert_eq!(
        metrics::value(&text, "idgate_plaintext_hops", &[("hop", "grpc_tokens")]),
        0.0,
        "{text}"
    );
    assert!(
        !logs.contents().contains("auth.allow_plaintext_tokens"),
        "no WARN"
    );
    gw.stop().await;
}
