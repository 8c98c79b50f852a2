//! The journey hub: one result-reading task per watched journey, shared by
//! all of that journey's watchers.
//!
//! A journey gets a task when its first watcher arrives and loses it when
//! its last watcher leaves (the task is aborted and the entry removed, so
//! memory returns to baseline). The task does not read the result until a
//! completion notice arrives, or until the webhook grace period passes
//! without one (a lost webhook delays watchers but never strands them).
//! It publishes on a `tokio::sync::watch` channel that holds only the
//! latest state: a slow watcher skips intermediate states and never holds
//! up the task or the other watchers.
//!
//! Tracing: each result read runs in its own root span
//! (`idgate.journey.result_read`, with `idgate.journey_ref`), linked to the
//! span of the webhook request whose notice triggered it and to the
//! `WatchJourney` call that started the task, so a backend shows the read
//! beside both without making it part of either trace.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use tokio::{
    sync::{Notify, watch},
    task::AbortHandle,
    time::Instant,
};

use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::{
    DynResultSource, Notice, NoticeStatus, ResultSource,
    config::WatchSettings,
    directory::JourneyDirectory,
    watch::{self as watch_stream, WatchStream},
};
use crate::{
    Error,
    domain::{Appkey, JourneyRef},
    proto::v1::{JourneyResult, JourneyStatus, WatchJourneyRequest, watch_journey_request},
    ttl::TtlMap,
};

/// Longest appkey accepted from a caller; real ones are far shorter.
const MAX_APPKEY_LEN: usize = 512;

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

/// Counts of the hub's live state, for tests and telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubStats {
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
}

/// The `WatchJourney` core: journeys being watched, their reading tasks,
/// and the journey directory. Cheap to clone (shared).
#[derive(Clone)]
pub struct JourneyHub {
    inner: Arc<HubInner>,
}

pub(crate) struct HubInner {
    source: Arc<dyn DynResultSource>,
    settings: WatchSettings,
    directory: JourneyDirectory,
    state: Mutex<HubState>,
    tasks: AtomicUsize,
    tasks_changed: Notify,
    notices_received: AtomicU64,
    result_reads: AtomicU64,
    notice_timeouts: AtomicU64,
}

/// A notice as the hub keeps it: what it announced, and the span of the
/// webhook request that brought it (result reads it triggers link to it).
#[derive(Clone, Debug)]
struct Heard {
    status: NoticeStatus,
    link: Option<SpanContext>,
}

