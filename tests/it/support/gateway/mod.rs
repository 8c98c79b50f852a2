//! Spawns a gateway on the embedded sandbox, all on `127.0.0.1:0`, with the
//! sandbox on a manual clock, and hands back typed clients.
//!
//! This module holds [`TestGateway`] itself and re-exports every helper,
//! so tests import them from `support::gateway` whichever submodule holds
//! them:
//!
//! - [`config`]: the configuration test gateways start from;
//! - [`lifecycle`]: starting, reloading and stopping gateways, and a
//!   gateway on a sandbox of its own ([`ExternalGateway`]);
//! - [`clients`]: typed clients and addresses of a running gateway;
//! - [`calls`]: one-line journey, liveness and document calls;
//! - [`admin`]: the admin listener and its channel RPCs;
//! - [`watch`]: `WatchJourney` requests and streams read to their end;
//! - [`counters`]: what the sandbox and `/metrics` counted;
//! - [`requests`]: request messages (persons, images, snapshots, weights);
//! - [`assertions`]: the details of a refused call's status.

mod admin;
mod assertions;
mod calls;
mod clients;
mod config;
mod counters;
mod lifecycle;
mod requests;
mod watch;

use std::sync::Arc;

use idgate::{sandbox::ManualClock, server::Gateway};

pub use self::{
    admin::admin_token,
    assertions::{assert_error, bad_fields, reason, retryable},
    clients::{GatewayChannel, WEBHOOK_PATH, connect, resending},
    config::{ADMIN_TOKEN, run_open, secret_file, test_config, use_upstream},
    lifecycle::{ExternalGateway, start_gateway},
    requests::{document_pair, happy_person, person, rg_images, snapshots_for, weights},
    watch::{assert_only_processing, by_appkey, by_ref, drain, drain_within, statuses},
};

/// A running test gateway and what tests need around it.
pub struct TestGateway {
    /// The gateway.
    pub gateway: Gateway,
    /// The embedded sandbox's clock.
    pub clock: Arc<ManualClock>,
    /// What the typed clients call through.
    channel: GatewayChannel,
}
