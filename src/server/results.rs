//! The watchers' source of journey results: the journey core, each fetch
//! bounded by the watch's own timeout.

use std::time::Duration;

use crate::{context::CallContext, domain::Appkey, events::ResultSource, journey::JourneyCore};

/// Reads journey results for the watchers, through the core.
pub(super) struct CoreResults {
    pub(super) core: JourneyCore,
    pub(super) timeout: Duration,
}

impl ResultSource for CoreResults {
    async fn fetch(
        &self,
        appkey: &Appkey,
    ) -> Result<crate::proto::v1::JourneyResult, crate::Error> {
        self.core
            .journey_result(&CallContext::with_timeout(self.timeout), appkey)
            .await
    }
}
