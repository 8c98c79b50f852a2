//! Callers by client certificate: the SPIFFE ID (URI SAN) of a verified
//! certificate maps to its `[[callers]]` entry; a certificate from the
//! same CA that names no caller is CALLER_UNKNOWN.

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
    jwt::callers,
    telemetry::quiet_telemetry,
    tls::TestCa,
};

const SPIFFE_ID: &str = "spiffe://corp.test/ns/onboarding/sa/api";

async fn create_as(url: &str, ca: &TestCa, cert: &str) -> Result<String, tonic::Status> {
    let (cert, key) = ca.write(cert, &leaf_for(ca, cert));
    let tls = ClientTls {
        ca: Some(ca.ca_file()),
        cert: Some(cert),
        key: Some(key),
    };
    let channel = tls
        .endpoint(url)
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    JourneyServiceClient::new(channel)
        .create_journey(happy_person())
        .await
        .map(|r| r.into_inner().appkey)
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

#[tokio::test]
async fn a_spiffe_id_maps_to_its_caller_and_an_unlisted_certificate_is_unknown() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&["localhost", "127.0.0.1"]));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls {
        cert_file,
        key_file,
        client_ca_file: Some(ca.ca_file()),
    });
    config.auth = Some(AuthConfig {
        mode: AuthMode::Mtls,
        jwt: None,
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
