//! The journey watches: one result-reading task per watched journey, shared by
//! all of that journey's watchers.
//!
//! A journey gets a task when its first watcher arrives and loses it when
//! its last watcher leaves (the task is aborted and the entry removed, so
//! memory returns to baseline). The task starts from the current state,
//! as a Kubernetes watch or gRPC health's `Watch` does: a notice already
//! heard, a result the fleet already shares, or, when the journey's
//! liveness steps went through the gateway or no webhook receiver is
//! configured, one read at once. Otherwise it waits for a completion
//! notice, or until the webhook grace period passes without one (a lost
//! webhook delays watchers but never strands them). It publishes on a `tokio::sync::watch` channel that holds only the
//! latest state: a slow watcher skips intermediate states and never holds
//! up the task or the other watchers.
//!
//! Tracing: each result read runs in its own root span
//! (`idgate.journey.result_read`, with `idgate.journey_ref`), linked to the
//! span of the webhook request whose notice triggered it and to the
//! `WatchJourney` call that started the task, so a backend shows the read
//! beside both without making it part of either trace.
//!
//! In a fleet, one replica at a time polls a journey's result for all
//! (its read turn, `cluster::fleet::read_turns`), so the vendor sees one
//! read per interval however many replicas watch. Once a read finds the result
//! final, the replica announces it (a notice, nothing of the result), and
//! every replica holding watchers of the journey reads it once for its
//! own watchers: the result never crosses Redis.
//!
//! - `journeys`: watch by reference, through the journey records
//!   (`cluster::journeys`).
//! - `reader`: the result-reading task of one journey.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
};

use opentelemetry::trace::SpanContext;
use tokio::{
    sync::{Notify, watch},
    task::AbortHandle,
    time::Instant,
};

use crate::telemetry::spans::SpanExt as _;

use self::config::WatchSettings;
use super::{DynResultSource, Notice, NoticeStatus, ResultSource};
use crate::{
    Error,
    cluster::{
        JourneyStore, JourneysConfig, MemoryJourneys, MemoryProgress, ProgressStore, ReadTurns,
    },
    context::CallContext,
    domain::{Appkey, JourneyRef},
    proto::v1::{JourneyResult, JourneyStatus},
    ttl::TtlMap,
};

/// The journey a `WatchJourney` caller names, validated by the API layer:
/// by its appkey, or by the reference `CreateJourney` returned (which the
/// watches resolves through the journey records).
#[derive(Debug, Clone)]
pub enum WatchTarget {
    /// The journey's appkey.
    Appkey(Appkey),
    /// A journey reference issued by this gateway.
    Journey(JourneyRef),
}

/// What a journey's task has published: its latest status and, once known,
/// how the journey ended. Cloned cheaply (the result is shared).
#[derive(Clone, Default)]
pub(crate) struct Snapshot {
    /// The latest status read, and the status as the upstream wrote it.
    pub(crate) status: Option<(JourneyStatus, String)>,
    /// Set once: the final result, or the error that ended the watch.
    pub(crate) end: Option<End>,
}

/// How a journey's watch ended.
#[derive(Clone)]
pub(crate) enum End {
    /// The result, with status COMPLETE or ERROR.
    Result(Arc<JourneyResult>),
    /// Reading failed for good; every watcher gets this status.
    Failed(tonic::Status),
}

/// Counts of the watches' live state, for tests and telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchStats {
    /// Journeys with at least one watcher.
    pub journeys: usize,
    /// Watchers across all journeys.
    pub watchers: usize,
    /// Result-reading tasks still running (aborted tasks leave shortly
    /// after their last watcher).
    pub tasks: usize,
    /// Notices remembered for journeys that may be watched later.
    pub notices_remembered: usize,
    /// Notices received since start.
    pub notices_received: u64,
    /// Result reads started since start.
    pub result_reads: u64,
    /// Watches whose grace period ended without a completion notice, so
    /// the result is polled instead (the webhook did not arrive), since
    /// start.
    pub notice_timeouts: u64,
    /// Final results read here because another replica of the fleet
    /// announced them (read on its turn, found final), since start: one
    /// read per replica holding watchers, not one per watcher.
    pub fleet_results: u64,
}

/// The `WatchJourney` core: journeys being watched and their reading
/// tasks. Cheap to clone (shared).
#[derive(Clone)]
pub struct JourneyWatches {
    inner: Arc<WatchesInner>,
}

