//! Issue 6 through the gateway and the sandbox: the completion webhook
//! pushes the result to every `WatchJourney` stream.

use std::time::Duration;

use base64::Engine as _;
use futures_util::{StreamExt as _, stream};
use idgate::{
    cli::journey::{DocumentChoice, JourneyPlan, LivenessMode, Person},
    proto::v1::{self, JourneyStatus},
    sandbox::samples,
};
use reqwest::StatusCode;

use crate::support::{
    gateway::*,
    net::http_client,
    process::alone_in_own_process,
    wait::{EVENT_WAIT, eventually},
    webhook::{
        PASSWORD as BASIC_PASSWORD, SECRET, USER as BASIC_USER, notice as notice_body, now_unix,
        post_chunked,
    },
};

async fn json(response: reqwest::Response) -> serde_json::Value {
    let bytes = response.bytes().await.expect("response body");
    serde_json::from_slice(&bytes).expect("a JSON answer")
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

/// A notice signed with `secret`, as a Standard Webhooks sender sends it.
fn signed(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &str,
) -> reqwest::RequestBuilder {
    crate::support::webhook::signed(client.post(url), secret, id, timestamp, body)
}

/// A notice with HTTP Basic credentials, as the service sends it.
fn basic(
    client: &reqwest::Client,
    url: &str,
    password: &str,
    body: &str,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .basic_auth(BASIC_USER, Some(password))
        .body(body.to_owned())
}

/// Asserts a stream's messages end with exactly one final message with
/// the complete result, and the stream closed with OK.
fn assert_ends_complete(
    (items, end): &(Vec<v1::WatchJourneyResponse>, Option<tonic::Status>),
    journey_ref: &str,
) {
    assert!(end.is_none(), "stream ended with {end:?}");
    let (last, before) = items.split_last().expect("at least the result");
    assert_eq!(last.status(), JourneyStatus::Complete);
    assert_eq!(last.raw_status, "Completo");
    assert_eq!(last.journey_ref, journey_ref);
    let result = last
        .result
        .as_ref()
        .expect("the last message has the result");
    assert_eq!(result.status(), JourneyStatus::Complete);
    assert!(result.document_analysis.is_some());
    assert!(
        before.iter().all(|i| i.result.is_none()),
        "only the last message carries the result"
    );
}

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
    let hub = gw.gateway.hub();
    assert_eq!((hub.stats().journeys, hub.stats().watchers), (1, 6));
    // Halfway through processing: watched, but nothing is read.
    gw.clock.advance(Duration::from_millis(1500));
    assert_eq!(gw.result_reads(), 0);
    assert_eq!(hub.stats().result_reads, 0);
    assert_eq!(gw.sandbox().webhook_stats().queued, 0);

    gw.finish_processing();
    let results = futures_util::future::join_all(streams.into_iter().map(drain)).await;
    for stream in &results {
        assert_ends_complete(stream, &journey.journey_ref);
        // Read after the notice, when the result was already complete:
        // the result is the only message.
        assert_eq!(stream.0.len(), 1, "{:?}", statuses(&stream.0));
    }
    let webhook = gw.sandbox().webhook_stats();
    assert_eq!((webhook.queued, webhook.delivered), (1, 1));
    let stats = hub.stats();
    assert_eq!(stats.notices_received, 1);
    // One read, shared by the six watchers, and only after the notice.
    assert_eq!(stats.result_reads, 1);
    assert_eq!(gw.result_reads(), 1);
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
        assert_eq!(gw.gateway.hub().stats().notices_received, 1, "{case}");
        assert_eq!(gw.result_reads(), 1, "{case}");
        gw.stop().await;
    }
}

/// A gateway that authenticates notices by Basic and by signature, whose
/// sandbox does not send its own (the tests post them), with one journey
/// whose processing is finished: any notice that got through would
/// complete its watchers at once.
async fn gateway_with_finished_journey(
    edit: impl FnOnce(&mut idgate::config::Config),
) -> (TestGateway, v1::CreateJourneyResponse) {
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(BASIC_USER.into());
        c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        c.webhook.hmac_secret_file = Some(secret_file(SECRET));
        c.watch.webhook_grace_secs = 3600;
        c.sandbox.webhook.enabled = false;
        edit(c);
    })
    .await;
    let journey = gw.journey_in_processing().await;
    gw.finish_processing();
    (gw, journey)
}

