//! The whole configuration: loading, validation, the documented examples.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_apply_without_a_file() {
    let c = Config::from_toml_and_env("", env(&[])).unwrap();
    assert_eq!(c.listen.grpc.port(), 50051);
    assert!(c.upstream.is_none());
}

#[test]
fn environment_overrides_nested_keys_and_array_items() {
    let c = Config::from_toml_and_env(
        "[upstream]\nbase_url = \"http://a\"\n[[operators]]\nname = \"x\"\nlogin = \"l\"\n",
        env(&[
            ("IDGATE_UPSTREAM__TIMEOUT_MS", "1234"),
            ("IDGATE_OPERATORS__0__LOGIN", "other"),
            ("IDGATE_ADMIN_TOKEN", "not-an-override"),
        ]),
    )
    .unwrap();
    let up = c.upstream.unwrap();
    assert_eq!(up.timeout_ms, 1234);
    assert_eq!(up.base_url, "http://a");
    assert_eq!(up.paths.credential, "/service/captcha/credencial");
    assert_eq!(c.operators[0].login, "other");
}

#[test]
fn channels_routing_and_admin_load_with_overrides() {
    let c = Config::from_toml_and_env(
        "[routing]\nmode = \"force_alternative\"\n\
         [[channels]]\nname = \"primary\"\nbase_url = \"http://a\"\n\
         [[channels]]\nname = \"alternative\"\nbase_url = \"http://b\"\npriority = 1\n",
        env(&[
            ("IDGATE_CHANNELS__1__TIMEOUT_MS", "2500"),
            ("IDGATE_ADMIN__TOKEN_ENV", "MY_ADMIN_TOKEN"),
        ]),
    )
    .unwrap();
    assert_eq!(c.channels.len(), 2);
    assert_eq!(c.channels[1].timeout_ms, 2500);
    assert_eq!(
        c.routing.mode,
        crate::channels::RoutingMode::ForceAlternative
    );
    assert_eq!(c.admin.token_env, "MY_ADMIN_TOKEN");
}

