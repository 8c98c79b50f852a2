//! Callers by client certificate: the SPIFFE ID (URI SAN) of a verified
//! certificate maps to its `[[callers]]` entry; a certificate from the
//! same CA that names no caller is CALLER_UNKNOWN. With `jwt_or_mtls` a
//! client may come with a certificate, a token, or both (the token then
//! decides), and one with neither is refused by the policy, not the
//! handshake.

use idgate::{
    auth::{AuthConfig, AuthMode},
    cli::tls::ClientTls,
    proto::v1::journey_service_client::JourneyServiceClient,
    tls::ListenerTls,
};
use rcgen::SanType;
use tonic::Code;

use crate::support::{
    gateway::{assert_error, happy_person, start_gateway, test_config},
    jwt::{TestKey, bearer, callers, jwks_file, jwt_auth},
    telemetry::quiet_telemetry,
    tls::TestCa,
};

pub(super) const SPIFFE_ID: &str = "spiffe://corp.test/ns/onboarding/sa/api";

async fn create_as(url: &str, ca: &TestCa, cert: &str) -> Result<String, tonic::Status> {
    create_with(url, ca, Some(cert), None).await
}

/// One `CreateJourney` over TLS, with the client certificate `cert` (if
/// any) and the bearer `token` (if any).
async fn create_with(
    url: &str,
    ca: &TestCa,
    cert: Option<&str>,
    token: Option<&str>,
) -> Result<String, tonic::Status> {
    let mut tls = ClientTls {
        ca: Some(ca.ca_file()),
        ..ClientTls::default()
    };
    if let Some(cert) = cert {
        let (cert_file, key_file) = ca.write(cert, &leaf_for(ca, cert));
        tls.cert = Some(cert_file);
        tls.key = Some(key_file);
    }
    let channel = tls
        .endpoint(url)
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let request = match token {
        Some(token) => bearer(token, happy_person()),
        None => tonic::Request::new(happy_person()),
    };
    JourneyServiceClient::new(channel)
        .create_journey(request)
        .await
        .map(|r| r.into_inner().appkey)
}

fn tls_config(ca: &TestCa) -> idgate::config::Config {
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&["localhost", "127.0.0.1"]));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls {
        client_ca_file: Some(ca.ca_file()),
        ..ListenerTls::new(cert_file, key_file)
    });
    config
}

fn leaf_for(ca: &TestCa, which: &str) -> crate::support::tls::Leaf {
    let sans = match which {
        "onboarding" => vec![
            SanType::DnsName("api.onboarding.svc".try_into().expect("dns")),
            SanType::URI(SPIFFE_ID.try_into().expect("uri")),
        ],
        _ => vec![SanType::DnsName(
            "stranger.corp.test".try_into().expect("dns"),
        )],
    };
    ca.leaf_with_sans(sans)
}

/// mTLS callers, one of them: `onboarding`, by [`SPIFFE_ID`], allowed
/// `CreateJourney`.
pub(super) fn onboarding_by_spiffe_id(config: &mut idgate::config::Config) {
    config.auth = Some(AuthConfig {
        mode: AuthMode::Mtls,
        jwt: None,
        allow_plaintext_tokens: false,
    });
    config.callers = callers(&format!(
        r#"
        [[callers]]
        name = "onboarding"
        spiffe_id = "{SPIFFE_ID}"
        operator_profiles = ["sandbox"]
        operations = ["create_journey"]
        "#
    ));
}

#[tokio::test]
async fn a_spiffe_id_maps_to_its_caller_and_an_unlisted_certificate_is_unknown() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let mut config = tls_config(&ca);
    onboarding_by_spiffe_id(&mut config);
    let gw = start_gateway(config).await;
    let url = gw.grpc_url();

    create_as(&url, &ca, "onboarding")
        .await
        .expect("the SPIFFE ID's caller is served");
    let status = create_as(&url, &ca, "stranger")
        .await
        .expect_err("a certificate that names no caller");
    assert_error(&status, Code::PermissionDenied, "CALLER_UNKNOWN");
    gw.shutdown().await;
}

#[tokio::test]
async fn with_jwt_or_mtls_a_token_or_a_certificate_identifies_and_the_token_decides() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let key = TestKey::es256("k");
    let mut config = tls_config(&ca);
    let mut auth = jwt_auth(Some(jwks_file(&[&key])), None);
    auth.mode = AuthMode::JwtOrMtls;
    config.auth = Some(auth);
    config.callers = callers(&format!(
        r#"
        [[callers]]
        name = "onboarding"
        spiffe_id = "{SPIFFE_ID}"
        operator_profiles = ["sandbox"]
        operations = ["create_journey"]
        [[callers]]
        name = "backoffice"
        jwt_subject = "svc-backoffice"
        operator_profiles = ["sandbox"]
        operations = ["create_journey"]
        "#
    ));
    let gw = start_gateway(config).await;
    let url = gw.grpc_url();
    let token = key.token("svc-backoffice");

    create_with(&url, &ca, None, Some(&token))
        .await
        .expect("a token without a certificate");
    create_with(&url, &ca, Some("onboarding"), None)
        .await
        .expect("a certificate without a token");
    let status = create_with(&url, &ca, None, None)
        .await
        .expect_err("neither");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    // A bad token is refused even beside a good certificate.
    let forged = TestKey::es256("k").token("svc-backoffice");
    let status = create_with(&url, &ca, Some("onboarding"), Some(&forged))
        .await
        .expect_err("the token decides");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    gw.shutdown().await;
}
