//! Conformance of a channel to the REST contract, as its last probe
//! (`ProbeChannel`) found it: a channel that failed its last probe gets no
//! weight (`SetRoutingMode`, `StartRollout`) unless the request forces it.

use std::{collections::HashMap, sync::Mutex};

use crate::sync::lock;

/// The last probe verdict of each channel probed on this replica.
#[derive(Debug, Default)]
pub struct ProbeVerdicts {
    last: Mutex<HashMap<String, bool>>,
}

impl ProbeVerdicts {
    /// Notes the verdict of a probe of `channel`.
    pub fn record(&self, channel: &str, conforming: bool) {
        lock(&self.last).insert(channel.to_owned(), conforming);
    }

    /// False when the last probe of `channel` found it non-conforming;
    /// true when it passed or was never probed.
    pub fn may_take_weight(&self, channel: &str) -> bool {
        lock(&self.last).get(channel).copied().unwrap_or(true)
    }

    /// The channels whose last probe failed.
    pub fn failed(&self) -> Vec<String> {
        let mut out: Vec<String> = lock(&self.last)
            .iter()
            .filter(|(_, ok)| !**ok)
            .map(|(n, _)| n.clone())
            .collect();
        out.sort();
        out
    }
}
