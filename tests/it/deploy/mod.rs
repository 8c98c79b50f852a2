//! What `deploy/` ships for platform teams, proven without a cluster or a
//! container engine:
//!
//! - `manifests`: deploy/kubernetes/ validates against the Kubernetes
//!   schemas (PyPI's `kubernetes-validate`), and holds the properties a
//!   rolling restart relies on (probes, a grace period that covers the
//!   gateway's own drain, non-root, no secret value), with its ConfigMap
//!   loaded by the gateway's own configuration loader and its
//!   PrometheusRule equal to deploy/prometheus/;
//! - `image`: the Containerfile's contract: the binary serves as an
//!   unprivileged user with nothing writable;
//! - `rolling_restart`: replicas behind Envoy restarted one by one under
//!   load lose no journey, watcher or consuming call (one round of
//!   examples/rolling_restart).
//!
//! The manifests are read through scripts/yaml-to-json (PyYAML, which
//! `kubernetes-validate` brings): no YAML parser in the Rust tree. A
//! missing `python3` or package fails the test naming what to install.

mod image;
mod kubernetes;
mod manifests;
mod rolling_restart;
mod yaml;
