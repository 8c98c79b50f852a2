//! The completion webhook over real HTTP, driving `WatchJourney` streams.
//!
//! The receiver is served on 127.0.0.1:0 and called with reqwest; result
//! reads go to a counting double of the REST client, so every test can
//! prove what was (not) read.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt as _;
use idgate::{
    Error,
    domain::{Appkey, Password},
    events::{
        BasicCredentials, HmacSecret, JourneyHub, RejectReason, ResultSource, WatchSettings,
        WatchStream, WatchTarget, WebhookReceiver, WebhookSettings,
    },
    proto::v1::{JourneyResult, JourneyStatus, WatchJourneyResponse},
};

use crate::support::{
    net::{bind_loopback, http_client},
    webhook::{PASSWORD, SECRET, USER, notice, now_unix, post_chunked, signed, status_code},
};

/// Reads answer PROCESSING `processing_reads` times per appkey, then
/// COMPLETE; every read is counted.
#[derive(Default)]
struct CountingSource {
    processing_reads: usize,
    reads: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
}

impl CountingSource {
    fn reads(&self, appkey: &str) -> usize {
        self.reads.lock().unwrap().get(appkey).copied().unwrap_or(0)
    }
}

impl ResultSource for CountingSource {
    async fn fetch(&self, appkey: &Appkey) -> Result<JourneyResult, Error> {
        self.total.fetch_add(1, Ordering::SeqCst);
        let n = {
            let mut reads = self.reads.lock().unwrap();
            let n = reads.entry(appkey.expose().to_owned()).or_default();
            *n += 1;
            *n
        };
        let (status, raw) = if n <= self.processing_reads {
            (JourneyStatus::Processing, "Em processamento")
        } else {
            (JourneyStatus::Complete, "Completo")
        };
        Ok(JourneyResult {
            status: status as i32,
            raw_status: raw.to_owned(),
            customer_reference: "proposal-42".to_owned(),
            ..Default::default()
        })
    }
}

struct Gateway {
    addr: SocketAddr,
    url: String,
    hub: JourneyHub,
    receiver: WebhookReceiver,
    source: Arc<CountingSource>,
    client: reqwest::Client,
}

fn basic() -> Option<BasicCredentials> {
    Some(BasicCredentials {
        user: USER.to_owned(),
        password: Password::new(PASSWORD),
    })
}

fn hmac() -> Option<HmacSecret> {
    Some(HmacSecret::parse(SECRET).unwrap())
}

fn webhook(basic: Option<BasicCredentials>, hmac: Option<HmacSecret>) -> WebhookSettings {
    WebhookSettings {
        basic,
        hmac,
        ..WebhookSettings::new()
    }
}

/// No fallback within a test's lifetime, millisecond backoff.
fn watch_settings() -> WatchSettings {
    WatchSettings {
        webhook_grace: Duration::from_secs(3600),
        poll_initial: Duration::from_millis(1),
        poll_max: Duration::from_millis(5),
        ..WatchSettings::default()
    }
}

async fn start(hook: WebhookSettings, watch: WatchSettings, source: CountingSource) -> Gateway {
    let source = Arc::new(source);
    let hub = JourneyHub::new(source.clone(), watch);
    let path = hook.path.clone();
    let receiver = WebhookReceiver::new(hook, hub.clone()).unwrap();
    let (listener, addr) = bind_loopback().await;
    let app: axum::Router = receiver.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Gateway {
        addr,
        url: format!("http://{addr}{path}"),
        hub,
        receiver,
        source,
        client: http_client(),
    }
}

fn body(status: &str, appkey: &str) -> Vec<u8> {
    notice(status, appkey).into_bytes()
}

fn now() -> i64 {
    now_unix()
}

impl Gateway {
    fn watch(&self, appkey: &str) -> WatchStream {
        self.hub
            .watch(WatchTarget::Appkey(Appkey::new(appkey)))
            .unwrap()
    }

    fn post(&self, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body)
    }

    fn post_basic(&self, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.post(body).basic_auth(USER, Some(PASSWORD))
    }

    fn post_signed(&self, id: &str, timestamp: i64, body: Vec<u8>) -> reqwest::RequestBuilder {
        signed(self.client.post(&self.url), SECRET, id, timestamp, body)
    }
}

