//! The journey's room: the journeys this gateway issues, who may act on
//! each, and what each operation does on the vendor.
//!
//! ```text
//! the door --CreateJourney--> Journeys::create --> spend (idempotency, budget) --> JourneyCore::create_journey --> record
//!          --any other call-> JourneyAccess::{appkey, reference} (issued here? the caller's?) --> Journeys::bill --> spend
//! handlers --> JourneyCore (the REST operations) | channels (3D liveness)
//! ```
//!
//! - [`Journeys`]: creation, replay and access, over the journey records
//!   (`cluster::JourneyStore`), spend and the core; built once at start.
//! - [`creation`]: `CreateJourney` made once per `request_id`, budgeted
//!   and recorded before its appkey is handed out.
//! - [`access`]: whose journey a call names ([`JourneyAccess`],
//!   [`Issued`]).
//! - [`JourneyCore`] (`core`): appkeys, 2D liveness, documents and the
//!   result, on the core REST service (3D liveness goes through the
//!   channel router).
//! - [`Credentials`] (`credentials`): the per-profile credential cache
//!   with single-flight refresh and the one-refresh retry of `/appkey`.
//! - [`OperatorConfig`], [`OperatorProfiles`] (`operators`):
//!   `[[operators]]`, whose passwords live outside the TOML, and the one
//!   place the default profile is resolved.

pub mod access;
mod core;
pub mod creation;
pub(crate) mod credentials;
mod operators;

use std::{sync::Arc, time::Duration};

pub use access::{Issued, JourneyAccess};
pub use core::{JourneyCore, NewJourney};
pub use creation::{Created, Creation};
pub use credentials::{CredentialPolicy, Credentials};
pub use operators::{OperatorConfig, OperatorProfile, OperatorProfiles};

use crate::{
    cluster::JourneyStore,
    domain::{Caller, ProfileGrant},
    error::Error,
    spend::{BilledOperation, Spend},
    telemetry::{log_throttle::LogThrottle, usage::Usage},
};

/// The journeys of a gateway: made, replayed, checked and billed here.
/// Built once at start; cheap to clone.
#[derive(Clone)]
pub struct Journeys {
    inner: Arc<Inner>,
}

struct Inner {
    /// The journey records: registered at creation, read on every call.
    records: Arc<dyn JourneyStore>,
    access: JourneyAccess,
    spend: Spend,
    core: JourneyCore,
    /// Where created journeys are counted by caller.
    usage: Usage,
    /// Repeated appkeys are a vendor's fault a caller cannot cause at
    /// will, but one vendor bug repeats on every call: a line a minute.
    repeats: LogThrottle,
}

impl Journeys {
    /// The journeys recorded in `records` (appkeys it holds no record of
    /// are refused unless `accept_foreign`), billed through `spend`,
    /// created by `core`, counted by caller in `usage`.
    pub fn new(
        records: Arc<dyn JourneyStore>,
        accept_foreign: bool,
        spend: Spend,
        core: JourneyCore,
        usage: Usage,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                access: JourneyAccess::new(records.clone(), accept_foreign),
                records,
                spend,
                core,
                usage,
                repeats: LogThrottle::new(Duration::from_secs(60)),
            }),
        }
    }

    /// Whose journey a call names.
    pub fn access(&self) -> &JourneyAccess {
        &self.inner.access
    }

    /// The vendor's operations on a journey.
    pub fn core(&self) -> &JourneyCore {
        &self.inner.core
    }

    /// Bills `operation` on a journey the caller may act on, to the
    /// profile that pays for it: the one that created it, or (foreign) the
    /// caller's first profile when it is configured, else the default.
    pub async fn bill(
        &self,
        issued: &Issued,
        operation: BilledOperation,
        caller: &Caller,
    ) -> Result<(), Error> {
        let profiles = self.inner.core.credentials().profiles();
        let profile = match issued {
            Issued::Here(record) => record.profile.as_deref(),
            Issued::Unverified => None,
            Issued::Foreign => match &caller.profiles {
                ProfileGrant::Only(names) => names
                    .first()
                    .map(String::as_str)
                    .filter(|name| profiles.knows(name)),
                ProfileGrant::Any => None,
            },
        };
        self.inner
            .spend
            .bill(operation, profiles.meant(profile), caller.name.as_str())
            .await
    }
}
