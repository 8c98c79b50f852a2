//! The task of one watched journey: waits for the completion notice (or
//! the grace period), reads the result until it agrees with the notice,
//! and publishes each state for the journey's watchers.
//!
//! The service answers 404 on the result until a liveness proof exists,
//! so a 404 is retried; but it also answers 404 for an appkey it never
//! issued, and a reader polling such an appkey would hold its watch slot
//! and call upstream for as long as the watcher stays. After
//! `[watch] max_not_found` consecutive 404s the reader gives up and every
//! watcher gets `NOT_FOUND` / `RESULT_NOT_AVAILABLE`.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use opentelemetry::trace::SpanContext;
use tokio::{sync::watch, time::Instant};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::{End, Heard, HubInner, Snapshot};
use crate::{
    Error,
    domain::{Appkey, JourneyRef},
    proto::v1::JourneyStatus,
};
/// Publishes a journey's snapshots; counts the task as live while it
/// exists. If the task stops without publishing an end (a panic in the
/// result source), its drop ends the watch with an error rather than
/// leaving watchers waiting forever.
pub(super) struct Publisher {
    hub: Arc<HubInner>,
    events: watch::Sender<Snapshot>,
}

impl Publisher {
    pub(super) fn new(hub: &Arc<HubInner>, events: watch::Sender<Snapshot>) -> Self {
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
pub(super) struct Reader {
    pub(super) hub: Arc<HubInner>,
    pub(super) journey: JourneyRef,
    pub(super) appkey: Appkey,
    pub(super) notices: watch::Receiver<Option<Heard>>,
    /// The WatchJourney call that started this task.
    pub(super) watch_link: Option<SpanContext>,
    pub(super) publisher: Publisher,
    pub(super) seed: u64,
}

impl Reader {
    pub(super) async fn run(mut self) {
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
        let mut not_found = 0;
        loop {
            if self.read_once(&mut not_found).await.is_break() {
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
    /// watch has ended (final result, permanent failure, or the
    /// `not_found`-th consecutive 404 reaching `max_not_found`).
    async fn read_once(&self, not_found: &mut u32) -> std::ops::ControlFlow<()> {
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
        let read = self.hub.source.fetch(&self.appkey).instrument(span).await;
        match &read {
            Err(e) if e.classify().0 == tonic::Code::NotFound => *not_found += 1,
            _ => *not_found = 0,
        }
        match read {
            Err(e) if *not_found >= self.hub.settings.max_not_found => {
                tracing::info!(
                    journey = %self.journey,
                    not_found = *not_found,
                    "the result read answered 404 too many times in a row; giving up"
                );
                self.publisher.end(End::Failed(e.into()));
                Break(())
            }
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
pub(super) struct Backoff {
    initial: Duration,
    max: Duration,
    step: Duration,
    rng: u64,
}

impl Backoff {
    pub(super) fn new(initial: Duration, max: Duration, seed: u64) -> Self {
        // A zero step would read in a tight loop.
        let initial = initial.max(Duration::from_millis(1));
        Self {
            initial,
            max: max.max(initial),
            step: initial,
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub(super) fn next_delay(&mut self) -> Duration {
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

    pub(super) fn reset(&mut self) {
        self.step = self.initial;
    }
}
