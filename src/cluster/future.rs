//! How a store answers: a boxed future, so the store traits are
//! object-safe, and one that is ready at once, for the tiers that answer
//! without waiting (memory).

use std::{future::Future, pin::Pin};

/// A boxed future, so the stores are object-safe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A future that is ready at once (the memory stores' answers).
pub(crate) fn ready<T: Send + 'static>(value: T) -> BoxFuture<T> {
    Box::pin(std::future::ready(value))
}
