//! `[watch]`: `WatchJourney` streams and the result reads behind them,
//! and their form as durations ([`WatchSettings`]).

use std::time::Duration;

use serde::Deserialize;

use crate::config_source::ConfigError;

/// `[watch]`: `WatchJourney` streams and the result reads behind them.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchConfig {
    /// How long a watched journey waits for the webhook before it falls
    /// back to reading the result with backoff, in seconds. Only with a
    /// webhook receiver (`[webhook]`), and only while nothing says the
    /// result may be there already: without a receiver, or once the
    /// journey's liveness steps went through the gateway, the watch reads
    /// at once.
    pub webhook_grace_secs: u64,
    /// First delay between result reads, in milliseconds.
    pub poll_initial_ms: u64,
    /// Largest delay between result reads, in milliseconds.
    pub poll_max_ms: u64,
    /// After a notice, how long the result may keep saying "processing"
    /// before watchers get `RESULT_NOT_SETTLED`, in seconds.
    pub result_settle_limit_secs: u64,
    /// Most concurrent watchers of one journey.
    pub max_watchers_per_journey: usize,
    /// Most journeys watched at once.
    pub max_journeys: usize,
    /// How long a notice for an unwatched journey is remembered, so a
    /// watcher that comes later reads at once instead of waiting.
    pub notice_ttl_secs: u64,
    /// Most such notices remembered.
    pub notice_max_entries: usize,
    /// Longest a `WatchJourney` stream stays open, in seconds; then it ends
    /// with `UNAVAILABLE` / `WATCH_LIFETIME_REACHED` (watch again).
    pub max_stream_secs: u64,
    /// Consecutive upstream 404s on the result after which the reader of
    /// an appkey this gateway did not issue (`[journeys]
    /// accept_foreign_appkeys`) gives up and its watchers get `NOT_FOUND`.
    /// A journey this gateway issued answers 404 until its end user
    /// finishes, and is watched until its result or its retention.
    pub max_not_found: u32,
    /// No effect: releases before Redis carried no result kept the final
    /// result on Redis this long for the other replicas. Accepted so that
    /// their files still load (a replica warns once at start when it is
    /// set); every replica now reads the result itself.
    pub shared_result_secs: Option<u64>,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            webhook_grace_secs: 30,
            poll_initial_ms: 500,
            poll_max_ms: 10_000,
            result_settle_limit_secs: 60,
            max_watchers_per_journey: 64,
            max_journeys: 10_000,
            notice_ttl_secs: 900,
            notice_max_entries: 100_000,
            max_stream_secs: 3600,
            max_not_found: 5,
            shared_result_secs: None,
        }
    }
}

/// The longest `watch.max_stream_secs` (a day): a stream must end some
/// time, and `now + lifetime` must not overflow.
const MAX_STREAM_SECS: u64 = 86_400;

impl WatchConfig {
    /// Checks the bounds a watch must have: a finite lifetime and a
    /// finite number of 404s.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_stream_secs == 0 || self.max_stream_secs > MAX_STREAM_SECS {
            return Err(ConfigError::Invalid(format!(
                "watch.max_stream_secs must be between 1 and {MAX_STREAM_SECS}"
            )));
        }
        if self.max_not_found == 0 {
            return Err(ConfigError::Invalid(
                "watch.max_not_found must be at least 1".to_owned(),
            ));
        }
        Ok(())
    }
}

/// `[watch]` as durations, for the watches. Tests build it directly with
/// millisecond durations.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    /// Wait for the webhook before falling back to reading.
    pub webhook_grace: Duration,
    /// Whether a webhook receiver can bring notices; without one the
    /// watch reads from the start, with no grace.
    pub notices_expected: bool,
    /// The longest one result read takes (the upstream timeout): a
    /// replica's read turn covers its read as well as the step after it.
    pub read_timeout: Duration,
    /// First delay between reads.
    pub poll_initial: Duration,
    /// Largest delay between reads.
    pub poll_max: Duration,
    /// After a notice, how long "processing" is tolerated.
    pub settle_limit: Duration,
    /// Most watchers of one journey.
    pub max_watchers_per_journey: usize,
    /// Most journeys watched at once.
    pub max_journeys: usize,
    /// Memory of notices for unwatched journeys.
    pub notice_ttl: Duration,
    /// Most notices remembered.
    pub notice_max_entries: usize,
    /// Longest a stream stays open.
    pub max_stream_lifetime: Duration,
    /// Consecutive upstream 404s before the reader of a foreign appkey
    /// gives up.
    pub max_not_found: u32,
}

impl From<&WatchConfig> for WatchSettings {
    fn from(c: &WatchConfig) -> Self {
        Self {
            webhook_grace: Duration::from_secs(c.webhook_grace_secs),
            notices_expected: true,
            read_timeout: Duration::from_secs(10),
            poll_initial: Duration::from_millis(c.poll_initial_ms.max(1)),
            poll_max: Duration::from_millis(c.poll_max_ms.max(c.poll_initial_ms).max(1)),
            settle_limit: Duration::from_secs(c.result_settle_limit_secs),
            max_watchers_per_journey: c.max_watchers_per_journey.max(1),
            max_journeys: c.max_journeys.max(1),
            notice_ttl: Duration::from_secs(c.notice_ttl_secs),
            notice_max_entries: c.notice_max_entries,
            max_stream_lifetime: Duration::from_secs(c.max_stream_secs.clamp(1, MAX_STREAM_SECS)),
            max_not_found: c.max_not_found.max(1),
        }
    }
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self::from(&WatchConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_keys() {
        let s = WatchSettings::default();
        assert_eq!(s.webhook_grace, Duration::from_secs(30));
        assert!(WatchConfig::default().validate().is_ok());
    }

    #[test]
    fn a_watch_without_an_end_is_refused() {
        let forever = WatchConfig {
            max_stream_secs: 0,
            ..WatchConfig::default()
        };
        assert!(
            forever
                .validate()
                .unwrap_err()
                .to_string()
                .contains("watch.max_stream_secs")
        );
        let never_gives_up = WatchConfig {
            max_not_found: 0,
            ..WatchConfig::default()
        };
        assert!(
            never_gives_up
                .validate()
                .unwrap_err()
                .to_string()
                .contains("watch.max_not_found")
        );
    }
}
