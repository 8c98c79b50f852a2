//! What a load run saw, gathered from its callers' tasks. Shared by
//! examples/fleet_throughput and examples/deployed_capacity (included by
//! path, beside examples/support/journey.rs as `journey`: examples cannot
//! share a library).

use std::{collections::BTreeMap, time::Duration};

use tokio::task::JoinSet;

use super::journey::Latencies;

/// What one run saw.
#[derive(Default)]
pub struct Load {
    pub completed: u64,
    /// Failed journeys by a key of the example's choosing.
    pub failed: BTreeMap<String, u64>,
    /// Whole journeys', sorted.
    pub latencies: Vec<Duration>,
    /// Each RPC's, by step name, sorted.
    pub steps: BTreeMap<&'static str, Vec<Duration>>,
}

impl Load {
    /// Every caller's load summed (a caller that panicked counts as one
    /// failure), the latencies sorted, and each step's from `steps`.
    pub async fn gather(mut tasks: JoinSet<Load>, steps: &Latencies) -> Load {
        let mut total = Load::default();
        while let Some(done) = tasks.join_next().await {
            let Ok(load) = done else {
                *total.failed.entry("caller panicked".into()).or_default() += 1;
                continue;
            };
            total.completed += load.completed;
            total.latencies.extend(load.latencies);
            for (k, n) in load.failed {
                *total.failed.entry(k).or_default() += n;
            }
        }
        total.latencies.sort();
        total.steps = steps.lock().map(|m| m.clone()).unwrap_or_default();
        for v in total.steps.values_mut() {
            v.sort();
        }
        total
    }
}
