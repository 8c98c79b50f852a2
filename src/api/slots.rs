//! Per-caller limits on the public listener: unary calls in flight,
//! `WatchJourney` streams open at once and request bytes being received,
//! per caller (`[[callers]] max_in_flight`, `max_watch_streams`,
//! `max_body_bytes`, the last charged by [`request_bytes`](super::request_bytes)), so that one caller cannot take
//! every slot of the gateway's own caps (`[serving] max_in_flight`,
//! `max_streams`). Past its limit a call is refused at once with
//! `RESOURCE_EXHAUSTED`/`CALLER_LIMIT_REACHED` (retryable); nothing
//! queues. The open caller of a gateway without `[auth]` has no limit of
//! its own (the listener's caps apply).
//!
//! Counts are per process, like the listener's caps they share.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use super::request_bytes::Tally;
use crate::{
    Error,
    domain::{Caller, CallerName},
};

#[derive(Default)]
struct Counts {
    calls: AtomicUsize,
    streams: AtomicUsize,
    bytes: Arc<Tally>,
}

/// The callers' counts. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct CallerSlots {
    counts: Arc<Mutex<HashMap<CallerName, Arc<Counts>>>>,
}

/// A slot held for one call or stream; released on drop.
pub struct Slot {
    counts: Arc<Counts>,
    stream: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let counter = match self.stream {
            true => &self.counts.streams,
            false => &self.counts.calls,
        };
        counter.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CallerSlots {
    /// A unary call's slot for `caller` (`None`: the caller has no limit).
    pub fn call(&self, caller: &Caller) -> Result<Option<Slot>, Error> {
        self.take(caller, false, caller.limits.max_in_flight)
    }

    /// A `WatchJourney` stream's slot for `caller`.
    pub fn stream(&self, caller: &Caller) -> Result<Option<Slot>, Error> {
        self.take(caller, true, caller.limits.max_watch_streams)
    }

    /// The request bytes `caller` is receiving, with its share (`None`:
    /// the caller has no share of its own), read from the call's `slot`
    /// when it holds one (no second lookup).
    pub(super) fn bytes(
        &self,
        caller: &Caller,
        slot: Option<&Slot>,
    ) -> Option<(Arc<Tally>, usize)> {
        let share = caller.limits.max_body_bytes;
        if share == usize::MAX {
            return None;
        }
        let tally = match slot {
            Some(slot) => Arc::clone(&slot.counts.bytes),
            None => Arc::clone(&self.counts_of(caller).bytes),
        };
        Some((tally, share))
    }

    /// The request bytes each caller seen so far is receiving now.
    pub(super) fn bytes_held(&self) -> Vec<(CallerName, usize)> {
        crate::sync::lock(&self.counts)
            .iter()
            .map(|(name, counts)| (name.clone(), counts.bytes.get()))
            .collect()
    }

    fn counts_of(&self, caller: &Caller) -> Arc<Counts> {
        crate::sync::lock(&self.counts)
            .entry(caller.name.clone())
            .or_default()
            .clone()
    }

    fn take(&self, caller: &Caller, stream: bool, limit: usize) -> Result<Option<Slot>, Error> {
        if limit == usize::MAX {
            return Ok(None);
        }
        let counts = self.counts_of(caller);
        let counter = match stream {
            true => &counts.streams,
            false => &counts.calls,
        };
        if counter.fetch_add(1, Ordering::AcqRel) >= limit {
            counter.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::CallerLimitReached(match stream {
                true => "WatchJourney streams",
                false => "calls in flight",
            }));
        }
        Ok(Some(Slot { counts, stream }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CallerLimits;

    #[test]
    fn a_caller_is_refused_past_its_limits_and_slots_come_back() {
        let mut caller = Caller::open();
        caller.name = CallerName::new("a");
        caller.limits = CallerLimits {
            max_in_flight: 2,
            max_watch_streams: 1,
            ..CallerLimits::default()
        };
        let slots = CallerSlots::default();
        let (one, two) = (slots.call(&caller).unwrap(), slots.call(&caller).unwrap());
        assert!(matches!(
            slots.call(&caller),
            Err(Error::CallerLimitReached(_))
        ));
        let stream = slots.stream(&caller).unwrap();
        assert!(slots.stream(&caller).is_err());
        drop((one, stream));
        assert!(slots.call(&caller).is_ok());
        assert!(slots.stream(&caller).is_ok());
        drop(two);
        // Another caller has slots of its own; the open caller has none.
        let mut other = caller.clone();
        other.name = CallerName::new("b");
        assert!(slots.stream(&other).unwrap().is_some());
        assert!(slots.call(&Caller::open()).unwrap().is_none());
    }
}
