//! One watcher's registration with its journey's entry in the watches.

use std::sync::Arc;

use super::WatchesInner;
use crate::domain::JourneyRef;

/// One watcher, registered with its journey's entry: it counts among the
/// journey's watchers while it lives. Dropping it (the stream is dropped:
/// the call ended, was cancelled or timed out) deregisters the watcher;
/// the last one out stops the journey's task and removes its entry.
pub(crate) struct WatcherRegistration {
    watches: Arc<WatchesInner>,
    journey: JourneyRef,
    id: u64,
}

impl WatcherRegistration {
    pub(super) fn new(watches: &Arc<WatchesInner>, journey: &JourneyRef, id: u64) -> Self {
        Self {
            watches: watches.clone(),
            journey: journey.clone(),
            id,
        }
    }
}

impl Drop for WatcherRegistration {
    fn drop(&mut self) {
        let mut state = self.watches.lock();
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
