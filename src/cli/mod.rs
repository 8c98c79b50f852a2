//! Command-line front ends that talk to a running gateway: `idgate
//! journey` (a whole journey through the public API), `idgate channels`
//! (run-time control and vendor figures through the admin API) and `idgate
//! usage` (the charge-back report, through the admin API), over
//! plaintext or TLS (`tls`). Every subcommand's arguments are in `args`
//! (clap); the binary (`main.rs`) runs them.

pub mod args;
pub mod channels;
pub mod compare;
pub mod inputs;
pub mod journey;
pub mod plan;
pub mod rollout;
pub mod summary;
pub mod tls;
pub mod usage;
