//! The stream one `WatchJourney` caller receives.
//!
//! Each stream reads its journey's latest snapshot from a watch channel:
//! it emits each distinct status once, then the final result (or the error
//! that ended the journey's watch), then closes. It holds a
//! [`WatcherRegistration`](super::WatcherRegistration), so dropping the
//! stream, for whatever reason, releases the watcher.
//!
//! Every stream has a lifetime (`[watch] max_stream_secs`): a watch slot
//! held by a client that never sets a deadline (or one that set a far one)
//! is freed anyway, with `UNAVAILABLE` / `WATCH_LIFETIME_REACHED`, which
//! tells the client to watch again: nothing is lost, since the next
//! stream starts from the journey's latest state.

use std::pin::Pin;

use futures_util::Stream;
use tokio::{sync::watch, time::Instant};

use super::{End, Snapshot, WatcherRegistration};
use crate::{
    Error,
    domain::JourneyRef,
    proto::v1::{JourneyResult, JourneyStatus, WatchJourneyResponse},
};

/// The part of the final result a watcher is given (the caller's result
/// view), built from the shared result without copying what it leaves out.
pub type ResultViewer = fn(&JourneyResult) -> JourneyResult;

/// The stream type of `JourneyService.WatchJourney`, ready for the tonic
/// service's associated `WatchJourneyStream` type.
pub type WatchStream =
    Pin<Box<dyn Stream<Item = Result<WatchJourneyResponse, tonic::Status>> + Send + 'static>>;

struct State {
    journey: JourneyRef,
    events: watch::Receiver<Snapshot>,
    last: Option<(JourneyStatus, String)>,
    deadline: Option<Instant>,
    lifetime: Lifetime,
    view: ResultViewer,
    done: bool,
    _registration: WatcherRegistration,
}

/// When a stream ends however its journey goes, and the lifetime it was
/// given (for the message).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lifetime {
    ends: Instant,
    secs: u64,
}

impl Lifetime {
    /// A lifetime of `max` from now.
    pub(crate) fn from_now(max: std::time::Duration) -> Self {
        Self {
            ends: Instant::now() + max,
            secs: max.as_secs(),
        }
    }
}

impl State {
    /// What this watcher has not seen yet in `snap`, if anything. Marks the
    /// stream done at the end.
    fn next_item(
        &mut self,
        snap: &Snapshot,
    ) -> Option<Result<WatchJourneyResponse, tonic::Status>> {
        if let Some(end) = &snap.end {
            self.done = true;
            return Some(match end {
                End::Result(result) => Ok(WatchJourneyResponse {
                    journey_ref: self.journey.to_string(),
                    status: result.status,
                    raw_status: result.raw_status.clone(),
                    result: Some((self.view)(result)),
                }),
                End::Failed(status) => Err(status.clone()),
            });
        }
        let (status, raw) = snap.status.as_ref()?;
        if self.last.as_ref() == Some(&(*status, raw.clone())) {
            return None;
        }
        self.last = Some((*status, raw.clone()));
        Some(Ok(WatchJourneyResponse {
            journey_ref: self.journey.to_string(),
            status: *status as i32,
            raw_status: raw.clone(),
            result: None,
        }))
    }

    async fn next(&mut self) -> Option<Result<WatchJourneyResponse, tonic::Status>> {
        if self.done {
            return None;
        }
        loop {
            // Cheap: a status string and a shared result. The borrow (a read
            // lock) must not be held across the await below.
            let snap = self.events.borrow_and_update().clone();
            let item = self.next_item(&snap);
            if item.is_some() {
                return item;
            }
            // The caller's deadline when it comes first, else the lifetime.
            let (until, end) = match self.deadline {
                Some(deadline) if deadline <= self.lifetime.ends => {
                    (deadline, Error::DeadlineExceeded("WatchJourney"))
                }
                _ => (
                    self.lifetime.ends,
                    Error::WatchLifetimeReached(self.lifetime.secs),
                ),
            };
            let changed = tokio::select! {
                changed = self.events.changed() => changed,
                () = tokio::time::sleep_until(until) => {
                    self.done = true;
                    return Some(Err(end.into()));
                }
            };
            if changed.is_err() {
                // The entry (which holds the sender) ended before this
                // watcher's registration: cannot happen while the
                // registration lives, but never hang.
                self.done = true;
                return Some(Err(Error::Internal(
                    "the journey's event channel closed".to_owned(),
                )
                .into()));
            }
        }
    }
}

/// Builds the stream of one watcher.
pub(crate) fn stream(
    journey: JourneyRef,
    events: watch::Receiver<Snapshot>,
    registration: WatcherRegistration,
    deadline: Option<Instant>,
    lifetime: Lifetime,
    view: ResultViewer,
) -> WatchStream {
    let state = State {
        journey,
        events,
        last: None,
        deadline,
        lifetime,
        view,
        done: false,
        _registration: registration,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        },
    ))
}
