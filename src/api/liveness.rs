//! `LivenessService`: 2D challenges and snapshots on the core service; 3D
//! sessions through the vendor channel router.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::{Admitted, JourneyAccess, LimitsConfig, admit, validate};
use crate::{
    Error,
    channels::ChannelRouter,
    cluster::{JourneysConfig, MemoryProgress, ProgressStore},
    domain::{Appkey, JourneyRef, Operation},
    journey::JourneyCore,
    proto::{services::LivenessService, v1},
    spend::{BilledOperation, SpendGuard},
};

/// The `LivenessService` implementation.
pub struct LivenessApi {
    core: JourneyCore,
    router: Arc<ChannelRouter>,
    limits: LimitsConfig,
    guard: SpendGuard,
    access: JourneyAccess,
    /// Where a journey's liveness proof is marked as submitted, so that a
    /// watch opened later reads the result at once.
    progress: Arc<dyn ProgressStore>,
}

impl LivenessApi {
    /// A service over the journey core and the 3D channel router,
    /// refusing requests past `limits`.
    pub fn new(core: JourneyCore, router: Arc<ChannelRouter>, limits: LimitsConfig) -> Self {
        Self {
            core,
            router,
            limits,
            guard: SpendGuard::default(),
            access: JourneyAccess::default(),
            progress: {
                let c = JourneysConfig::default();
                Arc::new(MemoryProgress::new(c.retention(), c.max_entries))
            },
        }
    }

    /// Where liveness proofs are marked (the journey watches' progress);
    /// default: a store of its own, which no watch reads.
    pub fn with_progress(mut self, progress: Arc<dyn ProgressStore>) -> Self {
        self.progress = progress;
        self
    }

    /// Marks the journey of `appkey` as having its liveness proof in, once
    /// the vendor took it: the result may exist from now on.
    async fn proof_submitted(&self, appkey: &Appkey) {
        self.progress
            .mark_submitted(&JourneyRef::from_appkey(appkey))
            .await;
    }

    /// The journey checks (issued here, owned by the caller); default: no
    /// record held, so every appkey is refused as foreign.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
    }

    /// The spending guard, which bills 3D session starts; default: no
    /// budgets.
    pub fn with_guard(mut self, guard: SpendGuard) -> Self {
        self.guard = guard;
        self
    }
}

impl LivenessApi {
    async fn inner_create_challenges(
        &self,
        admitted: &mut Admitted,
        message: v1::CreateChallengesRequest,
    ) -> Result<v1::CreateChallengesResponse, Error> {
        let appkey = validate::appkey_only(&message.appkey)?;
        admitted.journey_of(&appkey);
        self.access.appkey(admitted.caller(), &appkey).await?;
        admitted.sending(Operation::Challenge);
        self.core.create_challenges(admitted.ctx(), &appkey).await
    }

    async fn inner_submit_challenge_response(
        &self,
        admitted: &mut Admitted,
        message: v1::SubmitChallengeResponseRequest,
    ) -> Result<v1::SubmitChallengeResponseResponse, Error> {
        let req = validate::challenge_response(message, &self.limits)?;
        admitted.journey_of(&req.appkey);
        self.access.appkey(admitted.caller(), &req.appkey).await?;
        admitted.sending(Operation::Captcha);
        let verdict = self
            .core
            .submit_challenge_response(
                admitted.ctx(),
                &req.appkey,
                &req.challenge_key,
                &req.snapshots,
            )
            .await?;
        self.proof_submitted(&req.appkey).await;
        Ok(v1::SubmitChallengeResponseResponse {
            verdict: Some(verdict),
        })
    }

    async fn inner_start_session(
        &self,
        admitted: &mut Admitted,
        message: v1::StartSession3DRequest,
    ) -> Result<v1::StartSession3DResponse, Error> {
        let req = validate::start_session(&message)?;
        admitted.journey_of(&req.appkey);
        self.access
            .billed(
                admitted.caller(),
                &req.appkey,
                &self.guard,
                BilledOperation::StartSession3D,
            )
            .await?;
        admitted.sending(Operation::SessionToken3D);
        let started = self
            .router
            .start_session(admitted.ctx(), &req.appkey, &req.user_agent)
            .await?;
        if let Some(span) = admitted.span() {
            span.record("idgate.channel", started.channel.as_str());
        }
        Ok(v1::StartSession3DResponse {
            session_token: started.grant.token.expose().to_owned(),
            vendor: started.grant.vendor,
            vendor_url: started.grant.vendor_url,
            contingency: started.grant.contingency,
            channel: started.channel,
        })
    }

    async fn inner_verify(
        &self,
        admitted: &mut Admitted,
        message: v1::VerifyLiveness3DRequest,
    ) -> Result<v1::VerifyLiveness3DResponse, Error> {
        let req = validate::verify_liveness(&message)?;
        admitted.journey_of(&req.appkey);
        self.access.appkey(admitted.caller(), &req.appkey).await?;
        admitted.sending(Operation::Liveness3D);
        let verdict = self
            .router
            .verify(
                admitted.ctx(),
                &req.appkey,
                &req.session_token,
                req.channel.as_deref(),
            )
            .await?;
        self.proof_submitted(&req.appkey).await;
        Ok(v1::VerifyLiveness3DResponse {
            verdict: Some(verdict),
        })
    }
}

#[tonic::async_trait]
impl LivenessService for LivenessApi {
    async fn create_challenges(
        &self,
        request: Request<v1::CreateChallengesRequest>,
    ) -> Result<Response<v1::CreateChallengesResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_create_challenges(&mut admitted, message).await;
        admitted.finish(result)
    }

    async fn submit_challenge_response(
        &self,
        request: Request<v1::SubmitChallengeResponseRequest>,
    ) -> Result<Response<v1::SubmitChallengeResponseResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self
            .inner_submit_challenge_response(&mut admitted, message)
            .await;
        admitted.finish(result)
    }

    async fn start_session3_d(
        &self,
        request: Request<v1::StartSession3DRequest>,
    ) -> Result<Response<v1::StartSession3DResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_start_session(&mut admitted, message).await;
        admitted.finish(result)
    }

    async fn verify_liveness3_d(
        &self,
        request: Request<v1::VerifyLiveness3DRequest>,
    ) -> Result<Response<v1::VerifyLiveness3DResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_verify(&mut admitted, message).await;
        admitted.finish(result)
    }
}
