//! Client certificates that mean what they say, over real sockets: the
//! right X.509-SVID is served; a certificate made for no client (no
//! extended key usage, or serverAuth only), from another CA, expired, or
//! revoked by a CRL fails the handshake and is counted by cause; one with
//! two URI SANs is no identity, and a SPIFFE ID that names no caller is
//! unknown. A revoked certificate is served again once the CRL that
//! listed it is replaced and the TLS files are read again (SIGHUP).

use idgate::testing::GatewayParts as _;
use idgate::{
    cli::tls::ClientTls, config::Config, proto::v1::journey_service_client::JourneyServiceClient,
    server::Gateway, tls::ListenerTls,
};
use rcgen::{ExtendedKeyUsagePurpose, SanType, SerialNumber};
use tonic::Code;

use super::mtls::{SPIFFE_ID, onboarding_by_spiffe_id};
use crate::support::{
    gateway::{assert_error, happy_person, start_gateway, test_config},
    metrics::{counted, of},
    telemetry::quiet_telemetry,
    tls::{Leaf, TestCa, client_params},
    wait::{EVENT_WAIT, eventually},
};

fn svid(id: &str) -> rcgen::CertificateParams {
    client_params(vec![SanType::URI(id.try_into().expect("uri"))])
}

/// A gateway whose public listener takes `edit`ed client certificates of
/// `ca`, with one caller: [`SPIFFE_ID`].
async fn gateway(ca: &TestCa, edit: impl FnOnce(&mut ListenerTls)) -> Gateway {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&["localhost", "127.0.0.1"]));
    let mut tls = ListenerTls {
        client_ca_file: Some(ca.ca_file()),
        ..ListenerTls::new(cert_file, key_file)
    };
    edit(&mut tls);
    let mut config: Config = test_config();
    config.tls.grpc = Some(tls);
    onboarding_by_spiffe_id(&mut config);
    start_gateway(config).await
}

/// One `CreateJourney` with the client certificate `leaf` (written beside
/// `ca`'s files as `name`), trusting `ca` for the server: `Err` when the
/// handshake or the call is refused.
async fn create_as(
    gw: &Gateway,
    ca: &TestCa,
    name: &str,
    leaf: &Leaf,
) -> Result<(), tonic::Status> {
    let (cert, key) = ca.write(name, leaf);
    let tls = ClientTls {
        ca: Some(ca.ca_file()),
        cert: Some(cert),
        key: Some(key),
    };
    let channel = tls
        .endpoint(&gw.grpc_url())
        .expect("endpoint")
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    JourneyServiceClient::new(channel)
        .create_journey(happy_person())
        .await
        .map(drop)
}

/// Waits until the public listener has refused `n` handshakes for `cause`
/// (counted by the task that ran the handshake, which may end after the
/// client gave up).
async fn handshakes_refused(gw: &Gateway, cause: &str, n: f64) {
    let series =
        format!("idgate_tls_handshake_failures_total{{listener=\"grpc\",cause=\"{cause}\"}}");
    eventually(
        &format!("{n} handshakes refused: {cause}"),
        EVENT_WAIT,
        async || {
            let text = of(gw.metrics());
            text.contains("idgate_tls_handshake_failures") && counted(&text, &series) >= n
        },
    )
    .await;
}