struct HubState {
    journeys: HashMap<JourneyRef, JourneyEntry>,
    /// Recent notices by journey, watched or not, so that a watcher that
    /// arrives after the notice reads at once.
    notices: TtlMap<JourneyRef, Heard>,
    next_id: u64,
    /// Set by [`JourneyHub::close`]: no new watchers.
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

impl JourneyHub {
    /// A hub reading results through `source`.
    pub fn new<S: ResultSource>(source: S, settings: WatchSettings) -> Self {
        let directory =
            JourneyDirectory::new(settings.directory_ttl, settings.directory_max_entries);
        let notices = TtlMap::new(settings.notice_ttl, settings.notice_max_entries);
        Self {
            inner: Arc::new(HubInner {
                source: Arc::new(source),
                settings,
                directory,
                state: Mutex::new(HubState {
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
            }),
        }
    }

    /// The directory CreateJourney registers new journeys in (shared with
    /// the hub: clone it into the journey service).
    pub fn directory(&self) -> &JourneyDirectory {
        &self.inner.directory
    }

    /// Shorthand for `directory().register(appkey)`.
    pub fn register(&self, appkey: &Appkey) -> JourneyRef {
        self.inner.directory.register(appkey)
    }

    /// Starts watching the journey named by `request`, without a deadline.
    pub fn watch(&self, request: WatchJourneyRequest) -> Result<WatchStream, Error> {
        self.watch_with_deadline(request, None)
    }

    /// Starts watching; the stream ends with `DEADLINE_EXCEEDED` after
    /// `timeout` (the caller's gRPC deadline) unless the journey ends first.
    /// Must be called inside a Tokio runtime.
    pub fn watch_with_deadline(
        &self,
        request: WatchJourneyRequest,
        timeout: Option<Duration>,
    ) -> Result<WatchStream, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let appkey = self.resolve(request)?;
        let journey = JourneyRef::from_appkey(&appkey);
        let (events, guard) = self.subscribe(&journey, appkey)?;
        Ok(watch_stream::stream(journey, events, guard, deadline))
    }

    /// The tonic entry point: honours the request's `grpc-timeout` and maps
    /// errors to `tonic::Status`.
    pub fn watch_request(
        &self,
        request: tonic::Request<WatchJourneyRequest>,
    ) -> Result<WatchStream, tonic::Status> {
        let timeout = watch_stream::grpc_timeout(request.metadata());
        self.watch_with_deadline(request.into_inner(), timeout)
            .map_err(tonic::Status::from)
    }

    /// Takes an authenticated completion notice. Never blocks: it wakes the
    /// journey's task, if the journey is watched, and remembers the notice
    /// for watchers that come later. Returns true when a watched journey
    /// was woken.
    pub fn notify(&self, notice: Notice) -> bool {
        self.notify_traced(notice, None)
    }

    /// [`JourneyHub::notify`], remembering `link`, the span context of the
    /// webhook request that brought the notice: the result reads the notice
    /// triggers carry a span link to it.
    pub fn notify_traced(&self, notice: Notice, link: Option<SpanContext>) -> bool {
        self.inner.notices_received.fetch_add(1, Ordering::Relaxed);
        let journey = JourneyRef::from_appkey(&notice.appkey);
        let heard = Heard {
            status: notice.status,
            link: link.filter(SpanContext::is_valid),
        };
        let mut state = self.inner.lock();
        state
            .notices
            .insert(journey.clone(), heard.clone(), Instant::now());
        match state.journeys.get(&journey) {
            Some(entry) => {
                entry.notice.send_modify(|n| *n = Some(heard));
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
    pub fn stats(&self) -> HubStats {
        let mut state = self.inner.lock();
        state.notices.purge(Instant::now());
        HubStats {
            journeys: state.journeys.len(),
            watchers: state.journeys.values().map(|j| j.watchers).sum(),
            tasks: self.inner.tasks.load(Ordering::Acquire),
            notices_remembered: state.notices.len(),
            notices_received: self.inner.notices_received.load(Ordering::Relaxed),
            result_reads: self.inner.result_reads.load(Ordering::Relaxed),
            notice_timeouts: self.inner.notice_timeouts.load(Ordering::Relaxed),
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

    /// The appkey a request names, by appkey or by directory reference.
    fn resolve(&self, request: WatchJourneyRequest) -> Result<Appkey, Error> {
        match request.journey {
            Some(watch_journey_request::Journey::Appkey(key)) => {
                let key = key.trim();
                if key.is_empty() {
                    return Err(Error::invalid("appkey", "is required"));
                }
                if key.len() > MAX_APPKEY_LEN {
                    return Err(Error::invalid(
                        "appkey",
                        format!("is longer than {MAX_APPKEY_LEN} characters"),
                    ));
                }
                Ok(Appkey::new(key))
            }
            Some(watch_journey_request::Journey::JourneyRef(text)) => {
                let journey = JourneyRef::parse(text.trim()).ok_or_else(|| {
                    Error::invalid(
                        "journey_ref",
                        "must be a journey reference returned by CreateJourney (`j-` and 16 hex digits)",
                    )
                })?;
                self.inner
                    .directory
                    .resolve(&journey)
                    .ok_or(Error::JourneyUnknown)
            }
            None => Err(Error::invalid(
                "journey",
                "set either appkey or journey_ref",
            )),
        }
    }

    /// Joins the journey's entry, creating it and its task if needed.
    fn subscribe(
        &self,
        journey: &JourneyRef,
        appkey: Appkey,
    ) -> Result<(watch::Receiver<Snapshot>, WatcherGuard), Error> {
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
            let guard = WatcherGuard::new(&self.inner, journey, entry.id);
            return Ok((entry.events.subscribe(), guard));
        }
        if state.journeys.len() >= settings.max_journeys {
            return Err(Error::WatchLimit(
                "this gateway watches the most journeys allowed",
            ));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Internal("WatchJourney called outside the runtime".to_owned()))?;
        let pending = state.notices.get(journey, Instant::now()).cloned();
        let (events, receiver) = watch::channel(Snapshot::default());
        let (notice, notices) = watch::channel(pending);
        let id = state.next_id;
        state.next_id += 1;
        // The call that starts the task (WatchJourney), for a span link.
        let watch_link = Some(
            tracing::Span::current()
                .context()
                .span()
                .span_context()
                .clone(),
        )
        .filter(SpanContext::is_valid);
        let reader = Reader {
            hub: self.inner.clone(),
            journey: journey.clone(),
            appkey,
            notices,
            watch_link,
            publisher: Publisher::new(&self.inner, events.clone()),
            seed: id,
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
        Ok((receiver, WatcherGuard::new(&self.inner, journey, id)))
    }
}

impl std::fmt::Debug for JourneyHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JourneyHub")
            .field("stats", &self.stats())
            .finish()
    }
}

impl HubInner {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        // Every critical section leaves the state consistent before it can
        // panic, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One watcher's claim on its journey. Dropping it (the stream is dropped:
/// the call ended, was cancelled or timed out) releases the claim; the
/// last one out stops the journey's task and removes its entry.
pub(crate) struct WatcherGuard {
    hub: Arc<HubInner>,
    journey: JourneyRef,
    id: u64,
}

impl WatcherGuard {
    fn new(hub: &Arc<HubInner>, journey: &JourneyRef, id: u64) -> Self {
        Self {
            hub: hub.clone(),
            journey: journey.clone(),
            id,
        }
    }
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        let Some(entry) = state.journeys.get_mut(&self.journey) else {
            return;
        };
        if entry.id != self.id {
            return;
        }
        entry.watchers = entry.watchers.saturating_sub(1);
        if entry.watchers == 0 {
            if let Some(entry) = state.journeys.remove(&self.journey) {
                entry.task.abort();
                tracing::debug!(journey = %self.journey, "journey watch ended: no watchers left");
            }
        }
    }
}

/// Publishes a journey's snapshots; counts the task as live while it
/// exists. If the task stops without publishing an end (a panic in the
/// result source), its drop ends the watch with an error rather than
/// leaving watchers waiting forever.
struct Publisher {
    hub: Arc<HubInner>,
    events: watch::Sender<Snapshot>,
}

impl Publisher {
    fn new(hub: &Arc<HubInner>, events: watch::Sender<Snapshot>) -> Self {
        hub.tasks.fetch_add(1, Ordering::AcqRel);
        Self {
            hub: hub.clone(),
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
        self.hub.tasks.fetch_sub(1, Ordering::AcqRel);
        self.hub.tasks_changed.notify_waiters();
    }
}

/// The task of one watched journey.
struct Reader {
    hub: Arc<HubInner>,
    journey: JourneyRef,
    appkey: Appkey,
    notices: watch::Receiver<Option<Heard>>,
    /// The WatchJourney call that started this task.
    watch_link: Option<SpanContext>,
    publisher: Publisher,
    seed: u64,
}

impl Reader {
    async fn run(mut self) {
        let settings = self.hub.settings.clone();
        let mut notice_open = true;
        let mut notice = self.notices.borrow_and_update().is_some();
        if !notice {
            tokio::select! {
                changed = self.notices.changed() => match changed {
                    Ok(()) => notice = self.notices.borrow_and_update().is_some(),
                    Err(_) => notice_open = false,
                },
                () = tokio::time::sleep(settings.webhook_grace) => {
                    self.hub.notice_timeouts.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        journey = %self.journey,
                        "no completion notice within the grace period; reading the result"
                    );
                }
            }
        }
        let mut settle_deadline = notice.then(|| Instant::now() + settings.settle_limit);
        let mut backoff = Backoff::new(settings.poll_initial, settings.poll_max, self.seed);
        loop {
            if self.read_once().await.is_break() {
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

    /// Reads the result once and publishes what it says. Breaks when the
    /// watch has ended (final result or permanent failure).
    async fn read_once(&self) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        self.hub.result_reads.fetch_add(1, Ordering::Relaxed);
        let notice = self.notices.borrow().clone();
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
        match self.hub.source.fetch(&self.appkey).instrument(span).await {
            Ok(result) => {
                let status = result.status();
                if matches!(status, JourneyStatus::Complete | JourneyStatus::Error) {
                    tracing::info!(journey = %self.journey, status = status.as_str_name(), "journey result ready");
                    self.publisher.end(End::Result(Arc::new(result)));
                    return Break(());
                }
                self.publisher.status(status, &result.raw_status);
                Continue(())
            }
            Err(e) if is_transient(&e) => {
                tracing::debug!(journey = %self.journey, reason = e.reason(), "result read failed; will retry");
                Continue(())
            }
            Err(e) => {
                tracing::warn!(journey = %self.journey, reason = e.reason(), "result read failed permanently");
                self.publisher.end(End::Failed(e.into()));
                Break(())
            }
        }
    }
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

/// Exponential backoff with jitter (75-100 % of the step), so journeys
/// whose grace periods end together do not read in lockstep.
struct Backoff {
    initial: Duration,
    max: Duration,
    step: Duration,
    rng: u64,
}

impl Backoff {
    fn new(initial: Duration, max: Duration, seed: u64) -> Self {
        // A zero step would read in a tight loop.
        let initial = initial.max(Duration::from_millis(1));
        Self {
            initial,
            max: max.max(initial),
            step: initial,
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(self.max);
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let fraction = (z >> 11) as f64 / (1u64 << 53) as f64;
        step.mul_f64(0.75 + 0.25 * fraction)
    }

    fn reset(&mut self) {
        self.step = self.initial;
    }
}

#[cfg(test)]
mod tests;
