//! What every watcher receives: the result once a notice pushes it (one
//! read shared by all), each status change once on the way, the error
//! result of a failed journey, the fallback reads when no notice comes,
//! and `RESULT_NOT_SETTLED` when the result never settles.

use idgate::testing::GatewayParts as _;
use std::time::Duration;

use idgate::{
    proto::v1::{self, JourneyStatus},
    sandbox::samples,
};
use reqwest::StatusCode;

use super::{assert_ends_complete, basic, happy_3d_plan};
use crate::support::{
    gateway::*,
    net::http_client,
    wait::{EVENT_WAIT, eventually},
    webhook::{PASSWORD as BASIC_PASSWORD, SECRET, USER as BASIC_USER, notice as notice_body},
};

#[tokio::test]
async fn every_watcher_receives_the_result_once_pushed_by_the_webhook() {
    let gw = TestGateway::start_with(|c| {
        // The fallback cannot explain a result before an hour.
        c.watch.webhook_grace_secs = 3600;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(gw.watch(by_appkey(&journey.appkey)).await);
        streams.push(gw.watch(by_ref(&journey.journey_ref)).await);
    }
    let watches = gw.gateway.watches();
    assert_eq!((watches.stats().journeys, watches.stats().watchers), (1, 6));
    // The current state first: the proof went through this gateway, so
    // one read (still processing), shared by the six.
    eventually("the current state is read", EVENT_WAIT, async || {
        watches.stats().result_reads == 1
    })
    .await;
    // Halfway through processing: nothing more is read before the notice.
    gw.clock.advance(Duration::from_millis(1500));
    assert_eq!(gw.result_reads(), 1);
    assert_eq!(watches.stats().result_reads, 1);
    assert_eq!(gw.sandbox().webhook_stats().queued, 0);

    gw.finish_processing();
    let results = futures_util::future::join_all(streams.into_iter().map(drain)).await;
    for stream in &results {
        assert_ends_complete(stream, &journey.journey_ref);
        // The current state, then the result read after the notice.
        assert_eq!(
            statuses(&stream.0),
            [JourneyStatus::Processing, JourneyStatus::Complete]
        );
    }
    let webhook = gw.sandbox().webhook_stats();
    assert_eq!((webhook.queued, webhook.delivered), (1, 1));
    let stats = watches.stats();
    assert_eq!(stats.notices_received, 1);
    // Two reads, each shared by the six watchers: the current state, and
    // the result after the notice.
    assert_eq!(stats.result_reads, 2);
    assert_eq!(gw.result_reads(), 2);
    assert_eq!(gw.webhook_metric("accepted").await, 1);
    gw.stop().await;
}

#[tokio::test]
async fn the_embedded_sandbox_sends_with_the_webhook_secrets_the_gateway_was_given() {
    // Each way the operator may configure [webhook]; the embedded sandbox
    // is the sender, so it must present what the receiver expects.
    type Edit = fn(&mut idgate::config::Config);
    let configurations: [(&str, Edit); 2] = [
        ("basic", |c| {
            c.webhook.basic_user = Some(BASIC_USER.into());
            c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        }),
        ("hmac", |c| {
            c.webhook.hmac_secret_file = Some(secret_file(SECRET))
        }),
    ];
    for (case, edit) in configurations {
        let gw = TestGateway::start_with(|c| {
            c.watch.webhook_grace_secs = 3600;
            c.sandbox.webhook.max_attempts = 1;
            edit(c);
        })
        .await;
        let journey = gw.journey_in_processing().await;
        let watcher = gw.watch(by_ref(&journey.journey_ref)).await;
        gw.finish_processing();
        let stats = gw
            .webhook_stats_until(|s| s.delivered + s.abandoned == 1)
            .await;
        assert_eq!(
            stats.delivered, 1,
            "{case}: the gateway refused the sandbox"
        );
        let watched = drain(watcher).await;
        assert_ends_complete(&watched, &journey.journey_ref);
        assert_eq!(gw.gateway.watches().stats().notices_received, 1, "{case}");
        // The current state at once (the proof went through the gateway),
        // then one read on the notice: two, or one if the first came after
        // the clock moved.
        assert!((1..=2).contains(&gw.result_reads()), "{case}");
        gw.stop().await;
    }
}

#[tokio::test]
async fn a_journey_that_fails_processing_ends_every_watcher_with_the_error_result() {
    use samples::{DocumentKind, DocumentType, Side};
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let created = gw.create_journey_for(happy_person()).await;
    assert!(gw.pass_3d(&created.appkey).await.valid);
    let images = Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::unreadable_document_image(DocumentKind::new(DocumentType::Rg, side))
                .into(),
        })
        .collect();
    gw.documents()
        .submit_document_images(v1::SubmitDocumentImagesRequest {
            appkey: created.appkey.clone(),
            images,
        })
        .await
        .expect("submit documents");
    let watchers = [
        gw.watch(by_appkey(&created.appkey)).await,
        gw.watch(by_ref(&created.journey_ref)).await,
    ];
    gw.finish_processing();
    for watcher in watchers {
        let (items, end) = drain(watcher).await;
        assert!(end.is_none(), "{end:?}");
        // The current state (processing) if it was read before the clock
        // moved, then the error result.
        let (last, before) = items.split_last().expect("the error result");
        assert!(
            statuses(before)
                .iter()
                .all(|s| *s == JourneyStatus::Processing),
            "{items:?}"
        );
        assert_eq!(last.status(), JourneyStatus::Error);
        assert_eq!(last.raw_status, "Erro");
        let result = last.result.as_ref().expect("the error result");
        assert_eq!(result.status(), JourneyStatus::Error);
    }
    assert_eq!(gw.gateway.watches().stats().notices_received, 1);
    assert!((1..=2).contains(&gw.result_reads()));
    gw.stop().await;
}

