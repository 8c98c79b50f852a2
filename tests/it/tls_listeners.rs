//! TLS on every listener: a journey runs over mutual TLS (through the
//! CLI's client) and a client without a certificate is refused; a reload
//! serves the renewed certificate to the next connection while open ones
//! stay; the HTTP and admin listeners serve TLS, and the channels CLI
//! reaches the admin listener over HTTPS.

use idgate::{
    cli::{
        channels::AdminTarget,
        journey::{DocumentChoice, JourneyPlan, LivenessMode, Person},
        tls::ClientTls,
    },
    domain::AdminToken,
    proto::v1::journey_service_client::JourneyServiceClient,
    tls::ListenerTls,
};
use tonic::transport::Channel;

use crate::support::{
    gateway::{ADMIN_TOKEN, happy_person, start_gateway as start, test_config},
    telemetry::quiet_telemetry,
    tls::TestCa,
    wait::EVENT_WAIT as WAIT,
};

const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

fn trusting(ca: &TestCa) -> ClientTls {
    ClientTls {
        ca: Some(ca.ca_file()),
        ..ClientTls::default()
    }
}

/// One `CreateJourney` over `channel`.
async fn create(channel: Channel) -> Result<String, tonic::Status> {
    JourneyServiceClient::new(channel)
        .create_journey(happy_person())
        .await
        .map(|r| r.into_inner().appkey)
}

/// Connects to `url` with `tls` and creates a journey: `Err` when the
/// handshake or the call is refused.
async fn create_over(url: &str, tls: &ClientTls) -> Result<String, String> {
    let channel = tls
        .endpoint(url)
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    create(channel).await.map_err(|s| format!("call: {s}"))
}

#[tokio::test]
async fn a_journey_runs_over_mtls_and_a_client_without_a_certificate_is_refused() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
    let (client_cert, client_key) = ca.write("client", &ca.leaf(&["tls-test-client"]));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls {
        cert_file,
        key_file,
        client_ca_file: Some(ca.ca_file()),
    });
    config.sandbox.processing_delay_ms = 100;
    config.watch.poll_initial_ms = 50;
    config.watch.poll_max_ms = 200;
    let gw = start(config).await;
    let url = gw.grpc_url();
    assert!(url.starts_with("https://"), "{url}");

    // The whole journey, through the CLI's client with --ca --cert --key.
    let with_certificate = ClientTls {
        ca: Some(ca.ca_file()),
        cert: Some(client_cert),
        key: Some(client_key),
    };
    let p = happy_person();
    let plan = JourneyPlan {
        gateway: url.clone(),
        liveness: LivenessMode::ThreeD,
        document: DocumentChoice::Rg,
        person: Person {
            cpf: p.cpf,
            name: p.name,
            birth_date: p.birth_date,
            customer_reference: p.customer_reference,
        },
        operator_profile: String::new(),
        result_timeout: WAIT,
    };
    let mut out = String::new();
    idgate::cli::journey::run_with_tls(&plan, &with_certificate, &mut out)
        .await
        .unwrap_or_else(|e| panic!("the journey runs over mTLS: {e}\n{out}"));

    let refused = create_over(&url, &trusting(&ca)).await;
    assert!(
        refused.is_err(),
        "a client without a certificate is refused"
    );
    let plaintext = create_over(&format!("http://{}", gw.grpc_addr()), &ClientTls::default()).await;
    assert!(plaintext.is_err(), "plaintext is refused");
    gw.shutdown().await;
}

#[tokio::test]
async fn after_a_reload_the_next_connection_gets_the_new_certificate_and_open_ones_stay() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (old_ca, new_ca) = (TestCa::new(), TestCa::new());
    let (cert_file, key_file) = old_ca.write("server", &old_ca.leaf(&SERVER_NAMES));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls {
        cert_file: cert_file.clone(),
        key_file: key_file.clone(),
        client_ca_file: None,
    });
    let gw = start(config).await;
    let url = gw.grpc_url();
    let open = trusting(&old_ca)
        .endpoint(&url)
        .expect("endpoint")
        .connect()
        .await
        .expect("connect with the old CA");
    create(open.clone())
        .await
        .expect("served with the old certificate");

    // A new certificate from another CA, in the same files.
    let renewed = new_ca.leaf(&SERVER_NAMES);
    std::fs::write(&cert_file, &renewed.cert_pem).expect("renew certificate");
    std::fs::write(&key_file, &renewed.key_pem).expect("renew key");
    gw.reload().await.expect("reload (what SIGHUP runs)");

    create_over(&url, &trusting(&new_ca))
        .await
        .expect("the next connection gets the new certificate");
    assert!(
        create_over(&url, &trusting(&old_ca)).await.is_err(),
        "the old certificate is no longer served"
    );
    create(open)
        .await
        .expect("the connection opened before the reload still serves");
    gw.shutdown().await;
}

#[tokio::test]
async fn the_http_and_admin_listeners_serve_tls_and_the_channels_cli_reaches_admin_over_https() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
    let section = ListenerTls {
        cert_file,
        key_file,
        client_ca_file: None,
    };
    let mut config = test_config();
    config.tls.http = Some(section.clone());
    config.tls.admin = Some(section);
    let gw = start(config).await;

    let pem = std::fs::read(ca.ca_file()).expect("CA file");
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("CA"))
        .build()
        .expect("client");
    let health = https
        .get(format!("https://{}/healthz", gw.http_addr()))
        .send()
        .await
        .expect("healthz over TLS");
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.expect("body"), "ok");

    let admin = gw.admin_addr().expect("admin listener");
    let token = AdminToken::new(ADMIN_TOKEN).expect("token");
    let list = idgate::cli::channels::list(
        AdminTarget {
            addr: format!("https://{admin}"),
            tls: trusting(&ca),
        },
        &token,
    )
    .await
    .expect("idgate channels --ca list over https");
    assert!(list.contains("primary"), "{list}");
    assert!(
        idgate::cli::channels::list(&format!("http://{admin}"), &token)
            .await
            .is_err(),
        "plaintext is refused on a TLS admin listener"
    );
    gw.shutdown().await;
}
