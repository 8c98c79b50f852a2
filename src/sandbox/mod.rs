//! The sandbox: a faithful reference implementation of the
//! identity-verification REST service (the interface told in
//! `docs/upstream.md`), served by axum.
//!
//! It is a product feature (customers run it as their local test
//! environment) and the upstream of every gateway test. Outcomes are chosen
//! by deterministic inputs ([`samples`]); time is injected ([`Clock`]);
//! faults are injected per operation and channel ([`FaultRule`]).
//!
//! # Layout
//!
//! - [`Sandbox::start`] (`server`): listeners and routers; [`SandboxHandle`]
//!   (`handle`): addresses, control, shutdown.
//! - `ops`: one module per REST operation behind one dispatcher.
//! - `store`: the state machine (timing and state rules of
//!   `docs/upstream.md`); `journey`: document processing over time;
//!   `result`, `ocr`: the journey result body.
//! - `documents`, `liveness`, `outcomes`, `cpf`: how inputs choose outcomes.
//! - `faults`, `admin`: fault injection and the `/_sandbox` control API.
//! - `webhook`: the completion notice driver.
//! - [`clock`], [`config`], [`samples`].

mod admin;
mod app;
pub mod clock;
pub mod config;
mod cpf;
mod deliveries;
mod documents;
mod error;
mod faults;
mod handle;
mod input;
mod journey;
mod liveness;
mod ocr;
mod ops;
mod outcomes;
mod result;
pub mod samples;
mod server;
mod store;
mod webhook;
mod wire_time;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    ChannelConfig, CustomerConfig, ListenConfig, OperatorConfig, SandboxConfig, WebhookConfig,
};
pub use deliveries::WebhookStats;
pub use documents::LicenceFormat;
pub use error::SandboxError;
pub use faults::{
    ActiveFault, CallCount, DEFAULT_OVERSIZE_BYTES, FaultAction, FaultPhase, FaultRule,
    VerdictOutcome,
};
pub use handle::{SandboxChannelInfo, SandboxHandle};
pub use journey::JourneyStatus;
pub use server::{SERVICE_ROOT, Sandbox};
pub use store::{AppkeyState, StoreSizes};
pub use webhook::sign as sign_webhook;
