//! Sockets and HTTP: ephemeral loopback listeners, axum servers on them,
//! a port that refuses connections, and the HTTP client of the tests.

use std::{net::SocketAddr, time::Duration};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header::CONTENT_TYPE},
    response::IntoResponse,
};
use tokio::net::{TcpListener, TcpSocket};

use super::wait::Gate;

/// A listener on an ephemeral loopback port, and its address.
pub async fn bind_loopback() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    (listener, addr)
}

/// Serves `router` on an ephemeral loopback port until the runtime ends.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let (listener, addr) = bind_loopback().await;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// Serves, on an ephemeral loopback port, a proxy to `target` (an
/// `http://host:port` root) that holds every request at `gate` before
/// forwarding it; returns the proxy's root URL. Put in front of a channel
/// or an upstream, it keeps a call in flight for exactly as long as the
/// test wants; [`Gate::peak`] is the most requests it had in flight.
pub async fn gated_proxy(target: &str, gate: Gate) -> String {
    async fn forward(
        State((target, gate, client)): State<(String, Gate, reqwest::Client)>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> impl IntoResponse {
        let _inside = gate.hold().await;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = client.request(method, format!("{target}{path}")).body(body);
        if let Some(content_type) = headers.get(CONTENT_TYPE) {
            request = request.header(CONTENT_TYPE, content_type);
        }
        match request.send().await {
            Ok(answer) => {
                let status = answer.status();
                let content_type = answer.headers().get(CONTENT_TYPE).cloned();
                let body = answer.bytes().await.unwrap_or_default();
                let mut headers = HeaderMap::new();
                if let Some(c) = content_type {
                    headers.insert(CONTENT_TYPE, c);
                }
                (status, headers, body)
            }
            Err(_) => (StatusCode::BAD_GATEWAY, HeaderMap::new(), Bytes::new()),
        }
    }
    let router = axum::Router::new().fallback(forward).with_state((
        target.trim_end_matches('/').to_owned(),
        gate,
        http_client(),
    ));
    format!("http://{}", serve(router).await)
}

/// A loopback port held bound but never listening: connections to it are
/// refused, and no other test can take the port while this value lives.
pub struct RefusingPort {
    _socket: TcpSocket,
    addr: SocketAddr,
}

impl RefusingPort {
    /// Binds an ephemeral loopback port without listening on it.
    pub fn bind() -> Self {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(([127, 0, 0, 1], 0).into())
            .expect("bind a free port");
        let addr = socket.local_addr().expect("bound address");
        RefusingPort {
            _socket: socket,
            addr,
        }
    }

    /// Takes over `addr`, a loopback port its listener just released,
    /// and holds it bound without listening: without this, a port freed
    /// by a stopped server can be taken by a parallel test, and a
    /// connection meant to be refused would reach that test's server.
    /// Retries for a moment while the old listener finishes closing.
    pub async fn take_over(addr: SocketAddr) -> Self {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let socket = TcpSocket::new_v4().expect("socket");
            socket.set_reuseaddr(true).expect("SO_REUSEADDR");
            match socket.bind(addr) {
                Ok(()) => {
                    return RefusingPort {
                        _socket: socket,
                        addr,
                    };
                }
                Err(e) => assert!(
                    tokio::time::Instant::now() < give_up,
                    "{addr} was not released, or another test took it: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The refusing address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The `host:port` of an `http://host:port[/...]` URL.
pub fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no socket address in {url}"))
}

/// The HTTP client of the tests (ring as the TLS provider, as the crate
/// uses; a generous timeout so that a bug fails a test instead of hanging
/// it).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}
