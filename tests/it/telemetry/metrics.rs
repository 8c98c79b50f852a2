//! Metrics: RPCs and upstream calls are counted and timed under fixed
//! labels, with a path outside the API labelled `_OTHER`, never by itself.

use idgate::proto::v1::{CreateJourneyRequest, GetJourneyResultRequest, WatchJourneyRequest};

use super::{CREATE, start};
use crate::support::metrics;

#[tokio::test]
async fn metrics_count_rpcs_and_upstream_calls_with_fixed_labels() {
    let h = start().await;
    let mut client = h.client().await;
    for _ in 0..2 {
        client
            .create_journey(CreateJourneyRequest::default())
            .await
            .expect("ok");
    }
    client
        .create_journey(CreateJourneyRequest {
            operator_profile: "upstream-down".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    client
        .get_journey_result(GetJourneyResultRequest::default())
        .await
        .unwrap_err();
    let mut stream = client
        .watch_journey(WatchJourneyRequest::default())
        .await
        .expect("watch")
        .into_inner();
    let mut events = 0;
    while stream.message().await.expect("stream").is_some() {
        events += 1;
    }
    assert_eq!(events, 2);
    // A path outside the API: labelled _OTHER, never by the path.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", h.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let unknown = raw
        .unary(
            tonic::Request::new(()),
            http::uri::PathAndQuery::from_static("/idgate.v1.JourneyService/j-made-up"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::Unimplemented);

    let m = h.metrics().await;
    let get = |series: &str| -> f64 { metrics::series(&m, series) };
    let create = |code: &str| format!(r#"method="{CREATE}",code="{code}""#);
    assert_eq!(
        get(&format!("idgate_rpc_requests_total{{{}}}", create("OK"))),
        2.0
    );
    assert_eq!(
        get(&format!(
            "idgate_rpc_requests_total{{{}}}",
            create("UNAVAILABLE")
        )),
        1.0
    );
    assert_eq!(
        get(&format!(
            "idgate_rpc_duration_seconds_count{{{}}}",
            create("OK")
        )),
        2.0
    );
    assert!(
        get(&format!(
            "idgate_rpc_duration_seconds_sum{{{}}}",
            create("OK")
        )) > 0.0
    );
    assert_eq!(
        get(
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/GetJourneyResult",code="NOT_FOUND"}"#
        ),
        1.0
    );
    // The stream's OK arrives in its trailers.
    assert_eq!(
        get(
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/WatchJourney",code="OK"}"#
        ),
        1.0
    );
    assert_eq!(
        get(r#"idgate_rpc_requests_total{method="_OTHER",code="UNIMPLEMENTED"}"#),
        1.0
    );
    assert!(!m.contains("j-made-up"), "{m}");
    assert_eq!(
        get(&format!(r#"idgate_rpc_in_flight{{method="{CREATE}"}}"#)),
        0.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="200"}"#
        ),
        2.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="503"}"#
        ),
        1.0
    );
    assert_eq!(
        get(
            r#"idgate_upstream_duration_seconds_count{operation="liveness_3d",channel="primary",status="200"}"#
        ),
        2.0
    );
    assert_eq!(
        get(r#"idgate_channel_circuit_state{channel="primary"}"#),
        0.0
    );
    // The /metrics request itself is in flight while it is answered.
    assert_eq!(get("idgate_http_in_flight"), 1.0);
    h.finish().await;
}
