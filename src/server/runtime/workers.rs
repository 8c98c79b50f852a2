//! The serving threads: one current-thread Tokio runtime per thread, each
//! accepting on a socket of its own bound to the listener's address with
//! `SO_REUSEPORT`.
//!
//! The kernel spreads new connections over the threads' sockets by a hash
//! of their addresses (one shared socket would not: the first thread to
//! wake accepts every connection that arrived together, which measured as
//! one busy thread and one idle). Each thread installs the `tracing`
//! dispatcher that was current when the listener started, so spans and
//! logs go where the rest of the gateway's go (a test's own subscriber
//! included).

use std::{
    future::Future,
    io,
    net::{SocketAddr, TcpListener as StdTcpListener},
    thread,
};

use socket2::{Domain, Socket, Type};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

use crate::telemetry::log_lines;

/// How many serving threads `configured` asks for: itself, or one per core
/// when 0.
pub(super) fn count(configured: usize) -> usize {
    match configured {
        0 => thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

/// A listening socket on `addr` with `SO_REUSEPORT` (and `SO_REUSEADDR`,
/// as Tokio sets), non-blocking, for [`spawn`] to bind more beside it.
pub(crate) fn reuse_port_listener(addr: SocketAddr) -> io::Result<StdTcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Runs `serve(listener)` on `count` threads, each on its own
/// current-thread runtime on which `start` ran first: the first on
/// `listener` (bound with [`reuse_port_listener`]), the others on sockets
/// of their own bound to the same address. The returned task ends when
/// every thread's `serve` has returned.
pub(super) fn spawn<S, F, Fut>(
    name: &'static str,
    listener: TcpListener,
    count: usize,
    start: S,
    serve: F,
) -> io::Result<JoinHandle<()>>
where
    S: Fn() + Clone + Send + 'static,
    F: Fn(TcpListener) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let addr = listener.local_addr()?;
    let mut first = Some(listener.into_std()?);
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let mut finished = Vec::with_capacity(count);
    for i in 0..count.max(1) {
        let own = match first.take() {
            Some(listener) => listener,
            None => reuse_port_listener(addr)?,
        };
        let (start, serve, dispatch) = (start.clone(), serve.clone(), dispatch.clone());
        let (done, wait) = oneshot::channel::<()>();
        thread::Builder::new()
            .name(format!("{name}-{i}"))
            .spawn(move || {
                let _dispatch = tracing::dispatcher::set_default(&dispatch);
                // Log lines wait in the thread's batch until the thread
                // runs out of work (`telemetry::log_lines`).
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .on_thread_park(log_lines::flush_this_thread)
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(async move {
                        start();
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
                // Before telling the process this thread is done: the
                // process may exit before the thread's own end writes them.
                log_lines::flush_this_thread();
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
        let all = spawn(
            "test-serving",
            listener,
            2,
            || {},
            move |listener| {
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
            },
        )
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
