//! The load: whole journeys and extra `WatchJourney` watchers, without
//! pause, through Envoy, each call retried as idgate's error model says
//! (docs/api.md): again, after the `RetryInfo` delay, only when the error
//! carries a `RetryInfo`; any other error ends the journey as failed.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use idgate::{
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient, watch_journey_request::Journey as Target,
    },
    sandbox::samples::{self, DocumentKind, DocumentType, Side},
};
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

/// Attempts of one call before giving up (each after a `RetryInfo`).
const MAX_ATTEMPTS: u32 = 10;
/// The longest pause before a retry, whatever the `RetryInfo` says.
const MAX_RETRY_DELAY: Duration = Duration::from_millis(500);
/// Deadline of a unary call, and of a watch stream.
const CALL_DEADLINE: Duration = Duration::from_secs(30);
pub(super) const WATCH_DEADLINE: Duration = Duration::from_secs(120);

/// What the load saw.
#[derive(Default)]
pub struct Tally {
    /// RPC attempts sent, retries included (a watch stream opened is one).
    pub sent: AtomicU64,
    /// Failed attempts, by `code/reason`.
    pub failed: Mutex<BTreeMap<String, u64>>,
    /// Failed attempts without a `RetryInfo`: not retried, a lost call.
    pub not_retryable: Mutex<Vec<String>>,
    /// Attempts sent again after a `RetryInfo`.
    pub retried: AtomicU64,
    pub journeys_started: AtomicU64,
    pub journeys_completed: AtomicU64,
    /// Extra watchers (by appkey, beside the journey's own by reference).
    pub watchers_opened: AtomicU64,
    pub watchers_with_result: AtomicU64,
    /// Journeys that sent `VerifyLiveness3D` / `SubmitDocumentImages`
    /// (each consumes its appkey once: the sandbox must see one call each).
    pub verifying_journeys: AtomicU64,
    pub submitting_journeys: AtomicU64,
    /// Watchers held on a replica across its stop ([`super::pinned`]) that
    /// ended `SHUTTING_DOWN` with a `RetryInfo`, as they must.
    pub held_watchers_cut: AtomicU64,
}

impl Tally {
    /// Counts a failed attempt; true when it carries a `RetryInfo`.
    pub(super) fn failure(&self, method: &str, status: &tonic::Status) -> bool {
        let reason = status
            .get_details_error_info()
            .map(|i| i.reason)
            .unwrap_or_else(|| "-".into());
        let key = format!("{method} {:?}/{reason}", status.code());
        *lock(&self.failed).entry(key.clone()).or_default() += 1;
        let retry = status.get_details_retry_info();
        if retry.is_none() {
            lock(&self.not_retryable).push(format!("{key}: {}", status.message()));
        }
        retry.is_some()
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `call` until it succeeds, retrying only errors with a `RetryInfo`.
async fn with_retries<T, F, Fut>(tally: &Tally, method: &str, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    for _ in 0..MAX_ATTEMPTS {
        tally.sent.fetch_add(1, Relaxed);
        match call().await {
            Ok(answer) => return Some(answer.into_inner()),
            Err(status) => {
                if !tally.failure(method, &status) {
                    return None;
                }
                tally.retried.fetch_add(1, Relaxed);
                let delay = status
                    .get_details_retry_info()
                    .and_then(|r| r.retry_delay)
                    .unwrap_or_default();
                tokio::time::sleep(delay.min(MAX_RETRY_DELAY)).await;
            }
        }
    }
    None
}

pub(super) fn request<T>(message: T, deadline: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline);
    request
}

/// Watches `target` until a message carries the result; a stream ended
/// with a `RetryInfo` (`SHUTTING_DOWN` from a draining replica) is opened
/// again, on whichever replica Envoy picks. True when the result came.
pub(super) async fn watch_to_result(channel: &Channel, tally: &Tally, target: Target) -> bool {
    let client = JourneyServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
    for _ in 0..MAX_ATTEMPTS {
        let watch = v1::WatchJourneyRequest {
            journey: Some(target.clone()),
        };
        let Some(mut stream) = with_retries(tally, "WatchJourney", || {
            let (mut c, w) = (client.clone(), watch.clone());
            async move { c.watch_journey(request(w, WATCH_DEADLINE)).await }
        })
        .await
        else {
            return false;
        };
        loop {
            match stream.message().await {
                Ok(Some(event)) if event.result.is_some() => return true,
                Ok(Some(_)) => {}
                Ok(None) => {
                    lock(&tally.not_retryable).push("WatchJourney ended without a result".into());
                    return false;
                }
                Err(status) => {
                    if !tally.failure("WatchJourney", &status) {
                        return false;
                    }
                    tally.retried.fetch_add(1, Relaxed);
                    break;
                }
            }
        }
    }
    false
}

fn rg_images() -> Vec<v1::DocumentImage> {
    Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
        })
        .collect()
}

