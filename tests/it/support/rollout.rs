//! Guarded rollouts in tests: journeys of distinct persons (so the
//! sandbox's per-person share faults pick a fixed share of them), the
//! rollout RPCs, and a driver that keeps traffic flowing until the
//! rollout reaches the state a test waits for.

use std::time::Duration;

use futures_util::{StreamExt as _, stream};
use idgate::proto::v1::{self, RolloutState};

use super::gateway::{TestGateway, person};
use idgate::sandbox::samples;

/// Journeys run at once.
const CONCURRENCY: usize = 16;

/// Journeys run between two looks at the rollout.
const BATCH: usize = 32;

/// Longest a test drives traffic waiting for a rollout's state: bounds a
/// hang only (a step is judged as soon as it has its sessions).
pub const ROLLOUT_WAIT: Duration = Duration::from_secs(120);

/// The check digit following `digits` (9 or 10 of them).
fn check_digit(digits: &[u32]) -> u32 {
    let start = digits.len() as u32 + 1;
    let sum: u32 = digits
        .iter()
        .enumerate()
        .map(|(i, d)| d * (start - i as u32))
        .sum();
    match (sum * 10) % 11 {
        10 => 0,
        r => r,
    }
}

/// A valid CPF of its own for person `i`.
pub fn numbered_cpf(i: usize) -> String {
    let base = 300_000_000 + i;
    let mut digits: Vec<u32> = format!("{base:09}")
        .bytes()
        .map(|b| u32::from(b - b'0'))
        .collect();
    digits.push(check_digit(&digits));
    digits.push(check_digit(&digits));
    digits.iter().map(|d| char::from(b'0' + *d as u8)).collect()
}

/// Person `i`: the happy person's name and birth date, a CPF and a
/// customer reference of its own.
pub fn numbered_person(i: usize) -> v1::CreateJourneyRequest {
    let mut request = person(samples::HAPPY_PERSON);
    request.cpf = numbered_cpf(i);
    request.customer_reference = format!("RO{i:06}");
    request
}

/// The start request of a test rollout to `alternative`: steps judged as
/// soon as they have `min_sessions` (no least time).
pub fn start_request(steps: &[u32], min_sessions: u64) -> v1::StartRolloutRequest {
    v1::StartRolloutRequest {
        to: "alternative".into(),
        from: "primary".into(),
        steps: steps.to_vec(),
        step_duration: Some(prost_types::Duration {
            seconds: 0,
            nanos: 0,
        }),
        min_sessions: Some(min_sessions),
        max_error_rate: Some(0.02),
        max_pass_rate_drop: Some(0.03),
        force: false,
    }
}

impl TestGateway {
    /// `StartRollout`.
    pub async fn start_rollout(
        &self,
        request: v1::StartRolloutRequest,
    ) -> Result<v1::Rollout, tonic::Status> {
        self.admin()
            .await
            .start_rollout(request)
            .await
            .map(|r| r.into_inner().rollout.expect("the rollout"))
    }

    /// `GetRollout`: the fleet's last rollout.
    pub async fn rollout(&self) -> Option<v1::Rollout> {
        self.admin()
            .await
            .get_rollout(v1::GetRolloutRequest {})
            .await
            .expect("get rollout")
            .into_inner()
            .rollout
    }

    /// Runs journeys `from..from + n` (distinct persons) through a 3D
    /// session and its verification; returns the channel of each session.
    pub async fn rollout_journeys(&self, from: usize, n: usize) -> Vec<String> {
        stream::iter(from..from + n)
            .map(|i| async move {
                let appkey = self.create_journey_for(numbered_person(i)).await.appkey;
                let s = self.start_3d(&appkey).await.expect("session");
                self.verify_3d(&appkey, &s.session_token, &s.channel)
                    .await
                    .expect("verification");
                s.channel
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }
}

/// Sends journeys through `gateways` in turn, a batch at a time, until the
/// rollout read from the first one satisfies `done`; returns it and the
/// number of journeys run (person indices from `next`).
pub async fn drive_until(
    gateways: &[&TestGateway],
    next: &mut usize,
    what: &str,
    done: impl Fn(&v1::Rollout) -> bool,
) -> v1::Rollout {
    let give_up = tokio::time::Instant::now() + ROLLOUT_WAIT;
    let mut turn = 0;
    loop {
        let rollout = gateways[0].rollout().await.expect("a rollout");
        if done(&rollout) {
            return rollout;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "not reached within {ROLLOUT_WAIT:?}: {what}; the rollout: {rollout:?}"
        );
        gateways[turn % gateways.len()]
            .rollout_journeys(*next, BATCH)
            .await;
        *next += BATCH;
        turn += 1;
    }
}

/// True once the rollout left `Running`.
pub fn ended(r: &v1::Rollout) -> bool {
    r.state() != RolloutState::Running
}
