//! The configuration files of the run's two idgate processes, as text: the
//! gateway's as deployed (deploy/kubernetes/overlays/production/idgate.toml
//! on loopback, its watch limits raised for phase 2), the sandbox's, and
//! the sandbox's addresses read back from what `idgate sandbox` prints.
//! Pure: the unit tests load both files as idgate would.

use crate::child::{OPERATOR_PASSWORD, SEALING_KEY_ENV};

/// The user the sandbox's completion webhook authenticates as.
pub const WEBHOOK_USER: &str = "vendor";
/// The variable holding the webhook password the gateway checks (the
/// sandbox is given the same password in its file).
pub const WEBHOOK_PASSWORD_ENV: &str = "IDGATE_WEBHOOK_PASSWORD";

/// `[cluster] key_prefix`, the production overlay's.
pub const KEY_PREFIX: &str = "idgate:";

/// Every operation of a journey, and `challenges_2d` too: the production
/// overlay's caller is granted all of them.
pub const OPERATIONS: &str = r#"["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]"#;

/// The defaults of the watch limits phase 2 must raise
/// (docs/configuration.md): `[serving] max_streams`, `[watch]
/// max_journeys`, `[[callers]] max_watch_streams`, `[serving]
/// max_streams_per_connection`, `[serving] max_concurrent_streams`.
const DEFAULT_MAX_STREAMS: usize = 10_000;
const DEFAULT_MAX_JOURNEYS: usize = 10_000;
const DEFAULT_CALLER_WATCHES: usize = 1_000;
const DEFAULT_PER_CONNECTION: usize = 100;
const DEFAULT_H2_STREAMS: usize = 256;
/// Room above the watches phase 2 opens: phase 1's own watches may still
/// be closing when it starts.
const WATCH_MARGIN: usize = 1_000;

/// The watch limits of the gateway's configuration: each default, or
/// raised so that `watches` streams fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchRoom {
    /// `[serving] max_streams`: streams of the process.
    pub streams: usize,
    /// `[watch] max_journeys`: journeys watched at once.
    pub journeys: usize,
    /// `[[callers]] max_watch_streams`: the one caller's streams.
    pub per_caller: usize,
    /// `[serving] max_streams_per_connection`.
    pub per_connection: usize,
    /// `[serving] max_concurrent_streams` (HTTP/2 streams per connection).
    pub h2_streams: usize,
}

impl WatchRoom {
    /// Room for `watches` streams, `per_connection` on each connection.
    pub fn for_watches(watches: usize, per_connection: usize) -> Self {
        let room = watches + WATCH_MARGIN;
        WatchRoom {
            streams: room.max(DEFAULT_MAX_STREAMS),
            journeys: room.max(DEFAULT_MAX_JOURNEYS),
            per_caller: room.max(DEFAULT_CALLER_WATCHES),
            per_connection: per_connection.max(DEFAULT_PER_CONNECTION),
            h2_streams: per_connection.max(DEFAULT_H2_STREAMS),
        }
    }

    /// The settings that differ from their defaults, as `key = value`, for
    /// the report (and docs/capacity.md).
    pub fn raised(&self) -> Vec<String> {
        [
            ("[serving] max_streams", self.streams, DEFAULT_MAX_STREAMS),
            ("[watch] max_journeys", self.journeys, DEFAULT_MAX_JOURNEYS),
            (
                "[[callers]] max_watch_streams",
                self.per_caller,
                DEFAULT_CALLER_WATCHES,
            ),
            (
                "[serving] max_streams_per_connection",
                self.per_connection,
                DEFAULT_PER_CONNECTION,
            ),
            (
                "[serving] max_concurrent_streams",
                self.h2_streams,
                DEFAULT_H2_STREAMS,
            ),
        ]
        .into_iter()
        .filter(|(_, value, default)| value != default)
        .map(|(key, value, default)| format!("{key} = {value} (default {default})"))
        .collect()
    }
}

/// The sandbox's listeners, as `idgate sandbox` prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxAddresses {
    pub base_url: String,
    pub result_base_url: String,
    /// Each 3D channel's name and base URL, by priority.
    pub channels: Vec<(String, String)>,
}

