//! The configuration test gateways start from: ephemeral loopback
//! listeners, an admin token, fast fallback polling, and the settings a
//! gateway in front of an external upstream must state.

use std::net::SocketAddr;

use idgate::config::{Config, OperatorConfig, UpstreamConfig};

/// The admin bearer token of test gateways.
pub const ADMIN_TOKEN: &str = "test-admin-token-7f3c-0123456789abcdef";

fn loopback() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// A configuration with every listener on an ephemeral loopback port, the
/// embedded sandbox, an admin token file, and the state in memory.
pub fn test_config() -> Config {
    let mut config = Config {
        telemetry: crate::support::telemetry::telemetry_config(),
        ..Config::default()
    };
    config.listen.grpc = loopback();
    config.listen.http = loopback();
    config.listen.admin = loopback();
    config.admin.token_file = Some(secret_file(ADMIN_TOKEN));
    config.sandbox.processing_delay_ms = 2_000;
    // Tests stop at once: no load balancer to tell.
    config.serving.drain_delay_secs = 0;
    // One serving thread, and no idle polling (the default): a test that
    // needs more threads, or polling, asks for them.
    config.serving.grpc_threads = 1;
    // Fallback polling quickly, so tests that lose the webhook finish fast.
    config.watch.webhook_grace_secs = 1;
    config.watch.poll_initial_ms = 50;
    config.watch.poll_max_ms = 200;
    // Parallel gateways on the default store path would collide on its
    // lock: a test that needs the store gives it a directory of its own.
    config.store.backend = idgate::config::StoreBackend::Memory;
    config
}

/// Writes `content` to a fresh temporary file (a secret for the config),
/// removed with the test ([`crate::support::temp::file`]).
pub fn secret_file(content: &str) -> std::path::PathBuf {
    crate::support::temp::file("secret", content.as_bytes())
}

/// Points `config` at the external `upstream`, with the sandbox's operator
/// as the default profile (its password in a file), open to every caller
/// as it says explicitly (`[auth] mode = "none"`; tests/it/auth puts
/// callers in front).
pub fn use_upstream(config: &mut Config, upstream: UpstreamConfig) {
    config.upstream = Some(upstream);
    run_open(config);
    config.operators = vec![OperatorConfig {
        name: "default".into(),
        login: "sandbox".into(),
        password_env: None,
        password_file: Some(secret_file("sandbox\n")),
    }];
}

/// `[auth] mode = "none"`: what a gateway in front of a real upstream
/// must say to run open.
pub fn run_open(config: &mut Config) {
    config.auth = Some(idgate::auth::AuthConfig {
        mode: idgate::auth::AuthMode::None,
        jwt: None,
        allow_plaintext_tokens: false,
    });
}
