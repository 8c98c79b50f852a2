//! Serving threads of the public gRPC listener: one current-thread Tokio
//! runtime per core, each accepting on a socket of its own bound to the
//! listener's address with `SO_REUSEPORT`.
//!
//! On the process's work-stealing runtime a call hops between worker
//! threads: the connection task, the stream task hyper spawns, the upstream
//! connection task and the timers wake each other across threads, and idle
//! workers are woken to look for work they rarely find. Profiles of the
//! hop measured that as about a third of a call's CPU (docs/performance.md).
//! Here a connection, its streams, and the tasks its calls spawn stay on
//! the thread that accepted it. The kernel spreads new connections over
//! the threads' sockets by a hash of their addresses (one shared socket
//! would not: the first thread to wake accepts every connection that
//! arrived together, which measured as one busy thread and one idle). Everything the threads share (the
//! channel router, the journey hub, the admission and connection limits,
//! metrics) is behind `Arc`s and locks, as on the shared runtime; what a
//! call hands to another thread (an upstream connection pooled by another
//! serving thread, the shared state's Redis connection) goes through
//! channels.
//!
//! Each thread installs the `tracing` dispatcher that was current when the
//! listener started, so spans and logs go where the rest of the gateway's
//! go (a test's own subscriber included).
//!
//! Each thread also keeps a [`HEARTBEAT`] timer. Tokio's timer wakes its
//! driver (a write to an `eventfd`) whenever a new timer is due before the
//! earliest one it parked for, even when the thread registering it is the
//! driver's own and awake; with nothing else pending, every call's
//! deadline and upstream timeout were such timers: two system calls per
//! call. A timer always due within the heartbeat keeps them later than
//! the earliest.
//!
//! And each thread polls for a short window, instead of sleeping, while it
//! has at most one call ([`IdlePoll`]).

use std::{
    future::Future,
    io,
    net::{SocketAddr, TcpListener as StdTcpListener},
    thread,
    time::Duration,
};

use socket2::{Domain, Socket, Type};

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle, time::MissedTickBehavior};

use super::idle_poll::IdlePoll;
use crate::{
    config::ServingConfig,
    telemetry::{IdlePollSeconds, Metrics},
};

/// How often an otherwise idle serving thread wakes: short enough that a
/// call's timers (a deadline, an upstream timeout: seconds) are not the
/// earliest its runtime waits for, long enough to cost nothing.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// The serving threads of a listener.
#[derive(Debug, Clone)]
pub(super) struct ServingThreads {
    /// How many.
    pub(super) count: usize,
    /// The longest each polls for work after a call begins or ends,
    /// instead of sleeping ([`IdlePoll`]; zero: never).
    pub(super) idle_poll: Duration,
    /// Where that polling time is counted.
    pub(super) polled: IdlePollSeconds,
}

impl ServingThreads {
    /// The public listener's threads under `serving`.
    pub(super) fn from_config(serving: &ServingConfig, metrics: &Metrics) -> Self {
        Self {
            count: count(serving.grpc_threads),
            idle_poll: Duration::from_micros(serving.idle_poll_us),
            polled: metrics.idle_poll_seconds(),
        }
    }
}

/// How many serving threads `configured` asks for: itself, or one per core
/// when 0.
fn count(configured: usize) -> usize {
    match configured {
        0 => thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

/// A listening socket on `addr` with `SO_REUSEPORT` (and `SO_REUSEADDR`,
/// as Tokio sets), non-blocking, for [`spawn`] to bind more beside it.
pub(super) fn reuse_port_listener(addr: SocketAddr) -> io::Result<StdTcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Runs `serve(listener)` on `threads.count` threads, each on its own
/// current-thread runtime: the first on `listener` (bound with
/// [`reuse_port_listener`]), the others on sockets of their own bound to
/// the same address. The returned task ends when every thread's `serve`
/// has returned.
pub(super) fn spawn<F, Fut>(
    name: &'static str,
    listener: TcpListener,
    threads: ServingThreads,
    serve: F,
) -> io::Result<JoinHandle<()>>
where
    F: Fn(TcpListener) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let addr = listener.local_addr()?;
    let mut first = Some(listener.into_std()?);
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let mut finished = Vec::with_capacity(threads.count);
    for i in 0..threads.count.max(1) {
        let own = match first.take() {
            Some(listener) => listener,
            None => reuse_port_listener(addr)?,
        };
        let serve = serve.clone();
        let dispatch = dispatch.clone();
        let (idle_poll, polled) = (threads.idle_poll, threads.polled.clone());
        let (done, wait) = oneshot::channel::<()>();
        thread::Builder::new()
            .name(format!("{name}-{i}"))
            .spawn(move || {
                let _dispatch = tracing::dispatcher::set_default(&dispatch);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(async move {
                        // Ends with the runtime, after `serve`.
                        tokio::spawn(async {
                            let mut beat = tokio::time::interval(HEARTBEAT);
                            beat.set_missed_tick_behavior(MissedTickBehavior::Skip);
                            loop {
                                beat.tick().await;
                            }
                        });
                        IdlePoll::install(idle_poll, polled);
                        match TcpListener::from_std(own) {
                            Ok(listener) => serve(listener).await,
                            Err(e) => {
                                tracing::error!(thread = i, error = %e, "serving thread cannot listen")
                            }
                        }
                    }),
                    Err(e) => {
                        tracing::error!(thread = i, error = %e, "serving thread has no runtime")
                    }
                }
                drop(done);
            })?;
        finished.push(wait);
    }
    Ok(tokio::spawn(async move {
        for wait in finished {
            let _ = wait.await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_one_per_core() {
        assert!(count(0) >= 1);
        assert_eq!(count(3), 3);
    }

    #[tokio::test]
    async fn every_thread_accepts_on_the_one_address_and_the_task_ends_with_them() {
        let listener =
            TcpListener::from_std(reuse_port_listener("127.0.0.1:0".parse().unwrap()).unwrap())
                .unwrap();
        let addr = listener.local_addr().unwrap();
        let (report, mut reports) = tokio::sync::mpsc::unbounded_channel();
        let threads = ServingThreads {
            count: 2,
            idle_poll: Duration::ZERO,
            polled: IdlePollSeconds::default(),
        };
        let all = spawn("test-serving", listener, threads, move |listener| {
            let report = report.clone();
            async move {
                let (conn, _) = listener.accept().await.unwrap();
                // Closed before reporting: the next connection can only
                // reach the other thread's socket.
                drop(listener);
                report
                    .send((thread::current().name().map(str::to_owned), conn))
                    .unwrap();
            }
        })
        .unwrap();
        let mut names = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(tokio::net::TcpStream::connect(addr).await.unwrap());
            let (name, _conn) = reports.recv().await.unwrap();
            names.push(name);
        }
        all.await.unwrap();
        names.sort();
        assert_eq!(
            names,
            vec![
                Some("test-serving-0".to_owned()),
                Some("test-serving-1".to_owned())
            ]
        );
    }
}
