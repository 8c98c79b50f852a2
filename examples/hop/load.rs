//! The load generator: HTTP/2 streams carrying a pre-encoded
//! `StartSession3D` to idgate (like `h2load -c N -m M`), or HTTP/1.1
//! keep-alive connections with pipelined REST requests straight to the
//! upstream (like `h2load --h1 -m`). Every answer is checked.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::{Buf as _, Bytes, BytesMut};
use http::{Request, StatusCode, Uri, header};
use idgate::proto::v1::StartSession3DRequest;
use prost::Message as _;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use crate::upstream::SESSION_TOKEN_PATH;

const GRPC_PATH: &str = "/idgate.v1.LivenessService/StartSession3D";

fn appkey() -> String {
    "a".repeat(43)
}

/// One worker's (or connection's) results.
#[derive(Default)]
pub struct Tally {
    pub ok: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    /// Nanoseconds per call, in the order they ended (sorted once measured).
    pub latencies: Vec<u64>,
}

impl Tally {
    fn with_capacity(n: usize) -> Self {
        Tally {
            latencies: Vec::with_capacity(n),
            ..Tally::default()
        }
    }

    fn record(&mut self, took: Duration, outcome: Result<(), String>) {
        self.latencies
            .push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        match outcome {
            Ok(()) => self.ok += 1,
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.ok += other.ok;
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.latencies.extend(other.latencies);
    }
}

/// Hands out call numbers until `calls` are claimed.
#[derive(Clone)]
struct Claims(Arc<AtomicUsize>, usize);

impl Claims {
    fn new(calls: usize) -> Self {
        Claims(Arc::new(AtomicUsize::new(0)), calls)
    }

    fn claim(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) < self.1
    }
}

/// The load of one phase.
#[derive(Clone, Copy)]
pub struct Load {
    pub calls: usize,
    pub connections: usize,
    pub streams: usize,
}

impl Load {
    fn per_worker(&self) -> usize {
        self.calls / (self.connections * self.streams) + 1
    }
}

/// One `StartSession3D` over an HTTP/2 connection: the pre-encoded
/// request, then the answer read whole and its gRPC status checked.
async fn grpc_call(
    send: &mut h2::client::SendRequest<Bytes>,
    uri: &Uri,
    frame: &Bytes,
    bearer: Option<&http::HeaderValue>,
) -> Result<(), String> {
    let mut request = Request::post(uri.clone())
        .header(header::CONTENT_TYPE, "application/grpc")
        .header(header::TE, "trailers");
    if let Some(bearer) = bearer {
        request = request.header(header::AUTHORIZATION, bearer.clone());
    }
    let request = request.body(()).expect("a valid request");
    std::future::poll_fn(|cx| send.poll_ready(cx))
        .await
        .map_err(|e| format!("h2 not ready: {e}"))?;
    let (response, mut body_tx) = send
        .send_request(request, false)
        .map_err(|e| format!("h2 send: {e}"))?;
    body_tx
        .send_data(frame.clone(), true)
        .map_err(|e| format!("h2 send data: {e}"))?;
    let response = response.await.map_err(|e| format!("h2 response: {e}"))?;
    if response.status() != StatusCode::OK {
        return Err(format!("HTTP {}", response.status()));
    }
    let grpc_status = |headers: &http::HeaderMap| -> Result<(), String> {
        match headers.get("grpc-status").map(|v| v.as_bytes()) {
            Some(b"0") => Ok(()),
            Some(code) => Err(format!(
                "grpc-status {} {}",
                String::from_utf8_lossy(code),
                headers
                    .get("grpc-message")
                    .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
                    .unwrap_or_default()
            )),
            None => Err("no grpc-status".to_owned()),
        }
    };
    if response.headers().contains_key("grpc-status") {
        // Trailers-only: an error, or OK without a message.
        grpc_status(response.headers())?;
        return Err("OK without a response message".to_owned());
    }
    let mut body = response.into_body();
    let mut received = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("h2 body: {e}"))?;
        received += chunk.len();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("h2 trailers: {e}"))?
        .ok_or("no trailers")?;
    grpc_status(&trailers)?;
    if received <= 5 {
        return Err("an empty response message".to_owned());
    }
    Ok(())
}

