//! A watch starts from the current state and never gives up on a live
//! journey: on a gateway with no webhook receiver (the sandbox sends no
//! webhook) it reads at once and polls; after the liveness proof it reads
//! at once even when a receiver waits for a notice that is lost; a
//! journey whose end user is slow is watched through its 404s; only an
//! appkey the gateway did not issue is given up after `max_not_found`.

use idgate::proto::v1::JourneyStatus;
use idgate::testing::GatewayParts as _;

use super::{assert_ends_complete, happy_3d_plan};
use crate::support::{
    gateway::*,
    wait::{EVENT_WAIT, eventually},
};

/// A gateway without a webhook receiver, on a sandbox that sends none: a
/// grace of an hour that must never apply.
async fn without_webhook(edit: impl FnOnce(&mut idgate::config::Config)) -> TestGateway {
    TestGateway::start_with(|c| {
        c.sandbox.webhook.enabled = false;
        c.watch.webhook_grace_secs = 3600;
        edit(c);
    })
    .await
}

#[tokio::test]
async fn a_watch_on_a_journey_already_complete_answers_at_once_without_a_webhook() {
    let gw = without_webhook(|_| {}).await;
    let journey = gw.journey_in_processing().await;
    gw.finish_processing();
    let watched = drain(gw.watch(by_ref(&journey.journey_ref)).await).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(watched.0.len(), 1, "{:?}", statuses(&watched.0));
    let stats = gw.gateway.watches().stats();
    assert_eq!((stats.result_reads, stats.notice_timeouts), (1, 0));
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn after_the_liveness_proof_a_watch_reads_at_once_though_the_webhook_is_lost() {
    // A receiver is configured (so a grace applies), but the sandbox never
    // sends: the proof went through this gateway, so the watch reads.
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(crate::support::webhook::USER.into());
        c.webhook.basic_password_file = Some(secret_file(crate::support::webhook::PASSWORD));
        c.sandbox.webhook.enabled = false;
        c.watch.webhook_grace_secs = 3600;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    gw.finish_processing();
    let watched = drain(gw.watch(by_appkey(&journey.appkey)).await).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(gw.gateway.watches().stats().notice_timeouts, 0);
    assert_eq!(gw.sandbox().webhook_stats().attempts, 0);
    gw.stop().await;
}

#[tokio::test]
async fn a_watch_opened_at_creation_outlasts_a_slow_end_user_and_ends_with_the_result() {
    // Three 404s would end a foreign appkey's watch; this journey was
    // issued here, so its 404s mean "not yet".
    let gw = without_webhook(|c| c.watch.max_not_found = 3).await;
    let created = gw.create_journey_for(happy_person()).await;
    let watcher = gw.watch(by_ref(&created.journey_ref)).await;
    // The end user takes their time: the result answers 404 many times
    // over (at the default backoff, more than two minutes of it).
    eventually("twenty 404s on the result", EVENT_WAIT, async || {
        gw.result_reads() >= 20
    })
    .await;
    assert_eq!(gw.gateway.watches().stats().watchers, 1, "still watched");
    assert!(gw.pass_3d(&created.appkey).await.valid);
    gw.submit_rg(&created.appkey).await;
    gw.finish_processing();
    let watched = drain(watcher).await;
    assert_ends_complete(&watched, &created.journey_ref);
    gw.stop().await;
}

#[tokio::test]
async fn a_made_up_appkey_is_given_up_after_max_not_found() {
    let gw = without_webhook(|c| {
        c.journeys.accept_foreign_appkeys = true;
        c.watch.max_not_found = 3;
    })
    .await;
    let (messages, end) = drain(gw.watch(by_appkey("made-up-appkey-0000")).await).await;
    assert!(messages.is_empty(), "{messages:?}");
    let end = end.expect("the watch ends with an error");
    assert_error(&end, tonic::Code::NotFound, "RESULT_NOT_AVAILABLE");
    assert_eq!(gw.result_reads(), 3, "no read after the third 404");
    let watches = gw.gateway.watches();
    tokio::time::timeout(EVENT_WAIT, watches.tasks_finished())
        .await
        .expect("the reading task stops");
    assert_eq!(watches.stats().watchers, 0);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idgate_journey_without_a_webhook_ends_at_the_first_read_after_the_result_is_ready() {
    // The product's own backoff (500 ms, doubling to 10 s), no receiver.
    let gw = without_webhook(|c| {
        let defaults = idgate::config::Config::default().watch;
        c.watch.poll_initial_ms = defaults.poll_initial_ms;
        c.watch.poll_max_ms = defaults.poll_max_ms;
    })
    .await;
    let plan = happy_3d_plan(&gw);
    // The result becomes ready once the watch has read it in processing
    // twice; the reads the upstream answered then are counted.
    let ready = async {
        eventually(
            "the watcher read the result twice",
            EVENT_WAIT,
            async || gw.result_reads() >= 2,
        )
        .await;
        gw.finish_processing();
        // Counted after: a read counted before may already see it.
        (gw.result_reads(), std::time::Instant::now())
    };
    let mut out = String::new();
    let (result, (reads_before, ready_at)) = {
        let run = idgate::cli::journey::run(&plan, &mut out);
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => panic!("the journey ended before its result was ready: {result:?}"),
            ready = ready => (run.await, ready),
        }
    };
    let after = ready_at.elapsed();
    let result = result.unwrap_or_else(|e| panic!("the journey fails: {e}\n{out}"));
    assert_eq!(result.status(), JourneyStatus::Complete);
    // At most the next read after the result was ready ended the journey:
    // at this point of the backoff, one step (1 s, jittered to 0.75-1 s)
    // later.
    assert!(
        gw.result_reads() - reads_before <= 1,
        "ended {after:?} and {} reads after the result was ready\n{out}",
        gw.result_reads() - reads_before
    );
    assert!(out.contains("finished: Completo"), "{out}");
    gw.stop().await;
}
