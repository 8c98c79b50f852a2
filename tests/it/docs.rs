//! The docs stay true to the code: every metric family the gateway
//! exposes is documented ([`metrics`]), and the one layer diagram, in
//! `src/lib.rs`, is the crate's imports and what `docs/development.md`
//! draws ([`layers`]).

mod layers;
mod metrics;
