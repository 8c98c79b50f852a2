//! Each public request as the door admits it: validated whole (every
//! field, before anything is looked up, billed or sent upstream), then
//! its journey found or made as its row in [`super::rpc`] says.
//!
//! One impl per request message; each is the message's validation and
//! one line that hands the journey it names to the door
//! ([`ApiContext::named`], [`ApiContext::create`]).

use std::future::Future;

use super::{
    Admitted, ApiContext, LimitsConfig, Named, Target,
    validate::{
        self, ChallengeResponse, DocumentSubmission, LicenceSubmission, LivenessCheck,
        NewJourneyRequest, SessionStart,
    },
};
use crate::{
    Error,
    domain::Appkey,
    events::WatchTarget,
    journey::{Created, Creation},
    proto::v1,
};

/// A public request message the door admits.
pub trait Admissible: Sized + Send + 'static {
    /// The request, validated.
    type Valid: Send + Sync + 'static;
    /// The journey its handler receives: [`Named`], or [`Created`] for
    /// `CreateJourney`.
    type Journey: Send + 'static;

    /// Every field checked, each violation named
    /// (`INVALID_ARGUMENT`/`BadRequest`).
    fn validate(self, limits: &LimitsConfig) -> Result<Self::Valid, Error>;

    /// The door's part: finds (or makes) the journey `valid` names.
    fn enter<'a>(
        api: &'a ApiContext,
        admitted: &'a mut Admitted,
        valid: &'a Self::Valid,
    ) -> impl Future<Output = Result<Self::Journey, Error>> + Send + 'a;
}

impl Admissible for v1::CreateJourneyRequest {
    type Valid = NewJourneyRequest;
    type Journey = Created;

    fn validate(self, _: &LimitsConfig) -> Result<NewJourneyRequest, Error> {
        validate::create_journey(&self)
    }

    fn enter<'a>(
        api: &'a ApiContext,
        admitted: &'a mut Admitted,
        valid: &'a NewJourneyRequest,
    ) -> impl Future<Output = Result<Created, Error>> + Send + 'a {
        let creation = Creation {
            user: &valid.user,
            profile: valid.operator_profile.as_deref(),
            request_id: valid.request_id.as_ref(),
        };
        api.create(admitted, creation)
    }
}

impl Admissible for v1::WatchJourneyRequest {
    type Valid = WatchTarget;
    type Journey = Named;

    fn validate(self, _: &LimitsConfig) -> Result<WatchTarget, Error> {
        validate::watch_journey(&self)
    }

    fn enter<'a>(
        api: &'a ApiContext,
        admitted: &'a mut Admitted,
        valid: &'a WatchTarget,
    ) -> impl Future<Output = Result<Named, Error>> + Send + 'a {
        let target = match valid {
            WatchTarget::Appkey(appkey) => Target::Appkey(appkey),
            WatchTarget::Journey(journey) => Target::Reference(journey),
        };
        api.named(admitted, target)
    }
}

/// The requests that name their journey by appkey: each one's validation,
/// and where the validated request holds the appkey (`appkey`: it is the
/// appkey; `appkey.appkey`: its `appkey` field). One shape, written once.
macro_rules! named_by_appkey {
    ($($message:ty => $valid:ty: |$request:ident, $limits:pat_param| $validate:expr, appkey $(.$field:ident)?;)*) => {$(
        impl Admissible for $message {
            type Valid = $valid;
            type Journey = Named;

            fn validate(self, $limits: &LimitsConfig) -> Result<$valid, Error> {
                let $request = self;
                $validate
            }

            fn enter<'a>(
                api: &'a ApiContext,
                admitted: &'a mut Admitted,
                valid: &'a $valid,
            ) -> impl Future<Output = Result<Named, Error>> + Send + 'a {
                api.named(admitted, Target::Appkey(&valid $(.$field)?))
            }
        }
    )*};
}

named_by_appkey! {
    v1::GetJourneyResultRequest => Appkey:
        |request, _| validate::appkey_only(&request.appkey), appkey;
    v1::CreateChallengesRequest => Appkey:
        |request, _| validate::appkey_only(&request.appkey), appkey;
    v1::SubmitChallengeResponseRequest => ChallengeResponse:
        |request, limits| validate::challenge_response(request, limits), appkey.appkey;
    v1::StartSession3DRequest => SessionStart:
        |request, _| validate::start_session(&request), appkey.appkey;
    v1::VerifyLiveness3DRequest => LivenessCheck:
        |request, _| validate::verify_liveness(&request), appkey.appkey;
    v1::SubmitDocumentImagesRequest => DocumentSubmission:
        |request, limits| validate::document_images(request, limits), appkey.appkey;
    v1::SubmitDigitalLicenceRequest => LicenceSubmission:
        |request, limits| validate::digital_licence(request, limits), appkey.appkey;
}
