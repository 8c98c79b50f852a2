//! What the three public services share, built once at start: the
//! journey room, the request limits and what goes on spans; and the
//! door's last steps, which need the request's message.
//!
//! The tower layer ([`super::AdmissionLayer`]) admits a call before its
//! message is read: caller, permission, slot, request bytes, the audit
//! record. [`ApiContext::enter`] finishes the job once the message is
//! decoded: it validates the whole request, finds the journey it names
//! (issued here? the caller's?) or makes it (`CreateJourney`), bills
//! what the row bills, puts the journey on the span and the audit
//! record, and marks the upstream operation; then the handler runs, and
//! is its translation and nothing else.

use tonic::{Request, Status};

use super::{Admitted, LimitsConfig, admit, requests::Admissible, rpc::Naming};
use crate::{
    Error,
    domain::{Appkey, JourneyRef},
    journey::{Created, Creation, Issued, Journeys},
    telemetry::{self, TelemetryConfig},
};

/// The public API's context. Cheap to share (the services hold an `Arc`).
pub struct ApiContext {
    journeys: Journeys,
    limits: LimitsConfig,
    telemetry: TelemetryConfig,
}

/// How a request names its journey (what [`ApiContext::named`] resolves).
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// By its appkey.
    Appkey(&'a Appkey),
    /// By the reference `CreateJourney` returned (`WatchJourney`).
    Reference(&'a JourneyRef),
}

/// A journey a call acts on, as the door found it.
#[derive(Debug)]
pub struct Named {
    /// Its appkey: the one the call named, or its record's.
    pub appkey: Appkey,
    /// How this gateway knows it.
    pub issued: Issued,
}

impl ApiContext {
    /// The context over `journeys`, refusing requests past `limits`,
    /// with `telemetry`'s span settings.
    pub fn new(journeys: Journeys, limits: LimitsConfig, telemetry: TelemetryConfig) -> Self {
        Self {
            journeys,
            limits,
            telemetry,
        }
    }

    /// The journey room.
    pub fn journeys(&self) -> &Journeys {
        &self.journeys
    }

    /// Admits `request`: the ticket the tower layer left, the message
    /// validated, its journey found or made. A refusal is recorded and
    /// converted here, so a handler never sees it.
    pub async fn enter<M: Admissible>(
        &self,
        request: Request<M>,
    ) -> Result<(Admitted, M::Valid, M::Journey), Status> {
        let (mut admitted, message) = admit(request)?;
        let valid = match message.validate(&self.limits) {
            Ok(valid) => valid,
            Err(error) => return Err(admitted.refuse(error)),
        };
        match M::enter(self, &mut admitted, &valid).await {
            Ok(journey) => Ok((admitted, valid, journey)),
            Err(error) => Err(admitted.refuse(error)),
        }
    }

    /// The journey `target` names, if the caller may act on it; billed
    /// and marked as the row says.
    pub(super) async fn named(
        &self,
        admitted: &mut Admitted,
        target: Target<'_>,
    ) -> Result<Named, Error> {
        let row = admitted.rpc();
        let access = self.journeys.access();
        let named = match (target, row.journey) {
            (Target::Appkey(appkey), Naming::Appkey | Naming::AppkeyOrReference) => {
                admitted.journey_of(appkey);
                let issued = access.appkey(admitted.caller(), appkey).await?;
                Named {
                    appkey: appkey.clone(),
                    issued,
                }
            }
            (Target::Reference(journey), Naming::AppkeyOrReference) => {
                admitted.journey(journey);
                let record = access.reference(admitted.caller(), journey).await?;
                admitted.journey_of(&record.appkey);
                Named {
                    appkey: record.appkey.clone(),
                    issued: Issued::Here(record),
                }
            }
            (_, naming) => return Err(misnamed(row.path, naming)),
        };
        if let Some(operation) = row.billing {
            self.journeys
                .bill(&named.issued, operation, admitted.caller())
                .await?;
        }
        if let Some(operation) = row.upstream {
            admitted.sending(operation);
        }
        Ok(named)
    }

    /// The journey `creation` asks for, made (or replayed) by the journey
    /// room, which bills and marks the upstream operation once its own
    /// checks pass.
    pub(super) async fn create(
        &self,
        admitted: &mut Admitted,
        creation: Creation<'_>,
    ) -> Result<Created, Error> {
        let row = admitted.rpc();
        let (Naming::Creates, Some(operation)) = (row.journey, row.upstream) else {
            return Err(misnamed(row.path, row.journey));
        };
        if let Some(span) = admitted.span() {
            telemetry::record_customer_reference(
                span,
                &creation.user.customer_reference,
                &self.telemetry,
            );
        }
        let upstream = admitted.upstream_marker(operation);
        let created = self
            .journeys
            .create(admitted.ctx(), admitted.caller(), creation, &upstream)
            .await?;
        admitted.journey_of(&created.journey.appkey);
        Ok(created)
    }
}

/// A request whose message names its journey otherwise than its row
/// says: a defect of the table, refused rather than served unchecked.
fn misnamed(path: &str, naming: Naming) -> Error {
    Error::Internal(format!(
        "{path} names its journey otherwise than its row ({naming:?})"
    ))
}
