//! Keys from a JWKS URL: fetched at start, fetched once more for an
//! unknown `kid` (rate-limited), refreshed in the background so a rotation
//! at the issuer is picked up without a restart, and a failed fetch keeps
//! the last good keys and is counted.

use std::time::Duration;

use tonic::Code;

use super::{gateway_with, refusals};
use crate::support::{
    gateway::{TestGateway, assert_error, happy_person},
    jwt::{JwksServer, TestKey, bearer, jwt_auth},
    tls::TestCa,
};

/// Whether `token` may create a journey.
async fn served(gw: &TestGateway, token: &str) -> Result<(), tonic::Status> {
    gw.journeys()
        .create_journey(bearer(token, happy_person()))
        .await
        .map(|_| ())
}

/// Waits (bounded) until `token` is served as `want` says.
async fn until_served(gw: &TestGateway, token: &str, want: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while served(gw, token).await.is_ok() != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the key set did not change in time"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_unknown_kid_is_fetched_for_once_then_refused_and_a_key_added_later_is_picked_up() {
    let k1 = TestKey::es256("k1");
    let k2 = TestKey::ed25519("k2");
    let issuer = JwksServer::start(&[&k1]).await;
    let gw = gateway_with(jwt_auth(None, Some(issuer.url())), |_| {}).await;
    assert_eq!(issuer.fetches(), 1, "fetched at start");
    served(&gw, &k1.token("svc-onboarding")).await.expect("k1");

    // k2 is not published yet: one fetch, then refused.
    let early = k2.token("svc-onboarding");
    let status = served(&gw, &early).await.expect_err("unknown kid");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    assert_eq!(issuer.fetches(), 2, "one refresh for the unknown kid");
    // Again at once: no new fetch (rate-limited), still refused.
    let status = served(&gw, &early).await.expect_err("unknown kid again");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    assert_eq!(
        issuer.fetches(),
        2,
        "unknown-kid refreshes are rate-limited"
    );

    // The issuer publishes k2: after the minimum interval, its tokens are
    // served (one more fetch), without a restart.
    issuer.publish(&[&k1, &k2]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    served(&gw, &k2.token("svc-onboarding"))
        .await
        .expect("k2 picked up");
    assert_eq!(issuer.fetches(), 3);
    let metrics = gw.metrics_text().await;
    assert!(refusals(&metrics, "CALLER_UNAUTHENTICATED", "unknown_key") >= 2.0);
    gw.stop().await;
}

#[tokio::test]
async fn a_rotation_at_the_url_is_picked_up_in_the_background_and_a_failed_fetch_keeps_the_keys() {
    let old = TestKey::es256("2026-01");
    let new = TestKey::es256("2026-02");
    let issuer = JwksServer::start(&[&old]).await;
    let mut auth = jwt_auth(None, Some(issuer.url()));
    auth.jwt.as_mut().expect("jwt").refresh_secs = 1;
    let gw = gateway_with(auth, |_| {}).await;
    let old_token = old.token("svc-onboarding");
    served(&gw, &old_token).await.expect("old key");

    // The issuer rotates: the new key in, the old one out.
    issuer.publish(&[&new]);
    until_served(&gw, &old_token, false).await;
    served(&gw, &new.token("svc-onboarding"))
        .await
        .expect("new key");

    // The issuer fails: the last good keys stay, and failures are counted.
    issuer.fail_with(503);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let metrics = gw.metrics_text().await;
        if crate::support::metrics::series(&metrics, "idgate_auth_jwks_fetch_failures_total") >= 1.0
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no failure counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    served(&gw, &new.token("svc-onboarding"))
        .await
        .expect("the last good keys stay");
    gw.stop().await;
}

#[tokio::test]
async fn keys_over_https_are_fetched_trusting_the_configured_ca_and_refused_without_it() {
    let key = TestKey::es256("k1");
    let ca = TestCa::new();
    let issuer = JwksServer::start_tls(&[&key], &ca.leaf(&["localhost"])).await;
    let token = key.token("svc-onboarding");

    // The issuer's private CA is not among the system's roots: the fetch
    // fails (counted), no key is known, every token is refused.
    let gw = gateway_with(jwt_auth(None, Some(issuer.url())), |_| {}).await;
    let status = served(&gw, &token).await.expect_err("no keys");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    assert_eq!(
        issuer.fetches(),
        0,
        "the handshake failed before any request"
    );
    let metrics = gw.metrics_text().await;
    assert!(
        crate::support::metrics::counted(&metrics, "idgate_auth_jwks_fetch_failures_total") >= 1.0,
        "{metrics}"
    );
    gw.stop().await;

    // With [auth.jwt] ca_file: fetched and served.
    let mut auth = jwt_auth(None, Some(issuer.url()));
    auth.jwt.as_mut().expect("jwt").ca_file = Some(ca.ca_file());
    let gw = gateway_with(auth, |_| {}).await;
    served(&gw, &token).await.expect("served");
    assert!(issuer.fetches() >= 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_jwks_url_over_plain_http_to_another_host_does_not_load() {
    let mut config = crate::support::gateway::test_config();
    config.auth = Some(jwt_auth(
        None,
        Some("http://issuer.example/jwks.json".into()),
    ));
    config.callers = crate::support::jwt::callers(super::CALLERS);
    let Err(err) = idgate::server::start(config).await else {
        panic!("a JWKS over plain HTTP to another host was accepted");
    };
    let err = err.to_string();
    assert!(err.contains("auth.jwt.jwks_url"), "{err}");
    assert!(err.contains("https://"), "{err}");
}
