//! The configuration loader: any TOML text with any `IDGATE_*` overrides
//! loads or fails with a `ConfigError` that quotes no value, and every
//! duration key is bounded (past 30 days it fails, naming the key).

use idgate::config::Config;
use proptest::prelude::*;

use super::{PLACEHOLDER, any_text, cases, marker, quotes};

/// Key segments: real keys, array indices (in range or not) and junk.
fn key_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "listen", "grpc", "http", "admin", "serving", "max_in_flight",
            "max_concurrent_streams", "drain_delay_secs", "upstream", "base_url", "timeout_ms",
            "paths", "credential", "fields", "operators", "name", "login", "password_env",
            "limits", "max_image_bytes", "telemetry", "channels", "priority", "breaker",
            "routing", "mode", "max_bindings", "embedded_channels", "webhook", "basic_user",
            "hmac_secret_env", "path", "max_body_bytes", "watch", "poll_max_ms", "sandbox",
            "token_env", "cluster", "redis_url", "sentinels", "master_name", "nodes",
            "ca_file", "cert_file", "key_file", "sentinel_username", "sentinel_password_file",
            "secret_key_env", "0", "1", "2", "3",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "", "-1", "01", "1000", "1024", "4294967296", "18446744073709551615",
            "99999999999999999999", "LISTEN", "Upstream",
        ]).prop_map(str::to_owned),
        1 => any_text(8),
    ]
}

/// Override values that are names an error may list (the variants of a
/// mode), or too short to tell apart.
const NAMED_VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "true",
    "false",
    "nan",
    "inf",
    "1e400",
    "1.5",
    "\"\"",
    "\"",
    "force_primary",
    "force_alternative",
    "auto",
    "127.0.0.1:0",
    "[::1]:0",
    "/x",
];

/// A TOML value: text, a number, a boolean or a float, quoted or not.
fn override_value(marker: String) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(marker.clone()),
        Just(format!("\"{marker}\"")),
        Just(format!("http://{marker}")),
        Just(format!("rediss://{marker}:1")),
        Just(format!("{marker}:26379")),
        Just(format!(" {marker} ")),
        Just(format!("channel:{marker}")),
        (0u8..10).prop_map(|d| format!("{d}8{}", "7".repeat(9))),
        prop::sample::select(NAMED_VALUES).prop_map(str::to_owned),
        any_text(16),
    ]
}

/// TOML texts: empty, a full valid file, one with a string set to the
/// marker at some key, or arbitrary text.
fn toml_text(marker: String) -> impl Strategy<Value = String> {
    const VALID: &str = "[upstream]\nbase_url = \"http://a\"\n\
        [[operators]]\nname = \"default\"\nlogin = \"op\"\npassword_env = \"P\"\n\
        [[channels]]\nname = \"primary\"\nbase_url = \"http://a\"\n\
        [[channels]]\nname = \"alternative\"\nbase_url = \"http://b\"\npriority = 1\n";
    prop_oneof![
        Just(String::new()),
        Just(VALID.to_owned()),
        (
            prop::sample::select(vec![
                "[listen]\ngrpc",
                "[upstream]\nbase_url",
                "[routing]\nmode",
                "[webhook]\npath",
                "[serving]\nmax_in_flight",
                "[sandbox]\nwebhook_url",
                "[[channels]]\nname",
                "[limits]\nmax_images",
                "[telemetry]\nlog_format",
            ]),
            prop::sample::select(vec!["\"M\"", "\"M", "M", "[\"M\"]", "{ a = \"M\" }", "'M'"]),
        )
            .prop_map(move |(key, value)| { format!("{key} = {}\n", value.replace('M', &marker)) }),
        any_text(120),
        "(\\[[a-z_.]{0,12}\\]\n)?([a-z_]{1,12} = (\"[ -~]{0,12}\"|[0-9]{1,12}|true|\\[\\])\n){0,4}",
    ]
}

