//! Every rule, alert and panel query evaluated by a real Prometheus after
//! the scenario: each parses, returns data, and each alert would fire for
//! the fault injected.

use std::collections::{BTreeMap, BTreeSet};

use idgate::{
    domain::Operation,
    sandbox::{FaultAction, FaultRule},
};

use super::{
    scenario::{refused_reload, rolled_back_rollout, scenario_round, start_gateway},
    server::{Prometheus, unix_now},
    *,
};

/// Dashboard or rule queries that are NOT expected to return data after
/// the scenario of [`scenario_round`], each with the reason. Everything
/// else must return at least one series.
///
/// The list is empty today: the scenario drives every series the rules and
/// panels read (a failing primary whose breaker opens, failovers, a
/// contingency alternative, a failed and a slow 3D verification, refused
/// journeys, refused webhooks, watches that fall back to polling with the
/// sandbox's webhook off, failed result reads, a refused configuration
/// reload). A query added later that
/// cannot have data in a test (e.g. load shedding, once it exists, or a
/// series only a real vendor produces) goes here with its reason.
const NO_DATA_EXPECTED: &[(&str, &str)] = &[
    (
        TARGET_DOWN_EXPR,
        "IdgateTargetDown fires when a scrape fails; the scenario's gateway is up (promtool tests it)",
    ),
    (
        CALLER_BUDGET_EXPR,
        "a caller's own budget needs a [[callers]] entry, so [auth]; the scenario's gateway runs open (promtool tests it; tests/it/usage reads the series)",
    ),
    (
        r#"max by (caller, operator, operation) (idgate_caller_budget_used{window="day"} / (idgate_caller_budget_used{window="day"} + idgate_caller_budget_remaining{window="day"}))"#,
        "the panel of IdgateCallerBudgetNearlySpent's series: same reason",
    ),
    (
        r#"sum by (caller) (idgate_caller_share_used{share="body_bytes"})"#,
        "shares are a configured caller's; the open caller has none",
    ),
    (
        r#"max by (caller) (idgate_caller_share_limit{share="body_bytes"})"#,
        "shares are a configured caller's; the open caller has none",
    ),
];

/// Alerts the scenario cannot make fire (see [`NO_DATA_EXPECTED`]):
/// promtool's cases are their test.
const PROMTOOL_ONLY: &[&str] = &[TARGET_DOWN, "IdgateCallerBudgetNearlySpent"];
const CALLER_BUDGET_EXPR: &str = r#"max by (caller, operator, operation) (idgate_caller_budget_used{window="day"} / (idgate_caller_budget_used{window="day"} + idgate_caller_budget_remaining{window="day"})) >= 0.9"#;

/// The target-down alert: silent while the gateway is scraped, which is
/// the scenario's whole run; `deploy/prometheus/tests` makes it fire.
const TARGET_DOWN: &str = "IdgateTargetDown";
const TARGET_DOWN_EXPR: &str = r#"up{job="idgate"} == 0 or absent(up{job="idgate"})"#;

