//! The state every listener shares.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::{Notify, watch};

use super::clock::Clock;
use super::config::{ChannelConfig, SandboxConfig};
use super::deliveries::WebhookStats;
use super::faults::Faults;
use super::samples;
use super::store::{Base64Image, Limits, Store};
use super::wire_time::WireTime;

/// One 3D channel at run time.
#[derive(Debug)]
pub(crate) struct ChannelState {
    pub(crate) config: ChannelConfig,
    /// `isContingency` of session-token answers; switched by the admin API.
    pub(crate) contingency: AtomicBool,
}

/// Shared by the routers of all listeners, the admin API, the webhook
/// driver and the handle.
pub(crate) struct App {
    pub(crate) config: SandboxConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) store: Store,
    pub(crate) faults: Faults,
    pub(crate) channels: Vec<ChannelState>,
    pub(crate) time: WireTime,
    pub(crate) limits: Limits,
    /// Wakes the webhook driver after a liveness proof or a submission.
    pub(crate) activity: Notify,
    pub(crate) webhook_stats: watch::Sender<WebhookStats>,
    /// The frontal photo of every 3D proof (`selfie_bytes`), encoded once.
    pub(crate) selfie: Base64Image,
}

fn seconds(secs: u64) -> time::Duration {
    time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX))
}

fn millis(ms: u64) -> time::Duration {
    time::Duration::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

impl App {
    pub(crate) fn new(config: SandboxConfig, clock: Arc<dyn Clock>) -> Self {
        let limits = Limits {
            credential_ttl: seconds(config.credential_ttl_secs),
            appkey_ttl: seconds(config.appkey_ttl_secs),
            challenge_window: seconds(config.challenge_window_secs),
            retention: seconds(config.result_retention_secs),
            processing_delay: millis(config.processing_delay_ms),
            max_entries: config.max_entries,
        };
        let channels = config
            .channels
            .iter()
            .map(|c| ChannelState {
                contingency: AtomicBool::new(c.contingency),
                config: c.clone(),
            })
            .collect();
        Self {
            time: WireTime::new(config.utc_offset_minutes),
            store: Store::new(limits),
            faults: Faults::default(),
            channels,
            limits,
            clock,
            activity: Notify::new(),
            webhook_stats: watch::Sender::new(WebhookStats::default()),
            selfie: Base64Image::encode(&samples::selfie_of(config.selfie_bytes)),
            config,
        }
    }

    /// Index of the channel called `name`.
    pub(crate) fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.config.name == name)
    }

    /// Names of all channels.
    pub(crate) fn channel_names(&self) -> Vec<String> {
        self.channels
            .iter()
            .map(|c| c.config.name.clone())
            .collect()
    }
}