/// `load.connections` HTTP/2 connections to idgate, `load.streams`
/// concurrent `StartSession3D` calls on each.
pub async fn grpc_load(
    addr: SocketAddr,
    load: Load,
    bearer: Option<http::HeaderValue>,
) -> anyhow::Result<Tally> {
    let uri: Uri = format!("http://{addr}{GRPC_PATH}").parse()?;
    let message = StartSession3DRequest {
        appkey: appkey(),
        user_agent: "bench/1.0".into(),
    }
    .encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(message.len())?.to_be_bytes());
    frame.extend_from_slice(&message);
    let frame = Bytes::from(frame);
    let claims = Claims::new(load.calls);
    let mut workers = Vec::new();
    for _ in 0..load.connections {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::handshake(tcp).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        for _ in 0..load.streams {
            let (mut send, uri, frame, claims, bearer) = (
                send.clone(),
                uri.clone(),
                frame.clone(),
                claims.clone(),
                bearer.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut tally = Tally::with_capacity(load.per_worker());
                while claims.claim() {
                    let started = Instant::now();
                    let outcome = grpc_call(&mut send, &uri, &frame, bearer.as_ref()).await;
                    tally.record(started.elapsed(), outcome);
                }
                tally
            }));
        }
    }
    let mut all = Tally::with_capacity(load.calls);
    for worker in workers {
        all.merge(worker.await?);
    }
    Ok(all)
}

/// One HTTP/1.1 response from the front of `buf`: its status and length,
/// once it is all there.
pub fn parse_response(buf: &[u8]) -> Result<Option<(u16, usize)>, String> {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| "a non-UTF-8 head")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("a malformed status line")?;
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or("no content-length")?;
    let total = head_end + 4 + length;
    Ok((buf.len() >= total).then_some((status, total)))
}

/// One keep-alive connection to the upstream, `depth` requests pipelined.
async fn rest_connection(
    addr: SocketAddr,
    request: Bytes,
    depth: usize,
    claims: Claims,
    capacity: usize,
) -> anyhow::Result<Tally> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let mut tally = Tally::with_capacity(capacity);
    let mut in_flight: VecDeque<Instant> = VecDeque::with_capacity(depth);
    let mut out = Vec::with_capacity(request.len() * depth);
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        while in_flight.len() < depth && claims.claim() {
            out.extend_from_slice(&request);
            in_flight.push_back(Instant::now());
        }
        if in_flight.is_empty() {
            return Ok(tally);
        }
        if !out.is_empty() {
            tcp.write_all(&out).await?;
            out.clear();
        }
        loop {
            match parse_response(&buf) {
                Ok(Some((status, len))) => {
                    buf.advance(len);
                    let started = in_flight.pop_front().context("an unasked response")?;
                    let outcome = if status == 200 {
                        Ok(())
                    } else {
                        Err(format!("HTTP {status}"))
                    };
                    tally.record(started.elapsed(), outcome);
                    break;
                }
                Ok(None) => {
                    if tcp.read_buf(&mut buf).await? == 0 {
                        anyhow::bail!("the upstream closed the connection");
                    }
                }
                Err(e) => anyhow::bail!("the upstream's response: {e}"),
            }
        }
    }
}

/// `load.connections` keep-alive connections straight to the upstream.
pub async fn rest_load(addr: SocketAddr, load: Load) -> anyhow::Result<Tally> {
    let body = serde_json::json!({"appkey": appkey(), "userAgent": "bench/1.0"}).to_string();
    let request = Bytes::from(format!(
        "POST {SESSION_TOKEN_PATH} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let claims = Claims::new(load.calls);
    let capacity = load.per_worker() * load.streams;
    let connections: Vec<_> = (0..load.connections)
        .map(|_| {
            tokio::spawn(rest_connection(
                addr,
                request.clone(),
                load.streams,
                claims.clone(),
                capacity,
            ))
        })
        .collect();
    let mut all = Tally::with_capacity(load.calls);
    for connection in connections {
        all.merge(connection.await??);
    }
    Ok(all)
}

/// What a phase calls.
#[derive(Clone)]
pub enum Target {
    /// The upstream, over HTTP/1.1.
    Direct,
    /// idgate, with the bearer token every call carries, if any.
    Idgate(Option<http::HeaderValue>),
}

/// Runs one phase of `load` against `target` at `addr`, within `limit`.
pub async fn drive(
    target: Target,
    addr: SocketAddr,
    load: Load,
    limit: Duration,
) -> anyhow::Result<Tally> {
    let run = async {
        match target {
            Target::Direct => rest_load(addr, load).await,
            Target::Idgate(bearer) => grpc_load(addr, load, bearer).await,
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .context("the phase ran past --max-seconds")?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_read_once_it_is_all_there() {
        let one = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(&one[..one.len() - 1]), Ok(None));
        assert_eq!(parse_response(one), Ok(Some((200, one.len()))));
        let two = [
            &one[..],
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        ]
        .concat();
        assert_eq!(parse_response(&two), Ok(Some((200, one.len()))));
        assert_eq!(
            parse_response(&two[one.len()..]),
            Ok(Some((404, two.len() - one.len())))
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }

    #[test]
    fn claims_stop_at_the_count() {
        let claims = Claims::new(3);
        let taken = std::iter::from_fn(|| claims.claim().then_some(())).count();
        assert_eq!(taken, 3);
        assert!(!claims.clone().claim());
    }
}
