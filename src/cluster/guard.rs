//! What the fleet shares for the spending guard (`crate::guard`):
//! idempotency records of `CreateJourney` and budget window counters.
//!
//! Nothing personal crosses this boundary: an idempotency record holds a
//! keyed digest of the request (never the request), the journey
//! reference, the expiry and the appkey, which the Redis implementation
//! seals before storing. Budget windows are named by configuration names
//! only (operator profile, operation, window).

use std::time::Duration;

use crate::domain::{Appkey, JourneyRef};

/// A completed idempotent `CreateJourney`, as replayed to a caller that
/// sends the same `request_id` with the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdemRecord {
    /// Keyed digest of the request (hex), compared on every replay.
    pub request: String,
    /// The journey reference of the appkey.
    pub journey: JourneyRef,
    /// The appkey (sealed in Redis).
    pub appkey: Appkey,
    /// The expiry returned the first time, Unix seconds.
    pub expires_unix: i64,
}

/// Where an idempotency key stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdemState {
    /// Nobody holds it (never claimed, released after a failure, or the
    /// claimant's pending record expired).
    Absent,
    /// A call holds it and is in flight; `request` is its request digest.
    Pending {
        /// The claimant's request digest (hex).
        request: String,
    },
    /// The call completed.
    Done(IdemRecord),
}

/// One window of a budget, as the store counts it: a fixed window that
/// opens at the first call counted in it and lasts `length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetWindow {
    /// The counter's name, from configuration names only
    /// (`<operator>:<operation>:<window>`).
    pub name: String,
    /// Calls the window lets through.
    pub limit: u64,
    /// How long the window lasts.
    pub length: Duration,
}

/// One window's count after a call was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowUse {
    /// Calls counted in the window, this one included.
    pub used: u64,
    /// Until the window reopens.
    pub resets_in: Duration,
}

/// The answer to taking one unit of a budget: either every window counted
/// the call, or one was already spent and nothing was counted anywhere
/// (a refused call spends no window, so refusals cannot starve the day).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetTake {
    /// Let through; one [`WindowUse`] per window, in order.
    Granted(Vec<WindowUse>),
    /// Refused by the window at `window` (its index), which reopens in
    /// `retry_after`.
    Refused {
        /// Index of the spent window.
        window: usize,
        /// Until it reopens.
        retry_after: Duration,
    },
}
