//! idgate: a gRPC gateway for identity-verification journeys.
//!
//! # Layout
//!
//! - [`proto`]: the generated `idgate.v1` API (tonic + prost).
//! - [`config`]: typed configuration, TOML file plus `IDGATE_*` overrides.
//! - [`domain`]: validated values parsed at the edge (CPF, names, dates,
//!   images) and the secret-holding newtypes (appkeys, tokens).
//! - [`upstream`]: the REST client of the identity-verification service:
//!   wire types with the spec's field names, status mapping, credentials.
//! - [`channels`]: 3D liveness vendor channels: routing, circuit breakers,
//!   session bindings, run-time control.
//! - [`api`]: the tonic services, thin shims over plain async functions.
//! - [`events`]: the completion webhook receiver and `WatchJourney` streams.
//! - [`telemetry`]: tracing, OpenTelemetry, W3C propagation, metrics.
//! - [`sandbox`]: the reference implementation of the REST service.
//! - [`server`]: assembles listeners and services into a running gateway;
//!   [`net`]: the socket options of its accepted connections.
//! - [`error`]: the crate's error type and its mapping to `tonic::Status`.
#![forbid(unsafe_code)]

pub mod api;
pub mod channels;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod events;
pub mod journey;
pub mod net;
pub mod proto;
pub mod sandbox;
pub mod server;
pub mod telemetry;
mod ttl;
pub mod upstream;

pub use error::Error;
