//! Sockets and HTTP: ephemeral loopback listeners, axum servers on them,
//! a port that refuses connections, and the HTTP client of the tests.

use std::{net::SocketAddr, time::Duration};

use tokio::net::{TcpListener, TcpSocket};

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