#[tokio::test]
async fn only_a_certificate_made_for_a_client_with_one_spiffe_id_is_its_caller() {
    let (_logs, _default) = quiet_telemetry();
    let ca = TestCa::new();
    let gw = gateway(&ca, |_| {}).await;

    create_as(&gw, &ca, "svid", &ca.sign(svid(SPIFFE_ID)))
        .await
        .expect("the caller's X.509-SVID is served");

    let mut no_eku = svid(SPIFFE_ID);
    no_eku.extended_key_usages = vec![];
    create_as(&gw, &ca, "no-eku", &ca.sign(no_eku))
        .await
        .expect_err("a certificate without an extended key usage");
    let mut server_only = svid(SPIFFE_ID);
    server_only.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    create_as(&gw, &ca, "server-only", &ca.sign(server_only))
        .await
        .expect_err("a server certificate");
    handshakes_refused(&gw, "not_client_auth", 2.0).await;

    let stranger = TestCa::new();
    create_as(&gw, &ca, "other-ca", &stranger.sign(svid(SPIFFE_ID)))
        .await
        .expect_err("a certificate of another CA");
    handshakes_refused(&gw, "unknown_issuer", 1.0).await;

    let mut expired = svid(SPIFFE_ID);
    let now = time::OffsetDateTime::now_utc();
    expired.not_before = now - time::Duration::days(2);
    expired.not_after = now - time::Duration::days(1);
    create_as(&gw, &ca, "expired", &ca.sign(expired))
        .await
        .expect_err("an expired certificate");
    handshakes_refused(&gw, "expired", 1.0).await;

    let mut two_uris = svid(SPIFFE_ID);
    two_uris.subject_alt_names.push(SanType::URI(
        "spiffe://corp.test/ns/other/sa/api"
            .try_into()
            .expect("uri"),
    ));
    let status = create_as(&gw, &ca, "two-uris", &ca.sign(two_uris))
        .await
        .expect_err("two URI SANs are no X.509-SVID");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");

    let elsewhere = svid("spiffe://corp.test/ns/elsewhere/sa/api");
    let status = create_as(&gw, &ca, "elsewhere", &ca.sign(elsewhere))
        .await
        .expect_err("a SPIFFE ID that names no caller");
    assert_error(&status, Code::PermissionDenied, "CALLER_UNKNOWN");

    let text = of(gw.metrics());
    for (cause, n) in [
        ("no_certificate_identity", 0.0),
        ("spiffe_not_single_uri", 1.0),
    ] {
        let series = format!(
            "idgate_auth_refusals_total{{reason=\"CALLER_UNAUTHENTICATED\",cause=\"{cause}\"}}"
        );
        assert_eq!(counted(&text, &series), n, "{cause}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn with_allow_no_eku_a_certificate_without_one_is_a_caller() {
    let (_logs, _default) = quiet_telemetry();
    let ca = TestCa::new();
    let gw = gateway(&ca, |tls| tls.allow_no_eku = true).await;
    let mut no_eku = svid(SPIFFE_ID);
    no_eku.extended_key_usages = vec![];
    create_as(&gw, &ca, "no-eku", &ca.sign(no_eku))
        .await
        .expect("allowed without an EKU");
    let mut server_only = svid(SPIFFE_ID);
    server_only.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    create_as(&gw, &ca, "server-only", &ca.sign(server_only))
        .await
        .expect_err("an EKU without clientAuth is still refused");
    gw.shutdown().await;
}

#[tokio::test]
async fn a_revoked_certificate_is_refused_until_its_crl_is_replaced_and_read_again() {
    let (_logs, _default) = quiet_telemetry();
    let ca = TestCa::new();
    let crl = ca.write_crl("clients", &[7]);
    let gw = gateway(&ca, |tls| tls.crl_files = vec![crl.clone()]).await;
    let with_serial = |serial: u64| {
        let mut params = svid(SPIFFE_ID);
        params.serial_number = Some(SerialNumber::from(serial));
        ca.sign(params)
    };
    let (revoked, other) = (with_serial(7), with_serial(8));

    create_as(&gw, &ca, "revoked", &revoked)
        .await
        .expect_err("a revoked certificate");
    handshakes_refused(&gw, "revoked", 1.0).await;
    create_as(&gw, &ca, "other", &other)
        .await
        .expect("a certificate the CRL does not list");

    // The new CRL lists nothing; what SIGHUP calls reads it (with the
    // same callers).
    assert_eq!(ca.write_crl("clients", &[]), crl);
    let mut same = test_config();
    onboarding_by_spiffe_id(&mut same);
    gw.reload_from(&same).expect("TLS files read again");
    create_as(&gw, &ca, "revoked", &revoked)
        .await
        .expect("served once no CRL lists it");
    gw.shutdown().await;
}