impl SandboxAddresses {
    /// Reads one line `idgate sandbox` printed; true once the last line of
    /// its addresses (`sandbox admin`) was read.
    pub fn read_line(&mut self, line: &str) -> bool {
        let mut words = line.split_whitespace();
        if words.next() != Some("sandbox") {
            return false;
        }
        match (words.next(), words.next(), words.next()) {
            (Some("base_url"), Some(url), _) => self.base_url = url.to_owned(),
            (Some("result_base_url"), Some(url), _) => self.result_base_url = url.to_owned(),
            (Some("channel"), Some(name), Some(url)) => {
                self.channels.push((name.to_owned(), url.to_owned()));
            }
            (Some("admin"), ..) => return true,
            _ => {}
        }
        false
    }

    /// Whether every address the gateway needs was read.
    pub fn complete(&self) -> bool {
        !self.base_url.is_empty() && !self.result_base_url.is_empty() && !self.channels.is_empty()
    }
}

/// The sandbox's file: documents processed in `processing_ms`, a 3D
/// selfie of `selfie_bytes` (a real capture's size), the gateway's
/// operator, completion notices to the gateway's webhook receiver on
/// `webhook_port` with its credentials, room for every journey of a run
/// (phase 2 alone creates `--watches` of them).
pub fn sandbox_toml(
    processing_ms: u64,
    selfie_bytes: usize,
    webhook_port: u16,
    webhook_password: &str,
) -> String {
    format!(
        "[sandbox]\nprocessing_delay_ms = {processing_ms}\nmax_entries = 1000000\n\
         selfie_bytes = {selfie_bytes}\n\n\
         [[sandbox.operators]]\nlogin = \"bench\"\npassword = \"{OPERATOR_PASSWORD}\"\n\n\
         [sandbox.webhook]\nurl = \"http://127.0.0.1:{webhook_port}/webhooks/journey\"\n\
         basic_user = \"{WEBHOOK_USER}\"\nbasic_password = \"{webhook_password}\"\n"
    )
}

/// The `[[callers]]` keys after its name and subject: a service running
/// whole journeys of its own, as the production overlay's `onboarding`
/// caller, with room for phase 2's watches.
pub fn caller_grant(room: &WatchRoom) -> String {
    format!(
        "operator_profiles = [\"default\"]\noperations = {OPERATIONS}\njourneys = \"own\"\n\
         result_view = \"full\"\nmax_watch_streams = {}\n",
        room.per_caller
    )
}

