use super::exposition::assert_sample;
use super::*;

#[test]
fn configured_channels_are_exposed_before_any_event() {
    let m = Metrics::new(["primary", "alternative"]);
    let text = m.encode().unwrap();
    for line in [
        r#"idgate_channel_circuit_state{channel="primary"} 0"#,
        r#"idgate_channel_failovers_total{channel="alternative"} 0"#,
        r#"idgate_channel_contingency_answers_total{channel="primary"} 0"#,
    ] {
        assert_sample(&text, line);
    }
}

#[test]
fn series_carry_their_labels_and_values() {
    let m = Metrics::default();
    m.record_rpc(
        "idgate.v1.JourneyService/CreateJourney",
        tonic::Code::NotFound,
        Duration::from_millis(20),
    );
    m.record_upstream(&UpstreamOutcome {
        operation: Operation::Liveness3D,
        channel: Some(m.channel_label("alternative")),
        ended: UpstreamEnd::Answered {
            status: 503,
            elapsed: Duration::from_millis(7),
        },
    });
    m.record_upstream(&UpstreamOutcome {
        operation: Operation::SessionToken3D,
        channel: Some(m.channel_label("alternative")),
        ended: UpstreamEnd::Refused,
    });
    m.record_channel_failover("primary");
    m.set_channel_circuit_state("primary", 2);
    m.sync_webhooks("rejected_signature_invalid", 1);
    for end in [
        ChannelSessionEnd::Started { contingency: true },
        ChannelSessionEnd::Started { contingency: false },
        ChannelSessionEnd::Started { contingency: false },
        ChannelSessionEnd::Failed,
        ChannelSessionEnd::Failed,
    ] {
        m.record_channel_session("primary", end);
    }
    m.sync_watch(WatchCounts {
        journeys: 2,
        watchers: 5,
        result_reads: 4,
        notice_timeouts: 1,
        fleet_results: 3,
    });
    let guard = m.http_in_flight();
    let text = m.encode().unwrap();
    drop(guard);
    for line in [
        r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/CreateJourney",code="NOT_FOUND"} 1"#,
        r#"idgate_rpc_duration_seconds_count{method="idgate.v1.JourneyService/CreateJourney",code="NOT_FOUND"} 1"#,
        r#"idgate_upstream_requests_total{operation="liveness_3d",channel="alternative",status="503"} 1"#,
        r#"idgate_upstream_rejected_total{operation="session_token_3d",channel="alternative"} 1"#,
        r#"idgate_channel_failovers_total{channel="primary"} 1"#,
        r#"idgate_channel_circuit_state{channel="primary"} 2"#,
        r#"idgate_webhooks_total{outcome="rejected_signature_invalid"} 1"#,
        "idgate_http_in_flight 1",
        r#"idgate_channel_sessions_total{channel="primary"} 3"#,
        r#"idgate_channel_session_failures_total{channel="primary"} 2"#,
        r#"idgate_channel_contingency_answers_total{channel="primary"} 1"#,
        "idgate_watch_journeys 2",
        "idgate_watch_watchers 5",
        "idgate_watch_result_reads_total 4",
        "idgate_watch_notice_timeouts_total 1",
        "idgate_watch_fleet_results_total 3",
    ] {
        assert_sample(&text, line);
    }
    assert_sample(&m.encode().unwrap(), "idgate_http_in_flight 0");
}

#[test]
fn a_channel_seen_first_at_scrape_time_shows_every_series_at_zero() {
    let m = Metrics::default();
    m.set_channel_circuit_state("added-by-reload", 0);
    let text = m.encode().unwrap();
    for line in [
        r#"idgate_channel_circuit_state{channel="added-by-reload"} 0"#,
        r#"idgate_channel_failovers_total{channel="added-by-reload"} 0"#,
        r#"idgate_channel_sessions_total{channel="added-by-reload"} 0"#,
        r#"idgate_channel_session_failures_total{channel="added-by-reload"} 0"#,
        r#"idgate_channel_contingency_answers_total{channel="added-by-reload"} 0"#,
        r#"idgate_channel_verifications_total{channel="added-by-reload",outcome="valid"} 0"#,
    ] {
        assert_sample(&text, line);
    }
}
