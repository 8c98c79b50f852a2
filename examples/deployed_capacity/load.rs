//! Phase 1's callers: `concurrency` tasks, each running whole journeys
//! back to back (examples/support/journey.rs, the bearer token on every
//! call) over the run's connections, until the budget is spent; the
//! journeys in flight then finish.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use tonic::{metadata::AsciiMetadataValue, transport::Channel};
use tonic_types::StatusExt as _;

use crate::journey::{Latencies, journey_as};

/// The longest wait for a journey's completed result.
const RESULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much load a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Journeys begun until this long has passed.
    Seconds(u64),
    /// This many journeys begun, in all.
    Journeys(u64),
}

/// What one run saw; its failures are keyed by gRPC code and
/// `ErrorInfo` reason ([`failure_key`]; never the message: it may quote
/// what the caller sent).
pub use super::loads::Load;

impl Load {
    pub fn failures(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// A failed call as a key of [`Load::failed`]: `Code REASON`.
pub fn failure_key(status: &tonic::Status) -> String {
    match status.get_details_error_info() {
        Some(info) => format!("{:?} {}", status.code(), info.reason),
        None => format!("{:?}", status.code()),
    }
}

/// Whether a caller may begin another journey.
#[derive(Clone)]
struct Claims {
    budget: Budget,
    until: Instant,
    begun: Arc<AtomicU64>,
}

impl Claims {
    fn new(budget: Budget) -> Self {
        let secs = match budget {
            Budget::Seconds(s) => s,
            Budget::Journeys(_) => 0,
        };
        Claims {
            budget,
            until: Instant::now() + Duration::from_secs(secs),
            begun: Arc::default(),
        }
    }

    fn claim(&self) -> bool {
        match self.budget {
            Budget::Seconds(_) => Instant::now() < self.until,
            Budget::Journeys(n) => self.begun.fetch_add(1, Ordering::Relaxed) < n,
        }
    }
}

/// Runs `concurrency` callers, caller `i` on `channels[i % len]`, until
/// `budget` is spent.
pub async fn drive(
    channels: &[Channel],
    bearer: &AsciiMetadataValue,
    images: &[Bytes],
    concurrency: usize,
    budget: Budget,
) -> Load {
    let claims = Claims::new(budget);
    let steps: Latencies = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..concurrency.max(1) {
        let channel = channels[i % channels.len()].clone();
        let (images, steps, claims, bearer) = (
            images.to_vec(),
            steps.clone(),
            claims.clone(),
            bearer.clone(),
        );
        tasks.spawn(async move {
            let mut load = Load::default();
            while claims.claim() {
                let t = Instant::now();
                let run = journey_as(
                    Some(bearer.clone()),
                    channel.clone(),
                    images.clone(),
                    steps.clone(),
                    RESULT_TIMEOUT,
                );
                match run.await {
                    Ok(()) => {
                        load.completed += 1;
                        load.latencies.push(t.elapsed());
                    }
                    Err(status) => *load.failed.entry(failure_key(&status)).or_default() += 1,
                }
            }
            load
        });
    }
    Load::gather(tasks, &steps).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journey_budget_hands_out_exactly_that_many() {
        let claims = Claims::new(Budget::Journeys(3));
        let other = claims.clone();
        assert!(claims.claim() && other.claim() && claims.claim());
        assert!(!other.claim() && !claims.claim());
        assert!(!Claims::new(Budget::Journeys(0)).claim());
        // A spent time budget hands out none.
        assert!(!Claims::new(Budget::Seconds(0)).claim());
    }

    #[test]
    fn a_failure_is_keyed_by_its_code_and_reason_never_its_message() {
        let plain = tonic::Status::unavailable("the vendor said: 52110000139");
        assert_eq!(failure_key(&plain), "Unavailable");
        let detailed = tonic::Status::with_error_details(
            tonic::Code::ResourceExhausted,
            "over the limit for 52110000139",
            tonic_types::ErrorDetails::with_error_info(
                "OVERLOADED",
                "idgate.v1",
                std::collections::HashMap::new(),
            ),
        );
        assert_eq!(failure_key(&detailed), "ResourceExhausted OVERLOADED");
    }
}