#[tokio::test]
async fn forged_unauthenticated_stale_or_oversize_webhooks_are_refused_and_trigger_nothing() {
    let (gw, journey) = gateway_with_finished_journey(|c| c.webhook.max_body_bytes = 1024).await;
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let client = http_client();
    let url = gw.webhook_url();
    let body = notice_body("Completo", &journey.appkey);
    let other_secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([7u8; 32])
    );
    let oversize = serde_json::json!({
        "Status": "Completo",
        "Appkey": journey.appkey,
        "Padding": "x".repeat(2048),
    })
    .to_string();

    let refusals: Vec<(&str, reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            "no credentials",
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone()),
            StatusCode::UNAUTHORIZED,
            "credentials_missing",
        ),
        (
            "wrong Basic password",
            basic(&client, &url, "guessed", &body),
            StatusCode::UNAUTHORIZED,
            "credentials_invalid",
        ),
        (
            "signed with another secret",
            signed(
                &client,
                &url,
                &other_secret,
                "msg_forged",
                now_unix(),
                &body,
            ),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "body changed after signing",
            signed(&client, &url, SECRET, "msg_tampered", now_unix(), &body)
                .body(notice_body("Erro", &journey.appkey)),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "signature without its id and timestamp",
            client
                .post(&url)
                .header("webhook-signature", "v1,AAAA")
                .body(body.clone()),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "signed ten minutes ago",
            signed(&client, &url, SECRET, "msg_stale", now_unix() - 600, &body),
            StatusCode::UNAUTHORIZED,
            "timestamp_out_of_window",
        ),
        (
            "signed ten minutes ahead",
            signed(&client, &url, SECRET, "msg_future", now_unix() + 600, &body),
            StatusCode::UNAUTHORIZED,
            "timestamp_out_of_window",
        ),
        (
            "not JSON",
            basic(&client, &url, BASIC_PASSWORD, "Status=Completo"),
            StatusCode::BAD_REQUEST,
            "malformed_body",
        ),
        (
            "a status that is not an ending",
            basic(
                &client,
                &url,
                BASIC_PASSWORD,
                &notice_body("Em processamento", &journey.appkey),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_status",
        ),
        (
            "oversize body with valid credentials",
            basic(&client, &url, BASIC_PASSWORD, &oversize),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
    ];
    for (case, request, status, reason) in refusals {
        let response = request.send().await.expect("the gateway answers");
        assert_eq!(response.status(), status, "{case}");
        assert!(response.status().is_client_error(), "{case}");
        let answer = json(response).await;
        assert_eq!(answer["error"]["reason"], reason, "{case}");
        let answer = answer.to_string();
        assert!(!answer.contains(&journey.appkey), "{case}: {answer}");
    }

    // Oversize without a declared length: the limit applies while reading.
    let chunked = chunked_post(&gw, &oversize).await;
    assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");
    assert!(chunked.contains("payload_too_large"), "{chunked}");

    // The hub was never told, so nothing was read and the watcher sleeps.
    let stats = gw.gateway.hub().stats();
    assert_eq!(stats.notices_received, 0);
    assert_eq!(stats.result_reads, 0);
    assert_eq!(gw.result_reads(), 0);
    assert_eq!((stats.journeys, stats.watchers), (1, 1));
    assert_eq!(gw.webhook_metric("accepted").await, 0);
    assert_eq!(
        gw.webhook_metric("rejected_timestamp_out_of_window").await,
        2
    );
    assert_eq!(gw.webhook_metric("rejected_signature_invalid").await, 3);
    assert_eq!(gw.webhook_metric("rejected_payload_too_large").await, 2);
    assert_eq!(gw.webhook_metric("rejected_credentials_missing").await, 1);
    assert_eq!(gw.webhook_metric("rejected_credentials_invalid").await, 1);
    assert_eq!(gw.webhook_metric("rejected_malformed_body").await, 1);
    assert_eq!(gw.webhook_metric("rejected_unknown_status").await, 1);

    // The same notice, correctly signed and fresh, is what wakes it.
    let response = signed(&client, &url, SECRET, "msg_genuine", now_unix(), &body)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let watched = drain(watcher).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(watched.0.len(), 1);
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
}

