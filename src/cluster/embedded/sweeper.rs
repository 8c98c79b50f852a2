//! The sweeper: a task that removes expired records every
//! `store.sweep_interval_secs`, a bounded batch per transaction so that
//! writers never wait behind a long sweep. An expired record is already
//! invisible to reads; sweeping gives its bytes back to `store.max_bytes`.

use std::{sync::Weak, time::Duration};

use super::Shared;

/// Most records one sweeping transaction removes.
pub(super) const SWEEP_BATCH: usize = 1_000;

/// Sweeps the store every `every` until the store is dropped (the task
/// holds it only while it sweeps).
pub(super) async fn run(store: Weak<Shared>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = store.upgrade() else {
            return;
        };
        loop {
            match shared.writer.submit(|txn| txn.sweep(SWEEP_BATCH)).await {
                Ok(removed) if removed == SWEEP_BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "the store's sweep failed; retried at the next interval");
                    break;
                }
            }
        }
    }
}
