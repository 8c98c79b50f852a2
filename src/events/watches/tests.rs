use std::{sync::Arc, time::Duration};

use futures_util::StreamExt as _;

use super::*;
use crate::events::testing::{ScriptedSource, Step, collect, settings, statuses};
use crate::proto::v1::WatchJourneyResponse;

fn by_appkey(key: &str) -> WatchTarget {
    WatchTarget::Appkey(Appkey::new(key))
}

fn notice(key: &str, status: NoticeStatus) -> Notice {
    Notice {
        appkey: Appkey::new(key),
        status,
    }
}

fn hub_with(settings: WatchSettings) -> (JourneyWatches, Arc<ScriptedSource>) {
    let source = Arc::new(ScriptedSource::default());
    (JourneyWatches::new(source.clone(), settings), source)
}

fn is_final(item: &Result<WatchJourneyResponse, tonic::Status>, status: JourneyStatus) -> bool {
    matches!(item, Ok(r) if r.status() == status && r.result.is_some())
}

#[tokio::test]
async fn nothing_is_read_before_the_notice_and_the_watcher_then_gets_the_result() {
    let (watches, source) = hub_with(settings());
    let waiting = watches.watch(by_appkey("key-a")).unwrap();
    let other = watches.watch(by_appkey("key-b")).unwrap();
    assert!(watches.notify(notice("key-b", NoticeStatus::Complete)));
    let items = collect(other).await;
    assert_eq!(items.len(), 1);
    assert!(is_final(&items[0], JourneyStatus::Complete));
    // key-a's task has run meanwhile and must still be waiting.
    assert_eq!(source.reads("key-a"), 0);

    watches.notify(notice("key-a", NoticeStatus::Complete));
    let items = collect(waiting).await;
    let last = items.last().unwrap().as_ref().unwrap();
    assert_eq!(
        last.journey_ref,
        JourneyRef::from_appkey(&Appkey::new("key-a")).as_str()
    );
    assert_eq!(
        last.result.as_ref().unwrap().customer_reference,
        "proposal-1"
    );
    assert_eq!(source.total(), 2);
}

#[tokio::test]
async fn a_notice_while_the_result_still_says_processing_ends_with_the_complete_result() {
    let (watches, source) = hub_with(settings());
    source.script(
        "k",
        &[
            Step::Status(JourneyStatus::Processing),
            Step::Status(JourneyStatus::Processing),
            Step::Status(JourneyStatus::Complete),
        ],
    );
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    // Each distinct status once, then the result.
    assert_eq!(
        statuses(&items),
        [JourneyStatus::Processing, JourneyStatus::Complete]
    );
    assert_eq!(items[0].as_ref().unwrap().raw_status, "Em processamento");
    assert!(items[0].as_ref().unwrap().result.is_none());
    assert!(is_final(&items[1], JourneyStatus::Complete));
    assert_eq!(source.reads("k"), 3);
}

#[tokio::test]
async fn a_result_that_never_settles_ends_the_watch_with_result_not_settled() {
    let (watches, source) = hub_with(WatchSettings {
        settle_limit: Duration::from_millis(30),
        ..settings()
    });
    source.script("k", &[Step::Status(JourneyStatus::NotProcessed)]);
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    assert_eq!(statuses(&items), [JourneyStatus::NotProcessed]);
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(err.message().contains("processing"), "{}", err.message());
    assert!(source.reads("k") >= 2);
}

#[tokio::test]
async fn without_a_webhook_watchers_complete_through_the_fallback() {
    let (watches, source) = hub_with(WatchSettings {
        webhook_grace: Duration::from_millis(20),
        ..settings()
    });
    source.script(
        "k",
        &[
            Step::Status(JourneyStatus::Processing),
            Step::Unavailable,
            Step::Status(JourneyStatus::Complete),
        ],
    );
    let items = collect(watches.watch(by_appkey("k")).unwrap()).await;
    assert_eq!(
        statuses(&items),
        [JourneyStatus::Processing, JourneyStatus::Complete]
    );
    assert_eq!(watches.stats().notices_received, 0);
    assert_eq!(source.reads("k"), 3);
}

#[tokio::test]
async fn a_notice_during_fallback_polling_cuts_the_backoff_short() {
    let (watches, source) = hub_with(WatchSettings {
        webhook_grace: Duration::ZERO,
        poll_initial: Duration::from_secs(3600),
        poll_max: Duration::from_secs(3600),
        ..settings()
    });
    source.script(
        "k",
        &[
            Step::Status(JourneyStatus::Processing),
            Step::Status(JourneyStatus::Complete),
        ],
    );
    let mut stream = watches.watch(by_appkey("k")).unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.status(), JourneyStatus::Processing);
    // The task now sleeps for an hour unless the notice wakes it.
    watches.notify(notice("k", NoticeStatus::Complete));
    let rest = collect(stream).await;
    assert!(is_final(&rest[0], JourneyStatus::Complete));
}

