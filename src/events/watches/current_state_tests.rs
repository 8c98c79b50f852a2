//! A watch starts from the current state: it reads at once when no
//! notice can come or the journey's liveness proof is in, and a journey
//! issued here is watched through its 404s until its result.

use std::sync::Arc;

use super::*;
use crate::events::testing::{ScriptedSource, Step, collect, settings};

fn hub_with(settings: WatchSettings) -> (JourneyWatches, Arc<ScriptedSource>) {
    let source = Arc::new(ScriptedSource::default());
    (JourneyWatches::new(source.clone(), settings), source)
}

fn ends_complete(items: &[Result<crate::proto::v1::WatchJourneyResponse, tonic::Status>]) -> bool {
    matches!(items.last(), Some(Ok(r)) if r.status() == JourneyStatus::Complete && r.result.is_some())
}

#[tokio::test]
async fn without_a_webhook_receiver_a_watch_reads_at_once() {
    // An hour of grace (settings()) that must not apply: no notice can come.
    let (watches, source) = hub_with(WatchSettings {
        notices_expected: false,
        ..settings()
    });
    let items = collect(
        watches
            .watch(WatchTarget::Appkey(Appkey::new("k")))
            .unwrap(),
    )
    .await;
    assert!(ends_complete(&items), "{items:?}");
    assert_eq!(source.reads("k"), 1);
    assert_eq!(watches.stats().notice_timeouts, 0);
}

#[tokio::test]
async fn with_a_webhook_receiver_a_watch_waits_for_the_notice_until_the_proof_is_in() {
    let (watches, source) = hub_with(settings());
    let appkey = Appkey::new("k");
    let journey = watches.register(&appkey).await.unwrap();
    let waiting = watches
        .watch(WatchTarget::Journey(journey.clone()))
        .unwrap();
    // The task has run: with a receiver and no proof, it waits.
    tokio::task::yield_now().await;
    assert_eq!(source.reads("k"), 0);
    drop(waiting);
    watches.tasks_finished().await;

    watches.progress().mark_submitted(&journey).await;
    let items = collect(watches.watch(WatchTarget::Journey(journey)).unwrap()).await;
    assert!(ends_complete(&items), "{items:?}");
    assert_eq!(source.reads("k"), 1);
}

#[tokio::test]
async fn a_journey_issued_here_is_read_through_its_404s_until_the_result() {
    let (watches, source) = hub_with(WatchSettings {
        notices_expected: false,
        max_not_found: 3,
        ..settings()
    });
    let mut steps = vec![Step::NotFound; 10];
    steps.push(Step::Status(JourneyStatus::Complete));
    source.script("k", &steps);
    let journey = watches.register(&Appkey::new("k")).await.unwrap();
    let items = collect(watches.watch(WatchTarget::Journey(journey)).unwrap()).await;
    assert!(ends_complete(&items), "{items:?}");
    assert_eq!(source.reads("k"), 11);
}

#[tokio::test]
async fn an_appkey_not_issued_here_is_given_up_after_max_not_found() {
    let (watches, source) = hub_with(WatchSettings {
        notices_expected: false,
        max_not_found: 3,
        ..settings()
    });
    source.script("made-up", &[Step::NotFound]);
    let items = collect(
        watches
            .watch(WatchTarget::Appkey(Appkey::new("made-up")))
            .unwrap(),
    )
    .await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(source.reads("made-up"), 3);
}