/// The next message of a stream that must send one.
async fn next_event(
    watcher: &mut tonic::Streaming<v1::WatchJourneyResponse>,
) -> v1::WatchJourneyResponse {
    tokio::time::timeout(EVENT_WAIT, watcher.message())
        .await
        .expect("an event in time")
        .expect("no error")
        .expect("stream open")
}

#[tokio::test]
async fn a_notice_before_the_result_is_complete_still_ends_with_the_complete_result() {
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(BASIC_USER.into());
        c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        c.watch.webhook_grace_secs = 3600;
        // Only the premature notice: the reads that follow must find the
        // end by themselves.
        c.sandbox.webhook.enabled = false;
    })
    .await;
    // Liveness done, no documents yet: "Não processado".
    let created = gw.create_journey_for(happy_person()).await;
    assert!(gw.pass_3d(&created.appkey).await.valid);
    let mut watcher = gw.watch(by_appkey(&created.appkey)).await;
    let response = basic(
        &http_client(),
        &gw.webhook_url(),
        BASIC_PASSWORD,
        &notice_body("Completo", &created.appkey),
    )
    .send()
    .await
    .expect("the gateway answers");
    assert_eq!(response.status(), StatusCode::ACCEPTED);

    let first = next_event(&mut watcher).await;
    assert_eq!(first.status(), JourneyStatus::NotProcessed);
    assert_eq!(first.raw_status, "Não processado");
    assert!(first.result.is_none());
    assert_eq!(first.journey_ref, created.journey_ref);

    gw.submit_rg(&created.appkey).await;
    let second = next_event(&mut watcher).await;
    assert_eq!(second.status(), JourneyStatus::Processing);
    assert_eq!(second.raw_status, "Em processamento");
    assert!(second.result.is_none());
    // Still reading with backoff while the result says processing.
    let reads = gw.result_reads();
    eventually(
        "the gateway reads the result again",
        EVENT_WAIT,
        async || gw.result_reads() >= reads + 2,
    )
    .await;

    gw.finish_processing();
    let rest = drain(watcher).await;
    assert_ends_complete(&rest, &created.journey_ref);
    assert_eq!(rest.0.len(), 1, "each status once: {:?}", statuses(&rest.0));
    assert_eq!(gw.gateway.watches().stats().notices_received, 1);
    gw.stop().await;
}

