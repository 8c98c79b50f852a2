//! The floor of a hop built on hyper: HTTP/2 in, one HTTP/1.1 `POST` to
//! the upstream, a fixed gRPC-shaped answer out; no gRPC decoding, no
//! routing, no admission, no spans, no metrics. It answers what the hop
//! benchmark's `StartSession3D` calls expect (status 200, a length-prefixed
//! message, `grpc-status: 0` in the trailers), so `../shared/perf/run.py`
//! can measure it in idgate's place and show what the transport alone
//! costs on the machine, beside what idgate's features add to it.
//!
//! ```sh
//! cargo build --release --example bare_hop
//! target/release/examples/bare_hop & # :19084 → 127.0.0.1:19081, like idgate-perf.toml
//! python3 ../shared/perf/run.py -n 30000 --targets nginx,envoy,idgate \
//!     --idgate-port 19084 --idgate-pid $!
//! ```
//!
//! Serving threads: `BARE_HOP_THREADS` (default 1), each a current-thread
//! runtime accepting on the same listener, each with its own upstream
//! pool, as idgate's serving threads are. Listen and upstream addresses:
//! `BARE_HOP_LISTEN` (`127.0.0.1:19084`), `BARE_HOP_UPSTREAM`
//! (`http://127.0.0.1:19081/facecaptcha/service/captcha/3d/session-token`).

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    Request, Response,
    body::{Frame, Incoming},
};
use hyper_util::{
    client::legacy::Client,
    rt::{TokioExecutor, TokioIo},
};

/// The request body idgate sends for the benchmark's `StartSession3D`.
const UPSTREAM_BODY: &[u8] =
    br#"{"appkey":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","userAgent":"bench/1.0"}"#;

/// A unary gRPC answer: one message, then `grpc-status: 0`.
struct GrpcAnswer {
    message: Option<Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl hyper::body::Body for GrpcAnswer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn main() -> std::io::Result<()> {
    let threads: usize = env_or("BARE_HOP_THREADS", "1").parse().unwrap_or(1);
    let upstream: http::Uri = env_or(
        "BARE_HOP_UPSTREAM",
        "http://127.0.0.1:19081/facecaptcha/service/captcha/3d/session-token",
    )
    .parse()
    .map_err(std::io::Error::other)?;
    let listener = std::net::TcpListener::bind(env_or("BARE_HOP_LISTEN", "127.0.0.1:19084"))?;
    listener.set_nonblocking(true)?;
    let serving: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (listener, upstream) = (listener.try_clone(), upstream.clone());
            std::thread::spawn(move || serve(listener?, upstream))
        })
        .collect();
    for thread in serving {
        thread
            .join()
            .map_err(|_| std::io::Error::other("a serving thread panicked"))??;
    }
    Ok(())
}

/// Accepts and serves connections on one current-thread runtime.
fn serve(listener: std::net::TcpListener, upstream: http::Uri) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let (client, upstream) = (client.clone(), upstream.clone());
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (client, upstream) = (client.clone(), upstream.clone());
                async move {
                    let _ = request.into_body().collect().await;
                    let call = Request::post(upstream)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Full::new(Bytes::from_static(UPSTREAM_BODY)))
                        .map_err(std::io::Error::other)?;
                    let answer = client
                        .request(call)
                        .await
                        .map_err(std::io::Error::other)?
                        .into_body()
                        .collect()
                        .await
                        .map_err(std::io::Error::other)?
                        .to_bytes();
                    // The upstream's JSON as the message: a length prefix,
                    // then the bytes.
                    let mut message = Vec::with_capacity(5 + answer.len());
                    message.push(0);
                    let length = u32::try_from(answer.len()).map_err(std::io::Error::other)?;
                    message.extend_from_slice(&length.to_be_bytes());
                    message.extend_from_slice(&answer);
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    Response::builder()
                        .header(http::header::CONTENT_TYPE, "application/grpc")
                        .body(GrpcAnswer {
                            message: Some(Bytes::from(message)),
                            trailers: Some(trailers),
                        })
                        .map_err(std::io::Error::other)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
