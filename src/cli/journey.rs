//! `idgate journey`: drives a whole journey against a running gateway and
//! prints each step as it happens, with its trace id, then a summary.

use std::{fmt, time::Duration};

use bytes::Bytes;
use tonic::{Request, metadata::MetadataValue};

pub use super::plan::{DocumentChoice, JourneyPlan, LivenessMode, Person};
use super::tls::ClientTls;
use crate::domain::CallerToken;
use crate::proto::v1::{
    self, document_service_client::DocumentServiceClient,
    journey_service_client::JourneyServiceClient, liveness_service_client::LivenessServiceClient,
};

/// A step that failed: which one, and the gRPC status.
#[derive(Debug)]
pub struct StepFailed {
    /// The step's name.
    pub step: &'static str,
    /// What the gateway answered.
    pub status: tonic::Status,
}

impl fmt::Display for StepFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step `{}` failed: {:?}: {}",
            self.step,
            self.status.code(),
            self.status.message()
        )?;
        for violation in super::channels::violations(&self.status) {
            write!(f, "\n  {violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for StepFailed {}

/// A W3C trace context for one step, so the step's trace can be found.
struct StepTrace {
    trace_id: String,
    traceparent: String,
    bearer: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl StepTrace {
    fn new() -> Self {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        let span_id = &uuid::Uuid::new_v4().simple().to_string()[..16];
        let traceparent = format!("00-{trace_id}-{span_id}-01");
        StepTrace {
            trace_id,
            traceparent,
            bearer: None,
        }
    }

    /// The step's trace, its calls carrying the caller's bearer token.
    fn with_bearer(bearer: &Option<MetadataValue<tonic::metadata::Ascii>>) -> Self {
        StepTrace {
            bearer: bearer.clone(),
            ..Self::new()
        }
    }

    fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Ok(v) = MetadataValue::try_from(self.traceparent.as_str()) {
            req.metadata_mut().insert("traceparent", v);
        }
        if let Some(bearer) = &self.bearer {
            req.metadata_mut().insert("authorization", bearer.clone());
        }
        req
    }
}

fn step(out: &mut impl fmt::Write, n: usize, name: &str, trace: &StepTrace, detail: &str) {
    let _ = writeln!(out, "[{n}] {name:<26} trace={}  {detail}", trace.trace_id);
}

/// Runs the journey, writing progress to `out`. Returns the final result.
pub async fn run(
    plan: &JourneyPlan,
    out: &mut (impl fmt::Write + Send),
) -> Result<v1::JourneyResult, Box<dyn std::error::Error + Send + Sync>> {
    run_with_tls(plan, &ClientTls::default(), out).await
}

/// [`run_with_tls`] as a caller: every call carries `authorization:
/// Bearer <token>`, for a gateway whose `[auth]` asks for JWTs.
pub async fn run_as(
    plan: &JourneyPlan,
    tls: &ClientTls,
    token: Option<&CallerToken>,
    out: &mut (impl fmt::Write + Send),
) -> Result<v1::JourneyResult, Box<dyn std::error::Error + Send + Sync>> {
    let bearer = token
        .map(|t| MetadataValue::try_from(format!("Bearer {}", t.expose())))
        .transpose()
        .map_err(|_| "the token holds characters a header cannot carry")?;
    run_steps(plan, tls, &bearer, out).await
}

/// [`run`] with the client's TLS options (`--ca`, `--cert`, `--key`), for
/// an `https://` gateway.
pub async fn run_with_tls(
    plan: &JourneyPlan,
    tls: &ClientTls,
    out: &mut (impl fmt::Write + Send),
) -> Result<v1::JourneyResult, Box<dyn std::error::Error + Send + Sync>> {
    run_steps(plan, tls, &None, out).await
}

async fn run_steps(
    plan: &JourneyPlan,
    tls: &ClientTls,
    bearer: &Option<MetadataValue<tonic::metadata::Ascii>>,
    out: &mut (impl fmt::Write + Send),
) -> Result<v1::JourneyResult, Box<dyn std::error::Error + Send + Sync>> {
    let channel = tls
        .endpoint(&plan.gateway)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("cannot connect to the gateway at {}: {e}", plan.gateway))?;
    let mut journeys =
        JourneyServiceClient::new(channel.clone()).max_decoding_message_size(64 * 1024 * 1024);
    let mut liveness = LivenessServiceClient::new(channel.clone());
    let mut documents =
        DocumentServiceClient::new(channel).max_encoding_message_size(64 * 1024 * 1024);
    let inputs = super::inputs::JourneyInputs::default();
    let fail = |step: &'static str| move |status: tonic::Status| StepFailed { step, status };

    // 1. Appkey.
    let t = StepTrace::with_bearer(bearer);
    let created = journeys
        .create_journey(t.request(v1::CreateJourneyRequest {
            cpf: plan.person.cpf.clone(),
            name: plan.person.name.clone(),
            birth_date: plan.person.birth_date.clone(),
            customer_reference: plan.person.customer_reference.clone(),
            operator_profile: plan.operator_profile.clone(),
            request_id: String::new(),
        }))
        .await
        .map_err(fail("create journey"))?
        .into_inner();
    let expiry = created
        .expire_time
        .map(|t| t.seconds.to_string())
        .unwrap_or_default();
    step(
        out,
        1,
        "create journey",
        &t,
        &format!(
            "journey_ref={} appkey expires at unix {expiry}",
            created.journey_ref
        ),
    );
    let appkey = created.appkey;

    // 2. Liveness.
    match plan.liveness {
        LivenessMode::ThreeD => {
            let t = StepTrace::with_bearer(bearer);
            let session = liveness
                .start_session3_d(t.request(v1::StartSession3DRequest {
                    appkey: appkey.clone(),
                    user_agent: "idgate-journey/1".into(),
                }))
                .await
                .map_err(fail("start 3D session"))?
                .into_inner();
            step(
                out,
                2,
                "start 3D session",
                &t,
                &format!(
                    "channel={} vendor={} contingency={}",
                    session.channel, session.vendor, session.contingency
                ),
            );
            let t = StepTrace::with_bearer(bearer);
            let verdict = liveness
                .verify_liveness3_d(t.request(v1::VerifyLiveness3DRequest {
                    appkey: appkey.clone(),
                    session_token: session.session_token,
                    channel: session.channel,
                }))
                .await
                .map_err(fail("verify 3D liveness"))?
                .into_inner()
                .verdict
                .unwrap_or_default();
            step(out, 3, "verify 3D liveness", &t, &verdict_line(&verdict));
        }
        LivenessMode::TwoD => {
            let t = StepTrace::with_bearer(bearer);
            let ch = liveness
                .create_challenges(t.request(v1::CreateChallengesRequest {
                    appkey: appkey.clone(),
                }))
                .await
                .map_err(fail("create challenges"))?
                .into_inner();
            let faces: Vec<String> = ch
                .challenges
                .iter()
                .map(|c| {
                    let seconds = c
                        .duration
                        .map_or(0.0, |d| d.seconds as f64 + f64::from(d.nanos) / 1e9);
                    format!("{} ({seconds}s)", c.message)
                })
                .collect();
            step(
                out,
                2,
                "create 2D challenges",
                &t,
                &format!("{} challenge(s): {}", ch.challenges.len(), faces.join("; ")),
            );
            let snapshots = ch
                .challenges
                .iter()
                .filter_map(|c| c.face_type.as_ref())
                .map(|f| v1::Snapshot {
                    image: inputs.snapshot.clone(),
                    face_type_code: f.code.clone(),
                })
                .collect();
            let t = StepTrace::with_bearer(bearer);
            let verdict = liveness
                .submit_challenge_response(t.request(v1::SubmitChallengeResponseRequest {
                    appkey: appkey.clone(),
                    challenge_key: ch.challenge_key,
                    snapshots,
                }))
                .await
                .map_err(fail("submit 2D snapshots"))?
                .into_inner()
                .verdict
                .unwrap_or_default();
            step(out, 3, "submit 2D snapshots", &t, &verdict_line(&verdict));
        }
    }

    // 3. Documents.
    let t = StepTrace::with_bearer(bearer);
    let (label, code) = match plan.document {
        DocumentChoice::LicenceImage
        | DocumentChoice::LicencePdf
        | DocumentChoice::LicenceBinary => {
            use v1::submit_digital_licence_request::Licence;
            let licence = match plan.document {
                DocumentChoice::LicenceImage => Licence::QrImage(inputs.licence_image.clone()),
                DocumentChoice::LicencePdf => Licence::Pdf(inputs.licence_pdf.clone()),
                _ => Licence::QrBinary(inputs.licence_binary.clone()),
            };
            let r = documents
                .submit_digital_licence(t.request(v1::SubmitDigitalLicenceRequest {
                    appkey: appkey.clone(),
                    licence: Some(licence),
                }))
                .await
                .map_err(fail("submit digital licence"))?
                .into_inner();
            ("submit digital licence", r.document_code)
        }
        doc => {
            let images = inputs
                .document(doc)
                .into_iter()
                .map(|content: Bytes| v1::DocumentImage { content })
                .collect();
            let r = documents
                .submit_document_images(t.request(v1::SubmitDocumentImagesRequest {
                    appkey: appkey.clone(),
                    images,
                }))
                .await
                .map_err(fail("submit document images"))?
                .into_inner();
            ("submit document images", r.document_code)
        }
    };
    step(out, 4, label, &t, &format!("document code {code}"));

    // 4. The result, pushed by WatchJourney.
    let t = StepTrace::with_bearer(bearer);
    step(out, 5, "watch journey", &t, "waiting for the result");
    let mut req = t.request(v1::WatchJourneyRequest {
        journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.clone())),
    });
    req.set_timeout(plan.result_timeout);
    let mut stream = journeys
        .watch_journey(req)
        .await
        .map_err(fail("watch journey"))?
        .into_inner();
    let mut last = None;
    while let Some(event) = stream.message().await.map_err(fail("watch journey"))? {
        let _ = writeln!(out, "    status: {}", event.raw_status);
        if let Some(result) = event.result {
            last = Some(result);
        }
    }
    let result = last.ok_or("the watch stream closed without a result")?;
    let _ = writeln!(
        out,
        "\nJourney {} finished: {}",
        created.journey_ref, result.raw_status
    );
    let _ = write!(out, "{}", super::summary::render(&result));
    Ok(result)
}

fn verdict_line(v: &v1::LivenessVerdict) -> String {
    format!(
        "valid={} codID={} cause={:?} protocol={}",
        v.valid, v.raw_code, v.cause, v.protocol
    )
}