/// Sends and returns (HTTP status, parsed JSON body).
async fn send(request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

async fn collect(stream: WatchStream) -> Vec<Result<WatchJourneyResponse, tonic::Status>> {
    tokio::time::timeout(Duration::from_secs(20), stream.collect::<Vec<_>>())
        .await
        .expect("the watch stream did not close")
}

fn assert_complete(items: &[Result<WatchJourneyResponse, tonic::Status>]) {
    let last = items.last().unwrap().as_ref().unwrap();
    assert_eq!(last.status(), JourneyStatus::Complete);
    assert_eq!(
        last.result.as_ref().unwrap().customer_reference,
        "proposal-42"
    );
}

#[tokio::test]
async fn a_notice_with_valid_basic_credentials_is_accepted_and_completes_the_watcher() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let stream = gw.watch("key-1");
    let (status, json) = send(gw.post_basic(body("Completo", "key-1"))).await;
    assert_eq!(status, 202);
    assert_eq!(json["status"], "accepted");
    assert_complete(&collect(stream).await);
    assert_eq!(gw.source.reads("key-1"), 1);
    let stats = gw.receiver.stats();
    assert_eq!((stats.received, stats.accepted), (1, 1));
}

#[tokio::test]
async fn missing_or_forged_credentials_are_refused_and_trigger_nothing() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");
    let response = gw.post(body("Completo", "key-1")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert!(response.headers().contains_key("www-authenticate"));
    let json: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(json["error"]["reason"], "credentials_missing");

    let forged = gw
        .post(body("Completo", "key-1"))
        .basic_auth(USER, Some("guessed"));
    let (status, json) = send(forged).await;
    assert_eq!(status, 401);
    assert_eq!(json["error"]["reason"], "credentials_invalid");
    // A signature is no substitute when HMAC is not configured.
    let (status, _) = send(gw.post_signed("msg_1", now(), body("Completo", "key-1"))).await;
    assert_eq!(status, 401);

    // The handler hands notices to the hub before it answers: none came.
    assert_eq!(gw.hub.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::CredentialsMissing), 2);
    assert_eq!(stats.rejected(RejectReason::CredentialsInvalid), 1);
    assert_eq!(stats.accepted, 0);
}

#[tokio::test]
async fn signed_notices_are_verified_over_the_raw_body_and_the_replay_window() {
    let gw = start(
        webhook(None, hmac()),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");

    let mut signature_over_other_body = gw.post_signed("msg_1", now(), body("Erro", "key-1"));
    signature_over_other_body = signature_over_other_body.body(body("Completo", "key-1"));
    let (status, json) = send(signature_over_other_body).await;
    assert_eq!(
        (status, json["error"]["reason"].as_str()),
        (401, Some("signature_invalid"))
    );

    // Re-serialised JSON is a different raw body, even if it means the same.
    let pretty =
        serde_json::to_vec_pretty(&serde_json::json!({"Status": "Completo", "Appkey": "key-1"}))
            .unwrap();
    let reformatted = gw
        .post_signed("msg_2", now(), body("Completo", "key-1"))
        .body(pretty);
    assert_eq!(send(reformatted).await.0, 401);

    for skew in [-600, 600] {
        let (status, json) =
            send(gw.post_signed("msg_3", now() + skew, body("Completo", "key-1"))).await;
        assert_eq!(status, 401);
        assert_eq!(json["error"]["reason"], "timestamp_out_of_window");
    }
    let unsigned = gw
        .post(body("Completo", "key-1"))
        .basic_auth(USER, Some(PASSWORD));
    assert_eq!(send(unsigned).await.0, 401);
    assert_eq!(gw.hub.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);

    let (status, _) = send(gw.post_signed("msg_4", now() - 60, body("Completo", "key-1"))).await;
    assert_eq!(status, 202);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::SignatureInvalid), 2);
    assert_eq!(stats.rejected(RejectReason::TimestampOutOfWindow), 2);
    assert_eq!(stats.rejected(RejectReason::CredentialsMissing), 1);
    assert_eq!(stats.accepted, 1);
}

