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
//! only while the thread has at most one call in flight and a window (at
//! most `serving.idle_poll_us`) is still open since a call began or ended
//! there: the case of one caller waiting on each answer, where the windows
//! are spent waiting for the upstream's reply and then for the caller's
//! next call. Busier threads do not poll (their next event is already
//! queued), nor do idle ones: the CPU a thread may spend this way is at
//! most one window per call start and end, and nothing once calls stop.
//! Each window adapts between zero and that ceiling to what it waits for
//! ([`IdlePoll`]), so a slow upstream soon costs no polling.
//!
//! Off unless `serving.idle_poll_us` is set (docs/serving.md says when it
//! pays). Admission tells the poller of a call's start and end through
//! [`ThreadPollers`], the [`CallEvents`] hook the runtime hands it; the
//! thread-local that finds the current thread's poller stays here.

use std::{
    cell::RefCell,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use crate::{
    server::edge::{CallEnd, CallEvents},
    telemetry::IdlePollSeconds,
};

thread_local! {
    /// The polling state of the serving thread this is, if it is one.
    static THIS_THREAD: RefCell<Option<Arc<IdlePoll>>> = const { RefCell::new(None) };
}

/// The smallest window a shrunk one grows back from, as `haltpoll`'s
/// `guest_halt_poll_grow_start`; a window shrunk below it is zero.
const GROW_START_NS: u64 = 10_000;

/// `last_event_ns` before the first call event.
const NO_EVENT: u64 = u64::MAX;

/// One serving thread's calls, for deciding whether it polls or sleeps.
///
/// What a window waits for differs by the event that opened it: after a
/// call begins, the upstream's answer; after one ends, the caller's next
/// call. Each has its own window, adapted as `haltpoll` adapts its own:
/// when the next event came after the window but within the ceiling, a
/// longer window would have caught it, so it doubles; when it came after
/// the ceiling, polling was in vain, so it halves. An upstream that takes
/// milliseconds to answer soon costs no polling after a call begins.
#[derive(Debug)]
pub(super) struct IdlePoll {
    /// The longest window (`serving.idle_poll_us`), in nanoseconds.
    ceiling_ns: u64,
    /// The window after a call begins and after one ends, in nanoseconds.
    windows_ns: [AtomicU64; 2],
    /// The origin of `last_event_ns`.
    epoch: Instant,
    /// Calls admitted on this thread whose response has not ended.
    calls: AtomicU32,
    /// When, after `epoch`, a call last began or ended on this thread.
    last_event_ns: AtomicU64,
    /// Whether that event was a call's end (the index in `windows_ns`).
    last_was_end: AtomicBool,
    /// Wakes the poller from its sleep at a call's start or end.
    wake: Notify,
    /// Where the time spent polling is counted.
    polled: IdlePollSeconds,
}

impl IdlePoll {
    /// Installs a poller with windows up to `ceiling` on the current
    /// serving thread and spawns its task on the thread's runtime (none for
    /// a zero ceiling); it counts the time it polls in `polled`.
    pub(super) fn install(ceiling: Duration, polled: IdlePollSeconds) {
        if ceiling.is_zero() {
            return;
        }
        let poll = Arc::new(IdlePoll::new(ceiling, Instant::now(), polled));
        THIS_THREAD.with(|this| *this.borrow_mut() = Some(poll.clone()));
        tokio::spawn(poll.run());
    }

    fn new(ceiling: Duration, epoch: Instant, polled: IdlePollSeconds) -> Self {
        let ceiling_ns = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Self {
            ceiling_ns,
            windows_ns: [AtomicU64::new(ceiling_ns), AtomicU64::new(ceiling_ns)],
            epoch,
            calls: AtomicU32::new(0),
            last_event_ns: AtomicU64::new(NO_EVENT),
            last_was_end: AtomicBool::new(false),
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

    /// Whether the thread should poll rather than sleep at `now`: at most
    /// one call in flight, and the last call event's window still open.
    fn should_poll(&self, now: Instant) -> bool {
        self.calls.load(Relaxed) <= 1
            && self
                .nanos(now)
                .saturating_sub(self.last_event_ns.load(Relaxed))
                < self.window_ns(self.last_was_end.load(Relaxed))
    }

    fn window_ns(&self, after_end: bool) -> u64 {
        self.windows_ns[usize::from(after_end)].load(Relaxed)
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Notes a call's start (`end` false) or end at `now`, when `before`
    /// calls were in flight: adapts the window the previous event opened,
    /// if the thread could poll since, and wakes the poller if it may poll
    /// now.
    fn event(&self, now: Instant, end: bool, before: u32) {
        let now_ns = self.nanos(now);
        let previous = self.last_event_ns.swap(now_ns, Relaxed);
        let since = now_ns.saturating_sub(previous);
        let opened_by_end = self.last_was_end.swap(end, Relaxed);
        if before <= 1 && previous != NO_EVENT {
            let window = &self.windows_ns[usize::from(opened_by_end)];
            let current = window.load(Relaxed);
            if since > self.ceiling_ns {
                window.store(shrink(current), Relaxed);
            } else if since >= current {
                window.store(grow(current, self.ceiling_ns), Relaxed);
            }
        }
        if self.calls.load(Relaxed) <= 1 && self.window_ns(end) > 0 {
            self.wake.notify_one();
        }
    }
}

/// Half `window`, or nothing below [`GROW_START_NS`].
fn shrink(window: u64) -> u64 {
    match window / 2 {
        half if half < GROW_START_NS => 0,
        half => half,
    }
}

/// Twice `window`, from [`GROW_START_NS`], at most `ceiling`.
fn grow(window: u64, ceiling: u64) -> u64 {
    window.saturating_mul(2).max(GROW_START_NS).min(ceiling)
}

/// The calls admission reports, told to the poller of the serving thread
/// they run on: what the runtime hands admission as its [`CallEvents`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ThreadPollers;

impl CallEvents for ThreadPollers {
    fn began(&self, now: Instant) -> Option<Arc<dyn CallEnd>> {
        let poll = THIS_THREAD.with(|this| this.borrow().clone())?;
        let before = poll.calls.fetch_add(1, Relaxed);
        poll.event(now, false, before);
        Some(poll)
    }
}

impl CallEnd for IdlePoll {
    fn ended(&self, now: Instant) {
        let before = self.calls.fetch_sub(1, Relaxed);
        self.event(now, true, before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CEILING: Duration = Duration::from_micros(100);

    fn at(poll: &IdlePoll, micros: u64) -> Instant {
        poll.epoch + Duration::from_micros(micros)
    }

    fn poller() -> IdlePoll {
        IdlePoll::new(CEILING, Instant::now(), IdlePollSeconds::default())
    }

    /// A call begun at `begin` and ended at `end` (microseconds), alone on
    /// its thread.
    fn call(poll: &IdlePoll, begin: u64, end: u64) {
        poll.calls.fetch_add(1, Relaxed);
        poll.event(at(poll, begin), false, 0);
        poll.calls.fetch_sub(1, Relaxed);
        poll.event(at(poll, end), true, 1);
    }

    /// Five calls that each take 50 ms upstream, the caller calling again
    /// 20 µs after each answer; returns when the next would begin.
    fn slow_upstream_calls(poll: &IdlePoll) -> u64 {
        let mut t = 1_000;
        for _ in 0..5 {
            call(poll, t, t + 50_000);
            t += 50_020;
        }
        t
    }

    #[test]
    fn a_thread_polls_within_the_window_after_a_call_begins_or_ends() {
        let poll = poller();
        poll.calls.fetch_add(1, Relaxed);
        poll.event(at(&poll, 1_000), false, 0);
        assert!(poll.should_poll(at(&poll, 1_000)));
        assert!(poll.should_poll(at(&poll, 1_099)));
        assert!(
            !poll.should_poll(at(&poll, 1_100)),
            "a slow upstream is waited for asleep"
        );

        poll.calls.fetch_sub(1, Relaxed);
        poll.event(at(&poll, 1_500), true, 1);
        assert!(
            poll.should_poll(at(&poll, 1_550)),
            "the caller's next call is polled for"
        );
        assert!(!poll.should_poll(at(&poll, 1_600)), "an idle thread sleeps");
    }

    #[test]
    fn a_thread_with_two_calls_in_flight_sleeps() {
        let poll = poller();
        poll.calls.fetch_add(2, Relaxed);
        poll.event(at(&poll, 10), false, 1);
        assert!(!poll.should_poll(at(&poll, 10)));
        poll.calls.fetch_sub(1, Relaxed);
        assert!(poll.should_poll(at(&poll, 10)));
    }

    #[test]
    fn a_slow_upstream_soon_costs_no_polling_after_a_call_begins() {
        let poll = poller();
        let t = slow_upstream_calls(&poll);
        assert_eq!(poll.window_ns(false), 0, "nothing after a call begins");
        assert_eq!(
            u128::from(poll.window_ns(true)),
            CEILING.as_nanos(),
            "the caller's next call still caught"
        );
        poll.calls.fetch_add(1, Relaxed);
        poll.event(at(&poll, t), false, 0);
        assert!(!poll.should_poll(at(&poll, t)));
    }

    #[test]
    fn a_window_that_would_have_caught_the_next_event_grows_back() {
        let poll = poller();
        // A slow phase shrinks the window after a call begins to nothing...
        let mut t = slow_upstream_calls(&poll);
        assert_eq!(poll.window_ns(false), 0);
        // ...and a fast upstream (40 µs) brings it back.
        let mut windows = Vec::new();
        for _ in 0..5 {
            call(&poll, t, t + 40);
            windows.push(poll.window_ns(false) / 1_000);
            t += 60;
        }
        assert_eq!(windows, [10, 20, 40, 80, 80]);
        poll.calls.fetch_add(1, Relaxed);
        poll.event(at(&poll, t), false, 0);
        assert!(poll.should_poll(at(&poll, t + 79)));
        assert!(!poll.should_poll(at(&poll, t + 80)));
    }

    #[test]
    fn the_events_of_a_busy_thread_leave_the_windows_alone() {
        let poll = poller();
        poll.calls.fetch_add(2, Relaxed);
        poll.event(at(&poll, 0), false, 1);
        poll.calls.fetch_sub(1, Relaxed);
        poll.event(at(&poll, 1_000_000), true, 2);
        assert_eq!(u128::from(poll.window_ns(false)), CEILING.as_nanos());
        assert_eq!(u128::from(poll.window_ns(true)), CEILING.as_nanos());
    }

    #[test]
    fn only_serving_threads_that_poll_count_calls() {
        assert!(ThreadPollers.began(Instant::now()).is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_poller_polls_through_the_window_after_a_call_then_sleeps() {
        let polled = IdlePollSeconds::default();
        IdlePoll::install(Duration::from_millis(2), polled.clone());
        let poll = THIS_THREAD.with(|this| this.borrow().clone()).unwrap();
        ThreadPollers
            .began(Instant::now())
            .unwrap()
            .ended(Instant::now());
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
