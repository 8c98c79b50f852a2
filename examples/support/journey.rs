//! One whole journey, as a caller runs it: `CreateJourney`,
//! `StartSession3D`, `VerifyLiveness3D`, `SubmitDocumentImages`,
//! `WatchJourney` until the completed result, `GetJourneyResult`. It counts
//! once the watch delivered the completed result and the read then finds
//! it complete, not when the documents were merely accepted.
//!
//! Shared by examples/loadgen, examples/fleet_throughput and
//! examples/deployed_capacity (included by path: examples cannot share a
//! library). [`journey_as`] runs it as an authenticated caller: its bearer
//! token on every call.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use idgate::{
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::samples::{self, DocumentKind, DocumentType, Side},
};
use tonic::{
    metadata::{AsciiMetadataValue, MetadataValue},
    transport::Channel,
};

/// Each step's latencies, by step name.
pub type Latencies = Arc<Mutex<BTreeMap<&'static str, Vec<Duration>>>>;

fn record(lat: &Latencies, step: &'static str, d: Duration) {
    if let Ok(mut m) = lat.lock() {
        m.entry(step).or_default().push(d);
    }
}

#[allow(dead_code)]
/// The two sides of an RG, each a marked image padded to about `kib` KiB
/// (the padding sits after the image data, so the sandbox still reads its
/// marker).
pub fn rg_images(kib: usize) -> Vec<Bytes> {
    [Side::Front, Side::Back]
        .into_iter()
        .map(|side| {
            let mut v = samples::document_image(DocumentKind::new(DocumentType::Rg, side));
            v.resize(v.len().max(kib * 1024), 0);
            Bytes::from(v)
        })
        .collect()
}

/// The `p` quantile of `sorted` (zero when empty).
pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `CreateJourney` for the sandbox's happy test person (a complete
/// result), with `reference` as the customer reference.
pub fn create_request(reference: &str) -> v1::CreateJourneyRequest {
    let p = samples::HAPPY_PERSON;
    let b: Vec<&str> = p.birth_date.split('/').collect();
    v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", b[2], b[1], b[0]),
        customer_reference: reference.into(),
        operator_profile: String::new(),
        request_id: String::new(),
    }
}

/// Runs one journey on `ch`, recording each step's latency in `lat`; the
/// watch gives up after `result_timeout`.
#[allow(dead_code)]
pub async fn journey(
    ch: Channel,
    images: Vec<Bytes>,
    lat: Latencies,
    result_timeout: Duration,
) -> Result<(), tonic::Status> {
    journey_as(None, ch, images, lat, result_timeout).await
}

/// `Bearer <token>` as call metadata, for [`journey_as`].
#[allow(dead_code)]
pub fn bearer_metadata(token: &http::HeaderValue) -> Result<AsciiMetadataValue, String> {
    MetadataValue::try_from(token.as_bytes()).map_err(|e| e.to_string())
}

/// `message` as a request carrying `bearer` (when given) in its
/// `authorization` metadata.
#[allow(dead_code)]
pub fn call<T>(bearer: Option<&AsciiMetadataValue>, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = bearer {
        request
            .metadata_mut()
            .insert("authorization", value.clone());
    }
    request
}

/// [`journey`] as the caller whose `authorization` value is `bearer`
/// (none: no token, an open gateway).
pub async fn journey_as(
    bearer: Option<AsciiMetadataValue>,
    ch: Channel,
    images: Vec<Bytes>,
    lat: Latencies,
    result_timeout: Duration,
) -> Result<(), tonic::Status> {
    let bearer = bearer.as_ref();
    let mut j = JourneyServiceClient::new(ch.clone());
    let mut l = LivenessServiceClient::new(ch.clone());
    let mut d = DocumentServiceClient::new(ch).max_encoding_message_size(64 << 20);
    let t = Instant::now();
    let created = j
        .create_journey(call(bearer, create_request("LOADGEN1")))
        .await?
        .into_inner();
    record(&lat, "1 CreateJourney", t.elapsed());
    let appkey = created.appkey;
    let t = Instant::now();
    let s = l
        .start_session3_d(call(
            bearer,
            v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "loadgen".into(),
            },
        ))
        .await?
        .into_inner();
    record(&lat, "2 StartSession3D", t.elapsed());
    let t = Instant::now();
    l.verify_liveness3_d(call(
        bearer,
        v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: s.session_token,
            channel: s.channel,
        },
    ))
    .await?;
    record(&lat, "3 VerifyLiveness3D", t.elapsed());
    let t = Instant::now();
    d.submit_document_images(call(
        bearer,
        v1::SubmitDocumentImagesRequest {
            appkey: appkey.clone(),
            images: images
                .into_iter()
                .map(|content| v1::DocumentImage { content })
                .collect(),
        },
    ))
    .await?;
    record(&lat, "4 SubmitDocumentImages", t.elapsed());
    let t = Instant::now();
    let mut watch = call(
        bearer,
        v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                created.journey_ref,
            )),
        },
    );
    watch.set_timeout(result_timeout);
    let mut stream = j.watch_journey(watch).await?.into_inner();
    let mut completed = false;
    while let Some(event) = stream.message().await? {
        if let Some(result) = event.result {
            completed = result.status() == v1::JourneyStatus::Complete;
            break;
        }
    }
    if !completed {
        return Err(tonic::Status::failed_precondition(
            "the journey ended without a complete result",
        ));
    }
    record(&lat, "5 WatchJourney", t.elapsed());
    let t = Instant::now();
    let result = j
        .get_journey_result(call(bearer, v1::GetJourneyResultRequest { appkey }))
        .await?
        .into_inner()
        .result
        .unwrap_or_default();
    if result.status() != v1::JourneyStatus::Complete {
        return Err(tonic::Status::failed_precondition(
            "the result read after completion is not complete",
        ));
    }
    record(&lat, "6 GetJourneyResult", t.elapsed());
    Ok(())
}
