//! Bounded waits on state that settles on its own.

use std::time::Duration;

/// Longest a test waits for anything asynchronous.
pub const EVENT_WAIT: Duration = Duration::from_secs(20);

/// Polls `check` every 10 ms until it holds, for at most `within`; panics
/// naming `what` otherwise. For states that settle on their own (a breaker
/// back-off ending, a call reaching the sandbox, a watcher released).
pub async fn eventually(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "not reached within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