#[tokio::test]
async fn a_notice_that_arrived_before_the_first_watcher_is_read_at_once() {
    let (watches, source) = hub_with(settings());
    assert!(!watches.notify(notice("k", NoticeStatus::Complete)));
    assert_eq!(watches.stats().notices_remembered, 1);
    assert_eq!(source.total(), 0, "an unwatched journey is not read");
    let items = collect(watches.watch(by_appkey("k")).unwrap()).await;
    assert!(is_final(&items[0], JourneyStatus::Complete));
    assert_eq!(source.reads("k"), 1);
}

#[tokio::test]
async fn an_error_notice_ends_with_the_error_result() {
    let (watches, source) = hub_with(settings());
    source.script("k", &[Step::Status(JourneyStatus::Error)]);
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Error));
    let items = collect(stream).await;
    assert_eq!(items.len(), 1);
    assert!(is_final(&items[0], JourneyStatus::Error));
}

#[tokio::test]
async fn many_watchers_of_one_journey_share_one_read() {
    let (watches, source) = hub_with(settings());
    let streams: Vec<_> = (0..50)
        .map(|_| watches.watch(by_appkey("k")).unwrap())
        .collect();
    assert_eq!(watches.stats().tasks, 1);
    watches.notify(notice("k", NoticeStatus::Complete));
    for stream in streams {
        let items = collect(stream).await;
        assert!(is_final(&items[0], JourneyStatus::Complete));
    }
    assert_eq!(source.reads("k"), 1);
}

#[tokio::test]
async fn a_slow_watcher_does_not_hold_up_the_others_and_skips_to_the_latest_state() {
    let (watches, source) = hub_with(settings());
    source.script(
        "k",
        &[
            Step::Status(JourneyStatus::NotProcessed),
            Step::Status(JourneyStatus::Processing),
            Step::Status(JourneyStatus::Complete),
        ],
    );
    let slow = watches.watch(by_appkey("k")).unwrap();
    let fast = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    // The slow stream is never polled while the fast one runs to the end.
    let fast_items = collect(fast).await;
    assert_eq!(
        statuses(&fast_items),
        [
            JourneyStatus::NotProcessed,
            JourneyStatus::Processing,
            JourneyStatus::Complete
        ]
    );
    let slow_items = collect(slow).await;
    assert_eq!(slow_items.len(), 1);
    assert!(is_final(&slow_items[0], JourneyStatus::Complete));
}

#[tokio::test]
async fn dropping_the_last_stream_stops_the_task_and_frees_the_journey() {
    let (watches, source) = hub_with(settings());
    let a = watches.watch(by_appkey("k")).unwrap();
    let b = watches.watch(by_appkey("k")).unwrap();
    let s = watches.stats();
    assert_eq!((s.journeys, s.watchers, s.tasks), (1, 2, 1));
    drop(a);
    let s = watches.stats();
    assert_eq!((s.journeys, s.watchers), (1, 1));
    drop(b);
    let s = watches.stats();
    assert_eq!((s.journeys, s.watchers), (0, 0));
    tokio::time::timeout(Duration::from_secs(5), watches.tasks_finished())
        .await
        .unwrap();
    assert_eq!(watches.stats().tasks, 0);
    // Nobody watches any more: a notice wakes nothing and reads nothing.
    assert!(!watches.notify(notice("k", NoticeStatus::Complete)));
    assert_eq!(source.total(), 0);
}

#[tokio::test]
async fn finished_streams_release_their_journey() {
    let (watches, _source) = hub_with(settings());
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    collect(stream).await;
    tokio::time::timeout(Duration::from_secs(5), watches.tasks_finished())
        .await
        .unwrap();
    let s = watches.stats();
    assert_eq!((s.journeys, s.watchers, s.tasks), (0, 0, 0));
}

#[tokio::test]
async fn a_reference_issued_by_create_journey_is_watchable_and_others_are_unknown() {
    let (watches, _source) = hub_with(settings());
    let journey = watches.register(&Appkey::new("k")).await.unwrap();
    let stream = watches.watch(WatchTarget::Journey(journey)).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    assert!(is_final(&items[0], JourneyStatus::Complete));

    let unknown = JourneyRef::from_appkey(&Appkey::new("never-registered"));
    let err = watches.watch(WatchTarget::Journey(unknown)).err().unwrap();
    assert!(matches!(err, Error::JourneyUnknown));
    assert_eq!(watches.stats().journeys, 0);
}

#[tokio::test]
async fn watchers_beyond_the_limits_are_refused() {
    let (watches, _source) = hub_with(WatchSettings {
        max_watchers_per_journey: 2,
        max_journeys: 1,
        ..settings()
    });
    let _a = watches.watch(by_appkey("k")).unwrap();
    let _b = watches.watch(by_appkey("k")).unwrap();
    let err = watches.watch(by_appkey("k")).err().unwrap();
    assert_eq!(err.reason(), "WATCH_LIMIT_REACHED");
    let err = watches.watch(by_appkey("other")).err().unwrap();
    assert_eq!(err.reason(), "WATCH_LIMIT_REACHED");
    assert_eq!(watches.stats().watchers, 2);
}