pub(crate) struct WatchesInner {
    source: Arc<dyn DynResultSource>,
    /// The journey records, for watch by reference and to tell a journey
    /// issued here (watched until its result) from a foreign appkey.
    journeys: Arc<dyn JourneyStore>,
    /// Whether the steps that produce a journey's result went through the
    /// gateway.
    progress: Arc<dyn ProgressStore>,
    /// In a fleet, whose turn it is to read a journey's result, and the
    /// word that it is final; `None` for one process, which reads
    /// whenever it needs to.
    read_turns: Option<ReadTurns>,
    settings: WatchSettings,
    state: Mutex<WatchesState>,
    tasks: AtomicUsize,
    tasks_changed: Notify,
    notices_received: AtomicU64,
    result_reads: AtomicU64,
    notice_timeouts: AtomicU64,
    fleet_results: AtomicU64,
}

/// A notice as the watches keep it: what it announced, whether a replica
/// of the fleet already read the result and found it final, and the span
/// of the webhook request that brought it (result reads it triggers link
/// to it).
#[derive(Clone, Debug)]
struct Heard {
    status: NoticeStatus,
    /// Another replica read the result on its turn and found it final:
    /// this replica reads it once without waiting for a turn. Kept once
    /// set (a later webhook delivery does not unsay it).
    result_final: bool,
    link: Option<SpanContext>,
}

impl Heard {
    /// `self`, keeping what an earlier notice of the journey said.
    fn after(mut self, earlier: Option<&Heard>) -> Self {
        if let Some(earlier) = earlier {
            self.result_final |= earlier.result_final;
            if self.link.is_none() {
                self.link = earlier.link.clone();
            }
        }
        self
    }
}

struct WatchesState {
    journeys: HashMap<JourneyRef, JourneyEntry>,
    /// Recent notices by journey, watched or not, so that a watcher that
    /// arrives after the notice reads at once.
    notices: TtlMap<JourneyRef, Heard>,
    next_id: u64,
    /// Set by [`JourneyWatches::close`]: no new watchers.
    closed: bool,
}

struct JourneyEntry {
    /// Distinguishes this entry from a later one for the same journey.
    id: u64,
    events: watch::Sender<Snapshot>,
    notice: watch::Sender<Option<Heard>>,
    watchers: usize,
    task: AbortHandle,
}

impl JourneyWatches {
    /// A watches reading results through `source`, with journey records of
    /// its own (the default retention).
    pub fn new<S: ResultSource>(source: S, settings: WatchSettings) -> Self {
        let c = JourneysConfig::default();
        let journeys = MemoryJourneys::new(c.retention(), c.max_entries);
        Self::with_journeys(source, settings, Arc::new(journeys))
    }

    /// Watches whose journey references resolve through `journeys` (the
    /// gateway's one store of journey records).
    fn with_journeys<S: ResultSource>(
        source: S,
        settings: WatchSettings,
        journeys: Arc<dyn JourneyStore>,
    ) -> Self {
        let progress =
            MemoryProgress::new(journeys.retention(), JourneysConfig::default().max_entries);
        Self::with_stores(source, settings, journeys, Arc::new(progress), None)
    }

    /// A watches on the gateway's stores: its journey records, its
    /// journeys' progress and, in a fleet, the read turns it shares with
    /// the other replicas.
    pub fn with_stores<S: ResultSource>(
        source: S,
        settings: WatchSettings,
        journeys: Arc<dyn JourneyStore>,
        progress: Arc<dyn ProgressStore>,
        read_turns: Option<ReadTurns>,
    ) -> Self {
        let notices = TtlMap::new(settings.notice_ttl, settings.notice_max_entries);
        Self {
            inner: Arc::new(WatchesInner {
                source: Arc::new(source),
                journeys,
                progress,
                read_turns,
                settings,
                state: Mutex::new(WatchesState {
                    journeys: HashMap::new(),
                    notices,
                    next_id: 0,
                    closed: false,
                }),
                tasks: AtomicUsize::new(0),
                tasks_changed: Notify::new(),
                notices_received: AtomicU64::new(0),
                result_reads: AtomicU64::new(0),
                notice_timeouts: AtomicU64::new(0),
                fleet_results: AtomicU64::new(0),
            }),
        }
    }

