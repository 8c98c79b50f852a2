//! The cluster (Redis) series: operations, their latency, event lag.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ClusterOpLabels {
    pub(super) command: &'static str,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CommandLabels {
    pub(super) command: &'static str,
}

/// Buckets for calls to the fleet's shared state: loopback Redis answers
/// in tens of microseconds; the default command timeout is 250 ms.
const CLUSTER_BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

fn cluster_histogram() -> Histogram {
    Histogram::new(CLUSTER_BUCKETS)
}

/// Buckets for the fleet's event lag: tens of milliseconds while every
/// replica reads the stream, up to the length of an outage caught up on.
const EVENT_LAG_BUCKETS: [f64; 12] = [
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0, 300.0,
];

/// The series of the fleet's shared state (`[cluster]`).
pub(super) struct ClusterSeries {
    pub(super) up: Gauge,
    pub(super) operations: Family<ClusterOpLabels, Counter>,
    pub(super) duration: HistogramFamily<CommandLabels>,
    pub(super) lag: Histogram,
}

impl ClusterSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            up: Gauge::default(),
            operations: Family::default(),
            duration: HistogramFamily::<CommandLabels>::new_with_constructor(cluster_histogram),
            lag: Histogram::new(EVENT_LAG_BUCKETS),
        };
        // A single process's shared state is its memory: always up.
        series.up.set(1);
        registry.register(
            "idgate_cluster_up",
            "1 while the fleet's shared state (Redis) answers, 0 while it does not; always 1 without [cluster]",
            series.up.clone(),
        );
        registry.register(
            "idgate_cluster_operations",
            "Calls to the fleet's shared state, by Redis command and outcome (ok, timeout, unavailable, error)",
            series.operations.clone(),
        );
        registry.register_with_unit(
            "idgate_cluster_operation_duration",
            "Latency of calls to the fleet's shared state, by Redis command",
            Unit::Seconds,
            series.duration.clone(),
        );
        registry.register_with_unit(
            "idgate_cluster_event_lag",
            "Time from a replica appending a fleet event (notice, control change) to the stream to this replica reading it; an outage caught up on shows as its length",
            Unit::Seconds,
            series.lag.clone(),
        );
        series
    }
}
