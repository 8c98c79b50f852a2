//! The heartbeat timer of a serving thread.
//!
//! Tokio's timer wakes its driver (a write to an `eventfd`) whenever a new
//! timer is due before the earliest one it parked for, even when the
//! thread registering it is the driver's own and awake; with nothing else
//! pending, every call's deadline and upstream timeout were such timers:
//! two system calls per call. A timer always due within the heartbeat
//! keeps them later than the earliest (docs/serving.md, "Serving
//! threads").

use std::time::Duration;

use tokio::time::MissedTickBehavior;

/// How often an otherwise idle serving thread wakes: short enough that a
/// call's timers (a deadline, an upstream timeout: seconds) are not the
/// earliest its runtime waits for, long enough to cost nothing.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// Starts the heartbeat on the current thread's runtime; it ends with the
/// runtime.
pub(super) fn start() {
    tokio::spawn(async {
        let mut beat = tokio::time::interval(HEARTBEAT);
        beat.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            beat.tick().await;
        }
    });
}
