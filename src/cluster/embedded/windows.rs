//! Budget windows as the store counts them: counters that live as long
//! as their window, each a record of its table, counted all or none.

use std::time::Duration;

use super::Table;

/// One window of a budget counted by [`super::Embedded::take`]: a fixed
/// window that opens at the first call counted in it and lasts `length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The table its counter lives in.
    pub table: Table,
    /// The counter's key.
    pub key: Vec<u8>,
    /// Calls the window lets through.
    pub limit: u64,
    /// How long the window lasts from its first call.
    pub length: Duration,
}

/// One window's count after a call was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Calls counted in the window, this one included.
    pub used: u64,
    /// Until the window reopens.
    pub resets_in: Duration,
}

/// The answer to counting one call in a budget's windows: every window
/// counted it, or one was spent and none counted it (a refused call spends
/// nothing, so refusals cannot starve a window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Let through; one [`Counted`] per window, in order.
    Granted(Vec<Counted>),
    /// Refused by the window at index `window`, which reopens in `retry_after`.
    Refused {
        /// Index of the spent window.
        window: usize,
        /// Until it reopens.
        retry_after: Duration,
    },
}
