//! The one shared copy of every test double, launcher and helper.
//!
//! - [`gateway`]: `TestGateway` (a gateway on its embedded sandbox) and
//!   `ExternalGateway` (a gateway on a sandbox of its own), typed clients,
//!   request builders and status assertions;
//! - [`fleet`] and [`redis`]: gateway replicas sharing a sandbox and a
//!   `redis-server` of their own; [`redis_sentinel`] and
//!   [`redis_cluster`]: a Sentinel set and a Redis Cluster instead, of
//!   [`redis_node`]s;
//! - [`sandbox`]: a sandbox on a manual clock and a client for its REST
//!   operations;
//! - [`upstream`]: purpose-built fake upstream servers and fixtures for the
//!   REST client;
//! - [`net`]: loopback listeners, a refusing port, the HTTP client;
//! - [`fixed_port`]: ports below the ephemeral range, for processes that
//!   bind (and rebind) their own;
//! - [`proxy`]: a TCP proxy the test cuts, one replica's path to Redis;
//! - [`balancer`]: a round-robin TCP balancer that counts connections;
//! - [`webhook`]: completion notices, signed or with Basic credentials;
//! - [`telemetry`] and [`otlp_collector`]: per-test telemetry to the
//!   in-process OTLP collector (traces and metrics, plaintext or TLS);
//! - [`jwt`]: callers' signing keys, their JWKS (a file or a local URL
//!   the test rotates), valid and forged tokens;
//! - [`tls`]: a certificate authority per test and a TLS listener;
//! - [`metrics`]: one series of the `/metrics` exposition, exactly;
//! - [`rollout`]: journeys of distinct persons and the rollout RPCs;
//! - [`wait`]: bounded waits and gates;
//! - [`process`]: a test alone in a child process, for whole-process
//!   measurements, and `idgate serve` as a child;
//! - [`child_env`]: the cleared environment every child process starts
//!   from;
//! - [`temp`]: temporary files and directories removed with their test.

pub mod balancer;
pub mod child_env;
pub mod fixed_port;
pub mod fleet;
pub mod gateway;
pub mod jwt;
pub mod metrics;
pub mod net;
pub mod otlp_collector;
pub mod process;
pub mod proxy;
pub mod raw_grpc;
pub mod redis;
pub mod redis_cluster;
pub mod redis_node;
pub mod redis_sentinel;
pub mod rollout;
pub mod sandbox;
pub mod telemetry;
pub mod temp;
pub mod tls;
pub mod upstream;
pub mod wait;
pub mod webhook;
