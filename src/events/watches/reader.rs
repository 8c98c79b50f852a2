//! The task of one watched journey: starts from the current state, waits
//! for the completion notice (or the grace period) when nothing says the
//! result may be there, reads the result until it agrees with the notice,
//! and publishes each state for the journey's watchers.
//!
//! The service answers 404 on the result until a liveness proof exists.
//! For a journey this gateway issued a 404 means "not yet": the reader
//! keeps reading (with backoff) until the result, or until the journey's
//! retention ends; the stream's lifetime and the caller's deadline end a
//! watcher sooner. The service also answers 404 for an appkey it never
//! issued, and a reader polling such an appkey (`[journeys]
//! accept_foreign_appkeys`) would hold its watch slot and call upstream
//! for as long as the watcher stays: after `[watch] max_not_found`
//! consecutive 404s the reader of a foreign appkey gives up and every
//! watcher gets `NOT_FOUND` / `RESULT_NOT_AVAILABLE`.
//!
//! In a fleet each read takes the journey's read turn first
//! (`cluster::fleet::read_turns`): a replica that does not get it skips
//! the vendor this round. The replica whose turn finds the result final
//! announces it and gives the turn up; a replica told so reads once,
//! without a turn, for all its watchers. No result crosses Redis: each
//! replica holding watchers reads the vendor once, and one holding none
//! reads nothing. One process takes no turns: it reads whenever it needs
//! to.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use crate::telemetry::spans::SpanExt as _;
use opentelemetry::trace::SpanContext;
use tokio::{sync::watch, time::Instant};
use tracing::Instrument as _;

use super::{End, Heard, Snapshot, WatchesInner};
use crate::{
    Error,
    backoff::{Backoff, Jitter},
    cluster::journeys::now_unix,
    domain::{Appkey, JourneyRef},
    proto::v1::JourneyStatus,
};
/// Publishes a journey's snapshots; counts the task as live while it
/// exists. If the task stops without publishing an end (a panic in the
/// result source), its drop ends the watch with an error rather than
/// leaving watchers waiting forever.
pub(super) struct Publisher {
    watches: Arc<WatchesInner>,
    events: watch::Sender<Snapshot>,
}

impl Publisher {
    pub(super) fn new(watches: &Arc<WatchesInner>, events: watch::Sender<Snapshot>) -> Self {
        watches.tasks.fetch_add(1, Ordering::AcqRel);
        Self {
            watches: watches.clone(),
            events,
        }
    }

    /// Publishes a status, waking watchers only when it changed.
    fn status(&self, status: JourneyStatus, raw: &str) {
        self.events.send_if_modified(|snap| {
            let changed = snap
                .status
                .as_ref()
                .is_none_or(|(s, r)| *s != status || r != raw);
            if changed {
                snap.status = Some((status, raw.to_owned()));
            }
            changed
        });
    }

    /// Publishes the end; later ends are ignored.
    fn end(&self, end: End) {
        self.events.send_if_modified(|snap| {
            if snap.end.is_some() {
                return false;
            }
            snap.end = Some(end);
            true
        });
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if self.events.borrow().end.is_none() {
            self.end(End::Failed(
                Error::Internal("the journey's result reader stopped".to_owned()).into(),
            ));
        }
        self.watches.tasks.fetch_sub(1, Ordering::AcqRel);
        self.watches.tasks_changed.notify_waiters();
    }
}

/// The task of one watched journey.
pub(super) struct Reader {
    pub(super) watches: Arc<WatchesInner>,
    pub(super) journey: JourneyRef,
    pub(super) appkey: Appkey,
    /// Issued here: when the journey's record ends (Unix seconds), until
    /// which a 404 means "not yet". `None`: a foreign appkey.
    pub(super) retained_until: Option<i64>,
    pub(super) notices: watch::Receiver<Option<Heard>>,
    /// The WatchJourney call that started this task.
    pub(super) watch_link: Option<SpanContext>,
    pub(super) publisher: Publisher,
}

