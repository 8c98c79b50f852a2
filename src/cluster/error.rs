//! What a store says when its tier could not do what was asked.

/// The shared tier could not answer (unreachable, timed out, or refused);
/// nothing was changed by this call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Redis is unreachable or did not answer within the command timeout.
    #[error("the fleet's shared state (Redis) is unavailable")]
    Unavailable,
    /// A bounded store of one process is full and may not forget what it
    /// holds (the journey records of a single replica).
    #[error("the store is full")]
    Full,
    /// The owner of a new journey record holds as many live records as
    /// its share allows (`[[callers]] max_journeys`).
    #[error("the owner holds its share of records")]
    OwnerFull,
    /// A record already lives under the key: the first writer keeps it
    /// (records are inserted once, in every tier).
    #[error("a record already lives under the key")]
    Taken,
}
