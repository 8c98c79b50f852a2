//! The completion webhook over real HTTP, driving `WatchJourney` streams.
//!
//! The receiver is served on 127.0.0.1:0 and called with reqwest; result
//! reads go to a counting double of the REST client, so every test can
//! prove what was (not) read. This file holds what the modules share: the
//! counting source, a started receiver and watches, and request shorthands.

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
        BasicCredentials, HmacSecret, JourneyWatches, ResultSource, WatchSettings, WatchStream,
        WatchTarget, WebhookReceiver, WebhookSettings,
    },
    proto::v1::{JourneyResult, JourneyStatus, WatchJourneyResponse},
};

use crate::support::{
    net::{bind_loopback, http_client},
    webhook::{PASSWORD, SECRET, USER, notice, now_unix, signed},
};

mod authentication;
mod requests;
mod watchers;

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
    watches: JourneyWatches,
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
    let watches = JourneyWatches::new(source.clone(), watch);
    let path = hook.path.clone();
    let receiver = WebhookReceiver::new(hook, watches.clone()).unwrap();
    let (listener, addr) = bind_loopback().await;
    let app: axum::Router = receiver.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Gateway {
        addr,
        url: format!("http://{addr}{path}"),
        watches,
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
        self.watches
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