impl Reader {
    pub(super) async fn run(mut self) {
        let settings = self.watches.settings.clone();
        let mut notice_open = true;
        let mut notice = self.notices.borrow_and_update().is_some();
        let mut not_found = 0;
        let mut backoff = read_backoff(settings.poll_initial, settings.poll_max);
        if settings.notices_expected && !notice {
            // The current state first: once the liveness proof went
            // through the gateway the result may be final already (its
            // notice lost, or heard before this gateway started).
            if self.watches.progress.submitted(&self.journey).await {
                let turn = backoff.step() + settings.read_timeout;
                if self.read_once(&mut not_found, turn).await.is_break() {
                    return;
                }
            }
            tokio::select! {
                changed = self.notices.changed() => match changed {
                    Ok(()) => notice = self.notices.borrow_and_update().is_some(),
                    Err(_) => notice_open = false,
                },
                () = tokio::time::sleep(settings.webhook_grace) => {
                    self.watches.notice_timeouts.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        journey = %self.journey,
                        "no completion notice within the grace period; reading the result"
                    );
                }
            }
        }
        let mut settle_deadline = notice.then(|| Instant::now() + settings.settle_limit);
        loop {
            // The turn covers this read and the step after it: no other
            // replica reads before this one's next read is due.
            let turn = backoff.step() + settings.read_timeout;
            if self.read_once(&mut not_found, turn).await.is_break() {
                return;
            }
            let now = Instant::now();
            let mut delay = backoff.next_delay();
            if let Some(deadline) = settle_deadline {
                if now >= deadline {
                    tracing::warn!(
                        journey = %self.journey,
                        "result still processing after the completion notice; giving up"
                    );
                    self.publisher.end(End::Failed(
                        Error::ResultNotSettled(settings.settle_limit.as_secs()).into(),
                    ));
                    return;
                }
                // Read once more right at the limit rather than past it.
                delay = delay.min(deadline - now);
            }
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                changed = self.notices.changed(), if notice_open => match changed {
                    Ok(()) => {
                        // A (new) notice: read now, and from now on the
                        // settle limit applies.
                        if self.notices.borrow_and_update().is_some() && settle_deadline.is_none() {
                            settle_deadline = Some(Instant::now() + settings.settle_limit);
                        }
                        backoff.reset();
                    }
                    Err(_) => notice_open = false,
                },
            }
        }
    }

    /// Tells the fleet's other replicas that the result this replica read
    /// on its turn is final: each reads it for its own watchers. One
    /// process has no one to tell.
    fn announce(&self, status: JourneyStatus) {
        let Some(turns) = &self.watches.read_turns else {
            return;
        };
        let label = match status {
            JourneyStatus::Error => "error",
            _ => "complete",
        };
        turns.announce(&self.journey, label);
    }

    /// Whether this replica reads the result this round: in a fleet, when
    /// it holds the journey's read turn for `turn`; one process always
    /// does.
    async fn my_turn(&self, turn: Duration) -> bool {
        match &self.watches.read_turns {
            Some(turns) => turns.take(&self.journey, turn).await,
            None => true,
        }
    }

    /// Reads the result once, when another replica announced it final or
    /// this replica has the journey's read turn (for `turn`), and
    /// publishes what it says. Breaks when the watch has ended (final
    /// result, permanent failure, a foreign appkey's `not_found`-th
    /// consecutive 404 reaching `max_not_found`, or a 404 past the
    /// journey's retention).
    async fn read_once(&self, not_found: &mut u32, turn: Duration) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        let notice = self.notices.borrow().clone();
        let announced = notice.as_ref().is_some_and(|n| n.result_final);
        if !announced && !self.my_turn(turn).await {
            // Another replica polls for the fleet this round.
            return Continue(());
        }
        self.watches.result_reads.fetch_add(1, Ordering::Relaxed);
        if announced {
            self.watches.fleet_results.fetch_add(1, Ordering::Relaxed);
        }
        // Its own trace: the read serves every watcher of the journey and
        // is caused by the notice; links say so.
        let span = tracing::info_span!(
            parent: None,
            "journey.result_read",
            otel.name = "idgate.journey.result_read",
            otel.kind = "internal",
            idgate.journey_ref = self.journey.as_str(),
            idgate.trigger = if notice.is_some() { "notice" } else { "poll" },
            idgate.notice_status = notice.as_ref().map(|n| n.status.as_str()),
        );
        if let Some(link) = notice.and_then(|n| n.link) {
            span.add_link(link);
        }
        if let Some(link) = &self.watch_link {
            span.add_link(link.clone());
        }
        let read = self
            .watches
            .source
            .fetch(&self.appkey)
            .instrument(span)
            .await;
        match &read {
            Err(e) if e.classify().0 == tonic::Code::NotFound => *not_found += 1,
            _ => *not_found = 0,
        }
        match read {
            Err(e) if *not_found > 0 && self.gone(*not_found) => {
                self.publisher.end(End::Failed(e.into()));
                Break(())
            }
            Ok(result) => {
                let status = result.status();
                if is_final(status) {
                    tracing::info!(journey = %self.journey, status = status.as_str_name(), "journey result ready");
                    self.publisher.end(End::Result(Arc::new(result)));
                    if !announced {
                        // Read on this replica's turn: the others wait
                        // for the word (or for the turn).
                        self.announce(status);
                    }
                    return Break(());
                }
                self.publisher.status(status, &result.raw_status);
                Continue(())
            }
            Err(e) if is_transient(&e) => {
                tracing::debug!(journey = %self.journey, reason = e.reason().as_str(), "result read failed; will retry");
                Continue(())
            }
            Err(e) => {
                tracing::warn!(journey = %self.journey, reason = e.reason().as_str(), "result read failed permanently");
                self.publisher.end(End::Failed(e.into()));
                Break(())
            }
        }
    }
}

impl Reader {
    /// Whether `not_found` consecutive 404s mean the journey will never
    /// have a result here: a journey issued here only once its record's
    /// retention ended; a foreign appkey after `max_not_found`.
    fn gone(&self, not_found: u32) -> bool {
        match self.retained_until {
            Some(until) if now_unix() < until => false,
            Some(_) => {
                tracing::info!(journey = %self.journey, "the journey's retention ended without a result; giving up");
                true
            }
            None if not_found >= self.watches.settings.max_not_found => {
                tracing::info!(
                    journey = %self.journey,
                    not_found,
                    "the result of an appkey not issued here answered 404 too many times in a row; giving up"
                );
                true
            }
            None => false,
        }
    }
}

/// A status that ends the journey's watch.
fn is_final(status: JourneyStatus) -> bool {
    matches!(status, JourneyStatus::Complete | JourneyStatus::Error)
}

/// Failures worth another read: the call consumed nothing, so anything the
/// upstream may fix by itself (unavailability, timeouts, rate limits, and
/// 404, which the service answers until the liveness proof is done).
fn is_transient(e: &Error) -> bool {
    let (code, _, retry_safe) = e.classify();
    retry_safe
        || matches!(
            code,
            tonic::Code::NotFound
                | tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::ResourceExhausted
                | tonic::Code::Aborted
        )
}

/// The waits between a journey's result reads: `initial` doubling up to
/// `max`, each 75-100 % of its step, so journeys whose grace periods end
/// together do not read in lockstep.
pub(super) fn read_backoff(initial: Duration, max: Duration) -> Backoff {
    Backoff::new(initial, max).jittered(Jitter::Down { floor: 0.75 })
}
