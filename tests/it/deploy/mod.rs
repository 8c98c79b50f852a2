//! What `deploy/` ships for platform teams, proven without a cluster or a
//! container engine:
//!
//! - `manifests`: each overlay of deploy/kubernetes/, rendered by
//!   `kubectl kustomize`, validates strictly against the Kubernetes
//!   schemas (PyPI's `kubernetes-validate`), and holds the properties a
//!   rolling restart relies on (probes, a grace period that covers the
//!   gateway's own drain, non-root, no secret value), with its generated
//!   ConfigMap loaded by the gateway's own configuration loader;
//! - `environments`: who owns the scale, the spread, the connection age,
//!   the memory the request budget needs, and what sets dev and
//!   production apart;
//! - `egress`: the NetworkPolicy reaches what each configuration names,
//!   one kustomize component per dependency;
//! - `monitoring`: the PrometheusRule equal to deploy/prometheus/, the
//!   ServiceMonitor, and the labels kube-prometheus-stack selects;
//! - `image`: the Containerfile's contract: the binary serves as an
//!   unprivileged user with nothing writable;
//! - `rolling_restart`: replicas behind Envoy restarted one by one under
//!   load lose no journey, watcher or consuming call (one round of
//!   examples/rolling_restart).
//!
//! The rendered manifests are read through scripts/yaml-to-json (PyYAML,
//! which `kubernetes-validate` brings): no YAML parser in the Rust tree. A
//! missing `kubectl`, `python3` or package fails the test naming what to
//! install.

mod egress;
mod environments;
mod image;
mod kubernetes;
mod manifests;
mod monitoring;
mod rolling_restart;
mod yaml;
