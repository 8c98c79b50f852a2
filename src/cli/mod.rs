//! Command-line front ends that talk to a running gateway.

pub mod inputs;
pub mod journey;
pub mod summary;
