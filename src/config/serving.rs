//! `[serving]`: what the listeners accept, for how long, how they drain,
//! and how the public listener's serving threads run.
//!
//! The section lives in `config` rather than with `server` because
//! `config` sits below `server` (the server reads it; the configuration
//! knows nothing of the server). Reference: `docs/serving.md`.

use serde::Deserialize;

use crate::config_source::ConfigError;

/// How the listeners bound what they accept, and how the gateway drains.
/// Every bound answers promptly when reached (a closed connection, or
/// `RESOURCE_EXHAUSTED` / `OVERLOADED`); nothing queues without bound.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServingConfig {
    /// Unary calls in flight at once on the public listener.
    pub max_in_flight: usize,
    /// `WatchJourney` streams open at once (their own cap: long-lived,
    /// cheap, and never counted against unary calls).
    pub max_streams: usize,
    /// `WatchJourney` streams open at once on one connection, so one peer
    /// cannot hold every slot of `max_streams`.
    pub max_streams_per_connection: usize,
    /// gRPC request bytes all calls may be receiving at once (a
    /// process-wide budget, divided among `[[callers]]` as their
    /// `max_body_bytes` shares); a message's bytes are given back once it
    /// is decoded. Past it `RESOURCE_EXHAUSTED` / `OVERLOADED` at once.
    pub max_body_bytes_in_flight: usize,
    /// Health `Watch` and reflection streams open at once, whoever opens
    /// them (health needs no credential); past it such a stream is
    /// refused at once. Health `Check` is never refused.
    pub max_service_streams: usize,
    /// Health `Watch` and reflection streams open at once on one
    /// connection.
    pub max_service_streams_per_connection: usize,
    /// Open connections per listener; also bounded, across listeners, by
    /// the process's descriptor limit less a reserve for upstream sockets.
    pub max_connections: usize,
    /// HTTP/2 streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_concurrent_streams: u32,
    /// HTTP/2 keepalive pings on idle connections, every this many seconds
    /// (0: off).
    pub http2_keepalive_interval_secs: u64,
    /// A keepalive ping unanswered this long closes the connection.
    pub http2_keepalive_timeout_secs: u64,
    /// A connection with no request in flight this long is closed (0: off).
    pub idle_timeout_secs: u64,
    /// gRPC connections are told to go away (HTTP/2 GOAWAY) after this
    /// many seconds, give or take 10 % per connection, so callers that keep
    /// one connection for hours reach replicas added since (0: off).
    /// `WatchJourney` streams on the connection end with `UNAVAILABLE` /
    /// `CONNECTION_AGED`: watch again. See docs/serving.md.
    pub max_connection_age_secs: u64,
    /// After its age, a connection's calls in flight get this long to
    /// finish; then it is closed outright.
    pub max_connection_age_grace_secs: u64,
    /// Largest header list accepted (HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`).
    pub max_header_list_bytes: u32,
    /// TCP keepalive probes after this much silence (0: off).
    pub tcp_keepalive_secs: u64,
    /// Requests in flight at once on the HTTP listener (webhook,
    /// `/metrics`); past it 503 at once. `/healthz` is never refused.
    pub http_max_in_flight: usize,
    /// HTTP/1 (the webhook and metrics listener): the request head must
    /// arrive within this many milliseconds.
    pub header_read_timeout_ms: u64,
    /// gRPC: the request body must arrive within this many milliseconds (or
    /// the caller's deadline, when sooner).
    pub request_body_timeout_ms: u64,
    /// After the stop signal, health says NOT_SERVING while calls are still
    /// served for this long, so load balancers move traffic away first.
    pub drain_delay_secs: u64,
    /// Then calls in flight get this long to finish; what is left is
    /// closed and the process exits.
    pub shutdown_grace_secs: u64,
    /// Threads serving the public gRPC listener, each a single-threaded
    /// runtime that keeps a connection and its calls on one thread
    /// (0: one per core). See docs/serving.md.
    pub grpc_threads: usize,
    /// The longest window, in microseconds, for which a serving thread
    /// with at most one call in flight keeps polling its sockets after a
    /// call begins or ends instead of sleeping; the windows adapt below it
    /// (0: off). See docs/serving.md.
    pub idle_poll_us: u64,
}

