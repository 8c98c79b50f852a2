//! `LivenessService`: 2D challenges and snapshots on the core service; 3D
//! sessions through the vendor channel router.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::{JourneyAccess, LimitsConfig, validate};
use crate::{
    channels::ChannelRouter,
    context::CallContext,
    domain::Permission,
    guard::{BilledOperation, Guard},
    journey::JourneyCore,
    proto::{services::LivenessService, v1},
};

/// The `LivenessService` implementation.
pub struct LivenessApi {
    core: JourneyCore,
    router: Arc<ChannelRouter>,
    limits: LimitsConfig,
    guard: Guard,
    access: JourneyAccess,
}

impl LivenessApi {
    /// A service over the journey core and the 3D channel router,
    /// refusing requests past `limits`.
    pub fn new(core: JourneyCore, router: Arc<ChannelRouter>, limits: LimitsConfig) -> Self {
        Self {
            core,
            router,
            limits,
            guard: Guard::default(),
            access: JourneyAccess::default(),
        }
    }

    /// The journey checks (issued here, owned by the caller); default: no
    /// directory, so every appkey is refused as foreign.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
    }

    /// The spending guard, which bills 3D session starts; default: no
    /// budgets.
    pub fn with_guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }
}

#[tonic::async_trait]
impl LivenessService for LivenessApi {
    async fn create_challenges(
        &self,
        request: Request<v1::CreateChallengesRequest>,
    ) -> Result<Response<v1::CreateChallengesResponse>, Status> {
        let caller = super::authorize(&request, Permission::Challenges2D)?;
        let _slot = self.access.call_slot(request.extensions(), &caller)?;
        let ctx = CallContext::of(&request);
        let span = super::server_span(&request);
        let appkey = validate::appkey_only(&request.get_ref().appkey)?;
        super::record_journey(&span, &appkey);
        self.access
            .appkey(request.extensions(), &caller, &appkey)
            .await?;
        let challenges = self.core.create_challenges(&ctx, &appkey).await?;
        Ok(Response::new(challenges))
    }

    async fn submit_challenge_response(
        &self,
        request: Request<v1::SubmitChallengeResponseRequest>,
    ) -> Result<Response<v1::SubmitChallengeResponseResponse>, Status> {
        let audit = super::Audit::start(&request, "challenges_2d", false);
        let result = async {
            let caller = super::authorize(&request, Permission::Challenges2D)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let (_, extensions, message) = request.into_parts();
            let req = validate::challenge_response(message, &self.limits)?;
            audit.journey(&super::record_journey(&span, &req.appkey));
            self.access
                .appkey(&extensions, &caller, &req.appkey)
                .await?;
            let verdict = self
                .core
                .submit_challenge_response(&ctx, &req.appkey, &req.challenge_key, &req.snapshots)
                .await?;
            Ok(Response::new(v1::SubmitChallengeResponseResponse {
                verdict: Some(verdict),
            }))
        }
        .await;
        audit.finish(result)
    }

    async fn start_session3_d(
        &self,
        request: Request<v1::StartSession3DRequest>,
    ) -> Result<Response<v1::StartSession3DResponse>, Status> {
        let audit = super::Audit::start(&request, "session_3d", false);
        let result = async {
            let caller = super::authorize(&request, Permission::Session3D)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let req = validate::start_session(request.get_ref())?;
            audit.journey(&super::record_journey(&span, &req.appkey));
            self.access
                .billed(
                    request.extensions(),
                    &caller,
                    &req.appkey,
                    &self.guard,
                    BilledOperation::StartSession3D,
                )
                .await?;
            let started = self
                .router
                .start_session(&ctx, &req.appkey, &req.user_agent)
                .await?;
            if let Some(span) = &span {
                span.record("idgate.channel", started.channel.as_str());
            }
            Ok(Response::new(v1::StartSession3DResponse {
                session_token: started.grant.token.expose().to_owned(),
                vendor: started.grant.vendor,
                vendor_url: started.grant.vendor_url,
                contingency: started.grant.contingency,
                channel: started.channel,
            }))
        }
        .await;
        audit.finish(result)
    }

    async fn verify_liveness3_d(
        &self,
        request: Request<v1::VerifyLiveness3DRequest>,
    ) -> Result<Response<v1::VerifyLiveness3DResponse>, Status> {
        let audit = super::Audit::start(&request, "verify_3d", false);
        let result = async {
            let caller = super::authorize(&request, Permission::Verify3D)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let req = validate::verify_liveness(request.get_ref())?;
            audit.journey(&super::record_journey(&span, &req.appkey));
            self.access
                .appkey(request.extensions(), &caller, &req.appkey)
                .await?;
            let verdict = self
                .router
                .verify(
                    &ctx,
                    &req.appkey,
                    &req.session_token,
                    req.channel.as_deref(),
                )
                .await?;
            Ok(Response::new(v1::VerifyLiveness3DResponse {
                verdict: Some(verdict),
            }))
        }
        .await;
        audit.finish(result)
    }
}
