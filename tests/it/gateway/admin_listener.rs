//! The admin listener's edge: its bearer token is taken only over TLS or
//! on loopback, unless `[listen] allow_plaintext_admin` asks for it in
//! clear (then a WARN and a plaintext hop); and refused admin calls are
//! counted by cause and logged as one line per interval with their count,
//! never a line each.

use std::time::Instant;

use idgate::testing::GatewayParts as _;
use idgate::{
    proto::v1::{self, channel_admin_service_client::ChannelAdminServiceClient},
    telemetry::audit::REFUSAL_LOG_INTERVAL,
};
use serde_json::Value;
use tonic::{Code, Request};

use crate::support::{
    gateway::{ADMIN_TOKEN, TestGateway, assert_error, start_gateway, test_config},
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

/// The admin listener's refusal lines among `text`'s JSON lines.
fn admin_refusal_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.contains("unauthenticated calls refused"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| field(v, "listener").as_str() == Some("admin"))
        .collect()
}

/// The event field `key` of a JSON line.
fn field<'a>(line: &'a Value, key: &str) -> &'a Value {
    match &line[key] {
        Value::Null => &line["fields"][key],
        found => found,
    }
}

#[tokio::test]
async fn refused_admin_calls_are_counted_by_cause_and_logged_once_per_interval_with_their_count() {
    let (logs, _default) = quiet_telemetry();
    let gw = TestGateway::start().await;
    let mut client = ChannelAdminServiceClient::connect(format!("http://{}", gw.admin_addr()))
        .await
        .expect("connect");
    let sent = [
        (None, "no_credential", 7_u32),
        (Some("Basic dXNlcjpwYXNz"), "malformed", 5),
        (Some("Bearer not-the-admin-token"), "wrong_token", 13),
    ];
    let started = Instant::now();
    for (header, _, times) in sent {
        for _ in 0..times {
            let mut request = Request::new(v1::ListChannelsRequest {});
            if let Some(h) = header {
                request
                    .metadata_mut()
                    .insert("authorization", h.parse().expect("header"));
            }
            let err = client.list_channels(request).await.expect_err("refused");
            assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
        }
    }
    let elapsed = started.elapsed();
    let exposed = gw.metrics_text().await;
    for (_, cause, times) in sent {
        assert_eq!(
            metrics::counted(
                &exposed,
                &format!("idgate_admin_refusals_total{{cause=\"{cause}\"}}"),
            ),
            f64::from(times),
            "{cause}: {exposed}"
        );
    }
    gw.stop().await;

    let text = logs.contents();
    let lines = admin_refusal_lines(&text);
    let total: u64 = sent.iter().map(|(_, _, n)| u64::from(*n)).sum();
    // One line at the first refusal, then at most one per interval.
    let allowed = 1 + elapsed.as_secs() / REFUSAL_LOG_INTERVAL.as_secs();
    assert!(
        !lines.is_empty() && lines.len() as u64 <= allowed,
        "{} lines for {total} refusals in {elapsed:?}:\n{text}",
        lines.len()
    );
    let refused = |l: &Value| field(l, "refused").as_u64();
    assert_eq!(refused(&lines[0]), Some(1), "{text}");
    let said: u64 = lines.iter().filter_map(refused).sum();
    assert!(said <= total, "{said} of {total}: {text}");
    assert!(!text.contains("not-the-admin-token"), "{text}");
    assert!(!text.contains("dXNlcjpwYXNz"), "{text}");
}
