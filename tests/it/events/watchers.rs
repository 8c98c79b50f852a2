//! What an accepted notice does to the watchers: a delivery processed
//! once, a result still PROCESSING read until COMPLETE, the fallback
//! without a webhook, a thousand watchers sharing one read loop per
//! journey, and a journey reference watched like an appkey.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use idgate::{
    domain::Appkey,
    events::{WatchSettings, WatchTarget},
    proto::v1::JourneyStatus,
};

use super::{
    CountingSource, assert_complete, basic, body, collect, hmac, now, send, start, watch_settings,
    webhook,
};

#[tokio::test]
async fn the_same_delivery_twice_is_processed_once() {
    let gw = start(
        webhook(basic(), hmac()),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    // Unsigned (Basic): the journey and status identify the delivery.
    let stream = gw.watch("key-1");
    let (_, first) = send(gw.post_basic(body("Completo", "key-1"))).await;
    let (status, second) = send(gw.post_basic(body("Completo", "key-1"))).await;
    assert_eq!((first["status"].as_str(), status), (Some("accepted"), 202));
    assert_eq!(second["status"], "duplicate");
    assert_complete(&collect(stream).await);

    // Signed: the webhook-id identifies it, whatever its timestamp.
    let stream = gw.watch("key-2");
    let ts = now();
    assert_eq!(
        send(gw.post_signed("msg_9", ts, body("Completo", "key-2")))
            .await
            .1["status"],
        "accepted"
    );
    assert_eq!(
        send(gw.post_signed("msg_9", ts + 1, body("Completo", "key-2")))
            .await
            .1["status"],
        "duplicate"
    );
    assert_complete(&collect(stream).await);

    assert_eq!(gw.watches.stats().notices_received, 2);
    assert_eq!(gw.source.reads("key-1"), 1);
    assert_eq!(gw.source.reads("key-2"), 1);
    let stats = gw.receiver.stats();
    assert_eq!((stats.accepted, stats.duplicates), (2, 2));
}

#[tokio::test]
async fn a_notice_that_arrives_while_the_result_still_says_processing_ends_with_the_complete_result()
 {
    let source = CountingSource {
        processing_reads: 3,
        ..CountingSource::default()
    };
    let gw = start(webhook(basic(), None), watch_settings(), source).await;
    let stream = gw.watch("key-1");
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    let items = collect(stream).await;
    let statuses: Vec<_> = items.iter().map(|i| i.as_ref().unwrap().status()).collect();
    assert_eq!(
        statuses,
        [JourneyStatus::Processing, JourneyStatus::Complete]
    );
    assert_complete(&items);
    assert_eq!(gw.source.reads("key-1"), 4);
}

#[tokio::test]
async fn without_a_webhook_watchers_complete_through_the_fallback() {
    let source = CountingSource {
        processing_reads: 1,
        ..CountingSource::default()
    };
    let watch = WatchSettings {
        webhook_grace: Duration::from_millis(20),
        ..watch_settings()
    };
    let gw = start(webhook(basic(), None), watch, source).await;
    let items = collect(gw.watch("key-1")).await;
    assert_complete(&items);
    assert_eq!(gw.receiver.stats().received, 0);
    assert_eq!(gw.source.reads("key-1"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watchers_on_a_hundred_journeys_all_complete_and_the_hub_empties() {
    let source = CountingSource {
        processing_reads: 1,
        ..CountingSource::default()
    };
    let gw = Arc::new(start(webhook(basic(), None), watch_settings(), source).await);
    let mut watchers = tokio::task::JoinSet::new();
    for journey in 0..100 {
        for _ in 0..10 {
            let stream = gw.watch(&format!("key-{journey}"));
            watchers.spawn(collect(stream));
        }
    }
    let stats = gw.watches.stats();
    assert_eq!(
        (stats.journeys, stats.watchers, stats.tasks),
        (100, 1000, 100)
    );

    let mut notices = tokio::task::JoinSet::new();
    for journey in 0..100 {
        let gw = gw.clone();
        notices.spawn(async move {
            send(gw.post_basic(body("Completo", &format!("key-{journey}"))))
                .await
                .0
        });
    }
    while let Some(status) = notices.join_next().await {
        assert_eq!(status.unwrap(), 202);
    }
    let mut completed = 0;
    while let Some(items) = watchers.join_next().await {
        assert_complete(&items.unwrap());
        completed += 1;
    }
    assert_eq!(completed, 1000);
    // One shared read loop per journey: PROCESSING once, then COMPLETE.
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 200);
    tokio::time::timeout(Duration::from_secs(10), gw.watches.tasks_finished())
        .await
        .unwrap();
    let stats = gw.watches.stats();
    assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
}

#[tokio::test]
async fn a_journey_reference_from_create_journey_can_be_watched() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let journey = gw.watches.register(&Appkey::new("key-1")).await.unwrap();
    let stream = gw
        .watches
        .watch(WatchTarget::Journey(journey.clone()))
        .unwrap();
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    let items = collect(stream).await;
    assert_complete(&items);
    assert_eq!(items[0].as_ref().unwrap().journey_ref, journey.as_str());
}