/// What each alert's expression must return after the scenario: a series
/// with these labels (the alert that would fire once `for:` has passed).
/// Every alert but those of [`PROMTOOL_ONLY`].
const ALERTS_EXPECTED: &[(&str, &[(&str, &str)])] = &[
    ("IdgateChannelCircuitOpen", &[("channel", "primary")]),
    ("IdgateChannelErrorRatioHigh", &[("channel", "primary")]),
    ("IdgateChannelLatencyHigh", &[("channel", "alternative")]),
    ("IdgateChannelFailoversSustained", &[("channel", "primary")]),
    (
        "IdgateChannelContingencySustained",
        &[("channel", "alternative")],
    ),
    (
        "Idgate3DVerificationErrors",
        &[("channel", "alternative"), ("operation", "liveness_3d")],
    ),
    (
        "IdgateWebhookRejections",
        &[("outcome", "rejected_credentials_invalid")],
    ),
    ("IdgateWatchersPolling", &[]),
    ("IdgateResultReadsFailing", &[]),
    (
        "IdgateRpcErrorRatioHigh",
        &[("method", "idgate.v1.LivenessService/VerifyLiveness3D")],
    ),
    ("IdgateRolloutRolledBack", &[("breach", "circuit_open")]),
    ("IdgateConfigReloadRefused", &[("outcome", "refused")]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_alert_and_panel_query_returns_data_from_a_real_prometheus() {
    // Fail before starting anything when the binaries are missing.
    binary("prometheus");
    let started = std::time::Instant::now();
    let gw = start_gateway().await;
    let prometheus = Prometheus::start(gw.gateway.http_addr()).await;

    // Prometheus has every rule of the files, healthy.
    let files: String = rule_files()
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("rule file"))
        .collect();
    let declared = files.matches("- record:").count() + files.matches("- alert:").count();
    assert_eq!(prometheus.rules().await.len(), declared, "rules loaded");

    // Series exist from the first scrape (channels at zero, webhook
    // counters at zero) before any fault, so the rounds show as increases.
    prometheus.scraped_after(unix_now()).await;
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::SessionToken3D)
                .channel("primary"),
        )
        .expect("primary fault");
    gw.sandbox()
        .set_contingency("alternative", true)
        .expect("contingency on the alternative");
    for round in 0..2 {
        scenario_round(&gw, round).await;
        prometheus.scraped_after(unix_now()).await;
    }
    rolled_back_rollout(&gw).await;
    refused_reload(&gw);
    prometheus.scraped_after(unix_now()).await;

    // Every rule group evaluated after the last scrape became visible, so
    // recorded series include the second round.
    let visible = unix_now();
    prometheus
        .until(
            "every rule group evaluated after the scenario",
            async || prometheus.groups_evaluated_after(visible).await,
        )
        .await;
    let rules = prometheus.rules().await;
    for r in &rules {
        assert_eq!(
            r["health"], "ok",
            "rule {} unhealthy: {}",
            r["name"], r["lastError"]
        );
    }

    let no_data: BTreeSet<&str> = NO_DATA_EXPECTED.iter().map(|(q, _)| *q).collect();
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut check = async |what: String, expr: String| {
        checked += 1;
        match prometheus.query(&expr).await {
            Err(e) => failures.push(format!("{what}: does not parse: {e}\n  {expr}")),
            Ok(series) if series.is_empty() && !no_data.contains(expr.as_str()) => {
                failures.push(format!("{what}: no data\n  {expr}"))
            }
            Ok(_) => {}
        }
    };

    // Recording rules: each expression, and the recorded series itself.
    for r in rules.iter().filter(|r| r["type"] == "recording") {
        let name = r["name"].as_str().expect("name").to_owned();
        let expr = r["query"].as_str().expect("query").to_owned();
        check(format!("recording rule {name}"), expr).await;
        check(format!("recorded series {name}"), name).await;
    }
    // Alert expressions (what fires once `for:` has passed).
    for r in rules.iter().filter(|r| r["type"] == "alerting") {
        let name = r["name"].as_str().expect("name").to_owned();
        let expr = r["query"].as_str().expect("query").to_owned();
        check(format!("alert {name}"), expr).await;
    }
    // Dashboard panels, with Grafana's variables substituted.
    for (title, expr) in dashboard_queries(&dashboard()) {
        check(format!("panel {title:?}"), substitute(&expr)).await;
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} queries failed:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // Each alert would fire for the fault the scenario injected.
    let alerts: BTreeMap<String, String> = rules
        .iter()
        .filter(|r| r["type"] == "alerting")
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("").to_owned(),
                r["query"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        alerts
            .keys()
            .map(String::as_str)
            .filter(|n| !PROMTOOL_ONLY.contains(n))
            .collect::<BTreeSet<_>>(),
        ALERTS_EXPECTED
            .iter()
            .map(|(n, _)| *n)
            .collect::<BTreeSet<_>>(),
        "ALERTS_EXPECTED covers every alert"
    );
    assert_eq!(
        alerts.get(TARGET_DOWN).map(String::as_str),
        Some(TARGET_DOWN_EXPR),
        "the target-down alert's expression, as NO_DATA_EXPECTED lists it"
    );
    assert_eq!(
        alerts
            .get("IdgateCallerBudgetNearlySpent")
            .map(String::as_str),
        Some(CALLER_BUDGET_EXPR),
        "the caller budget alert's expression, as NO_DATA_EXPECTED lists it"
    );
    for (name, labels) in ALERTS_EXPECTED {
        let series = prometheus.query(&alerts[*name]).await.expect("alert query");
        assert!(
            series
                .iter()
                .any(|s| labels.iter().all(|(k, v)| s["metric"][*k] == *v)),
            "{name}: no series with {labels:?}: {series:?}"
        );
    }
    // And Prometheus itself holds them pending (their `for:` running).
    prometheus
        .until("every alert pending or firing", async || {
            let answer = prometheus.get("/api/v1/alerts").await;
            let active: BTreeSet<String> = answer["data"]["alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_owned))
                .collect();
            alerts
                .keys()
                .filter(|n| !PROMTOOL_ONLY.contains(&n.as_str()))
                .all(|n| active.contains(n))
        })
        .await;

    eprintln!(
        "checked {checked} queries against Prometheus in {:?}",
        started.elapsed()
    );
    drop(prometheus);
    gw.stop().await;
}
