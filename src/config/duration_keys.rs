//! Every duration key of every section, bounded at load (at most 30 days,
//! `config_source::bounds`), and the webhook path checked as a plain path.
//!
//! The list is here, in one place, because one section's key is named by
//! its place in the whole file (`channels[1].timeout_ms`,
//! `sandbox.webhook.max_backoff_ms`); a unit test fails when a section
//! grows a `*_secs` or `*_ms` key this list does not name.

use super::Config;
use crate::config_source::{
    ConfigError,
    bounds::{DurationUnit, check_duration, check_route_path},
};

/// `(key, value, unit)` of every duration setting in `config`.
fn durations(c: &Config) -> Vec<(String, u64, DurationUnit)> {
    use DurationUnit::{Millis as Ms, Secs as S};
    let mut out: Vec<(String, u64, DurationUnit)> = Vec::new();
    let mut add = |key: &str, value: u64, unit| out.push((key.to_owned(), value, unit));
    let s = &c.serving;
    add(
        "serving.http2_keepalive_interval_secs",
        s.http2_keepalive_interval_secs,
        S,
    );
    add(
        "serving.http2_keepalive_timeout_secs",
        s.http2_keepalive_timeout_secs,
        S,
    );
    add("serving.idle_timeout_secs", s.idle_timeout_secs, S);
    add(
        "serving.max_connection_age_secs",
        s.max_connection_age_secs,
        S,
    );
    add(
        "serving.max_connection_age_grace_secs",
        s.max_connection_age_grace_secs,
        S,
    );
    add("serving.tcp_keepalive_secs", s.tcp_keepalive_secs, S);
    add(
        "serving.header_read_timeout_ms",
        s.header_read_timeout_ms,
        Ms,
    );
    add(
        "serving.request_body_timeout_ms",
        s.request_body_timeout_ms,
        Ms,
    );
    add("serving.drain_delay_secs", s.drain_delay_secs, S);
    add("serving.shutdown_grace_secs", s.shutdown_grace_secs, S);
    if let Some(u) = &c.upstream {
        add("upstream.timeout_ms", u.timeout_ms, Ms);
        add("upstream.connect_timeout_ms", u.connect_timeout_ms, Ms);
        add("upstream.appkey_ttl_secs", u.appkey_ttl_secs, S);
        add("upstream.credential_ttl_secs", u.credential_ttl_secs, S);
    }
    for (i, ch) in c.channels.iter().enumerate() {
        add(&format!("channels[{i}].timeout_ms"), ch.timeout_ms, Ms);
        let b = &ch.breaker;
        add(
            &format!("channels[{i}].breaker.base_ejection_ms"),
            b.base_ejection_ms,
            Ms,
        );
        add(
            &format!("channels[{i}].breaker.max_ejection_ms"),
            b.max_ejection_ms,
            Ms,
        );
        add(
            &format!("channels[{i}].breaker.window_secs"),
            b.window_secs,
            S,
        );
    }
    let e = &c.embedded_channels;
    add("embedded_channels.timeout_ms", e.timeout_ms, Ms);
    add(
        "embedded_channels.breaker.base_ejection_ms",
        e.breaker.base_ejection_ms,
        Ms,
    );
    add(
        "embedded_channels.breaker.max_ejection_ms",
        e.breaker.max_ejection_ms,
        Ms,
    );
    add(
        "embedded_channels.breaker.window_secs",
        e.breaker.window_secs,
        S,
    );
    add(
        "routing.contingency_hold_secs",
        c.routing.contingency_hold_secs,
        S,
    );
    add("routing.binding_ttl_secs", c.routing.binding_ttl_secs, S);
    add(
        "webhook.replay_window_secs",
        c.webhook.replay_window_secs,
        S,
    );
    add("webhook.dedupe_ttl_secs", c.webhook.dedupe_ttl_secs, S);
    let w = &c.watch;
    add("watch.webhook_grace_secs", w.webhook_grace_secs, S);
    add("watch.poll_initial_ms", w.poll_initial_ms, Ms);
    add("watch.poll_max_ms", w.poll_max_ms, Ms);
    add(
        "watch.result_settle_limit_secs",
        w.result_settle_limit_secs,
        S,
    );
    add("journeys.unknown_ttl_secs", c.journeys.unknown_ttl_secs, S);
    add("watch.notice_ttl_secs", w.notice_ttl_secs, S);
    add("watch.max_stream_secs", w.max_stream_secs, S);
    if let Some(secs) = w.shared_result_secs {
        add("watch.shared_result_secs", secs, S);
    }
    let k = &c.cluster;
    add("cluster.connect_timeout_ms", k.connect_timeout_ms, Ms);
    add("cluster.command_timeout_ms", k.command_timeout_ms, Ms);
    add("cluster.max_backoff_ms", k.max_backoff_ms, Ms);
    add("store.sweep_interval_secs", c.store.sweep_interval_secs, S);
    let r = &c.rollout;
    add("rollout.tick_ms", r.tick_ms, Ms);
    add("rollout.lease_ms", r.lease_ms, Ms);
    add("rollout.min_step_secs", r.min_step_secs, S);
    add("idempotency.ttl_secs", c.idempotency.ttl_secs, S);
    add(
        "idempotency.pending_ttl_secs",
        c.idempotency.pending_ttl_secs,
        S,
    );
    let b = &c.sandbox;
    add("sandbox.credential_ttl_secs", b.credential_ttl_secs, S);
    add("sandbox.appkey_ttl_secs", b.appkey_ttl_secs, S);
    add("sandbox.challenge_window_secs", b.challenge_window_secs, S);
    add("sandbox.processing_delay_ms", b.processing_delay_ms, Ms);
    add("sandbox.result_retention_secs", b.result_retention_secs, S);
    add(
        "sandbox.webhook.initial_backoff_ms",
        b.webhook.initial_backoff_ms,
        Ms,
    );
    add(
        "sandbox.webhook.max_backoff_ms",
        b.webhook.max_backoff_ms,
        Ms,
    );
    add("sandbox.webhook.timeout_ms", b.webhook.timeout_ms, Ms);
    out
}