#[tokio::test]
async fn the_callers_grpc_timeout_ends_the_stream_with_deadline_exceeded() {
    let (watches, source) = hub_with(settings());
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert("grpc-timeout", "20m".parse().unwrap());
    let ctx = CallContext::from_metadata(&metadata);
    let items = collect(watches.watch_until(by_appkey("k"), &ctx).unwrap()).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].as_ref().unwrap_err().code(),
        tonic::Code::DeadlineExceeded
    );
    assert_eq!(watches.stats().journeys, 0);
    assert_eq!(source.total(), 0);
}

#[tokio::test]
async fn a_permanent_read_failure_reaches_every_watcher() {
    let key = "canary-appkey-0001";
    let (watches, source) = hub_with(settings());
    source.script(key, &[Step::Unauthorized]);
    let a = watches.watch(by_appkey(key)).unwrap();
    let b = watches.watch(by_appkey(key)).unwrap();
    watches.notify(notice(key, NoticeStatus::Complete));
    for stream in [a, b] {
        let items = collect(stream).await;
        assert_eq!(items.len(), 1);
        let err = items[0].as_ref().unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
        assert!(!format!("{err:?}").contains(key));
    }
    assert_eq!(source.reads(key), 1);
}

#[tokio::test]
async fn a_panicking_result_source_ends_the_watch_with_an_internal_error() {
    let (watches, source) = hub_with(settings());
    source.script("k", &[Step::Panic]);
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap_err().code(), tonic::Code::Internal);
    tokio::time::timeout(Duration::from_secs(5), watches.tasks_finished())
        .await
        .unwrap();
}

#[tokio::test]
async fn watching_outside_a_runtime_is_an_error_not_a_panic() {
    let (watches, _source) = hub_with(settings());
    let result = std::thread::spawn(move || watches.watch(by_appkey("k")).err())
        .join()
        .unwrap();
    assert!(matches!(result, Some(Error::Internal(_))));
}

#[test]
fn backoff_doubles_up_to_the_maximum_with_bounded_jitter() {
    let mut b = read_backoff(Duration::from_millis(100), Duration::from_millis(400));
    let delays: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
    for (d, step) in delays.iter().zip([100u64, 200, 400, 400, 400]) {
        let step = Duration::from_millis(step);
        assert!(*d <= step && *d >= step.mul_f64(0.75), "{d:?} vs {step:?}");
    }
    b.reset();
    assert!(b.next_delay() <= Duration::from_millis(100));
    let mut zero = read_backoff(Duration::ZERO, Duration::ZERO);
    assert!(zero.next_delay() >= Duration::from_micros(750));
}

#[tokio::test]
async fn closing_the_hub_ends_every_watch_and_refuses_new_ones() {
    let (watches, source) = hub_with(settings());
    let a = watches.watch(by_appkey("k")).unwrap();
    let b = watches.watch(by_appkey("other")).unwrap();
    watches.close();
    for stream in [a, b] {
        let items = collect(stream).await;
        assert_eq!(items.len(), 1);
        let err = items[0].as_ref().unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unavailable);
    }
    let err = watches.watch(by_appkey("k")).err().unwrap();
    assert_eq!(err.reason(), "SHUTTING_DOWN");
    tokio::time::timeout(Duration::from_secs(5), watches.tasks_finished())
        .await
        .unwrap();
    let s = watches.stats();
    assert_eq!((s.journeys, s.watchers, s.tasks), (0, 0, 0));
    assert_eq!(source.total(), 0);
}

#[tokio::test]
async fn a_reader_gives_up_after_max_not_found_consecutive_404s() {
    let (watches, source) = hub_with(WatchSettings {
        max_not_found: 3,
        ..settings()
    });
    source.script("k", &[Step::NotFound]);
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(source.reads("k"), 3);
}

#[tokio::test]
async fn a_read_between_404s_starts_the_count_again() {
    let (watches, source) = hub_with(WatchSettings {
        max_not_found: 3,
        ..settings()
    });
    source.script(
        "k",
        &[
            Step::NotFound,
            Step::NotFound,
            Step::Unavailable,
            Step::NotFound,
            Step::NotFound,
            Step::Status(JourneyStatus::Complete),
        ],
    );
    let stream = watches.watch(by_appkey("k")).unwrap();
    watches.notify(notice("k", NoticeStatus::Complete));
    let items = collect(stream).await;
    assert!(is_final(items.last().unwrap(), JourneyStatus::Complete));
    assert_eq!(source.reads("k"), 6);
}

#[tokio::test]
async fn a_stream_past_its_lifetime_ends_unavailable_and_frees_its_watcher() {
    let (watches, _source) = hub_with(WatchSettings {
        max_stream_lifetime: Duration::from_millis(50),
        ..settings()
    });
    let items = collect(watches.watch(by_appkey("k")).unwrap()).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(err.message().contains("lifetime"), "{}", err.message());
    assert_eq!(watches.stats().watchers, 0);
}
