//! What a store says when its tier could not do what was asked.

/// The shared tier could not answer (unreachable, timed out, or refused);
/// nothing was changed by this call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The durable tier cannot be reached or written: Redis unreachable
    /// or past the command timeout, or the embedded store's file failing
    /// (its own error is logged with the path and the cause).
    #[error("the gateway's shared state is unavailable")]
    Unavailable,
    /// A bounded store of one process is full and may not forget what it
    /// holds (the journey records of a single replica).
    #[error("the store is full")]
    Full,
    /// The embedded store's live records reach `store.max_bytes`: new
    /// records are refused, and no live one is forgotten to make room.
    #[error("the store holds store.max_bytes of live records")]
    StoreFull,
    /// More writes wait for the embedded store's disk than its queue
    /// holds: refused at once rather than queued without bound.
    #[error("the store's writes wait for its disk")]
    Busy,
    /// The owner of a new journey record holds as many live records as
    /// its share allows (`[[callers]] max_journeys`).
    #[error("the owner holds its share of records")]
    OwnerFull,
    /// A record already lives under the key: the first writer keeps it
    /// (records are inserted once, in every tier).
    #[error("a record already lives under the key")]
    Taken,
}