    /// Starts watching `target`, without a deadline.
    pub fn watch(&self, target: WatchTarget) -> Result<WatchStream, Error> {
        self.watch_until(target, &CallContext::unbounded())
    }

    /// Starts watching; the stream ends with `DEADLINE_EXCEEDED` at the
    /// caller's deadline, or `UNAVAILABLE` / `WATCH_LIFETIME_REACHED` at
    /// its lifetime, unless the journey ends first. Must be called
    /// inside a Tokio runtime.
    pub fn watch_until(
        &self,
        target: WatchTarget,
        ctx: &CallContext,
    ) -> Result<WatchStream, Error> {
        self.watch_viewed(target, ctx, JourneyResult::clone)
    }

    /// [`JourneyWatches::watch_until`], giving the watcher `view` of the final
    /// result (the caller's `result_view`).
    pub fn watch_viewed(
        &self,
        target: WatchTarget,
        ctx: &CallContext,
        view: watch_stream::ResultViewer,
    ) -> Result<WatchStream, Error> {
        let appkey = self.resolve(target)?;
        let journey = JourneyRef::from_appkey(&appkey);
        let (events, registration) = self.subscribe(&journey, appkey)?;
        let lifetime = watch_stream::Lifetime::from_now(self.inner.settings.max_stream_lifetime);
        let stream = watch_stream::stream(
            journey,
            events,
            registration,
            ctx.deadline(),
            lifetime,
            view,
        );
        Ok(stream)
    }

    /// Takes an authenticated completion notice. Never blocks: it wakes the
    /// journey's task, if the journey is watched, and remembers the notice
    /// for watchers that come later. Returns true when a watched journey
    /// was woken.
    pub fn notify(&self, notice: Notice) -> bool {
        self.notify_traced(notice, None)
    }

    /// [`JourneyWatches::notify`], remembering `link`, the span context of the
    /// webhook request that brought the notice: the result reads the notice
    /// triggers carry a span link to it.
    pub fn notify_traced(&self, notice: Notice, link: Option<SpanContext>) -> bool {
        let journey = JourneyRef::from_appkey(&notice.appkey);
        self.notify_journey(journey, notice.status, false, link)
    }

    /// A notice another replica of the fleet told: a webhook delivery it
    /// accepted, or (`result_final`) a result it read on its turn and
    /// found final. Wakes this replica's watchers of `journey`, which
    /// read the result themselves, once for all of them.
    pub fn notify_from_fleet(
        &self,
        journey: JourneyRef,
        status: NoticeStatus,
        result_final: bool,
    ) -> bool {
        self.notify_journey(journey, status, result_final, None)
    }

    fn notify_journey(
        &self,
        journey: JourneyRef,
        status: NoticeStatus,
        result_final: bool,
        link: Option<SpanContext>,
    ) -> bool {
        self.inner.notices_received.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut state = self.inner.lock();
        let heard = Heard {
            status,
            result_final,
            link: link.filter(SpanContext::is_valid),
        }
        .after(state.notices.get(&journey, now));
        state.notices.insert(journey.clone(), heard.clone(), now);
        match state.journeys.get(&journey) {
            Some(entry) => {
                entry
                    .notice
                    .send_modify(|n| *n = Some(heard.after(n.as_ref())));
                true
            }
            None => false,
        }
    }

    /// Ends every watch with `UNAVAILABLE` / `SHUTTING_DOWN`, stops the
    /// reading tasks and refuses new watchers. Open streams otherwise wait
    /// for their journey (possibly forever), which would hold up the gRPC
    /// server's graceful shutdown. Idempotent.
    pub fn close(&self) {
        let mut state = self.inner.lock();
        state.closed = true;
        for (journey, entry) in &state.journeys {
            // Published before the abort, so the task's own end (when its
            // publisher is dropped) is ignored.
            entry.events.send_if_modified(|snap| {
                if snap.end.is_some() {
                    return false;
                }
                snap.end = Some(End::Failed(Error::ShuttingDown.into()));
                true
            });
            entry.task.abort();
            tracing::debug!(journey = %journey, "journey watch ended: shutting down");
        }
    }

