//! Accepted connections as the request path sees them: their socket
//! options, their peer, and the requests they are serving; [`body`]: a
//! body passed on under a hook (the one wrapper of the request path's
//! bodies); [`held`]: a response body that holds what its call holds.

pub mod body;
pub mod held;

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, AtomicUsize, Ordering},
    },
};

use tokio::{net::TcpStream, sync::watch, time::Instant};

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

/// The requests one connection is serving, for its idle timeout; its
/// `WatchJourney` streams, for the per-connection cap; and its calls
/// refused authentication in a row, for the cap on those.
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
    watches: AtomicUsize,
    service_streams: AtomicUsize,
    refused_in_a_row: AtomicU32,
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
        try_count(&self.watches, max).then(|| WatchSlot(Arc::clone(self)))
    }

    /// Counts a health `Watch` or reflection stream on this connection
    /// until the slot drops; `None` when `max` are already open.
    pub fn try_service_stream(self: &Arc<Self>, max: usize) -> Option<ServiceStreamSlot> {
        try_count(&self.service_streams, max).then(|| ServiceStreamSlot(Arc::clone(self)))
    }

    /// Counts a call refused authentication; how many have been, in a row.
    pub fn refused(&self) -> u32 {
        self.refused_in_a_row
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1)
    }

    /// An authenticated call ends the run of refusals.
    pub fn authenticated(&self) {
        // A load first: the common case writes nothing.
        if self.refused_in_a_row.load(Ordering::Relaxed) != 0 {
            self.refused_in_a_row.store(0, Ordering::Relaxed);
        }
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

/// A health `Watch` or reflection stream counted on its connection
/// ([`Activity::try_service_stream`]); uncounted on drop.
pub struct ServiceStreamSlot(Arc<Activity>);

impl Drop for ServiceStreamSlot {
    fn drop(&mut self) {
        self.0.service_streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Adds one to `count` if it is under `max`.
fn try_count(count: &AtomicUsize, max: usize) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .is_ok()
}

/// What the request path knows of its connection (a request extension).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The peer.
    pub remote: SocketAddr,
    /// The peer as text, written once per connection: every access line
    /// of the connection's calls shows it.
    pub remote_text: Arc<str>,
    /// The connection's requests in flight.
    pub activity: Arc<Activity>,
    /// Where the connection is in its life, for the streams that must end
    /// when it reaches its maximum age.
    pub age: Arc<ConnectionAge>,
}

impl ConnInfo {
    /// The connection of a request, plaintext or TLS, from its extensions.
    pub fn of(extensions: &http::Extensions) -> Option<&ConnInfo> {
        extensions.get::<ConnInfo>().or_else(|| {
            extensions
                .get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>()
                .map(tonic::transport::server::TlsConnectInfo::get_ref)
        })
    }
}

/// Where a connection is in its life (`[serving] max_connection_age_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgePhase {
    /// Serving as usual.
    Open,
    /// Told to go away (HTTP/2 GOAWAY), its calls in flight finishing
    /// within the grace: past its maximum age, or sooner
    /// ([`ConnectionAge::go_away`]).
    Aged,
    /// Closed, however it ended.
    Closed,
}

/// A connection's maximum age and its phase. The accept loop ages the
/// connection (and sends GOAWAY); the request path waits for that to end
/// its long-lived streams with a status callers re-watch on, since a
/// stream that outlived the grace would be cut with a transport error.
#[derive(Debug)]
pub struct ConnectionAge {
    /// When the connection is told to go away; `None`: never.
    pub aged_at: Option<Instant>,
    phase: watch::Sender<AgePhase>,
}

impl ConnectionAge {
    /// An open connection that ages at `aged_at` (`None`: never).
    pub fn new(aged_at: Option<Instant>) -> Self {
        Self {
            aged_at,
            phase: watch::Sender::new(AgePhase::Open),
        }
    }

    /// Marks the connection aged; true when it was still open (so a
    /// connection is counted aged at most once, and never after closing).
    pub fn age(&self) -> bool {
        self.phase.send_if_modified(|phase| {
            let open = *phase == AgePhase::Open;
            if open {
                *phase = AgePhase::Aged;
            }
            open
        })
    }

    /// Tells the connection to go away now, whatever its age (its client
    /// keeps sending credentials that are refused); true when it was
    /// still open.
    pub fn go_away(&self) -> bool {
        self.age()
    }

    /// Marks the connection closed.
    pub fn close(&self) {
        self.phase.send_replace(AgePhase::Closed);
    }

    /// Resolves once the connection is no longer [`AgePhase::Open`], with
    /// the phase it reached.
    pub fn past_open(
        &self,
    ) -> impl std::future::Future<Output = AgePhase> + Send + 'static + use<> {
        self.reaches(|p| p != AgePhase::Open)
    }

    /// The phase the connection is in now.
    pub fn phase(&self) -> AgePhase {
        *self.phase.borrow()
    }

    fn reaches(
        &self,
        done: fn(AgePhase) -> bool,
    ) -> impl std::future::Future<Output = AgePhase> + Send + 'static + use<> {
        let mut phase = self.phase.subscribe();
        async move {
            // An error: the sender went with the last holder of the
            // connection's info, so the connection is gone.
            match phase.wait_for(|p| done(*p)).await {
                Ok(p) => *p,
                Err(_) => AgePhase::Closed,
            }
        }
    }
}

/// True when `host` (as a URL writes it: `[::1]`, `127.0.0.1`,
/// `localhost`) is this machine: `localhost` and its `*.localhost`
/// names (RFC 6761), or a loopback address. What may be reached without
/// TLS (a plaintext hop is one that is not), and the only host a JWKS
/// may be fetched from over `http://`.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
