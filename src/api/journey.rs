//! `JourneyService`: appkeys, results, and the `WatchJourney` stream.
//!
//! Each method is the door's shim ([`super::admitted`]); the work is in
//! the `inner_*` functions, which return the crate's [`Error`].

use tonic::{Request, Response, Status};

use super::{
    Admitted, JourneyAccess, admit,
    revocation::{Revocable, Revocations, Watched},
    validate,
};
use crate::{
    Error,
    auth::CallerUpdates,
    domain::Operation,
    events::{JourneyWatches, WatchStream, WatchTarget},
    journey::JourneyCore,
    proto::{services::JourneyService, v1},
    spend::SpendGuard,
    telemetry::{self, TelemetryConfig},
};

/// The `JourneyService` implementation.
pub struct JourneyApi {
    core: JourneyCore,
    watches: JourneyWatches,
    telemetry: TelemetryConfig,
    guard: SpendGuard,
    access: JourneyAccess,
    revocations: Revocations,
}

impl JourneyApi {
    /// A service over the journey core and the journey watches.
    pub fn new(core: JourneyCore, watches: JourneyWatches) -> Self {
        let guard = SpendGuard::default();
        Self {
            access: JourneyAccess::new(guard.journeys().clone(), false),
            core,
            watches,
            telemetry: TelemetryConfig::default(),
            guard,
            revocations: Revocations::default(),
        }
    }

    /// Open `WatchJourney` streams re-checked against each caller table
    /// `updates` brings (see `revocation`); default: never (an open
    /// gateway).
    pub fn with_caller_updates(mut self, updates: CallerUpdates) -> Self {
        self.revocations = Revocations::new(updates);
        self
    }

    /// The journey checks; default: the default guard's records, foreign
    /// appkeys refused.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
    }

    /// The spending guard (idempotency, budgets, journey records);
    /// default: one process, no budgets.
    pub fn with_guard(mut self, guard: SpendGuard) -> Self {
        self.guard = guard;
        self
    }

    /// What goes on spans (`record_customer_reference`).
    pub fn with_telemetry(mut self, telemetry: TelemetryConfig) -> Self {
        self.telemetry = telemetry;
        self
    }

    async fn inner_create_journey(
        &self,
        admitted: &mut Admitted,
        message: v1::CreateJourneyRequest,
    ) -> Result<v1::CreateJourneyResponse, Error> {
        let req = validate::create_journey(&message)?;
        if let Some(span) = admitted.span() {
            telemetry::record_customer_reference(
                span,
                &req.user.customer_reference,
                &self.telemetry,
            );
        }
        let profile = req.operator_profile.as_deref();
        admitted.check_profile(profile, self.core.credentials().default_profile())?;
        let ctx = *admitted.ctx();
        // Marked when the guard lets the call through to the vendor (after
        // its record, claim and budget checks), not before.
        let upstream = admitted.upstream_marker();
        let created = self
            .guard
            .create_journey(
                &ctx,
                &req.user,
                admitted.caller(),
                profile,
                req.request_id.as_ref(),
                || {
                    upstream.sending(Operation::Credential.as_str());
                    self.core.create_journey(&ctx, &req.user, profile)
                },
            )
            .await?;
        let journey = created.journey;
        admitted.journey_of(&journey.appkey);
        Ok(v1::CreateJourneyResponse {
            appkey: journey.appkey.expose().to_owned(),
            journey_ref: journey.journey_ref.to_string(),
            expire_time: Some(prost_types::Timestamp {
                seconds: journey.expires_at.unix_timestamp(),
                nanos: 0,
            }),
        })
    }

    async fn inner_get_journey_result(
        &self,
        admitted: &mut Admitted,
        message: v1::GetJourneyResultRequest,
    ) -> Result<v1::GetJourneyResultResponse, Error> {
        let appkey = validate::appkey_only(&message.appkey)?;
        admitted.journey_of(&appkey);
        self.access.appkey(admitted.caller(), &appkey).await?;
        admitted.sending(Operation::Result);
        let result = self.core.journey_result(admitted.ctx(), &appkey).await?;
        Ok(v1::GetJourneyResultResponse {
            result: Some(super::view::apply(admitted.caller().result_view, result)),
        })
    }

    async fn inner_watch_journey(
        &self,
        admitted: &mut Admitted,
        message: v1::WatchJourneyRequest,
        revocable: Option<Revocable>,
    ) -> Result<WatchStream, Error> {
        // tonic does not enforce the caller's deadline on streams: the
        // stream ends itself with DEADLINE_EXCEEDED when it passes.
        let (appkey, watched) = match validate::watch_journey(&message)? {
            WatchTarget::Appkey(appkey) => {
                admitted.journey_of(&appkey);
                let issued = self.access.appkey(admitted.caller(), &appkey).await?;
                (appkey, Watched::from(&issued))
            }
            WatchTarget::Journey(journey) => {
                admitted.journey(&journey);
                let record = self.access.reference(admitted.caller(), &journey).await?;
                admitted.journey_of(&record.appkey);
                (record.appkey, Watched::Here(record.owner))
            }
        };
        let view = super::view::viewer(admitted.caller().result_view);
        let stream =
            self.watches
                .watch_viewed(WatchTarget::Appkey(appkey), admitted.ctx(), view)?;
        match revocable {
            Some(revocable) => revocable.guard(stream, admitted.caller(), watched),
            None => Ok(stream),
        }
    }
}

#[tonic::async_trait]
impl JourneyService for JourneyApi {
    async fn create_journey(
        &self,
        request: Request<v1::CreateJourneyRequest>,
    ) -> Result<Response<v1::CreateJourneyResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_create_journey(&mut admitted, message).await;
        admitted.finish(result)
    }

    async fn get_journey_result(
        &self,
        request: Request<v1::GetJourneyResultRequest>,
    ) -> Result<Response<v1::GetJourneyResultResponse>, Status> {
        let (mut admitted, message) = admit(request)?;
        let result = self.inner_get_journey_result(&mut admitted, message).await;
        admitted.finish(result)
    }

    type WatchJourneyStream = WatchStream;

    async fn watch_journey(
        &self,
        request: Request<v1::WatchJourneyRequest>,
    ) -> Result<Response<Self::WatchJourneyStream>, Status> {
        let revocable = self.revocations.of(request.extensions());
        let (mut admitted, message) = admit(request)?;
        let result = self
            .inner_watch_journey(&mut admitted, message, revocable)
            .await;
        admitted.finish_stream(result)
    }
}
