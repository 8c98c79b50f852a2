//! The one reader of metric expositions in the tests: `/metrics` over
//! HTTP or an in-process registry ([`of`]), read exactly by the library's
//! own test parser (src/telemetry/metrics/exposition.rs, shared by path:
//! the unit tests read metrics the same way).

#[path = "../../../src/telemetry/metrics/exposition.rs"]
#[allow(dead_code)]
mod exposition;

pub use exposition::*;

/// The exposition of an in-process registry (a gateway's
/// `metrics()`), for the readers below.
pub fn of(metrics: &idgate::telemetry::Metrics) -> String {
    metrics.encode().expect("encode the metrics registry")
}
