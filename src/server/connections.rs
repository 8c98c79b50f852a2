//! Accepted connections, bounded: a cap per listener and a process-wide
//! budget under the descriptor limit, an idle timeout, a maximum age, TCP
//! keepalive, and a kill switch that closes whatever is still open when
//! the shutdown grace ends.
//!
//! Every accepted socket becomes a [`Conn`]: it holds its slot in the
//! listener's cap and in the process budget for as long as it lives, so
//! the count is exact however the connection ends. Past a cap the socket is
//! closed at once (counted, and logged at most once a second), so a flood
//! of idle connections cannot take the descriptors the gateway needs for
//! its own upstream sockets or for health checks.
//!
//! Idle: a connection with no request in flight for `idle_timeout` is
//! closed. The requests a connection serves are counted by an [`Activity`]
//! that the request path reaches through [`ConnInfo`] (a request
//! extension); the timer is re-armed lazily from the connection's own
//! reads, so nothing crosses tasks on the hot path.
//!
//! Age: with a [`MaxAge`], each connection is given the moment it ages
//! (its [`ConnectionAge`], which the accept loop acts on: GOAWAY, see
//! `listeners/aging.rs`) and is closed outright when the grace after it
//! has passed too, whatever is still in flight.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures_util::Stream;
use socket2::{SockRef, TcpKeepalive};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Notify, OwnedSemaphorePermit, Semaphore, futures::OwnedNotified},
    time::{Instant, Sleep},
};
use tonic::transport::server::Connected;

use super::max_age::MaxAge;
pub(crate) use crate::net::{ActiveRequest, Activity, ConnInfo, ConnectionAge, WatchSlot};
use crate::telemetry::{Metrics, metrics::InFlight};

/// Descriptors kept free for everything but accepted connections: logs,
/// the configuration file, DNS, and the listeners themselves.
const BASE_RESERVE: usize = 64;

/// How one listener bounds its connections.
#[derive(Debug, Clone)]
pub(super) struct ConnectionLimits {
    /// Most connections open at once on this listener.
    pub(super) max_connections: usize,
    /// Close a connection with no request in flight for this long.
    pub(super) idle_timeout: Option<Duration>,
    /// TCP keepalive probes after this much silence.
    pub(super) tcp_keepalive: Option<Duration>,
    /// Connections age (GOAWAY) and then close; `None`: they never do.
    pub(super) max_age: Option<MaxAge>,
}

/// The descriptors connections may use across every listener: the soft
/// `RLIMIT_NOFILE` less a reserve for upstream sockets (`upstream_sockets`,
/// the sum of the bulkheads) and the process's own files. `None` when the
/// limit cannot be read (then only the per-listener caps apply).
pub(super) fn connection_budget(upstream_sockets: usize) -> Option<(usize, usize)> {
    let limit = open_files_limit()?;
    Some((limit, budget_for(limit, upstream_sockets)))
}

/// The connection budget under a descriptor `limit`: the limit less the
/// reserve, never below a quarter of it (a reserve larger than the limit
/// must not leave the gateway unable to accept anything).
fn budget_for(limit: usize, upstream_sockets: usize) -> usize {
    let reserve = upstream_sockets.saturating_add(BASE_RESERVE);
    limit.saturating_sub(reserve).max(limit / 4).max(1)
}

/// The soft limit on open files, from `/proc/self/limits` (Linux); no
/// unsafe code, no libc binding.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_files_limit(&limits)
}

fn parse_open_files_limit(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    match soft {
        "unlimited" => Some(usize::MAX),
        n => n.parse().ok(),
    }
}

/// Closes every connection of a listener at once, when the shutdown grace
/// has run out.
#[derive(Debug, Default)]
pub(super) struct KillSwitch {
    killed: AtomicBool,
    notify: Arc<Notify>,
}

