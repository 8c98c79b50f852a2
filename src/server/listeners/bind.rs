//! Binding the listeners' sockets, first of all: a port already taken
//! fails the start before anything else is built.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::server::{StartError, runtime::reuse_port_listener};

/// A bound socket and the address it got (port 0 resolved).
pub(in crate::server) struct Bound {
    pub(in crate::server) listener: TcpListener,
    pub(in crate::server) addr: SocketAddr,
}

/// Binds `addr` for the listener `what`.
pub(in crate::server) async fn bind(
    what: &'static str,
    addr: SocketAddr,
) -> Result<Bound, StartError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })?;
    local(what, listener, addr)
}

/// Binds `addr` for the listener `what` with `SO_REUSEPORT`, so that the
/// serving threads can each bind a socket of their own to the address it
/// got (see `server::runtime`).
pub(in crate::server) fn bind_shared(
    what: &'static str,
    addr: SocketAddr,
) -> Result<Bound, StartError> {
    let listener = reuse_port_listener(addr)
        .and_then(TcpListener::from_std)
        .map_err(|source| StartError::Bind { what, addr, source })?;
    local(what, listener, addr)
}

/// `listener` (bound for `addr`) with the address it actually got.
fn local(what: &'static str, listener: TcpListener, addr: SocketAddr) -> Result<Bound, StartError> {
    let local = listener
        .local_addr()
        .map_err(|source| StartError::Bind { what, addr, source })?;
    Ok(Bound {
        listener,
        addr: local,
    })
}