/// Whole keys where a wrong value is refused by a check of its own.
const CHECKED_KEYS: &[&str] = &[
    "CHANNELS__0__NAME",
    "CHANNELS__1__NAME",
    "CHANNELS__0__BASE_URL",
    "CHANNELS__1__LIVENESS_PATH",
    "CHANNELS__2__NAME",
    "CHANNELS__1023__NAME",
    "CHANNELS__1024__NAME",
    "CHANNELS__18446744073709551615__NAME",
    "ROUTING__MODE",
    "UPSTREAM__BASE_URL",
    "LISTEN__GRPC",
    "WEBHOOK__PATH",
    "OPERATORS__0__NAME",
    "SERVING__MAX_IN_FLIGHT",
];

fn env_override(marker: String) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            3 => prop::collection::vec(key_segment(), 1..5),
            1 => prop::sample::select(CHECKED_KEYS).prop_map(|k| vec![k.to_owned()]),
        ],
        prop_oneof![Just("IDGATE_"), Just("IDGATE"), Just("idgate_"), Just("")],
        override_value(marker),
    )
        .prop_map(|(segments, prefix, value)| {
            let key = segments
                .iter()
                .map(|s| s.to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join("__");
            (format!("{prefix}{key}"), value)
        })
}

proptest! {
    #![proptest_config(cases(2500))]

    /// Any TOML text and `IDGATE_*` overrides: a configuration or a
    /// `ConfigError`, never a panic, and the error never quotes a value.
    #[test]
    fn configuration_loads_or_gives_an_error_that_quotes_no_value(
        marker in marker(),
        text in toml_text(PLACEHOLDER.to_owned()),
        env in prop::collection::vec(env_override(PLACEHOLDER.to_owned()), 0..5),
    ) {
        let text = text.replace(PLACEHOLDER, &marker);
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k, v.replace(PLACEHOLDER, &marker)))
            .collect();
        if let Err(e) = Config::from_toml_and_env(&text, env.clone()) {
            let e = e.to_string();
            prop_assert!(e.starts_with("invalid configuration: "), "{}", e);
            prop_assert!(!e.contains(&marker), "the error quotes a value: {}", e);
            for (_, value) in env.iter().filter(|(_, v)| !NAMED_VALUES.contains(&v.as_str())) {
                prop_assert!(!quotes(&e, value), "the error quotes a value: {}", e);
            }
        }
    }
}

/// Duration keys, as `IDGATE_*` variables and as errors name them; the
/// channel keys need `[[channels]]` (given by [`DURATION_BASE`]).
const DURATION_KEYS: [(&str, &str); 10] = [
    ("IDGATE_IDEMPOTENCY__TTL_SECS", "idempotency.ttl_secs"),
    (
        "IDGATE_IDEMPOTENCY__PENDING_TTL_SECS",
        "idempotency.pending_ttl_secs",
    ),
    (
        "IDGATE_JOURNEYS__UNKNOWN_TTL_SECS",
        "journeys.unknown_ttl_secs",
    ),
    ("IDGATE_WATCH__POLL_MAX_MS", "watch.poll_max_ms"),
    (
        "IDGATE_ROUTING__BINDING_TTL_SECS",
        "routing.binding_ttl_secs",
    ),
    (
        "IDGATE_WEBHOOK__REPLAY_WINDOW_SECS",
        "webhook.replay_window_secs",
    ),
    (
        "IDGATE_SERVING__IDLE_TIMEOUT_SECS",
        "serving.idle_timeout_secs",
    ),
    ("IDGATE_CLUSTER__MAX_BACKOFF_MS", "cluster.max_backoff_ms"),
    ("IDGATE_CHANNELS__0__TIMEOUT_MS", "channels[0].timeout_ms"),
    (
        "IDGATE_SANDBOX__RESULT_RETENTION_SECS",
        "sandbox.result_retention_secs",
    ),
];

const DURATION_BASE: &str = "[[channels]]\nname = \"p\"\nbase_url = \"http://127.0.0.1:1\"\n";

/// Values around the bound (30 days), and anything TOML takes or not.
fn duration_value() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => any::<u64>().prop_map(|v| v.to_string()),
        2 => (2_592_000u64 - 3..2_592_000 + 3).prop_map(|v| v.to_string()),
        2 => (2_592_000_000u64 - 3..2_592_000_000 + 3).prop_map(|v| v.to_string()),
        1 => (0u64..100_000).prop_map(|v| v.to_string()),
        1 => any::<i64>().prop_map(|v| v.to_string()),
        1 => "[0-9]{19,30}",
    ]
}

