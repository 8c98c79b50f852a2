//! Traces: one trace links the caller, the gateway and the upstream with
//! the conventional attributes, and failures mark spans as the
//! conventions say (a server failure is an error, a caller's mistake not).

use idgate::proto::v1::{CreateJourneyRequest, GetJourneyResultRequest};

use super::{
    CALLER_SPAN_ID, CREATE, TRACE_ID, UPSTREAM_PATH, is_grpc_server, is_upstream_client,
    is_upstream_server, journey, start,
};
use crate::support::otlp_collector::STATUS_ERROR;

#[tokio::test]
async fn one_trace_links_the_caller_the_gateway_and_the_upstream() {
    let h = start().await;
    let response = h
        .client()
        .await
        .create_journey(h.traced(CreateJourneyRequest::default()))
        .await
        .expect("CreateJourney");
    assert_eq!(response.get_ref().journey_ref, journey().to_string());

    let spans = h
        .spans_where(&[
            ("gRPC server span", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
        ])
        .await;
    let [server, client, upstream] = &spans[..] else {
        unreachable!()
    };

    for span in &spans {
        assert_eq!(span.trace_id, TRACE_ID, "{span:#?}");
        assert_eq!(span.str("idgate.journey_ref"), Some(journey().as_str()));
        assert_eq!(span.resource_str("service.name"), Some("idgate-test"));
        assert_eq!(
            span.resource_str("service.version"),
            Some(env!("CARGO_PKG_VERSION"))
        );
    }
    assert_eq!(server.parent_span_id, CALLER_SPAN_ID);
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(upstream.parent_span_id, client.span_id);

    assert_eq!(server.str("rpc.system"), Some("grpc"));
    assert_eq!(server.str("rpc.service"), Some("idgate.v1.JourneyService"));
    assert_eq!(server.str("rpc.method"), Some("CreateJourney"));
    assert_eq!(server.int("rpc.grpc.status_code"), Some(0));
    assert_ne!(server.status_code, STATUS_ERROR);

    assert_eq!(client.name, format!("POST {UPSTREAM_PATH}"));
    assert_eq!(client.str("http.request.method"), Some("POST"));
    assert_eq!(client.str("url.path"), Some(UPSTREAM_PATH));
    assert_eq!(client.str("server.address"), Some("127.0.0.1"));
    assert!(client.int("server.port").is_some_and(|p| p > 0));
    assert_eq!(client.int("http.response.status_code"), Some(200));
    assert_eq!(client.str("idgate.channel"), Some("primary"));

    assert_eq!(upstream.name, format!("POST {UPSTREAM_PATH}"));
    assert_eq!(upstream.str("http.request.method"), Some("POST"));
    assert_eq!(upstream.int("http.response.status_code"), Some(200));
    h.finish().await;
}

#[tokio::test]
async fn failures_mark_spans_by_the_conventions() {
    let h = start().await;
    let mut client = h.client().await;
    let err = client
        .create_journey(h.traced(CreateJourneyRequest {
            operator_profile: "upstream-down".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    let err = client
        .get_journey_result(h.traced(GetJourneyResultRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    let spans = h
        .spans_where(&[
            ("failed CreateJourney", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
            (
                "GetJourneyResult",
                &is_grpc_server("idgate.v1.JourneyService/GetJourneyResult"),
            ),
        ])
        .await;
    let [create, client, upstream, get] = &spans[..] else {
        unreachable!()
    };
    // A server failure (UNAVAILABLE) is an error span...
    assert_eq!(create.int("rpc.grpc.status_code"), Some(14));
    assert_eq!(create.status_code, STATUS_ERROR);
    // ...a caller's mistake (NOT_FOUND, sent in headers only) is not.
    assert_eq!(get.int("rpc.grpc.status_code"), Some(5));
    assert_ne!(get.status_code, STATUS_ERROR);
    // A 503 is an error on both sides of the upstream call.
    assert_eq!(client.int("http.response.status_code"), Some(503));
    assert_eq!(client.str("error.type"), Some("503"));
    assert_eq!(client.status_code, STATUS_ERROR);
    assert_eq!(upstream.int("http.response.status_code"), Some(503));
    assert_eq!(upstream.status_code, STATUS_ERROR);
    h.finish().await;
}
