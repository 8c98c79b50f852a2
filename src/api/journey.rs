//! `JourneyService`: appkeys, results, and the `WatchJourney` stream.
//!
//! Each method is the door's shim ([`super::admitted`]); the work is in
//! the `inner_*` functions, which return the crate's [`Error`].

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::{
    Admitted, ApiContext, Named,
    revocation::{Revocable, Revocations, Watched},
    view,
};
use crate::{
    Error,
    auth::CallerUpdates,
    domain::Appkey,
    events::{JourneyWatches, WatchStream, WatchTarget},
    journey::Created,
    proto::{services::JourneyService, v1},
};

/// The `JourneyService` implementation.
pub struct JourneyApi {
    api: Arc<ApiContext>,
    watches: JourneyWatches,
    revocations: Revocations,
}

impl JourneyApi {
    /// A service in the public API's context, over the journey watches.
    pub fn new(api: Arc<ApiContext>, watches: JourneyWatches) -> Self {
        Self {
            api,
            watches,
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

    fn inner_create_journey(created: Created) -> v1::CreateJourneyResponse {
        let journey = created.journey;
        v1::CreateJourneyResponse {
            appkey: journey.appkey.expose().to_owned(),
            journey_ref: journey.journey_ref.to_string(),
            expire_time: Some(prost_types::Timestamp {
                seconds: journey.expires_at.unix_timestamp(),
                nanos: 0,
            }),
        }
    }

    async fn inner_get_journey_result(
        &self,
        admitted: &Admitted,
        appkey: &Appkey,
    ) -> Result<v1::GetJourneyResultResponse, Error> {
        let core = self.api.journeys().core();
        let result = core.journey_result(admitted.ctx(), appkey).await?;
        Ok(v1::GetJourneyResultResponse {
            result: Some(view::apply(admitted.caller().result_view, result)),
        })
    }

    fn inner_watch_journey(
        &self,
        admitted: &Admitted,
        journey: Named,
        revocable: Option<Revocable>,
    ) -> Result<WatchStream, Error> {
        // tonic does not enforce the caller's deadline on streams: the
        // stream ends itself with DEADLINE_EXCEEDED when it passes.
        let watched = Watched::from(&journey.issued);
        let viewer = view::viewer(admitted.caller().result_view);
        let target = WatchTarget::Appkey(journey.appkey);
        let stream = self.watches.watch_viewed(target, admitted.ctx(), viewer)?;
        match revocable {
            Some(revocable) => revocable.ending_on_revocation(stream, admitted.caller(), watched),
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
        let (admitted, _, created) = self.api.enter(request).await?;
        let response = Self::inner_create_journey(created);
        admitted.finish(Ok(response))
    }

    async fn get_journey_result(
        &self,
        request: Request<v1::GetJourneyResultRequest>,
    ) -> Result<Response<v1::GetJourneyResultResponse>, Status> {
        let (admitted, appkey, _) = self.api.enter(request).await?;
        let result = self.inner_get_journey_result(&admitted, &appkey).await;
        admitted.finish(result)
    }

    type WatchJourneyStream = WatchStream;

    async fn watch_journey(
        &self,
        request: Request<v1::WatchJourneyRequest>,
    ) -> Result<Response<Self::WatchJourneyStream>, Status> {
        let revocable = self.revocations.of(request.extensions());
        let (admitted, _, journey) = self.api.enter(request).await?;
        let result = self.inner_watch_journey(&admitted, journey, revocable);
        admitted.finish_stream(result)
    }
}