/// POSTs `body` with valid Basic credentials in chunked encoding (no
/// content-length) to the gateway's webhook path; returns the raw answer.
async fn chunked_post(gw: &TestGateway, body: &str) -> String {
    post_chunked(gw.gateway.http_addr(), WEBHOOK_PATH, body.as_bytes()).await
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
        assert_eq!(statuses(&items), [JourneyStatus::Error]);
        assert_eq!(items[0].raw_status, "Erro");
        let result = items[0].result.as_ref().expect("the error result");
        assert_eq!(result.status(), JourneyStatus::Error);
    }
    assert_eq!(gw.gateway.hub().stats().notices_received, 1);
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_reference_this_gateway_did_not_issue_is_not_found() {
    let gw = TestGateway::start().await;
    let status = gw
        .journeys()
        .watch_journey(by_ref("j-0123456789abcdef"))
        .await
        .expect_err("unknown reference");
    assert_error(&status, tonic::Code::NotFound, "JOURNEY_UNKNOWN");
    assert!(!retryable(&status), "{status:?}: no RetryInfo");
    let status = gw
        .journeys()
        .watch_journey(by_ref("not-a-reference"))
        .await
        .expect_err("malformed reference");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(gw.gateway.hub().stats().journeys, 0);
    gw.stop().await;
}

