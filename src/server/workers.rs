//! Serving threads of the public gRPC listener: one current-thread Tokio
//! runtime per core, each accepting from the same socket.
//!
//! On the process's work-stealing runtime a call hops between worker
//! threads: the connection task, the stream task hyper spawns, the upstream
//! connection task and the timers wake each other across threads, and idle
//! workers are woken to look for work they rarely find. Profiles of the
//! hop measured that as about a third of a call's CPU (docs/performance.md).
//! Here a connection, its streams, and the tasks its calls spawn stay on
//! the thread that accepted it; the kernel spreads new connections over
//! the threads waiting in `accept`. Everything the threads share (the
//! channel router, the journey hub, the admission and connection limits,
//! metrics) is behind `Arc`s and locks, as on the shared runtime; what a
//! call hands to another thread (an upstream connection pooled by another
//! serving thread, the shared state's Redis connection) goes through
//! channels.
//!
//! Each thread installs the `tracing` dispatcher that was current when the
//! listener started, so spans and logs go where the rest of the gateway's
//! go (a test's own subscriber included).

use std::{future::Future, io, net::TcpListener as StdTcpListener, thread};

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

/// How many serving threads `configured` asks for: itself, or one per core
/// when 0.
pub(super) fn count(configured: usize) -> usize {
    match configured {
        0 => thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

/// Runs `serve(listener)` on `threads` threads, each on its own
/// current-thread runtime with its own handle on `listener`. The returned
/// task ends when every thread's `serve` has returned.
pub(super) fn spawn<F, Fut>(
    name: &'static str,
    listener: TcpListener,
    threads: usize,
    serve: F,
) -> io::Result<JoinHandle<()>>
where
    F: Fn(TcpListener) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let listener: StdTcpListener = listener.into_std()?;
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let mut finished = Vec::with_capacity(threads);
    for i in 0..threads.max(1) {
        let own = listener.try_clone()?;
        let serve = serve.clone();
        let dispatch = dispatch.clone();
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
    async fn every_thread_accepts_from_the_one_socket_and_the_task_ends_with_them() {
        use std::sync::{Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let seen = served.clone();
        let all = spawn("test-serving", listener, 2, move |listener| {
            let seen = seen.clone();
            async move {
                let (_conn, _) = listener.accept().await.unwrap();
                seen.lock()
                    .unwrap()
                    .push(thread::current().name().map(str::to_owned));
            }
        })
        .unwrap();
        // Each thread accepts one connection, then returns.
        let _a = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _b = tokio::net::TcpStream::connect(addr).await.unwrap();
        all.await.unwrap();
        let mut names: Vec<_> = served.lock().unwrap().clone();
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
