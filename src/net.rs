//! Socket options of the servers' accepted connections.

use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::TcpIncoming;

/// Accepted gRPC connections with `TCP_NODELAY`: without it, Nagle's
/// algorithm and the peer's delayed ACK stall small writes by ~40 ms.
pub fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Sets `TCP_NODELAY` on an accepted HTTP connection (see [`incoming`]),
/// for `axum::serve(listener.tap_io(no_delay), ..)`.
pub fn no_delay(tcp: &mut TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
}