#[tokio::test]
async fn the_same_delivery_twice_is_processed_once() {
    let (gw, journey) = gateway_with_finished_journey(|_| {}).await;
    let watcher = gw.watch(by_ref(&journey.journey_ref)).await;
    let client = http_client();
    let url = gw.webhook_url();
    let body = notice_body("Completo", &journey.appkey);
    let ts = now_unix();

    let mut answers = Vec::new();
    for _ in 0..2 {
        let response = signed(&client, &url, SECRET, "msg_once", ts, &body)
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let answer = json(response).await;
        answers.push(answer["status"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(answers, ["accepted", "duplicate"]);
    // Without a webhook-id (the service's own deliveries), the journey and
    // status identify the delivery.
    for expected in ["accepted", "duplicate"] {
        let response = basic(
            &client,
            &url,
            BASIC_PASSWORD,
            &notice_body("Erro", &journey.appkey),
        )
        .send()
        .await
        .expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let answer = json(response).await;
        assert_eq!(answer["status"], expected);
    }

    let watched = drain(watcher).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(watched.0.len(), 1);
    assert_eq!(gw.gateway.hub().stats().notices_received, 2);
    assert_eq!(gw.webhook_metric("duplicate").await, 2);
    assert_eq!(gw.webhook_metric("accepted").await, 2);
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
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
    assert_eq!(gw.gateway.hub().stats().notices_received, 1);
    gw.stop().await;
}

#[tokio::test]
async fn with_the_webhook_disabled_watchers_complete_through_the_fallback() {
    let gw = TestGateway::start_with(|c| {
        c.sandbox.webhook.enabled = false;
        c.watch.webhook_grace_secs = 1;
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
        assert_eq!(watched.0.len(), 1);
    }
    assert_eq!(gw.sandbox().webhook_stats().attempts, 0);
    let stats = gw.gateway.hub().stats();
    assert_eq!(stats.notices_received, 0);
    assert!(stats.result_reads >= 1);
    gw.stop().await;
}

/// The resident set size of this process, in KiB.
fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

type Watchers = Vec<(String, tonic::Streaming<v1::WatchJourneyResponse>)>;

/// Opens `per_journey` watch streams on each journey, half by appkey and
/// half by reference, 64 at a time.
async fn open_watchers(
    gw: &TestGateway,
    journeys: &[v1::CreateJourneyResponse],
    per_journey: usize,
) -> Watchers {
    let requests = journeys.iter().flat_map(|j| {
        (0..per_journey).map(move |i| {
            let request = if i % 2 == 0 {
                by_appkey(&j.appkey)
            } else {
                by_ref(&j.journey_ref)
            };
            (j.journey_ref.clone(), request)
        })
    });
    stream::iter(requests)
        .map(|(journey_ref, request)| async move { (journey_ref, gw.watch(request).await) })
        .buffer_unordered(64)
        .collect()
        .await
}

/// Drains every stream concurrently; asserts each ended with its result.
async fn all_end_complete(watchers: Watchers) {
    let count = watchers.len();
    let ended: Vec<_> = stream::iter(watchers)
        .map(|(journey_ref, watcher)| async move { (journey_ref, drain(watcher).await) })
        .buffer_unordered(count.max(1))
        .collect()
        .await;
    assert_eq!(ended.len(), count);
    for (journey_ref, watched) in &ended {
        assert_ends_complete(watched, journey_ref);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watchers_on_a_hundred_journeys_complete_and_the_hub_returns_to_baseline() {
    if !alone_in_own_process(
        "gateway::events::a_thousand_watchers_on_a_hundred_journeys_complete_and_the_hub_returns_to_baseline",
    ) {
        return;
    }
    const JOURNEYS: usize = 100;
    const PER_JOURNEY: usize = 10;
    const ROUNDS_AFTER_THE_FIRST: usize = 6;
    /// Rounds after the first that may still settle the allocator.
    const SETTLING_ROUNDS: usize = 2;
    let gw = TestGateway::start_with(|c| {
        c.watch.webhook_grace_secs = 3600;
        // A thousand streams share the test's one connection: above the
        // default per-connection cap (256), which would hold the rest back.
        c.serving.max_concurrent_streams = 2_048;
        // ... and above the default per-connection watch cap (100).
        c.serving.max_streams_per_connection = 2_048;
    })
    .await;
    let journeys: Vec<v1::CreateJourneyResponse> = stream::iter(0..JOURNEYS)
        .map(|_| gw.journey_in_processing())
        .buffer_unordered(16)
        .collect()
        .await;
    let hub = gw.gateway.hub();
    assert_eq!(hub.directory().len(), JOURNEYS);
    let baseline = vm_rss_kib();

    let watchers = open_watchers(&gw, &journeys, PER_JOURNEY).await;
    let stats = hub.stats();
    assert_eq!(
        (stats.journeys, stats.watchers, stats.tasks),
        (JOURNEYS, JOURNEYS * PER_JOURNEY, JOURNEYS)
    );
    let peak = vm_rss_kib();
    assert_eq!(gw.result_reads(), 0);

    gw.finish_processing();
    all_end_complete(watchers).await;
    assert_eq!(gw.sandbox().webhook_stats().delivered, JOURNEYS as u64);
    // One read per journey, whatever its number of watchers.
    assert_eq!(gw.result_reads(), JOURNEYS as u64);

    tokio::time::timeout(EVENT_WAIT, hub.tasks_finished())
        .await
        .expect("reading tasks stop");
    let stats = hub.stats();
    assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
    // What stays is bounded by configuration: one reference and one
    // notice per journey, not per watcher.
    assert_eq!(hub.directory().len(), JOURNEYS);
    assert_eq!(stats.notices_remembered, JOURNEYS);
    let after = vm_rss_kib();

    // More rounds on the finished journeys (the remembered notices make
    // them read at once): a leak grows with every round, allocator reuse
    // does not. This test runs alone in its own process, so the whole
    // process's RSS is this gateway's.
    let mut after_rounds = vec![after];
    for _ in 0..ROUNDS_AFTER_THE_FIRST {
        let watchers = open_watchers(&gw, &journeys, PER_JOURNEY).await;
        all_end_complete(watchers).await;
        tokio::time::timeout(EVENT_WAIT, hub.tasks_finished())
            .await
            .expect("reading tasks stop");
        let stats = hub.stats();
        assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
        assert_eq!(hub.directory().len(), JOURNEYS);
        after_rounds.push(vm_rss_kib());
    }
    println!(
        "VmRSS (KiB, this test's own process): before watchers {baseline}, with {} watchers \
         {peak}, after each round {after_rounds:?}",
        JOURNEYS * PER_JOURNEY
    );
    // Once the allocator settled, the remaining rounds (4000 watchers) may
    // not raise RSS above its settled high-water mark by more than an
    // eighth of what one round of open watchers took: a leak of 1/16 of
    // each watcher's footprint per round exceeds it (measured here: one
    // round of watchers takes about 17 MiB, the settled rounds add at most
    // about 1.2 MiB). The high-water mark, not one sample: the allocator
    // may hand pages back for a round and take them again the next.
    let footprint = peak.saturating_sub(baseline);
    let bound = footprint / 8;
    let settled = after_rounds[..=SETTLING_ROUNDS]
        .iter()
        .copied()
        .max()
        .expect("rounds");
    let last = *after_rounds.last().expect("rounds");
    assert!(
        last <= settled + bound,
        "VmRSS grew by {} KiB over {} rounds of {} watchers, more than {bound} KiB \
         (an eighth of the {footprint} KiB one round of watchers took): {after_rounds:?}",
        last.saturating_sub(settled),
        ROUNDS_AFTER_THE_FIRST - SETTLING_ROUNDS,
        JOURNEYS * PER_JOURNEY
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_callers_deadline_ends_the_stream_with_deadline_exceeded() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let mut request = tonic::Request::new(by_appkey(&journey.appkey));
    request.set_timeout(Duration::from_millis(300));
    let watcher = gw
        .journeys()
        .watch_journey(request)
        .await
        .expect("watch journey")
        .into_inner();
    let (items, end) = drain(watcher).await;
    assert!(items.is_empty());
    let end = end.expect("the stream ends with an error");
    assert_eq!(end.code(), tonic::Code::DeadlineExceeded, "{end:?}");
    assert_eq!(reason(&end), "DEADLINE_EXCEEDED");
    let hub = gw.gateway.hub();
    eventually("the watcher is released", EVENT_WAIT, async || {
        hub.stats().watchers == 0
    })
    .await;
    tokio::time::timeout(EVENT_WAIT, hub.tasks_finished())
        .await
        .expect("the reading task stops");
    assert_eq!(hub.stats().journeys, 0);
    assert_eq!(gw.result_reads(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn a_cancelled_stream_releases_its_watcher() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let first = gw.watch(by_appkey(&journey.appkey)).await;
    let second = gw.watch(by_ref(&journey.journey_ref)).await;
    let hub = gw.gateway.hub();
    assert_eq!((hub.stats().journeys, hub.stats().watchers), (1, 2));

    drop(first);
    eventually(
        "the cancelled watcher is released",
        EVENT_WAIT,
        async || hub.stats().watchers == 1,
    )
    .await;
    assert_eq!(hub.stats().journeys, 1);
    drop(second);
    eventually("the journey is released", EVENT_WAIT, async || {
        hub.stats().journeys == 0
    })
    .await;
    tokio::time::timeout(EVENT_WAIT, hub.tasks_finished())
        .await
        .expect("the reading task stops");
    assert_eq!(hub.stats().watchers, 0);

    // Nobody watches: the notice is delivered but reads nothing.
    gw.finish_processing();
    gw.webhook_stats_until(|s| s.delivered == 1).await;
    assert_eq!(gw.result_reads(), 0);
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
    let person = samples::HAPPY_PERSON;
    let parts: Vec<&str> = person.birth_date.split('/').collect();
    let plan = JourneyPlan {
        gateway: gw.gateway.grpc_url(),
        liveness: LivenessMode::ThreeD,
        document: DocumentChoice::Rg,
        person: Person {
            cpf: person.cpf.into(),
            name: person.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "CLIREF1".into(),
        },
        operator_profile: String::new(),
        result_timeout: EVENT_WAIT,
    };
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
async fn shutting_down_ends_open_watch_streams() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let hub = gw.gateway.hub().clone();
    tokio::time::timeout(EVENT_WAIT, gw.stop())
        .await
        .expect("the gateway stops with a watcher open");
    let (items, end) = drain(watcher).await;
    assert!(items.is_empty());
    let end = end.expect("the stream ends with an error");
    assert_eq!(end.code(), tonic::Code::Unavailable, "{end:?}");
    assert_eq!(reason(&end), "SHUTTING_DOWN");
    let stats = hub.stats();
    assert_eq!((stats.journeys, stats.watchers), (0, 0));
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
