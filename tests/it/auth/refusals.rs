//! Refusals cost little, over real sockets: a client that sends a bad
//! token again and again on one HTTP/2 connection is refused from memory
//! after the first check, and its connection is told to go away (GOAWAY)
//! after 20 refusals in a row; refusals between authenticated calls do
//! not add up to it. (That the 20th refusal, not the 19th, decides is
//! `auth::layer`'s unit test: over a socket, HTTP/2's graceful GOAWAY
//! takes a round trip, a PING, in which a call already sent is served.)

use std::net::SocketAddr;

use bytes::Bytes;
use tokio::net::TcpStream;
use tonic::Code;

use super::{gateway_with, refusals};
use crate::support::{
    jwt::{TestKey, jwks_file, jwt_auth},
    metrics::counted,
    wait::EVENT_WAIT,
};

const CREATE_JOURNEY: &str = "/idgate.v1.JourneyService/CreateJourney";
/// The gateway's limit (`auth::layer::MAX_REFUSALS_IN_A_ROW`).
const IN_A_ROW: usize = 20;

/// One `CreateJourney` with `token` and an empty message on the raw
/// connection `send`: its gRPC status, or the HTTP/2 error that stopped it.
async fn call(
    send: &h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    token: &str,
) -> Result<tonic::Status, h2::Error> {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{CREATE_JOURNEY}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .expect("request");
    let mut send = send.clone().ready().await?;
    let (response, mut body) = send.send_request(request, false)?;
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)?;
    let response = tokio::time::timeout(EVENT_WAIT, response)
        .await
        .expect("answered in time")?;
    Ok(tonic::Status::from_header_map(response.headers()).expect("a trailers-only refusal"))
}

#[tokio::test]
async fn a_connection_sending_bad_tokens_is_refused_from_memory_and_told_to_go_away_after_20() {
    let key = TestKey::es256("k");
    let gw = gateway_with(jwt_auth(Some(jwks_file(&[&key])), None), |_| {}).await;
    let addr = gw.gateway.grpc_addr();
    // Signed by a key the gateway does not hold, under a kid it does.
    let forged = TestKey::es256("k").token("svc-onboarding");

    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let connection = tokio::spawn(connection);
    let mut refused = 0;
    let mut stopped_by = None;
    for _ in 0..10_000 {
        match call(&send, addr, &forged).await {
            Ok(status) => {
                assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
                refused += 1;
            }
            Err(e) => {
                stopped_by = Some(e);
                break;
            }
        }
    }
    assert!(stopped_by.is_some(), "the connection stops taking calls");
    assert!(
        (IN_A_ROW..2 * IN_A_ROW).contains(&refused),
        "{refused} refused calls answered on the connection"
    );
    let _closed = tokio::time::timeout(EVENT_WAIT, connection)
        .await
        .expect("the gateway closes the connection");

    let metrics = gw.metrics_text().await;
    assert_eq!(
        refusals(&metrics, "CALLER_UNAUTHENTICATED", "signature"),
        refused as f64
    );
    assert_eq!(
        counted(&metrics, "idgate_auth_refused_from_memory_total"),
        (refused - 1) as f64,
        "one signature check, then memory"
    );
    assert_eq!(
        counted(&metrics, "idgate_auth_connections_closed_total"),
        1.0
    );
    gw.stop().await;
}

#[tokio::test]
async fn refusals_between_authenticated_calls_keep_the_connection_open() {
    let key = TestKey::es256("k");
    let gw = gateway_with(jwt_auth(Some(jwks_file(&[&key])), None), |_| {}).await;
    let addr = gw.gateway.grpc_addr();
    let forged = TestKey::es256("k").token("svc-onboarding");
    // Authenticated, then refused by the handler (the message is empty).
    let good = key.token("svc-onboarding");

    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    for _ in 0..3 {
        for _ in 0..IN_A_ROW - 1 {
            let status = call(&send, addr, &forged).await.expect("served");
            assert_eq!(status.code(), Code::Unauthenticated);
        }
        let status = call(&send, addr, &good).await.expect("served");
        assert_ne!(status.code(), Code::Unauthenticated, "{status:?}");
    }
    let metrics = gw.metrics_text().await;
    assert_eq!(
        counted(&metrics, "idgate_auth_connections_closed_total"),
        0.0
    );
    gw.stop().await;
}
