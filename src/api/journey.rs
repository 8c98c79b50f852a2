//! `JourneyService`: appkeys, results, and the `WatchJourney` stream.

use futures_util::StreamExt as _;
use tonic::{Request, Response, Status};

use super::{JourneyAccess, validate};
use crate::{
    Error,
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
    access: JourneyAccess,
}

impl JourneyApi {
    /// A service over the journey core and the event hub.
    pub fn new(core: JourneyCore, hub: JourneyHub) -> Self {
        Self {
            access: JourneyAccess::new(hub.clone(), false),
            core,
            hub,
            telemetry: TelemetryConfig::default(),
            guard: Guard::default(),
        }
    }

    /// The journey checks; default: this hub's directory, foreign appkeys
    /// refused.
    pub fn with_access(mut self, access: JourneyAccess) -> Self {
        self.access = access;
        self
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
    async fn create_journey(
        &self,
        request: Request<v1::CreateJourneyRequest>,
    ) -> Result<Response<v1::CreateJourneyResponse>, Status> {
        let audit = super::Audit::start(&request, "create_journey", false);
        let result = async {
            let caller = super::authorize(&request, Permission::CreateJourney)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
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
            let created = self
                .guard
                .create_journey(
                    &ctx,
                    &req.user,
                    Some(caller.name.as_str()),
                    profile,
                    req.request_id.as_ref(),
                    || self.core.create_journey(&ctx, &req.user, profile),
                )
                .await?;
            let journey = created.journey;
            audit.journey(&super::record_journey(&span, &journey.appkey));
            // A replayed request_id hands back a journey only to a caller that
            // may touch it, and never changes its owner.
            let known = match created.replayed {
                true => self
                    .access
                    .reference(request.extensions(), &caller, &journey.journey_ref)
                    .await
                    .map(Some)
                    .or_else(|e| match e {
                        Error::JourneyUnknown => Ok(None),
                        e => Err(e),
                    })?,
                false => None,
            };
            if known.is_none() {
                // The owner, and lets callers watch by reference.
                self.hub
                    .register_shared(&journey.appkey, super::owner_of(&caller))
                    .await;
            }
            Ok(Response::new(v1::CreateJourneyResponse {
                appkey: journey.appkey.expose().to_owned(),
                journey_ref: journey.journey_ref.to_string(),
                expire_time: Some(prost_types::Timestamp {
                    seconds: journey.expires_at.unix_timestamp(),
                    nanos: 0,
                }),
            }))
        }
        .await;
        audit.finish(result)
    }

    async fn get_journey_result(
        &self,
        request: Request<v1::GetJourneyResultRequest>,
    ) -> Result<Response<v1::GetJourneyResultResponse>, Status> {
        let audit = super::Audit::start(&request, "read_result", true);
        let result = async {
            let caller = super::authorize(&request, Permission::ReadResult)?;
            let _slot = self.access.call_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let appkey = validate::appkey_only(&request.get_ref().appkey)?;
            audit.journey(&super::record_journey(&span, &appkey));
            self.access
                .appkey(request.extensions(), &caller, &appkey)
                .await?;
            let result = self.core.journey_result(&ctx, &appkey).await?;
            Ok(Response::new(v1::GetJourneyResultResponse {
                result: Some(super::view::apply(caller.result_view, result)),
            }))
        }
        .await;
        audit.finish(result)
    }

    type WatchJourneyStream = WatchStream;

    async fn watch_journey(
        &self,
        request: Request<v1::WatchJourneyRequest>,
    ) -> Result<Response<Self::WatchJourneyStream>, Status> {
        let audit = super::Audit::start(&request, "watch", true);
        let result = async {
            // tonic does not enforce the caller's deadline on streams: the
            // stream ends itself with DEADLINE_EXCEEDED when it passes.
            let caller = super::authorize(&request, Permission::Watch)?;
            let slot = self.access.stream_slot(request.extensions(), &caller)?;
            let ctx = CallContext::of(&request);
            let span = super::server_span(&request);
            let target = validate::watch_journey(request.get_ref())?;
            // One directory lookup: the reference resolved, the owner checked.
            let appkey = match target {
                WatchTarget::Appkey(appkey) => {
                    audit.journey(&super::record_journey(&span, &appkey));
                    self.access
                        .appkey(request.extensions(), &caller, &appkey)
                        .await?;
                    appkey
                }
                WatchTarget::Journey(journey) => {
                    audit.journey(&journey);
                    self.access
                        .reference(request.extensions(), &caller, &journey)
                        .await?
                        .appkey
                }
            };
            super::record_journey(&span, &appkey);
            let view = super::view::viewer(caller.result_view);
            let stream = self
                .hub
                .watch_viewed(WatchTarget::Appkey(appkey), &ctx, view)?;
            // The caller's stream slot lives as long as the stream.
            let stream = audit.watched(stream);
            Ok(Response::new(Box::pin(stream.inspect(move |_| {
                let _held = &slot;
            })) as WatchStream))
        }
        .await;
        audit.finish(result)
    }
}