#[tokio::test]
async fn either_method_is_enough_when_both_are_configured() {
    let gw = start(
        webhook(basic(), hmac()),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    assert_eq!(
        send(gw.post_signed("msg_1", now(), body("Completo", "key-2")))
            .await
            .0,
        202
    );
    let (status, json) = send(gw.post(body("Completo", "key-3"))).await;
    assert_eq!(
        (status, json["error"]["reason"].as_str()),
        (401, Some("credentials_missing"))
    );
    assert_eq!(gw.hub.stats().notices_received, 2);
}

#[tokio::test]
async fn oversize_malformed_and_unknown_bodies_are_refused_with_json_errors() {
    let gw = start(
        WebhookSettings {
            max_body_bytes: 256,
            ..webhook(basic(), None)
        },
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");
    let big = serde_json::to_vec(&serde_json::json!({
        "Status": "Completo", "Appkey": "key-1", "Padding": "x".repeat(600)
    }))
    .unwrap();
    let cases: [(Vec<u8>, u16, &str); 5] = [
        (big.clone(), 413, "payload_too_large"),
        (
            b"{\"Status\": \"Completo\", ".to_vec(),
            400,
            "malformed_body",
        ),
        (br#"{"Status":"Completo"}"#.to_vec(), 400, "malformed_body"),
        (body("Em processamento", "key-1"), 422, "unknown_status"),
        (body("Done", "key-1"), 422, "unknown_status"),
    ];
    for (payload, code, reason) in cases {
        let (status, json) = send(gw.post_basic(payload)).await;
        assert_eq!(
            (status, json["error"]["reason"].as_str()),
            (code, Some(reason))
        );
        assert!(json["error"]["message"].is_string());
    }
    // A chunked body declares no length: the limit applies while reading.
    assert_eq!(
        status_code(&post_chunked(gw.addr, "/webhooks/journey", &big).await),
        413
    );

    assert_eq!(gw.hub.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::PayloadTooLarge), 2);
    assert_eq!(stats.rejected(RejectReason::MalformedBody), 2);
    assert_eq!(stats.rejected(RejectReason::UnknownStatus), 2);
    assert_eq!(stats.rejected_total(), 6);
}

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

    assert_eq!(gw.hub.stats().notices_received, 2);
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
    let stats = gw.hub.stats();
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
    tokio::time::timeout(Duration::from_secs(10), gw.hub.tasks_finished())
        .await
        .unwrap();
    let stats = gw.hub.stats();
    assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
}

#[tokio::test]
async fn a_receiver_without_authentication_is_refused_unless_explicitly_allowed() {
    let hub = JourneyHub::new(CountingSource::default(), watch_settings());
    let err = WebhookReceiver::new(webhook(None, None), hub.clone()).unwrap_err();
    assert!(err.to_string().contains("allow_unauthenticated"), "{err}");

    let open = WebhookSettings {
        allow_unauthenticated: true,
        ..webhook(None, None)
    };
    let gw = start(open, watch_settings(), CountingSource::default()).await;
    assert_eq!(send(gw.post(body("Completo", "key-1"))).await.0, 202);
}

#[tokio::test]
async fn the_receiver_answers_only_post_on_its_configured_path() {
    let hook = WebhookSettings {
        path: "/hooks/idv".to_owned(),
        ..webhook(basic(), None)
    };
    let gw = start(hook, watch_settings(), CountingSource::default()).await;
    assert!(gw.url.ends_with("/hooks/idv"));
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    let get = gw.client.get(&gw.url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let elsewhere = gw
        .client
        .post(format!("http://{}/webhooks/journey", gw.addr))
        .basic_auth(USER, Some(PASSWORD))
        .body(body("Completo", "key-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 404);
}

#[tokio::test]
async fn a_journey_reference_from_create_journey_can_be_watched() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let journey = gw.hub.register(&Appkey::new("key-1"));
    let stream = gw.hub.watch(WatchTarget::Journey(journey.clone())).unwrap();
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    let items = collect(stream).await;
    assert_complete(&items);
    assert_eq!(items[0].as_ref().unwrap().journey_ref, journey.as_str());
}
