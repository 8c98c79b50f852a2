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
    telemetry::CapturedLogs,
    tls::ListenerTls,
};
use tonic::transport::Channel;

use crate::support::{
    gateway::{ADMIN_TOKEN, happy_person, start_gateway as start, test_config},
    telemetry::{quiet_telemetry, quiet_telemetry_at},
    tls::TestCa,
    wait::{EVENT_WAIT as WAIT, eventually},
};

const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

fn trusting(ca: &TestCa) -> ClientTls {
    ClientTls {
        ca: Some(ca.ca_file()),
        ..ClientTls::default()
    }
}

/// What the gateway logs of a client speaking plaintext to a TLS listener.
const PLAINTEXT: &str = "received corrupt message of type InvalidContentType";

/// Waits for the gateway's log line saying it refused a TLS handshake on
/// `listener` for `cause` (the line comes from the task that ran the
/// handshake, which may finish after the client gave up).
async fn handshake_refused(logs: &CapturedLogs, listener: &str, cause: &str) {
    let refused = |line: &serde_json::Value| {
        line["message"] == "TLS handshake refused"
            && line["listener"] == listener
            && line["error"] == cause
    };
    eventually(
        &format!("the {listener} listener logs a handshake refused: {cause}"),
        WAIT,
        async || {
            logs.contents()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|l| refused(&l))
        },
    )
    .await;
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
        .map_err(|e| format!("connect: {}", causes(&e)))?;
    create(channel).await.map_err(|s| {
        let source = std::error::Error::source(&s)
            .map(causes)
            .unwrap_or_default();
        format!("call: {:?}: {} {source}", s.code(), s.message())
    })
}

/// `e` and its causes, one after another: what refused the connection is
/// in a cause (tonic's own message is "transport error").
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

#[tokio::test]
async fn a_journey_runs_over_mtls_and_a_client_without_a_certificate_is_refused() {
    let (logs, _default) = quiet_telemetry_at("info");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
    let (client_cert, client_key) = ca.write("client", &ca.leaf(&["tls-test-client"]));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls {
        client_ca_file: Some(ca.ca_file()),
        ..ListenerTls::new(cert_file, key_file)
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

    // What the client reads of a refusal varies with timing (the alert, a
    // broken pipe, a bad frame: in TLS 1.3 the client may write before the
    // server has judged its certificate); the gateway's reason does not.
    create_over(&url, &trusting(&ca))
        .await
        .expect_err("a client without a certificate is refused");
    handshake_refused(&logs, "grpc", "peer sent no certificates").await;
    create_over(&format!("http://{}", gw.grpc_addr()), &ClientTls::default())
        .await
        .expect_err("plaintext is refused");
    handshake_refused(&logs, "grpc", PLAINTEXT).await;
    gw.shutdown().await;
}

#[tokio::test]
async fn after_a_reload_the_next_connection_gets_the_new_certificate_and_open_ones_stay() {
    let (_logs, _default) = quiet_telemetry();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (old_ca, new_ca) = (TestCa::new(), TestCa::new());
    let (cert_file, key_file) = old_ca.write("server", &old_ca.leaf(&SERVER_NAMES));
    let mut config = test_config();
    config.tls.grpc = Some(ListenerTls::new(cert_file.clone(), key_file.clone()));
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
    let stale = create_over(&url, &trusting(&old_ca))
        .await
        .expect_err("the old certificate is no longer served");
    assert!(
        stale.contains("invalid peer certificate: BadSignature"),
        "{stale}"
    );
    create(open)
        .await
        .expect("the connection opened before the reload still serves");
    gw.shutdown().await;
}

#[tokio::test]
async fn the_http_and_admin_listeners_serve_tls_and_the_channels_cli_reaches_admin_over_https() {
    let (logs, _default) = quiet_telemetry_at("info");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
    let section = ListenerTls::new(cert_file, key_file);
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
    idgate::cli::channels::list(&format!("http://{admin}"), &token)
        .await
        .expect_err("plaintext is refused on a TLS admin listener");
    handshake_refused(&logs, "admin", PLAINTEXT).await;
    gw.shutdown().await;
}
