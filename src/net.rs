//! Accepted connections as the request path sees them: their socket
//! options, their peer, and the requests they are serving.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::{net::TcpStream, time::Instant};

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

/// The requests one connection is serving, for its idle timeout, and its
/// `WatchJourney` streams, for the per-connection cap.
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
    watches: AtomicUsize,
    /// When the last request ended (its idle clock), as Tokio time.
    last_end: Mutex<Option<Instant>>,
}

impl Activity {
    /// Counts a request as in flight until the guard drops.
    pub fn start(self: &Arc<Self>) -> ActiveRequest {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        ActiveRequest(Arc::clone(self))
    }

    /// Counts a `WatchJourney` stream on this connection until the slot
    /// drops; `None` when `max` are already open.
    pub fn try_watch(self: &Arc<Self>, max: usize) -> Option<WatchSlot> {
        self.watches
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| WatchSlot(Arc::clone(self)))
    }

    /// `None` while a request is in flight; else when the last one ended
    /// (`None` inside: none ever did).
    pub fn idle_since(&self) -> Option<Option<Instant>> {
        (self.in_flight.load(Ordering::Acquire) == 0).then(|| *crate::sync::lock(&self.last_end))
    }
}

/// One request in flight on a connection.
#[derive(Debug)]
pub struct ActiveRequest(Arc<Activity>);

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        *crate::sync::lock(&self.0.last_end) = Some(Instant::now());
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One `WatchJourney` stream open on a connection.
#[derive(Debug)]
pub struct WatchSlot(Arc<Activity>);

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.0.watches.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the request path knows of its connection (a request extension).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The peer, for access logs.
    pub remote: SocketAddr,
    /// The connection's requests in flight.
    pub activity: Arc<Activity>,
}
