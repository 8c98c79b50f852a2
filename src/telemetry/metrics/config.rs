//! Configuration reloads (SIGHUP): how many were applied and how many
//! refused (a refused reload changes nothing), and when the configuration
//! in force was last applied, at start or by a reload.

use super::*;

/// The reload series.
pub(super) struct ConfigSeries {
    pub(super) reloads: Family<OutcomeLabels, Counter>,
    pub(super) last_success: Gauge,
}

impl ConfigSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            reloads: Family::default(),
            last_success: Gauge::default(),
        };
        registry.register(
            "idgate_config_reloads",
            "Configuration reloads (SIGHUP), by outcome: applied (all of it), refused (none of it: the running configuration stays)",
            series.reloads.clone(),
        );
        registry.register(
            "idgate_config_last_reload_success_timestamp_seconds",
            "Unix time the configuration in force was applied: at start, then at each applied reload",
            series.last_success.clone(),
        );
        for outcome in ["applied", "refused"] {
            drop(series.reloads.get_or_create(&OutcomeLabels { outcome }));
        }
        series
    }
}

impl Metrics {
    /// Counts one reload, applied or refused; an applied one is also the
    /// new time of the configuration in force.
    pub fn record_config_reload(&self, applied: bool) {
        let outcome = if applied { "applied" } else { "refused" };
        self.inner
            .config
            .reloads
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
        if applied {
            self.set_config_applied_now();
        }
    }

    /// Sets the time of the configuration in force to now (at start).
    pub fn set_config_applied_now(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.inner.config.last_success.set(now);
    }
}
