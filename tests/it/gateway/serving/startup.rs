//! Configurations the gateway refuses to start with: a short admin token,
//! an unbounded TTL or a pattern as the webhook path stop it before it
//! binds anything, naming the key and never quoting the value.

use idgate::server::StartOptions;

use crate::support::gateway::*;

#[tokio::test]
async fn an_admin_token_shorter_than_32_characters_stops_the_gateway_from_starting() {
    let mut config = test_config();
    config.admin.token_file = Some(secret_file("too-short-token"));
    let err = match idgate::server::start_with(config, StartOptions::default()).await {
        Ok(gateway) => {
            gateway.shutdown().await;
            panic!("a gateway started with a short admin token");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("admin.token"), "{err}");
    assert!(!err.contains("too-short-token"), "{err}");
}

/// `idgate serve` refuses a configuration foot-gun before it binds
/// anything: the process exits non-zero and says which key, not what value.
#[test]
fn idgate_serve_refuses_to_start_on_an_unbounded_ttl_or_a_pattern_webhook_path() {
    let dir = crate::support::temp::dir("footgun");
    let config = dir.path().join("idgate.toml");
    let listen =
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    for (extra, env, key) in [
        (
            "[webhook]\npath = \"/hooks/:journey\"\n",
            None,
            "webhook.path",
        ),
        (
            "",
            Some(("IDGATE_JOURNEYS__UNKNOWN_TTL_SECS", "9223372036854775807")),
            "journeys.unknown_ttl_secs",
        ),
    ] {
        std::fs::write(&config, format!("{listen}{extra}")).expect("write config");
        let mut command = crate::support::process::idgate_command();
        command
            .args(["serve", "--config"])
            .arg(&config)
            .env("IDGATE_ADMIN_TOKEN", crate::support::gateway::ADMIN_TOKEN);
        if let Some((var, value)) = env {
            command.env(var, value);
        }
        let out = command.output().expect("run idgate serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{key}: {stdout}");
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(!stdout.contains("idgate listening"), "{stdout}");
        assert!(
            !stderr.contains(":journey") && !stderr.contains("9223372036854775807"),
            "{stderr}"
        );
    }
}
