//! What tests and measurements reach inside the gateway, in one place.
//!
//! A gateway is driven through its listeners as any caller would; these
//! are the parts a test reads to assert what a call did, or turns to break
//! something on purpose. None of them is needed to run or embed a gateway,
//! so none sits on the types themselves: bring a trait into scope
//! (`use idgate::testing::GatewayParts as _;`) where a test needs it.
//!
//! The embedding API proper (starting a [`Gateway`](crate::server::Gateway)
//! on given listeners, the sandbox's [`SandboxHandle`](crate::sandbox::SandboxHandle),
//! the telemetry builder) stays on its types.

pub use crate::{journey::credentials::CredentialsParts, server::gateway::GatewayParts};
