//! The serving runtime: the one place that knows the public gRPC listener
//! runs on threads of its own.
//!
//! This is Envoy's worker model: one event loop per worker (a
//! current-thread Tokio runtime per serving thread), listeners per worker
//! (each thread accepts on a socket of its own, `SO_REUSEPORT`), and
//! connection pools per worker (each thread calls the upstream on a pool
//! of its own). As in Envoy, the layers that serve a call never see it:
//! nothing below `server` knows threads exist. The REST client asks the
//! [`HttpPools`] it was built on for a pool (`upstream::pool`); admission
//! tells the [`CallEvents`] hook it was given of each call; both are
//! handed down from here.
//!
//! Why: on the process's work-stealing runtime a call hops between worker
//! threads: the connection task, the stream task hyper spawns, the
//! upstream connection task and the timers wake each other across
//! threads, and idle workers are woken to look for work they rarely find.
//! Profiles of the hop measured that as about a third of a call's CPU
//! (docs/performance.md). Here a connection, its streams, and the tasks
//! its calls spawn stay on the thread that accepted it. Everything the
//! threads share (the channel router, the journey watches, the admission and
//! connection limits, metrics) is behind `Arc`s and locks, as on the
//! shared runtime; what a call hands to another thread (the shared
//! state's Redis connection) goes through channels.
//!
//! - `workers`: the threads, their runtimes and their sockets.
//! - `heartbeat`: the timer each thread keeps so that a call's own timers
//!   do not wake its event loop.
//! - `idle_poll`: polling instead of sleeping on a thread with at most one
//!   call (opt-in, `serving.idle_poll_us`).
//! - `pools`: the upstream connection pool of each thread.
//!
//! Whatever else a thread should own is given as a setup hook
//! ([`ServingRuntime::on_thread_start`]): the fleet's Redis connection.
//!
//! The HTTP and admin listeners and background work stay on the process
//! runtime.

mod heartbeat;
mod idle_poll;
mod pools;
mod workers;

use std::{future::Future, io, sync::Arc, time::Duration};

use tokio::{net::TcpListener, task::JoinHandle};

use super::edge::CallEvents;
use crate::{
    config::ServingConfig,
    telemetry::{IdlePollSeconds, Metrics},
    upstream::{HttpClientFactory, HttpPools},
};
use idle_poll::{IdlePoll, ThreadPollers};
use pools::WorkerPools;

pub(super) use workers::reuse_port_listener;

/// The serving threads of the public listener, and what each one keeps:
/// its heartbeat, its idle poller, its upstream pool.
#[derive(Clone)]
pub(super) struct ServingRuntime {
    /// How many threads.
    threads: usize,
    /// The longest each polls for work after a call begins or ends,
    /// instead of sleeping ([`IdlePoll`]; zero: never).
    idle_poll: Duration,
    /// Where that polling time is counted.
    polled: IdlePollSeconds,
    /// The upstream pools, one per serving thread.
    pools: Arc<WorkerPools>,
    /// What else each thread sets up as it starts (the fleet's Redis
    /// connection of its own).
    thread_setup: Vec<Arc<dyn Fn() + Send + Sync>>,
}

impl ServingRuntime {
    /// The runtime `serving` describes, its threads' upstream pools made by
    /// `http`, their polling time counted in `metrics`.
    pub(super) fn new(serving: &ServingConfig, metrics: &Metrics, http: HttpClientFactory) -> Self {
        Self {
            threads: workers::count(serving.grpc_threads),
            idle_poll: Duration::from_micros(serving.idle_poll_us),
            polled: metrics.idle_poll_seconds(),
            pools: Arc::new(WorkerPools::new(http)),
            thread_setup: Vec::new(),
        }
    }

    /// Runs `setup` on each serving thread as it starts, inside its
    /// runtime, before it accepts a connection.
    pub(super) fn on_thread_start(&mut self, setup: Arc<dyn Fn() + Send + Sync>) {
        self.thread_setup.push(setup);
    }

    /// Where the upstream client finds the calling thread's pool.
    pub(super) fn http_pools(&self) -> Arc<dyn HttpPools> {
        self.pools.clone()
    }

    /// What admission tells of the unary calls it admits (each thread's
    /// idle poller listens).
    pub(super) fn call_events(&self) -> Arc<dyn CallEvents> {
        Arc::new(ThreadPollers)
    }

    /// Serves `listener` (bound with [`reuse_port_listener`]) on the
    /// serving threads: `serve` runs on each with a socket of its own bound
    /// to the same address. The returned task ends when every thread's
    /// `serve` has returned.
    pub(super) fn serve<F, Fut>(
        &self,
        name: &'static str,
        listener: TcpListener,
        serve: F,
    ) -> io::Result<JoinHandle<()>>
    where
        F: Fn(TcpListener) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (idle_poll, polled, pools) = (self.idle_poll, self.polled.clone(), self.pools.clone());
        let setups = self.thread_setup.clone();
        let start = move || {
            // All end with the thread's runtime, after `serve`.
            heartbeat::start();
            crate::telemetry::log_lines::batch_this_thread();
            IdlePoll::install(idle_poll, polled.clone());
            pools.install();
            for setup in &setups {
                setup();
            }
        };
        workers::spawn(name, listener, self.threads, start, serve)
    }
}
