//! What `/metrics` exposes: after a journey, each RPC, upstream call,
//! channel and webhook counted, with no journey in any label; and plaintext
//! hops off loopback warned at start and counted by kind, without a URL.

use idgate::domain::{Appkey, JourneyRef};
use idgate::testing::GatewayParts as _;

use super::*;
use crate::support::{gateway, metrics};

#[tokio::test]
async fn metrics_after_a_journey_count_each_rpc_upstream_call_channel_and_webhook() {
    let o = observe(|_| {}).await;
    let gw = &o.gw;
    let (appkey, _) = run_3d_journey(gw, gateway::happy_person(), gateway::rg_images()).await;

    let text = reqwest::get(format!("{}/metrics", gw.http_url()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    let get = |series: &str| -> f64 { metrics::series(&text, series) };
    for method in [
        "idgate.v1.JourneyService/CreateJourney",
        "idgate.v1.LivenessService/StartSession3D",
        "idgate.v1.LivenessService/VerifyLiveness3D",
        "idgate.v1.DocumentService/SubmitDocumentImages",
        "idgate.v1.JourneyService/WatchJourney",
        "idgate.v1.JourneyService/GetJourneyResult",
    ] {
        let labels = format!(r#"method="{method}",code="OK""#);
        assert_eq!(
            get(&format!("idgate_rpc_requests_total{{{labels}}}")),
            1.0,
            "{method}"
        );
        assert_eq!(
            get(&format!("idgate_rpc_duration_seconds_count{{{labels}}}")),
            1.0
        );
        assert!(get(&format!("idgate_rpc_duration_seconds_sum{{{labels}}}")) > 0.0);
        assert_eq!(
            get(&format!(r#"idgate_rpc_in_flight{{method="{method}"}}"#)),
            0.0
        );
    }
    for (operation, channel, at_least) in [
        ("credential", "core", 1.0),
        ("appkey", "core", 1.0),
        ("session_token_3d", "primary", 1.0),
        ("liveness_3d", "primary", 1.0),
        ("document_images", "core", 1.0),
        // GetJourneyResult and the watch's read after the webhook.
        ("result", "core", 2.0),
    ] {
        let labels = format!(r#"operation="{operation}",channel="{channel}",status="200""#);
        let count = get(&format!("idgate_upstream_requests_total{{{labels}}}"));
        assert!(count >= at_least, "{operation}: {count}");
        assert_eq!(
            get(&format!(
                "idgate_upstream_duration_seconds_count{{{labels}}}"
            )),
            count
        );
    }
    assert!(
        metrics::label_sets(&text, "idgate_upstream_requests_total")
            .iter()
            .all(|labels| labels.contains(&("status".to_owned(), "200".to_owned()))),
        "a healthy journey makes no failed upstream call:\n{text}"
    );
    for channel in ["primary", "alternative"] {
        assert_eq!(
            get(&format!(
                r#"idgate_channel_circuit_state{{channel="{channel}"}}"#
            )),
            0.0
        );
        assert_eq!(
            get(&format!(
                r#"idgate_channel_failovers_total{{channel="{channel}"}}"#
            )),
            0.0
        );
    }
    assert!(get(r#"idgate_webhooks_total{outcome="received"}"#) >= 1.0);
    assert!(get(r#"idgate_webhooks_total{outcome="accepted"}"#) >= 1.0);
    assert_eq!(
        get(r#"idgate_webhooks_total{outcome="rejected_credentials_invalid"}"#),
        0.0
    );
    // The scrape itself is the one request in flight.
    assert_eq!(get("idgate_http_in_flight"), 1.0);
    // Labels never carry the journey: neither its appkey nor its person.
    let journey = JourneyRef::from_appkey(&Appkey::new(appkey.as_str()));
    for secret in [
        appkey.as_str(),
        journey.as_str(),
        samples::HAPPY_PERSON.cpf,
        samples::HAPPY_PERSON.name,
    ] {
        assert!(!text.contains(secret), "{secret} in metrics:\n{text}");
    }
    o.finish().await;
}

/// A plaintext hop off loopback (here an `http://` channel on a TEST-NET
/// address) is a WARN at start naming the key, and a gauge by kind; the
/// embedded sandbox's loopback hops are not. No URL in either.
#[tokio::test]
async fn plaintext_hops_off_loopback_are_warned_at_start_and_counted_by_kind() {
    let (logs, _default) = crate::support::telemetry::quiet_telemetry();
    let mut config = gateway::test_config();
    config.channels = vec![idgate::channels::ChannelSpec::new(
        "far",
        "http://192.0.2.10:8080/vendor",
        0,
    )];
    let gw = gateway::start_gateway(config).await;
    let exposition = metrics::of(gw.metrics());
    for (hop, count) in [
        ("channel", 1.0),
        ("upstream", 0.0),
        ("redis", 0.0),
        ("otlp", 0.0),
        ("grpc_tokens", 0.0),
    ] {
        assert_eq!(
            metrics::value(&exposition, "idgate_plaintext_hops", &[("hop", hop)]),
            count,
            "{hop}"
        );
    }
    gw.shutdown().await;
    let logs = logs.contents();
    let warned: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("plaintext hop off loopback"))
        .collect();
    assert_eq!(warned.len(), 1, "{logs}");
    assert!(
        warned[0].contains("channels[0].base_url") && warned[0].contains("WARN"),
        "{logs}"
    );
    assert!(!logs.contains("192.0.2.10"), "{logs}");

    // The embedded sandbox alone: every hop on loopback, nothing warned.
    let (logs, _default) = crate::support::telemetry::quiet_telemetry();
    let gw = gateway::start_gateway(gateway::test_config()).await;
    let exposition = metrics::of(gw.metrics());
    assert_eq!(
        metrics::value(&exposition, "idgate_plaintext_hops", &[("hop", "channel")]),
        0.0
    );
    gw.shutdown().await;
    assert!(
        !logs.contents().contains("plaintext hop"),
        "{}",
        logs.contents()
    );
}
