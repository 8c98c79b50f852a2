//! idgate: a gRPC gateway for identity-verification journeys.
//!
//! # Layout
//!
//! Imports flow one way, from the modules that compose down to the leaves
//! that know nothing of the crate (`python3 ../shared/tools/layers.py src`
//! prints any cycle):
//!
//! ```text
//! testing -> cli -> server -> config -> sandbox, api -> auth, spend, usage, events -> journey,
//!     channels -> error, cluster -> upstream -> telemetry -> leaves
//! leaves: domain, context, config_source, proto, ttl, sync, net, tls, client
//! ```
//!
//! - Leaves: [`domain`] (validated values, secret newtypes, the REST
//!   [`Operation`](domain::Operation)s), [`context`] (the caller's deadline,
//!   one [`CallContext`](context::CallContext)), [`config_source`] (TOML,
//!   `IDGATE_*` overrides, secrets from env or files), [`proto`] (the
//!   generated `idgate.v1` API), `ttl` (expiring maps), [`sync`]
//!   (poison-tolerant locks), [`net`] (accepted connections: socket options,
//!   peer, requests in flight, a body that holds a call's slots), [`tls`]
//!   (the listeners' certificates, reloadable, and mTLS), [`client`] (the
//!   transport for Rust callers that loses no call when the gateway ages
//!   their connection).
//! - [`telemetry`]: tracing, OpenTelemetry, W3C propagation, metrics; it
//!   takes labels, and knows no upstream or channel type.
//! - [`cluster`]: the state beyond a call, one store trait per concern
//!   (journey records, session bindings, webhook dedupe, spending
//!   records, rollout state, probe verdicts, watch progress, usage), each
//!   in memory or on Redis, composed in [`Shared`](cluster::Shared); and
//!   what only a fleet does ([`Fleet`](cluster::Fleet): channel control
//!   state, vendor figures, notices to the other replicas, read turns),
//!   which one process does not have.
//! - [`upstream`]: the REST client, its wire types and its client spans;
//!   it calls on whatever [`HttpPools`](upstream::HttpPools) it is given.
//! - [`error`]: the crate's error and its mapping to `tonic::Status`
//!   (reason names, the classify table, the status builders).
//! - [`journey`]: the journey's operations over domain types, operator
//!   credentials; [`channels`]: 3D vendor channels, routing (weighted
//!   split included), breakers, per-channel vendor figures, all counted
//!   from one outcome record per call (`channels::outcome`).
//! - [`events`]: the completion webhook receiver and `WatchJourney`.
//! - [`spend`]: the spending guard: idempotent `CreateJourney`
//!   (`request_id`) and `[[budgets]]` per operator profile, fleet-wide.
//! - [`usage`]: the charge-back report by caller and day (`GetUsage`,
//!   `idgate usage`), kept from the counts `telemetry::usage` makes.
//! - [`auth`]: who calls the public listener (mTLS SPIFFE IDs, JWTs
//!   checked against JWKS keys) and the `[[callers]]` table that says what
//!   each may do; a tower layer hands handlers an `Arc<Caller>`.
//! - [`api`]: every tonic service (the channel admin one included) and all
//!   request validation.
//! - [`sandbox`]: the reference implementation of the REST service; it
//!   depends on leaves and telemetry only.
//! - [`config`]: the whole configuration, composed of each module's
//!   section.
//! - [`server`]: listeners and services assembled into a running gateway
//!   in named steps (`start_with`), the embedded sandbox wired in its own
//!   file; `server::runtime` is the serving runtime's one door (Envoy's
//!   worker model: a thread, a listening socket and an upstream pool per
//!   core). Nothing below `server` knows threads exist: `upstream` is
//!   handed its pools ([`upstream::HttpPools`]), admission a call hook.
//! - [`cli`]: every subcommand that talks to a running gateway.
//! - [`testing`]: the one door to what tests and measurements look into
//!   (a running gateway's parts, the credential cache); nothing needs it
//!   to run or embed a gateway.
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod channels;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod config;
pub mod config_source;
pub mod context;
pub mod domain;
pub mod error;
pub mod events;
pub mod journey;
pub mod net;
pub mod proto;
pub mod sandbox;
pub mod server;
pub mod spend;
pub mod sync;
pub mod telemetry;
pub mod testing;
pub mod tls;
mod ttl;
pub mod upstream;
pub mod usage;

pub use error::Error;