/// `CreateJourney` through `channel`, with a `request_id` that makes it
/// safe to retry: the same id replays the journey if the first attempt
/// created it (docs/guard.md).
pub(super) async fn create(channel: &Channel, tally: &Tally) -> Option<v1::CreateJourneyResponse> {
    let j = JourneyServiceClient::new(channel.clone());
    let p = samples::HAPPY_PERSON;
    let b: Vec<&str> = p.birth_date.split('/').collect();
    let create = v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", b[2], b[1], b[0]),
        customer_reference: "ROLLING".into(),
        operator_profile: String::new(),
        request_id: uuid::Uuid::new_v4().to_string(),
    };
    with_retries(tally, "CreateJourney", || {
        let (mut c, r) = (j.clone(), create.clone());
        async move { c.create_journey(request(r, CALL_DEADLINE)).await }
    })
    .await
}

/// The rest of a created journey: 3D liveness, the document images, then
/// `WatchJourney` by reference to the result. True when the result came.
pub(super) async fn complete(
    channel: &Channel,
    tally: &Tally,
    created: &v1::CreateJourneyResponse,
) -> bool {
    let l = LivenessServiceClient::new(channel.clone());
    let d = DocumentServiceClient::new(channel.clone());
    let appkey = &created.appkey;
    let start = v1::StartSession3DRequest {
        appkey: appkey.clone(),
        user_agent: "rolling".into(),
    };
    let Some(session) = with_retries(tally, "StartSession3D", || {
        let (mut c, r) = (l.clone(), start.clone());
        async move { c.start_session3_d(request(r, CALL_DEADLINE)).await }
    })
    .await
    else {
        return false;
    };
    let verify = v1::VerifyLiveness3DRequest {
        appkey: appkey.clone(),
        session_token: session.session_token,
        channel: session.channel,
    };
    tally.verifying_journeys.fetch_add(1, Relaxed);
    if with_retries(tally, "VerifyLiveness3D", || {
        let (mut c, r) = (l.clone(), verify.clone());
        async move { c.verify_liveness3_d(request(r, CALL_DEADLINE)).await }
    })
    .await
    .is_none()
    {
        return false;
    }
    let submit = v1::SubmitDocumentImagesRequest {
        appkey: appkey.clone(),
        images: rg_images(),
    };
    tally.submitting_journeys.fetch_add(1, Relaxed);
    if with_retries(tally, "SubmitDocumentImages", || {
        let (mut c, r) = (d.clone(), submit.clone());
        async move { c.submit_document_images(request(r, CALL_DEADLINE)).await }
    })
    .await
    .is_none()
    {
        return false;
    }
    let target = Target::JourneyRef(created.journey_ref.clone());
    let own = watch_to_result(channel, tally, target).await;
    if own {
        tally.journeys_completed.fetch_add(1, Relaxed);
    }
    own
}

/// One whole journey, and an extra watcher on it by appkey, opened as soon
/// as the journey exists; true when both got the result.
async fn journey(channel: &Channel, tally: &Arc<Tally>) -> bool {
    tally.journeys_started.fetch_add(1, Relaxed);
    let Some(created) = create(channel, tally).await else {
        return false;
    };
    let watcher = {
        let (channel, tally, target) = (
            channel.clone(),
            tally.clone(),
            Target::Appkey(created.appkey.clone()),
        );
        tally.watchers_opened.fetch_add(1, Relaxed);
        tokio::spawn(async move {
            let got = watch_to_result(&channel, &tally, target).await;
            if got {
                tally.watchers_with_result.fetch_add(1, Relaxed);
            }
            got
        })
    };
    let own = complete(channel, tally, &created).await;
    let extra = watcher.await.unwrap_or(false);
    own && extra
}

/// `workers` callers, each running journeys back to back until `stop`.
pub async fn run(channel: Channel, tally: Arc<Tally>, workers: usize, stop: Arc<AtomicBool>) {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (channel, tally, stop) = (channel.clone(), tally.clone(), stop.clone());
        tasks.spawn(async move {
            while !stop.load(Relaxed) {
                journey(&channel, &tally).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}
