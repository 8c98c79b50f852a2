//! One journey as a caller makes it, with the hostile callers that ride
//! along (a caller on a made-up appkey, an abandoned watcher).

use std::{
    sync::{Arc, Mutex, atomic::Ordering},
    time::Duration,
};

use idgate::{
    domain::Operation,
    proto::v1::{
        self, document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{
        SandboxHandle,
        samples::{self, DocumentKind, DocumentType, Side},
    },
};
use tonic::transport::Channel;

use crate::tally::{Rng, Tally, crate_lock, maybe_fault};

/// The RPCs a journey makes that consume its appkey, with the upstream
/// operation each one sends.
pub const CONSUMING: [(&str, Operation); 2] = [
    ("VerifyLiveness3D", Operation::Liveness3D),
    ("SubmitDocumentImages", Operation::DocumentImages),
];
pub struct Journey {
    pub channel: Channel,
    pub sandbox: Arc<SandboxHandle>,
    pub rng: Arc<Mutex<Rng>>,
    pub percent: u64,
    pub fake_percent: u64,
    pub abandon_percent: u64,
    pub tally: Arc<Tally>,
}

/// The RG images of the sample document, as a request carries them.
fn rg_images() -> Vec<v1::DocumentImage> {
    Side::ALL
        .into_iter()
        .map(|side| v1::DocumentImage {
            content: samples::document_image(DocumentKind::new(DocumentType::Rg, side)).into(),
        })
        .collect()
}

impl Journey {
    fn fault(&self, op: Operation) {
        maybe_fault(&self.sandbox, &self.rng, self.percent, op, &self.tally);
    }

    /// True with `percent` chance.
    fn chance(&self, percent: u64) -> bool {
        crate_lock(&self.rng).below(100) < percent
    }

    /// Opens a `WatchJourney` on `target`, reads for a few milliseconds,
    /// and drops the stream: a caller that went away.
    async fn abandon_watch(&self, target: v1::watch_journey_request::Journey) {
        let wait = Duration::from_millis(crate_lock(&self.rng).below(50));
        let mut request = tonic::Request::new(v1::WatchJourneyRequest {
            journey: Some(target),
        });
        request.set_timeout(Duration::from_secs(30));
        self.tally.abandoned.fetch_add(1, Ordering::Relaxed);
        match JourneyServiceClient::new(self.channel.clone())
            .watch_journey(request)
            .await
        {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                let _ = tokio::time::timeout(wait, stream.message()).await;
                self.tally.record::<()>("WatchJourney[abandoned]", &Ok(()));
            }
            Err(status) => self
                .tally
                .record::<()>("WatchJourney[abandoned]", &Err(status)),
        }
    }

    /// A caller on a random appkey the gateway never issued: every
    /// appkey-taking RPC once, then a watcher it abandons.
    async fn fake_caller(&self) {
        let appkey = {
            let mut rng = crate_lock(&self.rng);
            format!("{:016x}{:016x}", rng.next(), rng.next())
        };
        self.tally.fake_callers.fetch_add(1, Ordering::Relaxed);
        let mut l = LivenessServiceClient::new(self.channel.clone());
        let mut d = DocumentServiceClient::new(self.channel.clone());
        let started = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "soak".into(),
            })
            .await;
        self.tally.record("StartSession3D[fake]", &started);
        let verdict = l
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: "fake-session-token".into(),
                channel: String::new(),
            })
            .await;
        self.tally.record("VerifyLiveness3D[fake]", &verdict);
        let submitted = d
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            })
            .await;
        self.tally.record("SubmitDocumentImages[fake]", &submitted);
        self.abandon_watch(v1::watch_journey_request::Journey::Appkey(appkey))
            .await;
    }

    /// One journey, ended by its first failed step.
    pub async fn run(self) -> Option<()> {
        let mut j =
            JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20);
        let mut l = LivenessServiceClient::new(self.channel.clone());
        let mut d = DocumentServiceClient::new(self.channel.clone());
        if self.chance(self.fake_percent) {
            self.fake_caller().await;
        }
        let p = samples::HAPPY_PERSON;
        let b: Vec<&str> = p.birth_date.split('/').collect();
        self.fault(Operation::Appkey);
        let created = j
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", b[2], b[1], b[0]),
                customer_reference: "SOAK".into(),
                operator_profile: String::new(),
                request_id: String::new(),
            })
            .await;
        self.tally.record("CreateJourney", &created);
        let created = created.ok()?.into_inner();
        let appkey = created.appkey;
        if self.chance(self.abandon_percent) {
            self.abandon_watch(v1::watch_journey_request::Journey::Appkey(appkey.clone()))
                .await;
        }

        self.fault(Operation::SessionToken3D);
        let session = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "soak".into(),
            })
            .await;
        self.tally.record("StartSession3D", &session);
        let session = session.ok()?.into_inner();

        self.fault(Operation::Liveness3D);
        let verdict = l
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: session.session_token,
                channel: session.channel,
            })
            .await;
        self.tally.record("VerifyLiveness3D", &verdict);
        verdict.ok()?;

        self.fault(Operation::DocumentImages);
        let images = rg_images();
        let submitted = d
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images,
            })
            .await;
        self.tally.record("SubmitDocumentImages", &submitted);
        submitted.ok()?;

        self.fault(Operation::Result);
        let mut watch = tonic::Request::new(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                created.journey_ref,
            )),
        });
        watch.set_timeout(Duration::from_secs(30));
        let stream = j.watch_journey(watch).await;
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(status) => {
                self.tally.record::<()>("WatchJourney", &Err(status));
                return None;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(event)) if event.result.is_some() => {
                    self.tally.record("WatchJourney", &Ok(()));
                    self.tally.completed.fetch_add(1, Ordering::Relaxed);
                    return Some(());
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.tally.record::<()>(
                        "WatchJourney",
                        &Err(tonic::Status::internal("stream ended without a result")),
                    );
                    return None;
                }
                Err(status) => {
                    self.tally.record::<()>("WatchJourney", &Err(status));
                    return None;
                }
            }
        }
    }
}
