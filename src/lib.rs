//! idgate: a gRPC gateway for identity-verification journeys.
//!
//! # Layout
//!
//! Imports flow one way, down this diagram, from the modules that compose
//! to the leaves that know nothing of the crate. Each `->` steps down a
//! level; a module imports only from the levels below its own, never from
//! a module beside it (`sandbox, api`: neither knows the other) nor from
//! above. `leaves` stands for the last line's chain.
//!
//! ```text
//! testing -> cli -> server -> config -> sandbox, api -> auth, usage, events, journey -> spend,
//!     channels -> error, cluster -> upstream -> telemetry -> leaves
//! leaves: domain, context, config_source, proto, ttl, net, tls, client, backoff -> sync
//! ```
//!
//! This diagram is the one copy: `docs/development.md` draws it as it is,
//! and `tests/it/docs/layers.rs` reads it here and fails on an import that
//! goes up or sideways, on a module it leaves out, and on a
//! `docs/development.md` that draws anything else.
//!
//! - Leaves: [`domain`] (validated values, secret newtypes, the REST
//!   [`Operation`](domain::Operation)s), [`context`] (the caller's deadline,
//!   one [`CallContext`](context::CallContext)), [`config_source`] (TOML,
//!   `IDGATE_*` overrides, secrets from env or files), [`proto`] (the
//!   generated `idgate.v1` API), `ttl` (expiring maps), [`net`] (accepted
//!   connections: socket options, peer, requests in flight; the one
//!   wrapper of the request path's bodies, and a body that holds a call's
//!   slots), [`tls`] (the listeners' certificates, reloadable, and mTLS),
//!   [`client`] (the transport for Rust callers that loses no call when
//!   the gateway ages their connection), `backoff` (the one wait between
//!   retries: exponential, capped, jittered); below them all [`sync`]
//!   (poison-tolerant locks).
//! - [`telemetry`]: tracing, OpenTelemetry, W3C propagation, metrics; it
//!   takes labels, and knows no upstream or channel type.
//! - [`upstream`]: the REST client, its wire types and its client spans;
//!   it calls on whatever [`HttpPools`](upstream::HttpPools) it is given.
//! - [`cluster`]: the state beyond a call, one store trait per concern
//!   (journey records, session bindings, webhook dedupe, spending
//!   records, rollout state, probe verdicts, watch progress, usage), each
//!   in memory or on Redis, composed in [`Shared`](cluster::Shared); and
//!   what only a fleet does ([`Fleet`](cluster::Fleet): channel control
//!   state, vendor figures, notices to the other replicas, read turns),
//!   which one process does not have.
//! - [`error`]: the crate's error and its mapping to `tonic::Status`
//!   (reason names, the classify table, the status builders).
//! - [`journey`]: the journey's room: creation (once per `request_id`,
//!   budgeted, recorded before its appkey is handed out), access (issued
//!   here? the caller's?), the journey's operations over domain types,
//!   operator credentials; [`channels`]: 3D vendor channels, routing (weighted
//!   split included), breakers, per-channel vendor figures, all counted
//!   from one outcome record per call (`channels::outcome`).
//! - [`events`]: the completion webhook receiver and `WatchJourney`.
//! - [`spend`]: what billed calls cost: idempotent `CreateJourney`
//!   (`request_id`) and `[[budgets]]` per operator profile, fleet-wide.
//! - [`usage`]: the charge-back report by caller and day (`GetUsage`,
//!   `idgate usage`), kept from the counts `telemetry::usage` makes.
//! - [`auth`]: who calls the public listener (mTLS SPIFFE IDs, JWTs
//!   checked against JWKS keys) and the `[[callers]]` table that says what
//!   each may do; a tower layer hands handlers an `Arc<Caller>`.
//! - [`api`]: every tonic service (the channel admin one included), the
//!   door (the RPC table, admission, the journey each call names, its
//!   bill) and all request validation.
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
mod backoff;
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