impl Default for ServingConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 1024,
            max_streams: 10_000,
            max_streams_per_connection: 100,
            max_body_bytes_in_flight: 256 * 1024 * 1024,
            max_service_streams: 256,
            max_service_streams_per_connection: 4,
            max_connections: 10_000,
            max_concurrent_streams: 256,
            http2_keepalive_interval_secs: 30,
            http2_keepalive_timeout_secs: 10,
            idle_timeout_secs: 300,
            max_connection_age_secs: 1800,
            max_connection_age_grace_secs: 60,
            max_header_list_bytes: 16 * 1024,
            tcp_keepalive_secs: 60,
            http_max_in_flight: 256,
            header_read_timeout_ms: 10_000,
            request_body_timeout_ms: 30_000,
            drain_delay_secs: 5,
            shutdown_grace_secs: 30,
            grpc_threads: 0,
            idle_poll_us: 0,
        }
    }
}

impl ServingConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("serving.max_in_flight", self.max_in_flight as u64),
            ("serving.max_streams", self.max_streams as u64),
            (
                "serving.max_streams_per_connection",
                self.max_streams_per_connection as u64,
            ),
            (
                "serving.max_body_bytes_in_flight",
                self.max_body_bytes_in_flight as u64,
            ),
            (
                "serving.max_service_streams",
                self.max_service_streams as u64,
            ),
            (
                "serving.max_service_streams_per_connection",
                self.max_service_streams_per_connection as u64,
            ),
            ("serving.max_connections", self.max_connections as u64),
            (
                "serving.max_concurrent_streams",
                u64::from(self.max_concurrent_streams),
            ),
            (
                "serving.max_header_list_bytes",
                u64::from(self.max_header_list_bytes),
            ),
            ("serving.http_max_in_flight", self.http_max_in_flight as u64),
            (
                "serving.header_read_timeout_ms",
                self.header_read_timeout_ms,
            ),
            (
                "serving.request_body_timeout_ms",
                self.request_body_timeout_ms,
            ),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::Invalid(format!("{key} must be at least 1")));
        }
        if self.max_connection_age_secs > 0 && self.max_connection_age_grace_secs == 0 {
            return Err(ConfigError::Invalid(
                "serving.max_connection_age_grace_secs must be at least 1 while serving.max_connection_age_secs is on (calls in flight need time to finish after the GOAWAY)"
                    .into(),
            ));
        }
        if self.idle_poll_us > MAX_IDLE_POLL_US {
            return Err(ConfigError::Invalid(format!(
                "serving.idle_poll_us must be at most {MAX_IDLE_POLL_US} (each call may cost a serving thread twice that in CPU)"
            )));
        }
        Ok(())
    }
}

/// The longest `serving.idle_poll_us`: past a few milliseconds the window
/// no longer bridges a reply on its way, it only burns a core.
const MAX_IDLE_POLL_US: u64 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn idle_polling_is_off_unless_asked_for() {
        assert_eq!(ServingConfig::default().idle_poll_us, 0);
        let c =
            crate::config::Config::from_toml_and_env("[serving]\nidle_poll_us = 100\n", env(&[]))
                .unwrap();
        assert_eq!(c.serving.idle_poll_us, 100);
    }

    #[test]
    fn connections_age_after_thirty_minutes_unless_set_and_zero_turns_it_off() {
        let d = ServingConfig::default();
        assert_eq!(
            (d.max_connection_age_secs, d.max_connection_age_grace_secs),
            (1800, 60)
        );
        let c = crate::config::Config::from_toml_and_env(
            "[serving]\nmax_connection_age_secs = 0\nmax_connection_age_grace_secs = 0\n",
            env(&[]),
        )
        .unwrap();
        assert_eq!(c.serving.max_connection_age_secs, 0);
    }

    #[test]
    fn a_connection_age_without_grace_or_past_the_duration_bound_fails_to_load() {
        let err = crate::config::Config::from_toml_and_env(
            "[serving]\nmax_connection_age_secs = 120\nmax_connection_age_grace_secs = 0\n",
            env(&[]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("serving.max_connection_age_grace_secs"),
            "{err}"
        );
        let err = crate::config::Config::from_toml_and_env(
            "",
            env(&[("IDGATE_SERVING__MAX_CONNECTION_AGE_SECS", "99999999999")]),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("serving.max_connection_age_secs"),
            "{err}"
        );
    }

    #[test]
    fn an_idle_poll_window_past_ten_milliseconds_fails_to_load() {
        let c =
            crate::config::Config::from_toml_and_env("[serving]\nidle_poll_us = 10000\n", env(&[]))
                .unwrap();
        assert_eq!(c.serving.idle_poll_us, 10_000);
        let err = crate::config::Config::from_toml_and_env(
            "",
            env(&[("IDGATE_SERVING__IDLE_POLL_US", "10001")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("serving.idle_poll_us"), "{err}");
    }
}
