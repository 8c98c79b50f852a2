//! Socket options of the servers' accepted connections.

use tokio::net::TcpStream;

/// Sets `TCP_NODELAY` on an accepted connection: without it, Nagle's
/// algorithm and the peer's delayed ACK stall small writes by ~40 ms.
pub fn no_delay_on(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
}

/// [`no_delay_on`] in the shape `axum::serve(listener.tap_io(no_delay), ..)`
/// takes.
pub fn no_delay(tcp: &mut TcpStream) {
    no_delay_on(tcp);
}
