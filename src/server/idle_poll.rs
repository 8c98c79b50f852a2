//! Polling before sleeping, on a serving thread that has at most one call.
//!
//! A serving thread with nothing to do sleeps in `epoll_wait`; the core it
//! ran on goes idle. Waking it again costs what the machine charges for an
//! idle core: on a virtual machine whose guest does not poll before
//! halting (`/sys/module/haltpoll/parameters/guest_halt_poll_ns` = 0, as
//! measured on the benchmark machine), a trip through the hypervisor, tens
//! of microseconds, twice per call: when the request arrives and when the
//! upstream answers. With many calls in flight the thread rarely sleeps
//! and that cost disappears in the load; with one caller it is most of
//! what the hop adds (docs/performance.md).
//!
//! So, as the kernel's `haltpoll` idle driver and Go's scheduler do, a
//! thread that just had work keeps polling for more for a short window
//! before it sleeps: a task of the thread's runtime yields in a loop, and
//! each yield makes the runtime poll its sockets without blocking. Each
//! turn also yields the core (`sched_yield`), so that polling only takes
//! time no other process wants: under load it measured neutral on the CPU
//! per call, where polling without yielding cost about 2 µs. It polls
//! only while the thread has at most one call in flight and less than
//! `serving.idle_poll_us` has passed since a call began or ended there: the
//! case of one caller waiting on each answer, where the window is spent
//! waiting for the upstream's reply and then for the caller's next call.
//! Busier threads do not poll (their next event is already queued), nor do
//! idle ones: the CPU a thread may spend this way is at most one window per
//! call start and end, and nothing once calls stop. `serving.idle_poll_us =
//! 0` turns it off.

use std::{
    cell::RefCell,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use crate::telemetry::IdlePollSeconds;

thread_local! {
    /// The polling state of the serving thread this is, if it is one.
    static THIS_THREAD: RefCell<Option<Arc<IdlePoll>>> = const { RefCell::new(None) };
}

/// One serving thread's calls, for deciding whether it polls or sleeps.
#[derive(Debug)]
pub(super) struct IdlePoll {
    /// How long after a call's start or end the thread keeps polling, in
    /// nanoseconds.
    window_ns: u64,
    /// The origin of `last_event_ns`.
    epoch: Instant,
    /// Calls admitted on this thread whose response has not ended.
    calls: AtomicU32,
    /// When, after `epoch`, a call last began or ended on this thread.
    last_event_ns: AtomicU64,
    /// Wakes the poller from its sleep at a call's start or end.
    wake: Notify,
    /// Where the time spent polling is counted.
    polled: IdlePollSeconds,
}

impl IdlePoll {
    /// Installs a poller with `window` on the current serving thread and
    /// spawns its task on the thread's runtime (none for a zero window);
    /// it counts the time it polls in `polled`.
    pub(super) fn install(window: Duration, polled: IdlePollSeconds) {
        if window.is_zero() {
            return;
        }
        let poll = Arc::new(IdlePoll::new(window, Instant::now(), polled));
        THIS_THREAD.with(|this| *this.borrow_mut() = Some(poll.clone()));
        tokio::spawn(poll.run());
    }

    fn new(window: Duration, epoch: Instant, polled: IdlePollSeconds) -> Self {
        Self {
            window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
            epoch,
            calls: AtomicU32::new(0),
            last_event_ns: AtomicU64::new(0),
            wake: Notify::new(),
            polled,
        }
    }

    /// Polls while [`Self::should_poll`]; sleeps until the next call event
    /// otherwise.
    async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            let from = Instant::now();
            let mut now = from;
            while self.should_poll(now) {
                // Whatever else this core could run goes first: polling
                // takes only time nobody else wants.
                std::thread::yield_now();
                // Back after the runtime has polled its sockets without
                // blocking and run what they woke.
                tokio::task::yield_now().await;
                now = Instant::now();
            }
            if now > from {
                self.polled.inc_by((now - from).as_secs_f64());
            }
        }
    }

    /// Whether the thread should poll rather than sleep at `now`.
    fn should_poll(&self, now: Instant) -> bool {
        self.calls.load(Relaxed) <= 1
            && self
                .nanos(now)
                .saturating_sub(self.last_event_ns.load(Relaxed))
                < self.window_ns
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Notes a call event at `now`, waking the poller if it may now poll.
    fn event(&self, now: Instant) {
        self.last_event_ns.store(self.nanos(now), Relaxed);
        if self.calls.load(Relaxed) <= 1 {
            self.wake.notify_one();
        }
    }
}

/// A call on a serving thread, from admission to the end of its response:
/// counted on that thread's [`IdlePoll`] until dropped.
#[derive(Debug)]
pub(super) struct CallOnThread(Arc<IdlePoll>);

impl CallOnThread {
    /// Counts a call admitted at `now` on this thread, if it is a serving
    /// thread that polls.
    pub(super) fn begin(now: Instant) -> Option<Self> {
        let poll = THIS_THREAD.with(|this| this.borrow().clone())?;
        poll.calls.fetch_add(1, Relaxed);
        poll.event(now);
        Some(Self(poll))
    }
}

impl Drop for CallOnThread {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Relaxed);
        self.0.event(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_micros(100);

    fn at(poll: &IdlePoll, micros: u64) -> Instant {
        poll.epoch + Duration::from_micros(micros)
    }

    #[test]
    fn a_thread_polls_within_the_window_after_a_call_begins_or_ends() {
        let poll = IdlePoll::new(WINDOW, Instant::now(), IdlePollSeconds::default());
        poll.calls.fetch_add(1, Relaxed);
        poll.event(at(&poll, 1_000));
        assert!(poll.should_poll(at(&poll, 1_000)));
        assert!(poll.should_poll(at(&poll, 1_099)));
        assert!(
            !poll.should_poll(at(&poll, 1_100)),
            "a slow upstream is waited for asleep"
        );

        poll.calls.fetch_sub(1, Relaxed);
        poll.event(at(&poll, 1_500));
        assert!(
            poll.should_poll(at(&poll, 1_550)),
            "the caller's next call is polled for"
        );
        assert!(!poll.should_poll(at(&poll, 1_600)), "an idle thread sleeps");
    }

    #[test]
    fn a_thread_with_two_calls_in_flight_sleeps() {
        let poll = IdlePoll::new(WINDOW, Instant::now(), IdlePollSeconds::default());
        poll.calls.fetch_add(2, Relaxed);
        poll.event(at(&poll, 10));
        assert!(!poll.should_poll(at(&poll, 10)));
        poll.calls.fetch_sub(1, Relaxed);
        assert!(poll.should_poll(at(&poll, 10)));
    }

    #[test]
    fn only_serving_threads_that_poll_count_calls() {
        assert!(CallOnThread::begin(Instant::now()).is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_poller_polls_through_the_window_after_a_call_then_sleeps() {
        let polled = IdlePollSeconds::default();
        IdlePoll::install(Duration::from_millis(2), polled.clone());
        let poll = THIS_THREAD.with(|this| this.borrow().clone()).unwrap();
        drop(CallOnThread::begin(Instant::now()).unwrap());
        assert_eq!(poll.calls.load(Relaxed), 0);
        while poll.should_poll(Instant::now()) {
            tokio::task::yield_now().await;
        }
        // Once more, for the poller to see the window has ended.
        tokio::task::yield_now().await;
        let seconds = polled.get();
        assert!(seconds > 0.0, "the poller polled through the window");
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(polled.get(), seconds, "the poller sleeps");
    }
}