/// The gateway's file: the production overlay's choices (serving limits
/// and connection age, image limits, webhook with Basic credentials,
/// `[cluster]`, JWT callers) on loopback ports, with the sandbox as the
/// vendor and its channels, `room`'s watch limits, and `auth` (the
/// `[auth]` and `[[callers]]` sections, from examples/hop/jwt.rs). What it
/// leaves out of the overlay: TLS (the listeners are on loopback, where
/// bearer tokens need none),
/// Sentinel (one Redis of the run's own), the admin listener (no token),
/// and the drain delay (0: the run ends at once).
pub fn gateway_toml(
    (grpc, http, admin): (u16, u16, u16),
    sandbox: &SandboxAddresses,
    redis_url: &str,
    room: &WatchRoom,
    auth: &str,
) -> String {
    let channels: String = sandbox
        .channels
        .iter()
        .zip(0..)
        .map(|((name, url), priority)| {
            format!(
                "[[channels]]\nname = \"{name}\"\nbase_url = \"{url}\"\npriority = {priority}\n\n"
            )
        })
        .collect();
    format!(
        "[listen]\ngrpc = \"127.0.0.1:{grpc}\"\nhttp = \"127.0.0.1:{http}\"\nadmin = \"127.0.0.1:{admin}\"\n\n\
         [serving]\ndrain_delay_secs = 0\nshutdown_grace_secs = 30\n\
         max_connection_age_secs = 300\nmax_connection_age_grace_secs = 30\n\
         max_body_bytes_in_flight = 50331648\n\
         max_streams = {}\nmax_streams_per_connection = {}\nmax_concurrent_streams = {}\n\n\
         [limits]\nmax_images = 8\nmax_image_bytes = 4194304\n\n\
         [upstream]\nbase_url = \"{}\"\nresult_base_url = \"{}\"\n\n\
         [[operators]]\nname = \"default\"\nlogin = \"bench\"\npassword_env = \"IDGATE_OPERATOR_PASSWORD\"\n\n\
         {channels}\
         [webhook]\nbasic_user = \"{WEBHOOK_USER}\"\nbasic_password_env = \"{WEBHOOK_PASSWORD_ENV}\"\n\n\
         [watch]\nmax_journeys = {}\n\n\
         [cluster]\nredis_url = \"{redis_url}\"\nsecret_key_env = \"{SEALING_KEY_ENV}\"\nkey_prefix = \"{KEY_PREFIX}\"\n\n\
         {auth}",
        room.streams,
        room.per_connection,
        room.h2_streams,
        sandbox.base_url,
        sandbox.result_base_url,
        room.journeys,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jwt::BenchCaller;

    fn sandbox() -> SandboxAddresses {
        let mut addresses = SandboxAddresses::default();
        let printed = "2026-01-01T00:00:00Z  INFO idgate: telemetry on\n\
            sandbox base_url        http://127.0.0.1:41001\n\
            sandbox result_base_url http://127.0.0.1:41002\n\
            sandbox channel primary      http://127.0.0.1:41003 (vendor sandbox-vendor-a)\n\
            sandbox channel alternative  http://127.0.0.1:41004 (vendor sandbox-vendor-b)\n\
            sandbox admin           http://127.0.0.1:41001/_sandbox\n\
            sandbox base_url        http://ignored";
        let mut done = false;
        for line in printed.lines() {
            if !done {
                done = addresses.read_line(line);
            }
        }
        assert!(done);
        addresses
    }

    #[test]
    fn the_sandbox_addresses_are_read_from_what_it_prints() {
        let a = sandbox();
        assert!(a.complete());
        assert_eq!(a.base_url, "http://127.0.0.1:41001");
        assert_eq!(a.result_base_url, "http://127.0.0.1:41002");
        assert_eq!(
            a.channels,
            vec![
                ("primary".to_owned(), "http://127.0.0.1:41003".to_owned()),
                (
                    "alternative".to_owned(),
                    "http://127.0.0.1:41004".to_owned()
                ),
            ]
        );
        assert!(!SandboxAddresses::default().complete());
    }

    #[test]
    fn ten_thousand_watches_raise_the_three_caps_and_keep_the_connection_defaults() {
        let room = WatchRoom::for_watches(10_000, 100);
        assert_eq!(
            (room.streams, room.journeys, room.per_caller),
            (11_000, 11_000, 11_000)
        );
        assert_eq!((room.per_connection, room.h2_streams), (100, 256));
        assert_eq!(room.raised().len(), 3);
        assert!(room.raised()[0].starts_with("[serving] max_streams = 11000"));
        // A few watches fit the defaults: nothing raised.
        assert!(WatchRoom::for_watches(200, 100).raised().len() == 1);
        // More streams per connection than HTTP/2 allows raise both.
        let wide = WatchRoom::for_watches(10_000, 500);
        assert_eq!((wide.per_connection, wide.h2_streams), (500, 500));
    }

    #[test]
    fn the_deployed_configuration_is_one_idgate_accepts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let caller = BenchCaller::new().expect("a key");
        let room = WatchRoom::for_watches(10_000, 100);
        let auth = caller
            .config_granting(dir.path(), &caller_grant(&room))
            .expect("jwks");
        let toml = gateway_toml(
            (1, 2, 3),
            &sandbox(),
            "redis://127.0.0.1:6399",
            &room,
            &auth,
        );
        let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let env = vec![
            ("IDGATE_OPERATOR_PASSWORD".to_owned(), "x".to_owned()),
            (WEBHOOK_PASSWORD_ENV.to_owned(), "y".repeat(32)),
            (SEALING_KEY_ENV.to_owned(), key.to_owned()),
            ("IDGATE_TELEMETRY__ACCESS_LOG".to_owned(), "true".to_owned()),
        ];
        let config =
            idgate::config::Config::from_toml_and_env(&toml, env).expect("a valid configuration");
        assert!(config.cluster.is_enabled());
        assert!(config.auth.is_some());
        assert!(config.telemetry.access_log);
        assert_eq!(config.channels.len(), 2);
        assert_eq!(config.watch.max_journeys, 11_000);
        assert_eq!(config.serving.max_streams, 11_000);
        assert_eq!(config.limits.max_images, 8);
    }

    #[test]
    fn the_sandbox_file_is_one_idgate_sandbox_accepts() {
        let toml = sandbox_toml(200, 307_200, 8080, "secret");
        let config = idgate::config::Config::from_toml_and_env(&toml, Vec::new())
            .expect("a valid configuration");
        let s = &config.sandbox;
        assert_eq!(s.processing_delay_ms, 200);
        assert_eq!(s.selfie_bytes, 307_200);
        assert_eq!(s.operators[0].login, "bench");
        assert_eq!(
            s.webhook.url.as_deref(),
            Some("http://127.0.0.1:8080/webhooks/journey")
        );
        assert_eq!(s.webhook.basic_user.as_deref(), Some(WEBHOOK_USER));
    }
}
