//! A vendor migration through the gateway: the weighted split of new 3D
//! sessions (`weighted:primary=90,alternative=10`) and the per-channel
//! figures `idgate channels compare` reads, on the embedded sandbox with
//! outcomes and latency chosen per channel. This file holds what the
//! modules share: journeys and 3D sessions started many at once.

use futures_util::{StreamExt as _, stream};
use idgate::{proto::v1, sandbox::samples};

use crate::support::gateway::*;

mod figures;
mod split;

/// Journeys created and started at once.
const CONCURRENCY: usize = 16;

impl TestGateway {
    /// Creates journey `i` for `p` (its own customer reference, so no two
    /// journeys are taken for one).
    async fn journey(&self, i: usize, p: samples::TestPerson) -> v1::CreateJourneyResponse {
        let mut request = person(p);
        request.customer_reference = format!("MIG{i:05}");
        self.create_journey_for(request).await
    }

    /// `StartSession3D` with `user_agent` (which picks the sandbox outcome).
    async fn start_3d_as(
        &self,
        appkey: &str,
        user_agent: &str,
    ) -> Result<v1::StartSession3DResponse, tonic::Status> {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: user_agent.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Starts a session for `n` new journeys; their appkeys and channels.
    async fn new_sessions(&self, n: usize) -> Vec<(String, String)> {
        stream::iter(0..n)
            .map(|i| async move {
                let appkey = self.journey(i, samples::HAPPY_PERSON).await.appkey;
                let s = self.start_3d(&appkey).await.expect("session");
                (appkey, s.channel)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }
}

fn count(sessions: &[(String, String)], channel: &str) -> usize {
    sessions.iter().filter(|(_, c)| c == channel).count()
}