proptest! {
    #![proptest_config(cases(400))]

    /// Any value of a duration key loads, or fails with an error that
    /// names the key and quotes no value; past 30 days it always fails.
    #[test]
    fn any_duration_value_loads_or_fails_naming_the_key_without_the_value(
        key in prop::sample::select(DURATION_KEYS.to_vec()),
        value in duration_value(),
    ) {
        let (var, name) = key;
        let result = Config::from_toml_and_env(DURATION_BASE, [(var.to_owned(), value.clone())]);
        let max: u128 = if name.ends_with("_ms") { 2_592_000_000 } else { 2_592_000 };
        let over = value.parse::<u128>().is_ok_and(|v| v > max);
        match result {
            Ok(_) => prop_assert!(!over, "{} = {} loaded past the bound", name, value),
            Err(e) => {
                let e = e.to_string();
                // No run of digits in the error is the value.
                let quoted = e
                    .split(|c: char| !c.is_ascii_digit())
                    .any(|run| run == value.trim_start_matches('-'));
                prop_assert!(!quoted || value.len() < 2, "the error quotes the value: {}", e);
                if over && value.parse::<i64>().is_ok() {
                    prop_assert!(e.contains(name) && e.contains("30 days"), "{}", e);
                } else if over {
                    // Past TOML's integers: the variable is named.
                    prop_assert!(e.contains(var) && e.contains("out of range"), "{}", e);
                }
            }
        }
    }
}

/// How the fleet's Redis is named: one server, sentinels, or cluster nodes
/// (with what each needs beside it), as `IDGATE_CLUSTER__*` variables.
const REDIS_KEYS: [(&str, &str); 3] = [
    ("IDGATE_CLUSTER__REDIS_URL", ""),
    ("IDGATE_CLUSTER__SENTINELS", "IDGATE_CLUSTER__MASTER_NAME"),
    ("IDGATE_CLUSTER__NODES", "IDGATE_CLUSTER__MODE"),
];

/// A Redis address with `secret` where credentials, a host or a path may
/// go, in any scheme or none, one entry or a list.
fn redis_address(secret: String) -> impl Strategy<Value = String> {
    let one = prop_oneof![
        Just(format!("rediss://user:{secret}@10.0.0.1:6380")),
        Just(format!("redis://:{secret}@10.0.0.1:6379")),
        Just(format!("rediss://10.0.0.1:6380/{secret}")),
        Just(format!("{secret}://10.0.0.1:26379")),
        Just(format!("10.0.0.1:{secret}")),
        Just(format!("rediss://10.0.0.1:{secret}")),
        Just(format!("{secret}@10.0.0.1:26379")),
        any_text(12),
    ];
    prop::collection::vec(one, 1..3).prop_map(|entries| entries.join(","))
}

proptest! {
    #![proptest_config(cases(400))]

    /// However the fleet's Redis is named, the configuration loads or
    /// fails with an error that quotes no part of the address: a
    /// password in a URL never reaches a log line.
    #[test]
    fn any_redis_address_loads_or_fails_without_quoting_it(
        secret in "[a-z]{12}",
        key in prop::sample::select(REDIS_KEYS.to_vec()),
        tls in any::<bool>(),
        address in redis_address(PLACEHOLDER.to_owned()),
    ) {
        let (var, companion) = key;
        let mut env = vec![
            (var.to_owned(), address.replace(PLACEHOLDER, &secret)),
            ("IDGATE_CLUSTER__SECRET_KEY_ENV".to_owned(), "BENCH_KEY".to_owned()),
        ];
        match companion {
            "IDGATE_CLUSTER__MASTER_NAME" => env.push((companion.to_owned(), "fleet".to_owned())),
            "IDGATE_CLUSTER__MODE" => env.push((companion.to_owned(), "cluster".to_owned())),
            _ => {}
        }
        if tls {
            env.push(("IDGATE_CLUSTER__CA_FILE".to_owned(), "/etc/idgate/redis-ca.pem".to_owned()));
        }
        if let Err(e) = Config::from_toml_and_env("", env) {
            let e = e.to_string();
            prop_assert!(!e.contains(&secret), "the error quotes the address: {}", e);
        }
    }
}
