//! The stream one `WatchJourney` caller receives.
//!
//! Each stream reads its journey's latest snapshot from a watch channel:
//! it emits each distinct status once, then the final result (or the error
//! that ended the journey's watch), then closes. It holds a
//! [`WatcherGuard`](super::hub::WatcherGuard), so dropping the stream, for
//! whatever reason, releases the watcher.

use std::{pin::Pin, time::Duration};

use futures_util::Stream;
use tokio::{sync::watch, time::Instant};

use super::hub::{End, Snapshot, WatcherGuard};
use crate::{
    Error,
    domain::JourneyRef,
    proto::v1::{JourneyStatus, WatchJourneyResponse},
};

/// The stream type of `JourneyService.WatchJourney`, ready for the tonic
/// service's associated `WatchJourneyStream` type.
pub type WatchStream =
    Pin<Box<dyn Stream<Item = Result<WatchJourneyResponse, tonic::Status>> + Send + 'static>>;

struct State {
    journey: JourneyRef,
    events: watch::Receiver<Snapshot>,
    last: Option<(JourneyStatus, String)>,
    deadline: Option<Instant>,
    done: bool,
    _guard: WatcherGuard,
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
                    result: Some(result.as_ref().clone()),
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
            let changed = match self.deadline {
                None => self.events.changed().await,
                Some(deadline) => tokio::select! {
                    changed = self.events.changed() => changed,
                    () = tokio::time::sleep_until(deadline) => {
                        self.done = true;
                        return Some(Err(Error::DeadlineExceeded("WatchJourney").into()));
                    }
                },
            };
            if changed.is_err() {
                // The entry (which holds the sender) outlived this guard's
                // claim: cannot happen while the guard lives, but never hang.
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
    guard: WatcherGuard,
    deadline: Option<Instant>,
) -> WatchStream {
    let state = State {
        journey,
        events,
        last: None,
        deadline,
        done: false,
        _guard: guard,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        },
    ))
}

/// The caller's deadline from the `grpc-timeout` request header (tonic
/// does not enforce it on streams). `None` when absent or malformed.
pub fn grpc_timeout(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    crate::api::deadline::parse_grpc_timeout(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: &str) -> tonic::metadata::MetadataMap {
        let mut m = tonic::metadata::MetadataMap::new();
        m.insert("grpc-timeout", v.parse().unwrap());
        m
    }

    #[test]
    fn grpc_timeout_parses_every_unit_and_rejects_malformed_values() {
        assert_eq!(grpc_timeout(&meta("2S")), Some(Duration::from_secs(2)));
        assert_eq!(
            grpc_timeout(&meta("150m")),
            Some(Duration::from_millis(150))
        );
        assert_eq!(grpc_timeout(&meta("1H")), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout(&meta("3M")), Some(Duration::from_secs(180)));
        assert_eq!(grpc_timeout(&meta("7u")), Some(Duration::from_micros(7)));
        assert_eq!(grpc_timeout(&meta("9n")), Some(Duration::from_nanos(9)));
        assert_eq!(grpc_timeout(&meta("123456789S")), None);
        assert_eq!(grpc_timeout(&meta("S")), None);
        assert_eq!(grpc_timeout(&meta("5x")), None);
        assert_eq!(grpc_timeout(&meta("+5S")), None);
        assert_eq!(grpc_timeout(&tonic::metadata::MetadataMap::new()), None);
    }
}