impl Config {
    /// Every duration at most 30 days; the webhook path a plain path.
    /// Errors name the key and the bound, never the value.
    pub(super) fn check_bounds(&self) -> Result<(), ConfigError> {
        for (key, value, unit) in durations(self) {
            check_duration(&key, value, unit)?;
        }
        check_route_path("webhook.path", &self.webhook.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `pub <name>_secs: u64` / `pub <name>_ms: u64` fields of `source`.
    fn duration_fields(source: &str) -> Vec<String> {
        source
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub "))
            .filter_map(|l| l.split_once(": u64"))
            .map(|(name, _)| name.to_owned())
            .filter(|n| n.ends_with("_secs") || n.ends_with("_ms"))
            .collect()
    }

    #[test]
    fn every_duration_key_of_every_section_is_bounded() {
        let mut c = Config {
            upstream: Some(Default::default()),
            channels: vec![crate::channels::ChannelSpec::new("p", "http://a", 0)],
            ..Config::default()
        };
        c.channels[0].breaker = Default::default();
        let listed: Vec<String> = durations(&c).into_iter().map(|(k, ..)| k).collect();
        for (file, source) in [
            ("config/serving.rs", include_str!("serving.rs")),
            ("upstream/config.rs", include_str!("../upstream/config.rs")),
            ("channels/config.rs", include_str!("../channels/config.rs")),
            (
                "channels/config/routing.rs",
                include_str!("../channels/config/routing.rs"),
            ),
            (
                "channels/breaker/config.rs",
                include_str!("../channels/breaker/config.rs"),
            ),
            (
                "events/webhook/config.rs",
                include_str!("../events/webhook/config.rs"),
            ),
            (
                "events/watches/config.rs",
                include_str!("../events/watches/config.rs"),
            ),
            ("cluster/config.rs", include_str!("../cluster/config.rs")),
            (
                "cluster/embedded/config.rs",
                include_str!("../cluster/embedded/config.rs"),
            ),
            ("spend/config.rs", include_str!("../spend/config.rs")),
            ("sandbox/config.rs", include_str!("../sandbox/config.rs")),
        ] {
            let fields = duration_fields(source);
            assert!(!fields.is_empty(), "{file}");
            for field in fields {
                assert!(
                    listed.iter().any(|k| k.ends_with(&format!(".{field}"))),
                    "{file}: {field} is not bounded in config/duration_keys.rs"
                );
            }
        }
    }

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, String> {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::from_toml_and_env(text, env).map_err(|e| e.to_string())
    }

    #[test]
    fn each_config_foot_gun_fails_to_load_with_an_error_naming_the_key() {
        let upstream = "[upstream]\nbase_url = \"http://a\"\n[[operators]]\nname = \"d\"\nlogin = \"l\"\n\
                        [[channels]]\nname = \"p\"\nbase_url = \"http://a\"\n";
        for (text, var, key) in [
            (
                // The journey records must outlive the replay window.
                "[journeys]\nretention_hours = 720\n",
                "IDGATE_IDEMPOTENCY__TTL_SECS",
                "idempotency.ttl_secs",
            ),
            (
                "",
                "IDGATE_JOURNEYS__UNKNOWN_TTL_SECS",
                "journeys.unknown_ttl_secs",
            ),
            (
                "",
                "IDGATE_ROUTING__BINDING_TTL_SECS",
                "routing.binding_ttl_secs",
            ),
            (
                "",
                "IDGATE_WEBHOOK__DEDUPE_TTL_SECS",
                "webhook.dedupe_ttl_secs",
            ),
            (
                "",
                "IDGATE_SERVING__SHUTDOWN_GRACE_SECS",
                "serving.shutdown_grace_secs",
            ),
            (
                "",
                "IDGATE_CLUSTER__COMMAND_TIMEOUT_MS",
                "cluster.command_timeout_ms",
            ),
            (
                &format!("{upstream}[journeys]\nretention_hours = 720\n"),
                "IDGATE_UPSTREAM__APPKEY_TTL_SECS",
                "upstream.appkey_ttl_secs",
            ),
            (
                upstream,
                "IDGATE_CHANNELS__0__TIMEOUT_MS",
                "channels[0].timeout_ms",
            ),
            (
                upstream,
                "IDGATE_CHANNELS__0__BREAKER__MAX_EJECTION_MS",
                "channels[0].breaker.max_ejection_ms",
            ),
            (
                "",
                "IDGATE_SANDBOX__WEBHOOK__TIMEOUT_MS",
                "sandbox.webhook.timeout_ms",
            ),
            (
                "",
                "IDGATE_STORE__SWEEP_INTERVAL_SECS",
                "store.sweep_interval_secs",
            ),
        ] {
            let err = load(text, &[(var, "9000000000000")]).unwrap_err();
            assert!(err.contains(key) && err.contains("30 days"), "{var}: {err}");
            assert!(!err.contains("9000000000000"), "{err}");
            // Past TOML's integers: refused naming the variable.
            let err = load(text, &[(var, "18446744073709551616")]).unwrap_err();
            assert!(err.contains(var) && err.contains("out of range"), "{err}");
            assert!(!err.contains("18446744073709551616"), "{err}");
            // The bound itself loads.
            let max = if key.ends_with("_ms") {
                "2592000000"
            } else {
                "2592000"
            };
            assert!(load(text, &[(var, max)]).is_ok(), "{var} at the bound");
        }
        for path in ["/x/:id", "/x/{id}", "/x/*rest", "x", "/x//y", "/"] {
            let err = load(&format!("[webhook]\npath = \"{path}\"\n"), &[]).unwrap_err();
            assert!(
                err.contains("webhook.path") && err.contains("plain"),
                "{path}: {err}"
            );
        }
        assert!(load("[webhook]\npath = \"/hooks/v2/journey\"\n", &[]).is_ok());
    }
}
