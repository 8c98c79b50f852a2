//! `JourneyService`: appkeys, results, and the `WatchJourney` stream.

use tonic::{Request, Response, Status};

use super::validate;
use crate::{
    context::CallContext,
    domain::Permission,
    events::{JourneyHub, WatchStream, WatchTarget},
    guard::Guard,
    journey::JourneyCore,
    proto::{services::JourneyService, v1},
    telemetry::{self, TelemetryConfig},
};

/// The `JourneyService` implementation.
pub struct JourneyApi {
    core: JourneyCore,
    hub: JourneyHub,
    telemetry: TelemetryConfig,
    guard: Guard,
}

impl JourneyApi {
    /// A service over the journey core and the event hub.
    pub fn new(core: JourneyCore, hub: JourneyHub) -> Self {
        Self {
            core,
            hub,
            telemetry: TelemetryConfig::default(),
            guard: Guard::default(),
        }
    }

    /// The spending guard (idempotency, budgets); default: one process,
    /// no budgets.
    pub fn with_guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    /// What goes on spans (`record_customer_reference`).
    pub fn with_telemetry(mut self, telemetry: TelemetryConfig) -> Self {
        self.telemetry = telemetry;
        self
    }
}

#[tonic::async_trait]
impl JourneyService for JourneyApi {
    #[tracing::instrument(skip_all, fields(idgate.journey_ref))]
    async fn create_journey(
        &self,
        request: Request<v1::CreateJourneyRequest>,
    ) -> Result<Response<v1::CreateJourneyResponse>, Status> {
        let caller = super::authorize(&request, Permission::CreateJourney)?;
        let ctx = CallContext::of(&request);
        let span = super::server_span(&request);
        let req = validate::create_journey(request.get_ref())?;
        if let Some(span) = &span {
            telemetry::record_customer_reference(
                span,
                &req.user.customer_reference,
                &self.telemetry,
            );
        }
        let profile = req.operator_profile.as_deref();
        super::authorize_profile(
            &request,
            &caller,
            profile,
            self.core.credentials().default_profile(),
        )?;
        let journey = self
            .guard
            .create_journey(&ctx, &req.user, profile, req.request_id.as_ref(), || {
                self.core.create_journey(&ctx, &req.user, profile)
            })
            .await?
            .journey;
        super::record_journey(&span, &journey.appkey);
        // Lets callers watch by reference instead of by appkey.
        self.hub.register_shared(&journey.appkey).await;
        Ok(Response::new(v1::CreateJourneyResponse {
            appkey: journey.appkey.expose().to_owned(),
            journey_ref: journey.journey_ref.to_string(),
            expire_time: Some(prost_types::Timestamp {
                seconds: journey.expires_at.unix_timestamp(),
                nanos: 0,
            }),
        }))
    }

    #[tracing::instrument(skip_all, fields(idgate.journey_ref))]
    async fn get_journey_result(
        &self,
        request: Request<v1::GetJourneyResultRequest>,
    ) -> Result<Response<v1::GetJourneyResultResponse>, Status> {
        super::authorize(&request, Permission::ReadResult)?;
        let ctx = CallContext::of(&request);
        let span = super::server_span(&request);
        let appkey = validate::appkey_only(&request.get_ref().appkey)?;
        super::record_journey(&span, &appkey);
        let result = self.core.journey_result(&ctx, &appkey).await?;
        Ok(Response::new(v1::GetJourneyResultResponse {
            result: Some(result),
        }))
    }

    type WatchJourneyStream = WatchStream;

    #[tracing::instrument(skip_all, fields(idgate.journey_ref))]
    async fn watch_journey(
        &self,
        request: Request<v1::WatchJourneyRequest>,
    ) -> Result<Response<Self::WatchJourneyStream>, Status> {
        // tonic does not enforce the caller's deadline on streams: the
        // stream ends itself with DEADLINE_EXCEEDED when it passes.
        super::authorize(&request, Permission::Watch)?;
        let ctx = CallContext::of(&request);
        let span = super::server_span(&request);
        let target = validate::watch_journey(request.get_ref())?;
        if let WatchTarget::Appkey(appkey) = &target {
            super::record_journey(&span, appkey);
        }
        Ok(Response::new(self.hub.watch_shared(target, &ctx).await?))
    }
}
