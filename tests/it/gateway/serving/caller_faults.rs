//! Caller faults: a request that does not decode, or is over the message
//! size limit, is refused with its own status and reason, counted so, and
//! never reaches the upstream.

use tonic::Code;

use super::{raw_create_journey, sample};
use crate::support::gateway::*;

#[tokio::test]
async fn undecodable_protobuf_is_invalid_argument_malformed_request_and_counted_so() {
    let gw = TestGateway::start().await;
    let addr = gw.gateway.grpc_addr();
    let garbage: [&[u8]; 3] = [
        // Random bytes: a varint that never ends.
        &[
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ],
        // `cpf` (field 1, length-delimited) with a truncated length varint.
        &[0x0A, 0x80],
        // `cpf` holding invalid UTF-8.
        &[0x0A, 0x02, 0xC3, 0x28],
    ];
    for bytes in garbage {
        let status = raw_create_journey(addr, bytes).await;
        assert_error(&status, Code::InvalidArgument, "MALFORMED_REQUEST");
    }
    assert_eq!(gw.total_calls(), 0, "nothing reached the upstream");
    let metrics = gw.metrics_text().await;
    let series = |code: &str| {
        format!(
            r#"idgate_rpc_requests_total{{method="idgate.v1.JourneyService/CreateJourney",code="{code}"}}"#
        )
    };
    assert_eq!(
        sample(&metrics, &series("INVALID_ARGUMENT")),
        3,
        "{metrics}"
    );
    assert_eq!(sample(&metrics, &series("INTERNAL")), 0, "{metrics}");
    gw.stop().await;
}

#[tokio::test]
async fn a_message_over_the_size_limit_is_resource_exhausted_message_too_large() {
    // CreateJourney carries no image: the small limit is its own.
    let gw = TestGateway::start_with(|c| c.limits.max_small_message_bytes = 1024).await;
    let mut person = happy_person();
    person.customer_reference = "X".repeat(2048);
    let err = gw.journeys().create_journey(person).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "MESSAGE_TOO_LARGE");
    assert!(err.message().contains("1024 bytes"), "{err:?}");
    assert!(!retryable(&err));
    assert_eq!(gw.total_calls(), 0);
    let metrics = gw.metrics_text().await;
    assert_eq!(
        sample(
            &metrics,
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/CreateJourney",code="RESOURCE_EXHAUSTED"}"#
        ),
        1,
        "{metrics}"
    );
    gw.stop().await;
}
