//! The journey records as the watches sees them: where `WatchJourney` by
//! reference resolves, and a way for tests and tools to record a journey
//! the watches can then be asked about.

use std::sync::Arc;

use super::JourneyWatches;
use crate::{
    Error,
    cluster::{JourneyStore, ProgressStore, journeys::now_unix},
    domain::{Appkey, JourneyRecord, JourneyRef},
};

impl JourneyWatches {
    /// The journey records the watches resolves references through.
    pub fn journeys(&self) -> &Arc<dyn JourneyStore> {
        &self.inner.journeys
    }

    /// Where the watches keep journeys' progress: the liveness service marks
    /// a journey's result-producing steps there, so that a later watch
    /// reads at once.
    pub fn progress(&self) -> &Arc<dyn ProgressStore> {
        &self.inner.progress
    }

    /// Records the journey of `appkey` with no owner (only `journeys =
    /// "any"` callers may touch it) and returns its reference. CreateJourney
    /// records journeys through the journey room; this is for a watches used alone.
    pub async fn register(&self, appkey: &Appkey) -> Result<JourneyRef, Error> {
        let journey = JourneyRef::from_appkey(appkey);
        let record = JourneyRecord::new(appkey.clone(), None, now_unix());
        self.inner
            .journeys
            .register(&journey, &record, usize::MAX)
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        Ok(journey)
    }
}
