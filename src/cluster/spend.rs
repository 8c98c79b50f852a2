//! What the fleet shares for spend (`crate::spend`):
//! idempotency records of `CreateJourney` and budget window counters.
//! Which appkey a request made, who owns it and which profile pays for it
//! are the journey's record (`cluster::journeys`), not the guard's.
//!
//! Nothing personal or secret crosses this boundary: an idempotency
//! record holds a keyed digest of the request (never the request), the
//! journey reference and the expiry. Budget windows are named by configuration names
//! only (operator profile, operation, window).
//!
//! - `memory`: [`MemorySpend`], one process (and the fallback the Redis
//!   store counts budgets in while Redis is unreachable).
//! - `redis`: [`RedisSpend`], its keys and scripts.
//! - `embedded`: [`EmbeddedSpend`], a single replica's, durable on the
//!   embedded store with a [`MemorySpend`] in front.

mod embedded;
mod memory;
mod redis;

use std::time::Duration;

pub use embedded::EmbeddedSpend;
pub use memory::MemorySpend;
pub use redis::RedisSpend;

use super::{encryption::Digester, error::ClusterError, future::BoxFuture};
use crate::domain::JourneyRef;

/// Where spend keeps its records. Every method answers
/// within the implementation's command timeout.
pub trait SpendStore: Send + Sync + 'static {
    /// The keyed digester whose digests every replica of this store
    /// agrees on (random per process for memory).
    fn digester(&self) -> Digester;

    /// Claims idempotency `key` for a call whose request digest is
    /// `request`: `None` when this call now holds it (as pending for
    /// `pending_ttl`), else where the key stands.
    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>>;

    /// Completes the claim on `key` with `record`, kept for `ttl`; waiters
    /// see it at once.
    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// Releases the claim on `key` if it is still pending for `request`
    /// (the call failed): waiters and later calls may claim it again.
    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>>;

    /// Waits while `key` is pending for `request`, at most `max`; returns
    /// where it stands then.
    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>>;

    /// Counts one call in every window, unless one is spent (then counts
    /// nothing). Never fails: unreachable, the fleet's state counts in
    /// this replica alone.
    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake>;
}

/// A completed idempotent `CreateJourney`, as replayed to a caller that
/// sends the same `request_id` with the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdemRecord {
    /// Keyed digest of the request (hex), compared on every replay.
    pub request: String,
    /// The journey it made; its record holds the appkey.
    pub journey: JourneyRef,
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
