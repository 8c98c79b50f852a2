//! What every store's embedded tier shares: how the engine's answers read
//! as a store's, and how many records a store loads into its memory tier
//! when the gateway starts.
//!
//! Each store's embedded tier keeps its memory tier in front: reads are
//! answered there, as fast as a gateway without a store; a write returns
//! once the file holds it; at start the live records are read back into
//! memory, as many as the memory tier holds.

use super::{embedded::StoreError, error::ClusterError};

/// What an engine failure means to a store's caller. A refusal by the
/// store's rules keeps its meaning (taken, full, busy); any other failure
/// (an I/O error, a halted or closed store) is logged here, naming the
/// path and the cause, and answered as the tier being unavailable.
pub(super) fn refusal(e: StoreError) -> ClusterError {
    match e {
        StoreError::Taken => ClusterError::Taken,
        StoreError::Full { .. } => ClusterError::StoreFull,
        StoreError::Busy { .. } => ClusterError::Busy,
        other => {
            tracing::warn!(error = %other, "the embedded store failed a write");
            ClusterError::Unavailable
        }
    }
}

/// Logs a write the embedded store did not take, whatever the cause, for
/// a store that goes on from its memory tier alone (a budget counted in
/// memory, a mark or a release that expires by itself).
pub(super) fn write_failed(e: &StoreError) {
    tracing::warn!(error = %e, "the embedded store did not take a write; memory answers alone");
}

/// Logs a failed read of the embedded store (what was read then counts as
/// absent, and the memory tier answers alone).
pub(super) fn read_failed(e: &StoreError) {
    tracing::warn!(error = %e, "the embedded store failed a read");
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_engine_s_refusals_keep_their_meaning() {
        let path = PathBuf::from("idgate-data/store.redb");
        assert_eq!(refusal(StoreError::Taken), ClusterError::Taken);
        assert_eq!(
            refusal(StoreError::Full {
                path: path.clone(),
                max_bytes: 1
            }),
            ClusterError::StoreFull
        );
        assert_eq!(
            refusal(StoreError::Busy {
                path: path.clone(),
                queued: 1
            }),
            ClusterError::Busy
        );
        assert_eq!(
            refusal(StoreError::Halted { path }),
            ClusterError::Unavailable
        );
    }
}
