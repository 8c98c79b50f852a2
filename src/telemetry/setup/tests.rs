use std::collections::HashMap;

use opentelemetry::Key;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn export_needs_an_endpoint_and_can_be_switched_off() {
    assert!(!export_requested(&env_of(&[])));
    assert!(export_requested(&env_of(&[(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://c:4317"
    )])));
    assert!(export_requested(&env_of(&[(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "http://c:4317"
    )])));
    assert!(!export_requested(&env_of(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_SDK_DISABLED", "true"),
    ])));
    assert!(!export_requested(&env_of(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ])));
}

#[test]
fn service_name_comes_from_config_unless_the_environment_names_it() {
    let r = resource("idgate-test", &env_of(&[]));
    assert_eq!(
        r.get(&Key::new("service.name")).map(|v| v.to_string()),
        Some("idgate-test".to_owned())
    );
    assert_eq!(
        r.get(&Key::new("service.version")).map(|v| v.to_string()),
        Some(env!("CARGO_PKG_VERSION").to_owned())
    );
    assert!(env_names_service(&env_of(&[("OTEL_SERVICE_NAME", "x")])));
    assert!(env_names_service(&env_of(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment=prod, service.name=x"
    )])));
    assert!(!env_names_service(&env_of(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "service.namespace=x"
    )])));
}

/// A given set of `OTEL_*` variables is the only one read: run beside an
/// exported `OTEL_SERVICE_NAME` (the issue's `leaked`), the resource still
/// names what the set and the configuration say.
#[test]
fn a_given_otel_env_names_the_service_whatever_the_process_exports() {
    let name = |r: &Resource| r.get(&Key::new("service.name")).map(|v| v.to_string());
    assert_eq!(
        name(&resource_from("idgate-test", &OtelEnv::none())).as_deref(),
        Some("idgate-test")
    );
    let given = OtelEnv::given([("OTEL_SERVICE_NAME", "from-env")]);
    assert_eq!(
        name(&resource_from("idgate-test", &given)).as_deref(),
        Some("from-env")
    );
    let attributes = OtelEnv::given([("OTEL_RESOURCE_ATTRIBUTES", "service.name=attr,team=t")]);
    let r = resource_from("idgate-test", &attributes);
    assert_eq!(name(&r).as_deref(), Some("attr"));
    assert_eq!(
        r.get(&Key::new("team")).map(|v| v.to_string()).as_deref(),
        Some("t")
    );
}

#[test]
fn a_bad_filter_is_an_error_not_a_panic() {
    let err = TelemetryBuilder::new(&TelemetryConfig::default())
        .without_export()
        .log_filter("idgate=notalevel")
        .build()
        .unwrap_err();
    assert!(matches!(err, TelemetryError::Filter(_)), "{err}");
}

#[test]
fn json_logs_carry_the_event_and_its_span_fields() {
    let logs = CapturedLogs::new();
    let telemetry = TelemetryBuilder::new(&TelemetryConfig::default())
        .without_export()
        .log_format(LogFormat::Json)
        .log_filter("info")
        .log_writer(logs.clone())
        .build()
        .unwrap();
    tracing::dispatcher::with_default(telemetry.dispatch(), || {
        let span = tracing::info_span!("rpc", rpc.method = "CreateJourney");
        let _e = span.enter();
        tracing::info!(answer = 42, "done");
    });
    let line = logs.contents();
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON line");
    assert_eq!(v["message"], "done");
    assert_eq!(v["answer"], 42);
    assert_eq!(v["span"]["rpc.method"], "CreateJourney");
}

#[test]
fn otlp_metrics_export_is_opt_in_with_an_endpoint() {
    assert!(!metrics_export_requested(&env_of(&[(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://c:4317"
    )])));
    assert!(metrics_export_requested(&env_of(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_METRICS_EXPORTER", "prometheus, otlp"),
    ])));
    assert!(metrics_export_requested(&env_of(&[
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "https://c/v1/metrics"
        ),
        ("OTEL_METRICS_EXPORTER", "otlp"),
    ])));
    assert!(!metrics_export_requested(&env_of(&[(
        "OTEL_METRICS_EXPORTER",
        "otlp"
    )])));
    assert!(!metrics_export_requested(&env_of(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_SDK_DISABLED", "true"),
    ])));
}

/// Text log lines written under `directives`, by what `write` logs.
fn text_logs_under(directives: &str, write: impl FnOnce()) -> String {
    let logs = CapturedLogs::new();
    let telemetry = TelemetryBuilder::new(&TelemetryConfig::default())
        .without_export()
        .log_format(LogFormat::Text)
        .log_filter(directives)
        .log_writer(logs.clone())
        .build()
        .unwrap();
    tracing::dispatcher::with_default(telemetry.dispatch(), write);
    logs.contents()
}

#[test]
fn idgate_spans_exist_under_any_level_while_events_follow_the_directives() {
    let lines = text_logs_under("warn", || {
        let own = tracing::info_span!(target: "idgate::api", "call", rpc = "StartSession3D");
        let other = tracing::info_span!(target: "h2::proto", "frame");
        assert!(!own.is_disabled(), "idgate's INFO span is kept at warn");
        assert!(
            other.is_disabled(),
            "another crate's INFO span follows warn"
        );
        let _e = own.enter();
        tracing::info!(target: "idgate::api", "not at warn");
        tracing::warn!(target: "idgate::api", "logged at warn");
    });
    assert!(!lines.contains("not at warn"), "{lines}");
    assert!(lines.contains("logged at warn"), "{lines}");
    assert!(lines.contains("call{rpc=\"StartSession3D\"}"), "{lines}");
}

#[test]
fn span_scoped_directives_still_select_the_events_of_matching_spans() {
    let lines = text_logs_under("warn,idgate[call{attempt=2}]=debug", || {
        for attempt in [1_u64, 2] {
            let span = tracing::info_span!(target: "idgate::api", "call", attempt);
            let _e = span.enter();
            tracing::debug!(target: "idgate::api", "debug inside attempt {attempt}");
        }
    });
    assert!(lines.contains("debug inside attempt 2"), "{lines}");
    assert!(!lines.contains("debug inside attempt 1"), "{lines}");
}

#[test]
fn audit_records_are_logged_whatever_the_level() {
    for directives in ["warn", "error", "off", "idgate=off"] {
        let lines = text_logs_under(directives, || {
            tracing::info!(target: "idgate::audit", caller = "onboarding", "audit record");
            tracing::info!(target: "idgate::api", "an ordinary info");
        });
        assert!(lines.contains("audit record"), "{directives}: {lines}");
        assert!(!lines.contains("an ordinary info"), "{directives}: {lines}");
    }
}
