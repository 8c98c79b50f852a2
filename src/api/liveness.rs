//! `LivenessService`: 2D challenges and snapshots on the core service; 3D
//! sessions through the vendor channel router.
//!
//! Each method is the door's shim ([`super::admitted`]): the journey is
//! found, checked and billed before the `inner_*` function runs.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::{
    Admitted, ApiContext,
    validate::{ChallengeResponse, LivenessCheck, SessionStart},
};
use crate::{
    Error,
    channels::ChannelRouter,
    cluster::ProgressStore,
    domain::{Appkey, JourneyRef},
    journey::JourneyCore,
    proto::{services::LivenessService, v1},
};

/// The `LivenessService` implementation.
pub struct LivenessApi {
    api: Arc<ApiContext>,
    router: Arc<ChannelRouter>,
    /// Where a journey's liveness proof is marked as submitted, so that a
    /// watch opened later reads the result at once.
    progress: Arc<dyn ProgressStore>,
}

impl LivenessApi {
    /// A service in the public API's context, over the 3D channel router,
    /// marking liveness proofs in `progress` (the journey watches').
    pub fn new(
        api: Arc<ApiContext>,
        router: Arc<ChannelRouter>,
        progress: Arc<dyn ProgressStore>,
    ) -> Self {
        Self {
            api,
            router,
            progress,
        }
    }

    fn core(&self) -> &JourneyCore {
        self.api.journeys().core()
    }

    /// Marks the journey of `appkey` as having its liveness proof in, once
    /// the vendor took it: the result may exist from now on.
    async fn proof_submitted(&self, appkey: &Appkey) {
        self.progress
            .mark_submitted(&JourneyRef::from_appkey(appkey))
            .await;
    }

    async fn inner_create_challenges(
        &self,
        admitted: &Admitted,
        appkey: &Appkey,
    ) -> Result<v1::CreateChallengesResponse, Error> {
        self.core().create_challenges(admitted.ctx(), appkey).await
    }

    async fn inner_submit_challenge_response(
        &self,
        admitted: &Admitted,
        req: ChallengeResponse,
    ) -> Result<v1::SubmitChallengeResponseResponse, Error> {
        let verdict = self
            .core()
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
        admitted: &Admitted,
        req: SessionStart,
    ) -> Result<v1::StartSession3DResponse, Error> {
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
        admitted: &Admitted,
        req: LivenessCheck,
    ) -> Result<v1::VerifyLiveness3DResponse, Error> {
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
        let (admitted, appkey, _) = self.api.enter(request).await?;
        let result = self.inner_create_challenges(&admitted, &appkey).await;
        admitted.finish(result)
    }

    async fn submit_challenge_response(
        &self,
        request: Request<v1::SubmitChallengeResponseRequest>,
    ) -> Result<Response<v1::SubmitChallengeResponseResponse>, Status> {
        let (admitted, req, _) = self.api.enter(request).await?;
        let result = self.inner_submit_challenge_response(&admitted, req).await;
        admitted.finish(result)
    }

    async fn start_session3_d(
        &self,
        request: Request<v1::StartSession3DRequest>,
    ) -> Result<Response<v1::StartSession3DResponse>, Status> {
        let (admitted, req, _) = self.api.enter(request).await?;
        let result = self.inner_start_session(&admitted, req).await;
        admitted.finish(result)
    }

    async fn verify_liveness3_d(
        &self,
        request: Request<v1::VerifyLiveness3DRequest>,
    ) -> Result<Response<v1::VerifyLiveness3DResponse>, Status> {
        let (admitted, req, _) = self.api.enter(request).await?;
        let result = self.inner_verify(&admitted, req).await;
        admitted.finish(result)
    }
}
