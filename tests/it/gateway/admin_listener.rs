//! The admin listener's edge: its bearer token is taken only over TLS or
//! on loopback, unless `[listen] allow_plaintext_admin` asks for it in
//! clear (then a WARN and a plaintext hop).

use idgate::testing::GatewayParts as _;

use crate::support::{
    gateway::{ADMIN_TOKEN, TestGateway, start_gateway, test_config},
    metrics,
    telemetry::quiet_telemetry,
};

#[tokio::test]
async fn an_admin_token_off_loopback_without_tls_refuses_to_start_unless_asked_for_and_then_counts_as_a_plaintext_hop()
 {
    let mut config = test_config();
    // Bound to every address, as a pod's would be; nothing calls it.
    config.listen.admin = ([0, 0, 0, 0], 0).into();
    let error = match idgate::server::start(config.clone()).await {
        Ok(_) => panic!("took the admin token over plaintext without being asked to"),
        Err(e) => e.to_string(),
    };
    for named in ["[tls.admin]", "loopback", "allow_plaintext_admin"] {
        assert!(error.contains(named), "{named}: {error}");
    }
    assert!(!error.contains(ADMIN_TOKEN), "{error}");

    let (logs, _default) = quiet_telemetry();
    config.listen.allow_plaintext_admin = true;
    let gw = start_gateway(config).await;
    assert!(gw.admin_addr().is_some(), "the admin listener is served");
    let exposed = metrics::of(gw.metrics());
    let hops = |hop| metrics::value(&exposed, "idgate_plaintext_hops", &[("hop", hop)]);
    assert_eq!(hops("admin_token"), 1.0, "{exposed}");
    assert_eq!(hops("grpc_tokens"), 0.0, "{exposed}");
    assert!(
        logs.contents().contains("listen.allow_plaintext_admin"),
        "the WARN names the key"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn an_admin_listener_on_loopback_takes_its_token_without_tls_and_counts_no_hop() {
    let (logs, _default) = quiet_telemetry();
    let gw = TestGateway::start().await;
    gw.list_channels().await;
    let exposed = gw.metrics_text().await;
    assert_eq!(
        metrics::value(&exposed, "idgate_plaintext_hops", &[("hop", "admin_token")]),
        0.0,
        "{exposed}"
    );
    assert!(
        !logs.contents().contains("listen.allow_plaintext_admin"),
        "no WARN"
    );
    gw.stop().await;
}