impl KillSwitch {
    /// Closes every connection (their next read sees end of stream, their
    /// next write an error), and every one accepted from now on.
    pub(super) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// The gate of one listener: its cap, the process budget, its metrics.
#[derive(Clone)]
pub(super) struct ConnectionGate {
    listener: &'static str,
    own: Arc<Semaphore>,
    budget: Option<Arc<Semaphore>>,
    limits: ConnectionLimits,
    metrics: Metrics,
    kill: Arc<KillSwitch>,
    last_refusal_log: Arc<Mutex<Option<Instant>>>,
}

impl ConnectionGate {
    /// A gate for `listener` (its metric label), drawing on the shared
    /// process `budget` when the descriptor limit is known.
    pub(super) fn new(
        listener: &'static str,
        limits: ConnectionLimits,
        budget: Option<Arc<Semaphore>>,
        metrics: Metrics,
    ) -> Self {
        Self {
            listener,
            own: Arc::new(Semaphore::new(
                limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
            )),
            budget,
            limits,
            metrics,
            kill: Arc::default(),
            last_refusal_log: Arc::default(),
        }
    }

    /// The switch that closes every connection of this listener.
    pub(super) fn kill_switch(&self) -> Arc<KillSwitch> {
        Arc::clone(&self.kill)
    }

    /// This listener's metric label, and its metrics.
    pub(super) fn metrics(&self) -> (&'static str, Metrics) {
        (self.listener, self.metrics.clone())
    }

    /// Where this listener's TLS handshakes report their failures.
    pub(super) fn handshake_events(&self) -> Arc<dyn crate::tls::HandshakeEvents> {
        Arc::new(ListenerHandshakes {
            metrics: self.metrics.clone(),
        })
    }

    /// Admits `stream` as a [`Conn`], or closes it at once when a cap is
    /// reached.
    fn admit(&self, stream: TcpStream, remote: SocketAddr) -> Option<Conn> {
        let own = Arc::clone(&self.own).try_acquire_owned().ok();
        let shared = match &self.budget {
            Some(b) => Arc::clone(b).try_acquire_owned().ok().map(Some),
            None => Some(None),
        };
        let (Some(own), Some(shared)) = (own, shared) else {
            self.refuse();
            // Dropping the stream closes it: no request is read.
            return None;
        };
        if self.kill.is_killed() {
            return None;
        }
        crate::net::no_delay_on(&stream);
        if let Some(time) = self.limits.tcp_keepalive {
            if let Err(e) =
                SockRef::from(&stream).set_tcp_keepalive(&TcpKeepalive::new().with_time(time))
            {
                tracing::debug!(error = %e, "cannot set TCP keepalive");
            }
        }
        let mut killed = Box::pin(Arc::clone(&self.kill.notify).notified_owned());
        killed.as_mut().enable();
        let activity = Arc::new(Activity::default());
        let now = Instant::now();
        let aged_at = self.limits.max_age.map(|max| max.aged_at(now));
        let closes_at = self
            .limits
            .max_age
            .zip(aged_at)
            .map(|(max, at)| at + max.grace);
        tracing::trace!(listener = self.listener, peer = %remote, "connection accepted");
        Some(Conn {
            stream,
            info: ConnInfo {
                remote,
                remote_text: remote.to_string().into(),
                activity: Arc::clone(&activity),
                age: Arc::new(ConnectionAge::new(aged_at)),
            },
            expires: closes_at.map(|at| Box::pin(tokio::time::sleep_until(at))),
            activity,
            idle_timeout: self.limits.idle_timeout,
            idle: self
                .limits
                .idle_timeout
                .map(|t| Box::pin(tokio::time::sleep(t))),
            killed,
            kill: Arc::clone(&self.kill),
            dead: false,
            _slots: (own, shared),
            _open: self.metrics.connection_open(self.listener),
        })
    }