    /// Counts of the live state.
    pub fn stats(&self) -> WatchStats {
        let mut state = self.inner.lock();
        state.notices.purge(Instant::now());
        WatchStats {
            journeys: state.journeys.len(),
            watchers: state.journeys.values().map(|j| j.watchers).sum(),
            tasks: self.inner.tasks.load(Ordering::Acquire),
            notices_remembered: state.notices.len(),
            notices_received: self.inner.notices_received.load(Ordering::Relaxed),
            result_reads: self.inner.result_reads.load(Ordering::Relaxed),
            notice_timeouts: self.inner.notice_timeouts.load(Ordering::Relaxed),
            fleet_results: self.inner.fleet_results.load(Ordering::Relaxed),
        }
    }

    /// Waits until no result-reading task runs (aborted tasks finish
    /// asynchronously). For graceful shutdown and tests.
    pub async fn tasks_finished(&self) {
        loop {
            let changed = self.inner.tasks_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.inner.tasks.load(Ordering::Acquire) == 0 {
                return;
            }
            changed.await;
        }
    }

    /// The appkey of `target`, resolving a reference through the records
    /// this replica holds (the API layer resolves through the fleet's,
    /// owner checked, before it watches).
    fn resolve(&self, target: WatchTarget) -> Result<Appkey, Error> {
        match target {
            WatchTarget::Appkey(appkey) => Ok(appkey),
            WatchTarget::Journey(journey) => self
                .inner
                .journeys
                .held(&journey)
                .map(|record| record.appkey)
                .ok_or(Error::JourneyUnknown),
        }
    }

    /// Joins the journey's entry, creating it and its task if needed.
    fn subscribe(
        &self,
        journey: &JourneyRef,
        appkey: Appkey,
    ) -> Result<(watch::Receiver<Snapshot>, WatcherRegistration), Error> {
        let settings = &self.inner.settings;
        let mut state = self.inner.lock();
        if state.closed {
            return Err(Error::ShuttingDown);
        }
        if let Some(entry) = state.journeys.get_mut(journey) {
            if entry.watchers >= settings.max_watchers_per_journey {
                return Err(Error::WatchLimit(
                    "this journey has the most watchers allowed",
                ));
            }
            entry.watchers += 1;
            let registration = WatcherRegistration::new(&self.inner, journey, entry.id);
            return Ok((entry.events.subscribe(), registration));
        }
        if state.journeys.len() >= settings.max_journeys {
            return Err(Error::WatchLimit(
                "this gateway watches the most journeys allowed",
            ));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Internal("WatchJourney called outside the runtime".to_owned()))?;
        let pending = state.notices.get(journey, Instant::now()).cloned();
        // Issued here: a 404 means "not yet" until the record's retention
        // ends. Not held: a foreign appkey, given up after max_not_found.
        let retained_until = self.inner.journeys.held(journey).map(|record| {
            let retention =
                i64::try_from(self.inner.journeys.retention().as_secs()).unwrap_or(i64::MAX);
            record.created_unix.saturating_add(retention)
        });
        let (events, receiver) = watch::channel(Snapshot::default());
        let (notice, notices) = watch::channel(pending);
        let id = state.next_id;
        state.next_id += 1;
        // The call that starts the task (WatchJourney), for a span link.
        let watch_link =
            Some(tracing::Span::current().span_context()).filter(SpanContext::is_valid);
        let reader = Reader {
            watches: self.inner.clone(),
            journey: journey.clone(),
            appkey,
            retained_until,
            notices,
            watch_link,
            publisher: Publisher::new(&self.inner, events.clone()),
        };
        let task = runtime.spawn(reader.run()).abort_handle();
        state.journeys.insert(
            journey.clone(),
            JourneyEntry {
                id,
                events,
                notice,
                watchers: 1,
                task,
            },
        );
        tracing::debug!(journey = %journey, "journey watch started");
        Ok((receiver, WatcherRegistration::new(&self.inner, journey, id)))
    }
}

impl std::fmt::Debug for JourneyWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JourneyWatches")
            .field("stats", &self.stats())
            .finish()
    }
}

impl WatchesInner {
    fn lock(&self) -> MutexGuard<'_, WatchesState> {
        // Every critical section leaves the state consistent before it can
        // panic, so a poisoned lock is still usable.
        crate::sync::lock(&self.state)
    }
}

pub mod config;
#[cfg(test)]
mod current_state_tests;
mod journeys;
mod reader;
mod stream;
#[cfg(test)]
mod tests;
mod watcher;

#[cfg(test)]
use reader::read_backoff;
use reader::{Publisher, Reader};
use stream as watch_stream;
pub use stream::{ResultViewer, WatchStream};
pub(crate) use watcher::WatcherRegistration;
