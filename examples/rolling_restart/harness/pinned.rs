//! A watcher held on a replica across its stop, by construction. The
//! random load makes watchers that span a stop likely, not certain: callers
//! fall into step, and a stop can land between their bursts. So before each
//! stop the harness opens one `WatchJourney` on the replica itself, for a
//! journey whose documents are sent only once that watch has ended: it
//! cannot see the result there, it must end `UNAVAILABLE` /
//! `SHUTTING_DOWN` with a `RetryInfo`, and, opened again through Envoy,
//! get the result from another replica.

use std::sync::{Arc, atomic::Ordering::Relaxed};

use idgate::proto::v1::{
    self, journey_service_client::JourneyServiceClient, watch_journey_request::Journey as Target,
};
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

use super::load::{self, Tally};

/// Creates a journey through Envoy and watches it by appkey on the replica
/// serving gRPC on `grpc_port`, directly. Returns once that replica holds
/// the watch (it answers the call's headers only after registering it),
/// with the task that sees the watch end and finishes the journey.
pub async fn hold_watch(
    envoy: &Channel,
    grpc_port: u16,
    tally: &Arc<Tally>,
) -> anyhow::Result<JoinHandle<()>> {
    tally.journeys_started.fetch_add(1, Relaxed);
    let created = load::create(envoy, tally)
        .await
        .ok_or_else(|| anyhow::anyhow!("no journey could be created to hold a watcher on"))?;
    let replica = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}"))?
        .connect()
        .await?;
    let watch = v1::WatchJourneyRequest {
        journey: Some(Target::Appkey(created.appkey.clone())),
    };
    tally.watchers_opened.fetch_add(1, Relaxed);
    tally.sent.fetch_add(1, Relaxed);
    let mut stream = JourneyServiceClient::new(replica)
        .watch_journey(load::request(watch, load::WATCH_DEADLINE))
        .await?
        .into_inner();
    let (envoy, tally) = (envoy.clone(), tally.clone());
    Ok(tokio::spawn(async move {
        match stream.message().await {
            Err(status) => {
                let reason = status.get_details_error_info().map(|i| i.reason);
                if tally.failure("WatchJourney", &status) {
                    tally.retried.fetch_add(1, Relaxed);
                    if reason.as_deref() == Some("SHUTTING_DOWN") {
                        tally.held_watchers_cut.fetch_add(1, Relaxed);
                    }
                }
            }
            // The message itself is not printed: it may carry the result.
            Ok(message) => load::lock(&tally.not_retryable).push(format!(
                "a watcher held on a stopping replica got {} instead of SHUTTING_DOWN",
                if message.is_some() {
                    "a message"
                } else {
                    "the stream's end"
                }
            )),
        }
        // Counted in the tally: a journey completed, or failed.
        load::complete(&envoy, &tally, &created).await;
        let target = Target::Appkey(created.appkey.clone());
        if load::watch_to_result(&envoy, &tally, target).await {
            tally.watchers_with_result.fetch_add(1, Relaxed);
        }
    }))
}
