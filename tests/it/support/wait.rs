//! Bounded waits on state that settles on its own.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

/// Longest a test waits for anything asynchronous.
pub const EVENT_WAIT: Duration = Duration::from_secs(20);

/// Polls `check` every 10 ms until it holds, for at most `within`; panics
/// naming `what` otherwise. For states that settle on their own (a breaker
/// back-off ending, a call reaching the sandbox, a watcher released).
pub async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "not reached within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A gate for fakes: whoever passes it is counted, then held until the
/// test opens it. The test learns a call is in flight from
/// [`Gate::arrivals`], not from a delay it hopes is long enough.
#[derive(Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
    arrived: Arc<watch::Sender<usize>>,
    /// Callers inside (from [`Gate::hold`] until their guard drops), and
    /// the most there ever were at once.
    inside: Arc<std::sync::Mutex<(usize, usize)>>,
}

/// A caller inside a gated section (see [`Gate::hold`]).
pub struct Inside(Arc<std::sync::Mutex<(usize, usize)>>);

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.lock().expect("gate counters").0 -= 1;
    }
}

impl Gate {
    /// A closed gate.
    pub fn closed() -> Self {
        Gate {
            open: Arc::new(watch::channel(false).0),
            arrived: Arc::new(watch::channel(0).0),
            inside: Arc::default(),
        }
    }

    /// An open gate (counts, holds nobody).
    pub fn opened() -> Self {
        let gate = Self::closed();
        gate.open();
        gate
    }

    /// Counts one arrival, then waits until the gate is open.
    pub async fn pass(&self) {
        self.arrived.send_modify(|n| *n += 1);
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }

    /// Counts the caller as inside until the returned guard drops (for
    /// [`Gate::peak`]), then passes the gate.
    pub async fn hold(&self) -> Inside {
        {
            let mut inside = self.inside.lock().expect("gate counters");
            inside.0 += 1;
            inside.1 = inside.1.max(inside.0);
        }
        let guard = Inside(Arc::clone(&self.inside));
        self.pass().await;
        guard
    }

    /// The most callers inside at once (see [`Gate::hold`]).
    pub fn peak(&self) -> usize {
        self.inside.lock().expect("gate counters").1
    }

    /// Callers that have arrived so far.
    pub fn arrived(&self) -> usize {
        *self.arrived.borrow()
    }

    /// Closes the gate again: callers from now on are held.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// Opens the gate for everyone held and everyone to come.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Waits until `n` callers have arrived (at most [`EVENT_WAIT`]).
    pub async fn arrivals(&self, n: usize) {
        let mut arrived = self.arrived.subscribe();
        tokio::time::timeout(EVENT_WAIT, arrived.wait_for(|a| *a >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} arrivals at the gate within {EVENT_WAIT:?}"))
            .expect("gate alive");
    }
}