    fn refuse(&self) {
        self.metrics.record_connection_rejected(self.listener);
        let now = Instant::now();
        let mut last = crate::sync::lock(&self.last_refusal_log);
        if last.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1)) {
            *last = Some(now);
            tracing::warn!(
                listener = self.listener,
                max_connections = self.limits.max_connections,
                "connection cap reached: closing new connections at once"
            );
        }
    }

    /// The admitted connections of `listener`, for a server's accept loop.
    pub(super) fn incoming(
        self,
        listener: TcpListener,
    ) -> impl Stream<Item = io::Result<Conn>> + Send + 'static {
        futures_util::stream::unfold((self, listener), |(gate, listener)| async move {
            loop {
                match listener.accept().await {
                    Ok((stream, remote)) => {
                        if let Some(conn) = gate.admit(stream, remote) {
                            return Some((Ok(conn), (gate, listener)));
                        }
                    }
                    Err(e) => {
                        // Out of descriptors or a connection reset before
                        // accept: keep serving what is open, briefly back
                        // off so a full table does not spin the loop.
                        tracing::warn!(listener = gate.listener, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        })
    }
}

/// Refused handshakes, counted in the gateway's metrics.
struct ListenerHandshakes {
    metrics: Metrics,
}

impl crate::tls::HandshakeEvents for ListenerHandshakes {
    fn handshake_failed(&self, listener: &'static str, cause: &'static str) {
        self.metrics.record_tls_handshake_failure(listener, cause);
    }
}

/// An admitted connection.
pub(super) struct Conn {
    stream: TcpStream,
    info: ConnInfo,
    activity: Arc<Activity>,
    idle_timeout: Option<Duration>,
    idle: Option<Pin<Box<Sleep>>>,
    /// Fires when the grace after the connection's age has passed.
    expires: Option<Pin<Box<Sleep>>>,
    killed: Pin<Box<OwnedNotified>>,
    kill: Arc<KillSwitch>,
    /// Set once closed by the kill switch or the idle timeout.
    dead: bool,
    _slots: (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>),
    _open: InFlight,
}

impl Conn {
    /// True when the connection must close now: killed, past its age's
    /// grace, or idle too long. Polls the kill notification and the
    /// timers, so the task is woken when any fires.
    fn must_close(&mut self, cx: &mut Context<'_>) -> bool {
        if self.dead {
            return true;
        }
        let expired = self
            .expires
            .as_mut()
            .is_some_and(|e| e.as_mut().poll(cx).is_ready());
        if expired || self.kill.is_killed() || self.killed.as_mut().poll(cx).is_ready() {
            self.dead = true;
            return true;
        }
        let (Some(timeout), Some(idle)) = (self.idle_timeout, self.idle.as_mut()) else {
            return false;
        };
        while idle.as_mut().poll(cx).is_ready() {
            // The timer fired: close only if no request has been in flight
            // for the whole timeout; else re-arm from the last activity.
            let now = Instant::now();
            let next = match self.activity.idle_since() {
                None => now + timeout,
                Some(None) => {
                    self.dead = true;
                    return true;
                }
                Some(Some(last_end)) if last_end + timeout <= now => {
                    self.dead = true;
                    return true;
                }
                Some(Some(last_end)) => last_end + timeout,
            };
            idle.as_mut().reset(next);
        }
        false
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.must_close(cx) {
            // End of stream: the server closes the connection.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.dead || self.kill.is_killed() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        // The audit records of the calls this write answers are out first.
        crate::telemetry::log_lines::flush_this_thread();
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.dead || self.kill.is_killed() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        crate::telemetry::log_lines::flush_this_thread();
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.info.age.close();
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl Conn {
    /// What the request path may know of this connection.
    pub(super) fn info(&self) -> ConnInfo {
        self.info.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_files_limit_is_read_from_proc_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_open_files_limit(limits), Some(1024));
        assert_eq!(
            parse_open_files_limit(
                "Max open files            unlimited            unlimited files"
            ),
            Some(usize::MAX)
        );
        assert_eq!(parse_open_files_limit("nothing here"), None);
    }

    #[test]
    fn the_budget_keeps_the_reserve_free_but_never_drops_below_a_quarter() {
        // With the common 1,024 limit and the default bulkheads (256 core +
        // 2 x 256 channels), a quarter of the limit remains.
        assert_eq!(budget_for(1024, 768), 256);
        assert_eq!(budget_for(1024, 100), 860);
        assert_eq!(budget_for(1 << 20, 768), (1 << 20) - 832);
        assert_eq!(budget_for(usize::MAX, usize::MAX), usize::MAX / 4);
    }
}
