//! Journey, liveness and document calls in one line each: the steps a test
//! takes a journey through, either expected to succeed or returning the
//! status for the test to inspect.

use std::time::Duration;

use idgate::{proto::v1, sandbox::samples::LivenessOutcome};

use super::{TestGateway, happy_person, rg_images, snapshots_for};

impl TestGateway {
    /// Creates a journey for `person`, returning the response.
    pub async fn create_journey_for(
        &self,
        person: v1::CreateJourneyRequest,
    ) -> v1::CreateJourneyResponse {
        self.journeys()
            .create_journey(person)
            .await
            .expect("create journey")
            .into_inner()
    }

    /// Creates a journey for the sandbox's happy person; returns the appkey.
    pub async fn create_journey(&self) -> String {
        self.create_journey_for(happy_person()).await.appkey
    }

    /// Reads the journey result of `appkey`.
    pub async fn result(&self, appkey: &str) -> Result<v1::JourneyResult, tonic::Status> {
        self.journeys()
            .get_journey_result(v1::GetJourneyResultRequest {
                appkey: appkey.into(),
            })
            .await
            .map(|r| r.into_inner().result.expect("result set"))
    }

    /// Runs a valid 3D liveness proof on `appkey`.
    pub async fn pass_3d(&self, appkey: &str) -> v1::LivenessVerdict {
        let mut l = self.liveness();
        let s = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "test".into(),
            })
            .await
            .expect("start session")
            .into_inner();
        l.verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.into(),
            session_token: s.session_token,
            channel: s.channel,
        })
        .await
        .expect("verify")
        .into_inner()
        .verdict
        .expect("verdict")
    }

    /// `StartSession3D` for `appkey`.
    pub async fn start_3d(
        &self,
        appkey: &str,
    ) -> Result<v1::StartSession3DResponse, tonic::Status> {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: "test".into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// `VerifyLiveness3D`, naming `channel` (empty: none).
    pub async fn verify_3d(
        &self,
        appkey: &str,
        session_token: &str,
        channel: &str,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.liveness()
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: appkey.into(),
                session_token: session_token.into(),
                channel: channel.into(),
            })
            .await
            .map(|r| r.into_inner().verdict.expect("verdict"))
    }

    /// Starts a 3D session with `user_agent` and verifies it.
    pub async fn run_3d(
        &self,
        appkey: &str,
        user_agent: &str,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        let mut l = self.liveness();
        let s = l
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: user_agent.into(),
            })
            .await?
            .into_inner();
        l.verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.into(),
            session_token: s.session_token,
            channel: s.channel,
        })
        .await
        .map(|r| r.into_inner().verdict.expect("verdict set"))
    }

    /// Generates 2D challenges on `appkey`.
    pub async fn challenges(
        &self,
        appkey: &str,
    ) -> Result<v1::CreateChallengesResponse, tonic::Status> {
        self.liveness()
            .create_challenges(v1::CreateChallengesRequest {
                appkey: appkey.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Submits `snapshots` for the challenges `challenge_key` of `appkey`.
    pub async fn submit_snapshots(
        &self,
        appkey: &str,
        challenge_key: &str,
        snapshots: Vec<v1::Snapshot>,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.liveness()
            .submit_challenge_response(v1::SubmitChallengeResponseRequest {
                appkey: appkey.into(),
                challenge_key: challenge_key.into(),
                snapshots,
            })
            .await
            .map(|r| r.into_inner().verdict.expect("verdict set"))
    }

    /// Answers the challenges `ch` of `appkey` with one snapshot per
    /// challenge, all showing `outcome`.
    pub async fn answer_challenges(
        &self,
        appkey: &str,
        ch: &v1::CreateChallengesResponse,
        outcome: LivenessOutcome,
    ) -> Result<v1::LivenessVerdict, tonic::Status> {
        self.submit_snapshots(appkey, &ch.challenge_key, snapshots_for(ch, outcome))
            .await
    }

    /// A whole 2D proof on `appkey` ending with `outcome`: challenges, then
    /// one snapshot per challenge. Returns the verdict and the first
    /// snapshot sent (the frontal photo of the result).
    pub async fn pass_2d(
        &self,
        appkey: &str,
        outcome: LivenessOutcome,
    ) -> (v1::LivenessVerdict, Vec<u8>) {
        let ch = self.challenges(appkey).await.expect("create challenges");
        let snapshots = snapshots_for(&ch, outcome);
        let first = snapshots[0].image.to_vec();
        let verdict = self
            .submit_snapshots(appkey, &ch.challenge_key, snapshots)
            .await
            .expect("submit snapshots");
        (verdict, first)
    }

    /// Submits RG front and back on `appkey`.
    pub async fn submit_rg(&self, appkey: &str) -> i64 {
        self.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: rg_images(),
            })
            .await
            .expect("submit documents")
            .into_inner()
            .document_code
    }

    /// Submits `images` as document images of `appkey`.
    pub async fn submit_images(
        &self,
        appkey: &str,
        images: &[Vec<u8>],
    ) -> Result<i64, tonic::Status> {
        self.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: appkey.into(),
                images: images
                    .iter()
                    .map(|i| v1::DocumentImage {
                        content: i.clone().into(),
                    })
                    .collect(),
            })
            .await
            .map(|r| r.into_inner().document_code)
    }

    /// Submits a digital licence in one of its forms.
    pub async fn submit_licence(
        &self,
        appkey: &str,
        licence: v1::submit_digital_licence_request::Licence,
    ) -> Result<i64, tonic::Status> {
        self.documents()
            .submit_digital_licence(v1::SubmitDigitalLicenceRequest {
                appkey: appkey.into(),
                licence: Some(licence),
            })
            .await
            .map(|r| r.into_inner().document_code)
    }

    /// Moves the sandbox's clock past document processing.
    pub fn finish_processing(&self) {
        self.clock.advance(Duration::from_secs(3));
    }

    /// A journey with a liveness proof and RG documents submitted:
    /// processing runs until [`TestGateway::finish_processing`].
    pub async fn journey_in_processing(&self) -> v1::CreateJourneyResponse {
        let created = self.create_journey_for(happy_person()).await;
        assert!(self.pass_3d(&created.appkey).await.valid);
        self.submit_rg(&created.appkey).await;
        created
    }

    /// A journey watched from its creation (the stream `watch` asks for)
    /// and then taken, as [`TestGateway::journey_in_processing`], through
    /// its liveness proof and RG documents. The watch started before the
    /// proof: with a webhook receiver it waits for the notice rather than
    /// read the result at once.
    pub async fn watched_journey_in_processing(
        &self,
        watch: impl FnOnce(&v1::CreateJourneyResponse) -> v1::WatchJourneyRequest,
    ) -> (
        v1::CreateJourneyResponse,
        tonic::Streaming<v1::WatchJourneyResponse>,
    ) {
        let created = self.create_journey_for(happy_person()).await;
        let watcher = self.watch(watch(&created)).await;
        assert!(self.pass_3d(&created.appkey).await.valid);
        self.submit_rg(&created.appkey).await;
        (created, watcher)
    }
}
