//! End-to-end tests through the gateway over real sockets, on the
//! embedded sandbox.

mod admin_listener;
mod bounds;
mod channels;
mod errors;
mod events;
mod journeys;
mod lifecycle;
mod migration;
pub(crate) mod probe;
mod reasons;
pub(crate) mod rollout;
mod serving;
mod smoke;
pub(crate) mod spend;
mod validation;
