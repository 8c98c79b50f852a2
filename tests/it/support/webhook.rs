//! Completion notices as the service (HTTP Basic) or a Standard Webhooks
//! sender (signed) posts them, for the receiver tests.

use std::net::SocketAddr;

use base64::Engine as _;
use idgate::events::{HmacSecret, delivery_proof};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::wait::EVENT_WAIT;

/// The receiver's Standard Webhooks secret in the tests.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The receiver's HTTP Basic user in the tests.
pub const USER: &str = "vendor";
/// The receiver's HTTP Basic password in the tests.
pub const PASSWORD: &str = "s3cret-webhook-password";

/// A notice's JSON body.
pub fn notice(status: &str, appkey: &str) -> String {
    serde_json::json!({ "Status": status, "Appkey": appkey }).to_string()
}

/// Now, in Unix seconds (the `webhook-timestamp` clock).
pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// `request` with `body` signed by `secret` as message `id` at
/// `timestamp`, with the three Standard Webhooks headers.
pub fn signed(
    request: reqwest::RequestBuilder,
    secret: &str,
    id: &str,
    timestamp: i64,
    body: impl Into<Vec<u8>>,
) -> reqwest::RequestBuilder {
    let body = body.into();
    let signature = delivery_proof::sign(
        &HmacSecret::parse(secret).expect("secret"),
        id,
        timestamp,
        &body,
    );
    request
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
}

/// POSTs `body` to `path` on `addr` with valid Basic credentials in chunked
/// encoding (no content-length), over a raw connection; returns the raw
/// answer.
pub async fn post_chunked(addr: SocketAddr, path: &str, body: &[u8]) -> String {
    let credentials =
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Basic {credentials}\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(256) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the receiver");
    conn.write_all(&request).await.expect("send");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(EVENT_WAIT, conn.read_to_end(&mut answer))
        .await
        .expect("answer in time");
    String::from_utf8_lossy(&answer).into_owned()
}

/// The status code of a raw HTTP/1.1 answer (0 if there is none).
pub fn status_code(raw: &str) -> u16 {
    raw.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