#[tokio::test]
async fn with_the_webhook_disabled_watchers_complete_by_reading_from_the_start() {
    let gw = TestGateway::start_with(|c| {
        c.sandbox.webhook.enabled = false;
        // No receiver, so no grace: an hour of it would hang the test.
        c.watch.webhook_grace_secs = 3600;
        c.watch.poll_initial_ms = 50;
        c.watch.poll_max_ms = 100;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    let a = gw.watch(by_appkey(&journey.appkey)).await;
    let b = gw.watch(by_ref(&journey.journey_ref)).await;
    gw.finish_processing();
    for watched in [drain(a).await, drain(b).await] {
        assert_ends_complete(&watched, &journey.journey_ref);
        // Read from the start (no receiver): processing, if read before
        // the clock moved, then the result.
        assert!(watched.0.len() <= 2, "{:?}", statuses(&watched.0));
    }
    assert_eq!(gw.sandbox().webhook_stats().attempts, 0);
    let stats = gw.gateway.watches().stats();
    assert_eq!((stats.notices_received, stats.notice_timeouts), (0, 0));
    assert!(stats.result_reads >= 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idgate_journey_shows_the_status_changes_and_ends_complete() {
    let gw = TestGateway::start_with(|c| {
        // Read at once, so the journey's progress shows before the end.
        c.watch.webhook_grace_secs = 0;
        c.watch.poll_initial_ms = 200;
        c.watch.poll_max_ms = 400;
    })
    .await;
    let plan = happy_3d_plan(&gw);
    // The sandbox's clock moves once the gateway has read the result and
    // found it still processing (the second read starts after the first
    // one's answer was published).
    let driver = async {
        eventually(
            "the watcher read the result twice",
            EVENT_WAIT,
            async || gw.result_reads() >= 2,
        )
        .await;
        gw.finish_processing();
    };
    let mut out = String::new();
    let result = {
        let run = idgate::cli::journey::run(&plan, &mut out);
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => result,
            () = driver => run.await,
        }
    };
    let result = result.unwrap_or_else(|e| panic!("the journey fails: {e}\n{out}"));
    assert_eq!(result.status(), JourneyStatus::Complete);
    let lines: Vec<&str> = out.lines().collect();
    let position = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("`{needle}` missing from:\n{out}"))
    };
    let steps = [
        "[1] create journey",
        "[2] start 3D session",
        "[3] verify 3D liveness",
        "[4] submit document images",
        "[5] watch journey",
        "status: Em processamento",
        "status: Completo",
        "finished: Completo",
    ];
    let positions: Vec<usize> = steps.iter().map(|s| position(s)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{out}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("status: ")).count(),
        2,
        "each status once:\n{out}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_result_still_processing_past_the_settle_limit_after_the_notice_ends_the_watch_result_not_settled()
 {
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(BASIC_USER.into());
        c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        c.watch.webhook_grace_secs = 3600;
        c.watch.poll_initial_ms = 50;
        c.watch.poll_max_ms = 100;
        c.watch.result_settle_limit_secs = 1;
        // Only the notice posted here; processing never finishes.
        c.sandbox.webhook.enabled = false;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let response = basic(
        &http_client(),
        &gw.webhook_url(),
        BASIC_PASSWORD,
        &notice_body("Completo", &journey.appkey),
    )
    .send()
    .await
    .expect("the gateway answers");
    assert_eq!(response.status(), StatusCode::ACCEPTED);

    let (items, end) = drain(watcher).await;
    assert!(
        items
            .iter()
            .all(|i| i.status() == JourneyStatus::Processing),
        "only processing before the end: {:?}",
        statuses(&items)
    );
    let end = end.expect("the stream ends with an error");
    assert_error(&end, tonic::Code::Unavailable, "RESULT_NOT_SETTLED");
    assert!(retryable(&end), "RESULT_NOT_SETTLED: RetryInfo");
    assert!(gw.result_reads() >= 2, "read until the settle limit");
    gw.stop().await;
}
