//! Redaction: secrets in metadata, URLs and values reach no log line and
//! no span, while the logs still carry the journey and span context.

use idgate::proto::v1::CreateJourneyRequest;

use super::{
    CREATE, SECRET_APPKEY, SECRET_BEARER, is_grpc_server, is_upstream_client, is_upstream_server,
    journey, start,
};

#[tokio::test]
async fn secrets_in_metadata_urls_and_values_reach_no_log_or_span() {
    let h = start().await;
    h.client()
        .await
        .create_journey(h.traced(CreateJourneyRequest::default()))
        .await
        .expect("CreateJourney");
    let spans = h
        .spans_where(&[
            ("gRPC server span", &is_grpc_server(CREATE)),
            ("upstream client span", &is_upstream_client),
            ("upstream server span", &is_upstream_server),
        ])
        .await;

    let logs = h.traced.logs.contents();
    // The logs are there, with the journey and the span context...
    assert!(logs.contains("calling upstream"), "{logs}");
    assert!(logs.contains(journey().as_str()), "{logs}");
    // ...and nothing secret.
    for secret in [SECRET_APPKEY, SECRET_BEARER] {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
        for span in &spans {
            let dump = format!("{span:?}");
            assert!(!dump.contains(secret), "{secret} on span {dump}");
        }
    }
    h.finish().await;
}
