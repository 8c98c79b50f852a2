//! Fakes of the upstream for the REST client tests: counting and dropping
//! servers, configuration and fixtures.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{
    gateway::{reason, retryable},
    net::bind_loopback,
};
use bytes::Bytes;
use idgate::config::{OperatorProfile, UpstreamConfig};
use idgate::domain::{
    BirthDate, Cpf, CustomerReference, EndUser, ImageKind, ImagePayload, Password, PersonName,
};
use idgate::upstream::{UpstreamClient, UpstreamError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The default paths of the wire contract.
pub const CREDENTIAL: &str = "/service/captcha/credencial";
pub const APPKEY: &str = "/service/captcha/appkey";
pub const CHALLENGE: &str = "/service/captcha/challenge";
pub const CAPTCHA: &str = "/service/captcha/captcha";
pub const SESSION_3D: &str = "/service/captcha/3d/session-token";
pub const LIVENESS_3D: &str = "/service/captcha/3d/liveness";
pub const DOCUMENT: &str = "/service/captcha/document";
pub const RESULT: &str = "/service/captcha/document/result";

pub use super::net::serve;

/// A server that reads each request (headers and declared body), counts
/// it, and closes the connection without answering.
pub async fn serve_dropping(count: Counter) -> SocketAddr {
    let (listener, addr) = bind_loopback().await;
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                if read_request(&mut socket).await {
                    count.hit();
                }
                let _ = socket.shutdown().await;
                drop(socket);
            });
        }
    });
    addr
}

/// Reads one HTTP/1.1 request; true if it arrived whole.
async fn read_request(socket: &mut tokio::net::TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else {
            return false;
        };
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return true;
            }
        }
    }
}

/// Counts requests a server received.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// Counts one request; returns how many came before it.
    pub fn hit(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }

    /// Requests so far.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A configuration pointing at `addr`, with a small body bound and
/// generous timeouts (calls meant to succeed must not fail on a loaded
/// machine; the timeout tests set their own).
pub fn config(addr: SocketAddr) -> UpstreamConfig {
    UpstreamConfig {
        base_url: format!("http://{addr}"),
        result_base_url: format!("http://{addr}"),
        timeout_ms: 10_000,
        connect_timeout_ms: 5_000,
        max_response_bytes: 64 * 1024,
        safe_attempts: 2,
        ..UpstreamConfig::default()
    }
}

/// A client for `addr` with [`config`].
pub fn client(addr: SocketAddr) -> UpstreamClient {
    UpstreamClient::new(&config(addr)).expect("client")
}

/// A client for `addr` with a tweaked [`config`].
pub fn client_with(addr: SocketAddr, tweak: impl FnOnce(&mut UpstreamConfig)) -> UpstreamClient {
    let mut c = config(addr);
    tweak(&mut c);
    UpstreamClient::new(&c).expect("client")
}

/// The operator profile of the tests.
pub fn profile() -> OperatorProfile {
    OperatorProfile {
        name: "default".into(),
        login: "operator".into(),
        password: Password::new("s3cret-pass"),
    }
}

/// A valid end user.
pub fn end_user() -> EndUser {
    EndUser {
        cpf: Cpf::parse("529.982.247-25").expect("cpf"),
        name: PersonName::parse("Maria da Silva").expect("name"),
        birth_date: BirthDate::parse_now("1990-02-28").expect("date"),
        customer_reference: CustomerReference::parse("PROP2026X1").expect("ref"),
    }
}

/// A tiny JPEG-looking payload.
pub fn jpeg(tail: &'static [u8]) -> ImagePayload {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xE0];
    v.extend_from_slice(tail);
    ImagePayload::parse(Bytes::from(v), &[ImageKind::Jpeg, ImageKind::Png], 1 << 20).expect("jpeg")
}

/// A tiny PNG-looking payload.
pub fn png() -> ImagePayload {
    ImagePayload::parse(
        Bytes::from_static(b"\x89PNG\r\n\x1a\n\x00\x01"),
        &[ImageKind::Jpeg, ImageKind::Png],
        1 << 20,
    )
    .expect("png")
}

/// The gRPC code and `ErrorInfo.reason` a caller would see, and whether
/// `RetryInfo` is attached.
pub fn grpc(err: UpstreamError) -> (tonic::Code, String, bool) {
    let status = tonic::Status::from(idgate::Error::from(err));
    (status.code(), reason(&status), retryable(&status))
}

/// A delay far beyond every timeout of the tests.
pub const FOREVER: Duration = Duration::from_secs(30);