#[test]
fn duplicate_channel_names_fail_to_load() {
    let err = Config::from_toml_and_env(
        "[[channels]]\nname = \"p\"\nbase_url = \"http://a\"\n\
         [[channels]]\nname = \"p\"\nbase_url = \"http://b\"\n",
        env(&[]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("another channel"), "{err}");
}

#[test]
fn webhook_and_watch_sections_parse_and_take_overrides() {
    let c = Config::from_toml_and_env(
        "[webhook]\nbasic_user = \"vendor\"\nbasic_password_env = \"X\"\n[watch]\nwebhook_grace_secs = 5\n",
        env(&[("IDGATE_WEBHOOK__MAX_BODY_BYTES", "1024")]),
    )
    .unwrap();
    assert_eq!(c.webhook.basic_user.as_deref(), Some("vendor"));
    assert_eq!(c.webhook.max_body_bytes, 1024);
    assert_eq!(c.webhook.path, "/webhooks/journey");
    assert_eq!(c.watch.webhook_grace_secs, 5);
    assert_eq!(c.watch.poll_max_ms, 10_000);
}

#[test]
fn an_array_index_past_the_bound_is_refused_without_filling_memory() {
    let text = "[[channels]]\nname = \"p\"\nbase_url = \"http://a\"\n";
    for index in ["1024", "4294967296", "18446744073709551615"] {
        let err = Config::from_toml_and_env(
            text,
            env(&[(&format!("IDGATE_CHANNELS__{index}__NAME"), "q")]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("is over 1023"), "{err}");
    }
    // Inside the bound, the gap is filled and refused by the schema.
    let err = Config::from_toml_and_env(text, env(&[("IDGATE_CHANNELS__1023__NAME", "q")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field"), "{err}");
}

#[test]
fn budgets_load_with_overrides_and_must_name_a_configured_profile() {
    let base =
        "[upstream]\nbase_url = \"http://a\"\n[[operators]]\nname = \"default\"\nlogin = \"l\"\n";
    let c = Config::from_toml_and_env(
        &format!(
            "{base}[idempotency]\nttl_secs = 3600\n\
             [[budgets]]\noperator = \"default\"\noperation = \"submit_documents\"\nper_day = 10\n"
        ),
        env(&[("IDGATE_BUDGETS__0__PER_MINUTE", "2")]),
    )
    .unwrap();
    assert_eq!(c.idempotency.ttl_secs, 3600);
    assert_eq!(c.idempotency.pending_ttl_secs, 60);
    assert_eq!(c.budgets[0].operation, BilledOperation::SubmitDocuments);
    assert_eq!(
        (c.budgets[0].per_minute, c.budgets[0].per_day),
        (Some(2), Some(10))
    );
    for (text, words) in [
        (
            "[[budgets]]\noperator = \"ghost\"\noperation = \"create_journey\"\nper_day = 1\n",
            "ghost",
        ),
        // An unknown operation: the operations it may be, never the value
        // written (a value may be a secret set at the wrong key).
        (
            "[[budgets]]\noperator = \"default\"\noperation = \"refund\"\nper_day = 1\n",
            "unknown variant `<redacted>`, expected one of `create_journey`",
        ),
        (
            "[[budgets]]\noperator = \"default\"\noperation = \"create_journey\"\nper_day = 0\n",
            "at least 1",
        ),
        ("[idempotency]\nttl_secs = 0\n", "idempotency.ttl_secs"),
    ] {
        let err = Config::from_toml_and_env(&format!("{base}{text}"), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(words), "{err}");
    }
    // On the embedded sandbox the one profile is `sandbox`.
    let c = Config::from_toml_and_env(
        "[[budgets]]\noperator = \"sandbox\"\noperation = \"create_journey\"\nper_minute = 5\n",
        env(&[]),
    )
    .unwrap();
    assert_eq!(c.budgets.len(), 1);
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = Config::from_toml_and_env("[listen]\ngrcp = \"x\"\n", env(&[])).unwrap_err();
    assert!(err.to_string().contains("grcp"), "{err}");
}

#[test]
fn a_missing_password_variable_names_the_profile_not_a_value() {
    let op = OperatorConfig {
        name: "default".into(),
        login: "op".into(),
        password_env: Some("IDGATE_TEST_SURELY_UNSET_VAR".into()),
        password_file: None,
    };
    let err = op.resolve().unwrap_err().to_string();
    assert!(err.contains("operators.default"), "{err}");
}

/// The first TOML block after `## Configuration` in `doc`.
fn configuration_example(doc: &str) -> &str {
    let section = doc
        .split("\n## Configuration\n")
        .nth(1)
        .expect("the document has a Configuration section");
    section
        .split("```toml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the section has a TOML example")
}

#[test]
fn the_documented_configuration_examples_load() {
    for (name, doc) in [
        ("README.md", include_str!("../../README.md")),
        (
            "docs/configuration.md",
            include_str!("../../docs/configuration.md"),
        ),
    ] {
        let c = Config::from_toml_and_env(configuration_example(doc), env(&[]))
            .unwrap_or_else(|e| panic!("the example of {name} loads: {e}"));
        assert_eq!(c.channels.len(), 2, "{name}");
        assert!(c.upstream.is_some(), "{name}");
        assert_eq!(c.operators.len(), 1, "{name}");
        assert!(c.auth.is_some() && c.callers.len() == 1, "{name}");
    }
}

#[test]
fn auth_and_callers_are_checked_together() {
    let callers =
        "[[callers]]\nname = \"a\"\njwt_subject = \"s\"\noperator_profiles = [\"sandbox\"]\n";
    let err = Config::from_toml_and_env(callers, env(&[])).unwrap_err();
    assert!(err.to_string().contains("[auth]"), "{err}");
    // Running open drops no caller silently: with [[callers]], refused,
    // naming both.
    let err = Config::from_toml_and_env(callers, env(&[("IDGATE_AUTH__MODE", "none")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("[auth] mode = \"none\""), "{err}");
    assert!(err.contains("[[callers]]"), "{err}");
    // The override that runs a gateway open, without callers.
    let c = Config::from_toml_and_env("", env(&[("IDGATE_AUTH__MODE", "none")])).unwrap();
    assert_eq!(c.auth.map(|a| a.mode), Some(AuthMode::None));
    // mTLS needs client certificates on the public listener.
    let err = Config::from_toml_and_env("[auth]\nmode = \"mtls\"\n", env(&[])).unwrap_err();
    assert!(err.to_string().contains("client_ca_file"), "{err}");
    // Callers' profiles are the gateway's (the embedded sandbox's here).
    let jwt = "[auth]\nmode = \"jwt\"\nallow_plaintext_tokens = true\n[auth.jwt]\njwks_file = \"/etc/idgate/jwks.json\"\n\
               issuer = \"https://issuer.example\"\naudience = \"idgate\"\n";
    let wrong = format!("{jwt}{}", callers.replace("sandbox", "default"));
    let err = Config::from_toml_and_env(&wrong, env(&[])).unwrap_err();
    assert!(
        err.to_string().contains("callers[0].operator_profiles[0]"),
        "{err}"
    );
    // Bearer tokens need TLS on a public listener other machines reach,
    // unless asked for; on loopback they never leave the host.
    let plain = format!(
        "{}{callers}",
        jwt.replace("allow_plaintext_tokens = true\n", "")
    );
    let reachable = format!("[listen]\ngrpc = \"0.0.0.0:50051\"\n{plain}");
    let err = Config::from_toml_and_env(&reachable, env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("[tls.grpc]"), "{err}");
    assert!(err.contains("allow_plaintext_tokens"), "{err}");
    let on_loopback = Config::from_toml_and_env(&plain, env(&[])).unwrap();
    assert!(!on_loopback.takes_tokens_in_clear());
}

#[test]
fn the_cluster_example_of_the_operations_guide_loads_with_overrides() {
    let doc = include_str!("../../docs/operations.md");
    let c = Config::from_toml_and_env(
        configuration_example(doc),
        env(&[("IDGATE_CLUSTER__KEY_PREFIX", "fleet-a:")]),
    )
    .unwrap();
    assert!(c.cluster.redis_url.unwrap().starts_with("rediss://"));
    assert_eq!(c.cluster.key_prefix, "fleet-a:");
    assert_eq!(c.cluster.command_timeout_ms, 250);
    // A URL without a sealing key does not load.
    let err = Config::from_toml_and_env(
        "[cluster]\nredis_url = \"redis://127.0.0.1:6390\"\n",
        env(&[]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("secret_key"), "{err}");
}

#[test]
fn errors_never_quote_the_configuration_text_or_a_value() {
    // A syntax error on a line holding a secret.
    let err = Config::from_toml_and_env(
        "[sandbox]\nwebhook = { signing_secret = \"whsec_TOPSECRET\" \n",
        env(&[]),
    )
    .unwrap_err()
    .to_string();
    assert!(!err.contains("TOPSECRET"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    // A numeric override of a string key fails without quoting it...
    let err = Config::from_toml_and_env("", env(&[("IDGATE_UPSTREAM__BASE_URL", "987654321")]))
        .unwrap_err()
        .to_string();
    assert!(!err.contains("987654321"), "{err}");
    // ...and quoting the override makes it a string.
    let c = Config::from_toml_and_env("", env(&[("IDGATE_UPSTREAM__BASE_URL", "\"987654321\"")]))
        .unwrap();
    assert_eq!(c.upstream.unwrap().base_url, "987654321");
}

#[test]
fn a_byte_budget_below_the_message_limit_fails_to_load_naming_the_key() {
    let err =
        Config::from_toml_and_env("[serving]\nmax_body_bytes_in_flight = 1048576\n", env(&[]))
            .unwrap_err()
            .to_string();
    assert!(err.contains("serving.max_body_bytes_in_flight"), "{err}");
    let c = Config::from_toml_and_env(
        "[serving]\nmax_body_bytes_in_flight = 1048576\n[limits]\nmax_grpc_message_bytes = 1048576\n",
        env(&[]),
    )
    .unwrap();
    assert_eq!(c.limits.grpc_message_bytes(), 1_048_576);
}

#[test]
fn the_small_message_limit_is_its_own_key_and_must_be_positive() {
    let c =
        Config::from_toml_and_env("[limits]\nmax_small_message_bytes = 4096\n", env(&[])).unwrap();
    assert_eq!(
        c.limits.message_bytes(crate::api::rpc::MessageSize::Small),
        4096
    );
    let err = Config::from_toml_and_env("[limits]\nmax_small_message_bytes = 0\n", env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("limits.max_small_message_bytes"), "{err}");
}

#[test]
fn the_retired_guard_key_still_accepts_foreign_appkeys_and_is_named_as_retired() {
    let retired =
        Config::from_toml_and_env("[guard]\naccept_foreign_appkeys = true\n", env(&[])).unwrap();
    assert!(retired.journeys.accept_foreign_appkeys);
    assert_eq!(
        retired.retired_keys(),
        [(
            "guard.accept_foreign_appkeys",
            "journeys.accept_foreign_appkeys"
        )]
    );
    let by_env =
        Config::from_toml_and_env("", env(&[("IDGATE_GUARD__ACCEPT_FOREIGN_APPKEYS", "true")]))
            .unwrap();
    assert!(by_env.journeys.accept_foreign_appkeys);
    let current =
        Config::from_toml_and_env("[journeys]\naccept_foreign_appkeys = true\n", env(&[])).unwrap();
    assert!(current.journeys.accept_foreign_appkeys);
    assert!(current.retired_keys().is_empty());
    assert!(!Config::default().journeys.accept_foreign_appkeys);
}

#[test]
fn the_store_is_embedded_by_default_checked_by_key_and_set_to_memory_by_override() {
    let c = Config::from_toml_and_env("", env(&[])).unwrap();
    assert_eq!(c.store.backend, StoreBackend::Embedded);
    assert_eq!(c.store.path, std::path::Path::new("idgate-data"));
    let c = Config::from_toml_and_env(
        "[store]\npath = \"/var/lib/idgate\"\n",
        env(&[("IDGATE_STORE__BACKEND", "memory")]),
    )
    .unwrap();
    assert_eq!(c.store.backend, StoreBackend::Memory);
    let err = Config::from_toml_and_env("[store]\nmax_bytes = 1000\n", env(&[])).unwrap_err();
    assert!(err.to_string().contains("store.max_bytes"), "{err}");
    let err = Config::from_toml_and_env("[store]\nmax_size = 1\n", env(&[])).unwrap_err();
    assert!(err.to_string().contains("max_size"), "{err}");
}
