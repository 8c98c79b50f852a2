//! End-to-end tests through the gateway over real sockets, on the
//! embedded sandbox.

mod events;
mod helpers;
mod smoke;
