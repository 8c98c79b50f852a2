//! 3D liveness vendor channels through the gateway: failover, circuit
//! breaker, run-time routing modes, contingency, sticky and single-shot
//! verification, admin authentication, configuration reload and the
//! `idgate channels` commands. Each test runs its own gateway on its own
//! embedded sandbox; waits are bounded polls on observable state. This
//! file holds what the modules share: the sandbox's vendor names and its
//! session faults.

use idgate::{
    domain::Operation,
    sandbox::{FaultAction, FaultRule},
};

mod admin;
mod breaker;
mod failover;
mod partial_faults;
mod reload;
mod routing;
mod verification;

const VENDOR_A: &str = "sandbox-vendor-a";
const VENDOR_B: &str = "sandbox-vendor-b";

fn session_fault(action: FaultAction, channel: &str) -> FaultRule {
    FaultRule::new(action)
        .on(Operation::SessionToken3D)
        .channel(channel)
}
