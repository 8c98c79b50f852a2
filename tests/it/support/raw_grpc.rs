//! Raw HTTP/2 gRPC calls, for the request bodies a tonic client would
//! never send (a length prefix it does not honour, a body that stalls).

use std::net::SocketAddr;

use bytes::Bytes;
use tokio::net::TcpStream;

use super::wait::EVENT_WAIT;

/// An HTTP/2 connection to `addr`, its driver spawned.
pub async fn connect(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    (send, tokio::spawn(connection))
}

/// Opens a gRPC request to `path`, with `bearer` as its credential when
/// given; the body is the caller's to send.
pub async fn call(
    send: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
    bearer: Option<&str>,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = bearer {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(()).expect("request");
    let mut send = send.ready().await.expect("h2 ready");
    send.send_request(request, false).expect("send request")
}

/// A gRPC frame: uncompressed, announcing `declared` bytes, carrying `bytes`.
pub fn frame(declared: u32, bytes: &[u8]) -> Bytes {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&declared.to_be_bytes());
    frame.extend_from_slice(bytes);
    frame.into()
}

/// The gRPC status of a raw response: trailers-only or in the trailers,
/// within [`EVENT_WAIT`].
pub async fn status(response: h2::client::ResponseFuture) -> tonic::Status {
    tokio::time::timeout(EVENT_WAIT, async {
        let response = response.await.expect("response");
        if let Some(status) = tonic::Status::from_header_map(response.headers()) {
            return status;
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("body");
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await.expect("trailers").expect("trailers");
        tonic::Status::from_header_map(&trailers).expect("grpc-status")
    })
    .await
    .expect("answered in time")
}
