//! Every integration test, in one binary (one link, one process): real
//! servers on `127.0.0.1:0`, time moved with the sandbox's `ManualClock`.
//!
//! - `gateway`: end to end through the gateway on its embedded sandbox;
//! - `sandbox`: the reference sandbox over real HTTP;
//! - `upstream`: the REST client against purpose-built servers;
//! - `channels`, `events`, `telemetry`: the admin service, the webhook
//!   receiver and `WatchJourney`, and telemetry, each over real listeners;
//! - `observability`: traces, logs and metrics of the real gateway;
//! - `reflection`, `trace_propagation`, `access_log`, `otlp_export`,
//!   `tls_listeners`: the tools operators and callers already hold (gRPC
//!   reflection, W3C trace context, log lines joined to traces, OTLP
//!   collectors behind a private CA, TLS on every listener);
//! - `auth`: callers on the public listener (JWTs, JWKS files and URLs,
//!   SPIFFE IDs) and the `[[callers]]` policy;
//! - `fleet`: replicas sharing state on a Redis of their own;
//! - `usage`: usage by configured caller, on `/metrics` and in the
//!   charge-back report, on one replica and on a fleet;
//! - `prometheus`: the rules and dashboard of `deploy/`, with promtool and
//!   a real Prometheus;
//! - `deploy`: deploy/kubernetes/ against the Kubernetes schemas and the
//!   gateway's own configuration, and the image's contract (unprivileged,
//!   nothing writable);
//! - `properties`: property tests of every parser of outside input;
//! - `api_contract`: the buf checks CI runs on `proto/` (a breaking edit
//!   fails them); `clients`: the Python and Node quickstarts of
//!   `examples/clients/`, each a whole journey through a real gateway;
//! - `support`: the one shared copy of every launcher, fake and helper.
//!
//! Tests share this process. Nothing here sets environment variables or a
//! global tracer provider; tests that install a `tracing` subscriber do so
//! for their own thread through [`support::telemetry`], which also keeps
//! `tracing`'s per-callsite cache from switching their spans off (see
//! there). A test that measures the whole process (its RSS) runs alone in
//! a child process of this binary ([`support::process`]).

mod access_log;
mod api_contract;
mod auth;
mod channels;
mod clients;
mod config_check;
mod deploy;
mod docs;
mod events;
mod fleet;
mod gateway;
mod observability;
mod otlp_export;
mod prometheus;
mod properties;
mod reflection;
mod sandbox;
mod store;
mod support;
mod telemetry;
mod tls_listeners;
mod trace_propagation;
mod upstream;
mod usage;

/// `crate::fixed_port` and `crate::child_env`, as the examples that share
/// `support/redis.rs` and the rolling restart's harness by path declare
/// them.
use support::{child_env, fixed_port};
