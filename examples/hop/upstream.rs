//! The fixed-answer REST upstream, and the thread-per-server helper it and
//! the OTLP sink run on.

use std::{convert::Infallible, net::SocketAddr};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What `nginx-upstream.conf` answers to `/3d/session-token`.
pub const SESSION_TOKEN_PATH: &str = "/facecaptcha/service/captcha/3d/session-token";
const SESSION_TOKEN_ANSWER: &str = r#"{"isContingency":false,"token":"c2Vzc2lvbi10b2tlbi0wMTIzNDU2Nzg5YWJjZGVm","vendor":"vendor-a","url":"https://vendor-a.invalid/sdk"}"#;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let found = req.method() == Method::POST && req.uri().path() == SESSION_TOKEN_PATH;
    // Read the body whole, as a keep-alive server must.
    let _ = req.into_body().collect().await;
    let response = if found {
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONNECTION, "keep-alive")
            .body(Full::new(Bytes::from_static(
                SESSION_TOKEN_ANSWER.as_bytes(),
            )))
    } else {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Full::new(Bytes::from_static(b"not found\n")))
    };
    Ok(response.expect("a valid response"))
}

/// Answers like `nginx-upstream.conf`: the session token to its `POST`,
/// 404 to anything else, HTTP/1.1 keep-alive.
pub async fn serve_upstream(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                .await;
        });
    }
}

/// Binds `127.0.0.1:0` and serves `serve` on a current-thread runtime of
/// its own thread (like nginx's single worker); the thread lives as long
/// as the process.
pub fn spawn_server<F, Fut>(name: &str, serve: F) -> anyhow::Result<SocketAddr>
where
    F: FnOnce(TcpListener) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("listener");
                serve(listener).await;
            });
        })?;
    Ok(addr)
}
