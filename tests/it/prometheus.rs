//! Issue 15: the Prometheus rules and the Grafana dashboard of `deploy/`,
//! proven with Debian's `promtool` and against a real `prometheus`.
//!
//! - `promtool check rules` and `promtool test rules` pass, and every alert
//!   has a promtool case where it fires and one where it does not.
//! - The dashboard is a valid Grafana JSON model (unique panel ids, the
//!   datasource as a variable, trace links by `idgate.journey_ref`).
//! - A real Prometheus scrapes a gateway on the embedded sandbox while
//!   journeys run with injected channel faults; then every recording rule,
//!   every alert expression and every dashboard query is evaluated through
//!   Prometheus's HTTP API: each parses, and each one expected to have data
//!   returns series ([`NO_DATA_EXPECTED`] lists the exceptions and why).
//!
//! A missing `promtool` or `prometheus` binary fails these tests (never a
//! silent skip): install Debian's `prometheus` package.
//!
//! Self-contained: its own small helpers over idgate's public API.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use idgate::{
    channels::{BreakerConfig, rollout::RolloutConfig},
    domain::Operation,
    proto::v1,
    sandbox::{FaultAction, FaultRule, samples},
};
use serde_json::Value;

use crate::support::gateway::{TestGateway, secret_file};

const PACKAGE_HINT: &str = "install Debian's `prometheus` package (`apt-get install -y prometheus`), \
     which provides both `prometheus` and `promtool`; scripts/test installs it when missing";

/// Longest any wait of this file lasts (Prometheus start, scrapes, rule
/// evaluation, a watch stream).
const WAIT: Duration = Duration::from_secs(30);

/// Dashboard or rule queries that are NOT expected to return data after
/// the scenario of [`scenario_round`], each with the reason. Everything
/// else must return at least one series.
///
/// The list is empty today: the scenario drives every series the rules and
/// panels read (a failing primary whose breaker opens, failovers, a
/// contingency alternative, a failed and a slow 3D verification, refused
/// journeys, refused webhooks, watches that fall back to polling with the
/// sandbox's webhook off, failed result reads). A query added later that
/// cannot have data in a test (e.g. load shedding, once it exists, or a
/// series only a real vendor produces) goes here with its reason.
const NO_DATA_EXPECTED: &[(&str, &str)] = &[];

/// What each alert's expression must return after the scenario: a series
/// with these labels (the alert that would fire once `for:` has passed).
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
];

// ---------------------------------------------------------------- paths

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rules_dir() -> PathBuf {
    repo().join("deploy/prometheus")
}

fn rule_files() -> [PathBuf; 2] {
    [
        rules_dir().join("recording-rules.yml"),
        rules_dir().join("alert-rules.yml"),
    ]
}

fn dashboard() -> Value {
    let path = repo().join("deploy/grafana/idgate.json");
    let text = std::fs::read_to_string(&path).expect("read deploy/grafana/idgate.json");
    serde_json::from_str(&text).expect("deploy/grafana/idgate.json is valid JSON")
}

/// The doc the alerts' runbook annotations point into.
fn docs() -> String {
    std::fs::read_to_string(repo().join("docs/observability.md")).expect("docs/observability.md")
}

/// `name` on `PATH`, or a failure naming the Debian package.
fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` not found on PATH: {PACKAGE_HINT}"))
}

fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

// ------------------------------------------------------ promtool and files

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_pass() {
    let promtool = binary("promtool");
    let out = run(Command::new(&promtool)
        .args(["check", "rules"])
        .args(rule_files()));
    assert!(out.contains("SUCCESS"), "{out}");

    let tests = rule_test_files();
    assert!(
        !tests.is_empty(),
        "no promtool tests in deploy/prometheus/tests"
    );
    let out = run(Command::new(&promtool)
        .args(["test", "rules"])
        .args(&tests)
        .current_dir(rules_dir().join("tests")));
    assert!(!out.contains("FAILED"), "{out}");
}

fn rule_test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(rules_dir().join("tests"))
        .expect("deploy/prometheus/tests")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    files
}

/// `- alert: Name` lines of the alert rules.
fn alert_names() -> Vec<String> {
    let text = std::fs::read_to_string(rules_dir().join("alert-rules.yml")).expect("alert rules");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_owned())
        .collect()
}

/// Every alert has a promtool case where it fires and one where it does
/// not, a severity, a `for:`, and a runbook link to a section that exists.
#[test]
fn every_alert_has_firing_and_silent_cases_and_a_runbook_section() {
    let names = alert_names();
    assert!(names.len() >= 10, "{names:?}");
    assert_eq!(
        names.iter().collect::<BTreeSet<_>>().len(),
        names.len(),
        "duplicate alert names: {names:?}"
    );
    // (firing, silent) per alert, from `alertname:` followed by its
    // `exp_alerts:` line.
    let mut cases: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for file in rule_test_files() {
        let text = std::fs::read_to_string(&file).expect("promtool test file");
        let mut current: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(name) = line.strip_prefix("alertname:") {
                current = Some(name.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("exp_alerts:") {
                let name = current.take().expect("exp_alerts after an alertname");
                let entry = cases.entry(name).or_default();
                if rest.trim() == "[]" {
                    entry.1 = true;
                } else {
                    entry.0 = true;
                }
            }
        }
    }
    let docs = docs();
    let rules = std::fs::read_to_string(rules_dir().join("alert-rules.yml")).expect("rules");
    for name in &names {
        assert_eq!(
            cases.get(name),
            Some(&(true, true)),
            "{name}: needs a firing and a non-firing promtool case"
        );
        let anchor = format!("alert-{}", name.to_lowercase());
        assert!(
            rules.contains(&format!("runbook: docs/observability.md#{anchor}")),
            "{name}: runbook annotation"
        );
        assert!(
            docs.lines().any(|l| l.starts_with('#')
                && l.trim_start_matches('#').trim() == format!("Alert: {name}")),
            "{name}: no `Alert: {name}` section (anchor #{anchor}) in docs"
        );
    }
    // A severity (warning or critical) and a `for:` per alert.
    let keys = |key: &str| -> Vec<String> {
        rules
            .lines()
            .filter_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_owned())
            .collect()
    };
    let severities = keys("severity:");
    assert_eq!(severities.len(), names.len(), "{severities:?}");
    assert!(
        severities.iter().all(|s| s == "warning" || s == "critical"),
        "{severities:?}"
    );
    assert_eq!(keys("for:").len(), names.len());
}

/// All panels, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            if let Some(nested) = p.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Every PromQL target of the dashboard: (panel title, expression).
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    panels(dashboard)
        .into_iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_owned();
            p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap_or("").to_owned()))
        })
        .collect()
}

#[test]
fn the_dashboard_is_a_grafana_model_with_unique_ids_and_a_datasource_variable() {
    let d = dashboard();
    assert!(d["title"].is_string() && d["uid"].is_string());
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30));

    let variables = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| variables.iter().find(|v| v["name"] == name);
    let ds = var("datasource").expect("a `datasource` variable");
    assert_eq!(
        (ds["type"].as_str(), ds["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    assert!(
        var("journey_ref").is_some(),
        "a `journey_ref` variable for trace links"
    );

    let all = panels(&d);
    let ids: Vec<u64> = all
        .iter()
        .map(|p| p["id"].as_u64().expect("every panel has a numeric id"))
        .collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "panel ids repeat: {ids:?}"
    );

    let rows: Vec<&str> = all
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        rows,
        [
            "Journeys",
            "RPCs",
            "Vendor channels",
            "Webhook",
            "Saturation",
            "Rollout",
        ]
    );

    for p in all.iter().filter(|p| p["type"] != "row") {
        let title = p["title"].as_str().expect("title");
        assert!(
            p["gridPos"]["w"].is_u64() && p["gridPos"]["h"].is_u64(),
            "{title}: gridPos"
        );
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "{title}: datasource variable"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no targets");
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{title}: target datasource"
            );
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{title}: expr"
            );
            assert!(t["refId"].is_string(), "{title}: refId");
        }
    }
    // Trace search links by journey reference on the journey and channel
    // panels (Tempo through Explore, Jaeger's UI).
    let linked = all
        .iter()
        .filter(|p| {
            p["links"].as_array().is_some_and(|links| {
                links.iter().any(|l| {
                    let url = l["url"].as_str().unwrap_or_default();
                    url.contains("idgate.journey_ref") && url.contains("${journey_ref}")
                })
            })
        })
        .count();
    assert!(linked >= 8, "{linked} panels link to a trace search");
}

// ------------------------------------------------------------ Prometheus

/// A `prometheus` child process on a free loopback port with a temporary
/// data directory; killed and cleaned up on drop.
struct Prometheus {
    child: Child,
    dir: PathBuf,
    url: String,
    http: reqwest::Client,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

impl Prometheus {
    /// Starts Prometheus scraping `target` every second with the rule
    /// files of `deploy/prometheus` evaluated every second.
    async fn start(target: SocketAddr) -> Self {
        let binary = binary("prometheus");
        let dir = std::env::temp_dir().join(format!("idgate-prometheus-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus temp dir");
        let rules: Vec<String> = rule_files()
            .iter()
            .map(|p| format!("  - {}\n", p.display()))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n{}\
             scrape_configs:\n  - job_name: idgate\n    static_configs:\n      - targets: ['{target}']\n",
            rules.concat()
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
        let port = free_port();
        let child = Command::new(&binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}: {PACKAGE_HINT}", binary.display()));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let prometheus = Prometheus {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("http client"),
        };
        prometheus
            .until("Prometheus is ready", async || {
                prometheus
                    .http
                    .get(format!("{}/-/ready", prometheus.url))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            })
            .await;
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Polls `check` every 100 ms until it holds; fails after [`WAIT`]
    /// with Prometheus's log.
    async fn until(&self, what: &str, mut check: impl AsyncFnMut() -> bool) {
        let give_up = tokio::time::Instant::now() + WAIT;
        while !check().await {
            if tokio::time::Instant::now() > give_up {
                panic!(
                    "not within {WAIT:?}: {what}\nprometheus log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn get(&self, path_and_query: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path_and_query}", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path_and_query}: {e}"));
        let body = response.text().await.expect("Prometheus API body");
        serde_json::from_str(&body).expect("Prometheus API answers JSON")
    }

    /// `/api/v1/query` of `expr` at the current time: the result's series,
    /// or the API's error (a parse error, for instance).
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let q = serde_urlencoded::to_string([("query", expr)]).expect("encode query");
        let answer = self.get(&format!("/api/v1/query?{q}")).await;
        if answer["status"] != "success" {
            return Err(format!("{}: {}", answer["errorType"], answer["error"]));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits until Prometheus holds a scrape of the gateway that started
    /// after `after` (Unix seconds), so everything done before is in it.
    async fn scraped_after(&self, after: f64) {
        self.until("a scrape of the gateway after the last step", async || {
            self.query(r#"timestamp(up{job="idgate"})"#)
                .await
                .ok()
                .and_then(|r| r.first().cloned())
                .and_then(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
                .is_some_and(|t| t > after)
        })
        .await;
    }

    /// True when every rule group's last evaluation started after `t`
    /// (Unix seconds).
    async fn groups_evaluated_after(&self, t: f64) -> bool {
        let answer = self.get("/api/v1/rules").await;
        let groups = answer["data"]["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        !groups.is_empty()
            && groups.iter().all(|g| {
                g["lastEvaluation"]
                    .as_str()
                    .and_then(|s| {
                        time::OffsetDateTime::parse(
                            s,
                            &time::format_description::well_known::Rfc3339,
                        )
                        .ok()
                    })
                    .is_some_and(|e| e.unix_timestamp_nanos() as f64 / 1e9 > t)
            })
    }

    /// Every rule Prometheus loaded.
    async fn rules(&self) -> Vec<Value> {
        let answer = self.get("/api/v1/rules").await;
        assert_eq!(answer["status"], "success", "{answer}");
        answer["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }
}

/// Grafana's variables and macros replaced by values for a 1 s scrape.
fn substitute(expr: &str) -> String {
    let out = expr
        .replace("$__rate_interval", "1m")
        .replace("${__rate_interval}", "1m")
        .replace("$__interval", "15s")
        .replace("$__range", "5m")
        .replace("${channel}", ".*")
        .replace("$channel", ".*");
    assert!(!out.contains('$'), "unsubstituted variable in `{out}`");
    out
}

// ------------------------------------------------------- gateway helpers

const WEBHOOK_USER: &str = "vendor";

/// The gateway of the scenario: the shared test gateway, with no
/// completion notices (watches fall back to polling, quickly), a webhook
/// receiver for the refused notices, and a primary whose breaker opens at
/// the third fault and stays open.
async fn start_gateway() -> TestGateway {
    TestGateway::start_with(|config| {
        config.sandbox.webhook.enabled = false;
        config.webhook.basic_user = Some(WEBHOOK_USER.into());
        config.webhook.basic_password_file =
            Some(secret_file("webhook-password-for-prometheus-test"));
        config.embedded_channels.breaker = BreakerConfig {
            failure_threshold: 3,
            base_ejection_ms: 600_000,
            max_ejection_ms: 600_000,
        };
        config.rollout = RolloutConfig {
            tick_ms: 50,
            lease_ms: 500,
            min_step_secs: 0,
        };
    })
    .await
}

/// A guarded rollout to the primary, whose breaker the rounds left open:
/// the driver rolls it back at once (`circuit_open`).
async fn rolled_back_rollout(gw: &TestGateway) {
    let mut admin = gw.admin().await;
    admin
        .start_rollout(v1::StartRolloutRequest {
            to: "primary".into(),
            from: "alternative".into(),
            steps: vec![50, 100],
            step_duration: Some(prost_types::Duration {
                seconds: 0,
                nanos: 0,
            }),
            min_sessions: Some(1),
            max_error_rate: None,
            max_pass_rate_drop: None,
            force: false,
        })
        .await
        .expect("start rollout");
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        let rollout = admin
            .get_rollout(v1::GetRolloutRequest {})
            .await
            .expect("get rollout")
            .into_inner()
            .rollout
            .expect("the rollout");
        if rollout.state() == v1::RolloutState::RolledBack {
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "not rolled back: {rollout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(gw: &TestGateway) -> v1::CreateJourneyResponse {
    gw.journeys()
        .create_journey(person())
        .await
        .expect("create journey")
        .into_inner()
}

async fn watch(gw: &TestGateway, journey_ref: &str) -> tonic::Streaming<v1::WatchJourneyResponse> {
    gw.journeys()
        .watch_journey(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                journey_ref.into(),
            )),
        })
        .await
        .expect("watch journey")
        .into_inner()
}

fn person() -> v1::CreateJourneyRequest {
    let p = samples::HAPPY_PERSON;
    let parts: Vec<&str> = p.birth_date.split('/').collect();
    v1::CreateJourneyRequest {
        cpf: p.cpf.into(),
        name: p.name.into(),
        birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
        customer_reference: "PROMTEST".into(),
        operator_profile: String::new(),
        request_id: String::new(),
    }
}

/// Reads a watch stream to its end; true when it delivered a final result.
async fn drain(mut stream: tonic::Streaming<v1::WatchJourneyResponse>) -> bool {
    tokio::time::timeout(WAIT, async {
        let mut complete = false;
        loop {
            match stream.message().await {
                Ok(Some(item)) => complete |= item.result.is_some(),
                Ok(None) => return complete,
                Err(status) => panic!("watch failed: {status:?}"),
            }
        }
    })
    .await
    .expect("the watch ends in time")
}

/// One round of traffic. The faults stay in place across rounds (the
/// primary answers 503 to session starts; the alternative answers in
/// contingency); each round makes every failure series grow, so rates over
/// the rounds are non-zero:
/// - two journeys watched and completed (watches fall back to polling:
///   the sandbox sends no webhook), their 3D sessions failing over from
///   the primary (its breaker opens in the second round);
/// - one refused CreateJourney (INVALID_ARGUMENT);
/// - one 3D verification answered 500 on the alternative (OUTCOME_UNKNOWN);
/// - in the second round, one verification slower than 2.5 s;
/// - result reads failing twice (503) under GetJourneyResult;
/// - two webhook notices with wrong credentials.
async fn scenario_round(gw: &TestGateway, round: u32) {
    // Refused input.
    let mut bad = person();
    bad.cpf = "123".into();
    let err = gw.journeys().create_journey(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

    // Two watched journeys to completion.
    let a = create(gw).await;
    let b = create(gw).await;
    let (watch_a, watch_b) = (
        watch(gw, &a.journey_ref).await,
        watch(gw, &b.journey_ref).await,
    );
    if round == 1 {
        gw.sandbox()
            .add_fault(
                FaultRule::new(FaultAction::Delay)
                    .on(Operation::Liveness3D)
                    .channel("alternative")
                    .latency_ms(3_000)
                    .times(1),
            )
            .expect("slow verification fault");
    }
    for created in [&a, &b] {
        let verdict = gw
            .run_3d(&created.appkey, "prometheus-test")
            .await
            .expect("3D proof");
        assert!(verdict.valid, "{verdict:?}");
        gw.submit_rg(&created.appkey).await;
    }
    gw.clock.advance(Duration::from_secs(3));
    let (done_a, done_b) = tokio::join!(drain(watch_a), drain(watch_b));
    assert!(done_a && done_b, "both watches delivered a result");

    // A verification that fails on the alternative.
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 500 })
                .on(Operation::Liveness3D)
                .channel("alternative")
                .times(1),
        )
        .expect("verification fault");
    let failing = create(gw).await;
    let err = gw
        .run_3d(&failing.appkey, "prometheus-test")
        .await
        .unwrap_err();
    assert_ne!(err.code(), tonic::Code::Ok);

    // Result reads failing (the read is retried; the RPC may succeed).
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::Result)
                .times(2),
        )
        .expect("result fault");
    let _ = gw
        .journeys()
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: a.appkey.clone(),
        })
        .await;

    // Forged notices.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    for _ in 0..2 {
        let response = http
            .post(format!(
                "http://{}/webhooks/journey",
                gw.gateway.http_addr()
            ))
            .basic_auth(WEBHOOK_USER, Some("not-the-password"))
            .header("content-type", "application/json")
            .body(r#"{"Status":"Completo","Appkey":"forged"}"#)
            .send()
            .await
            .expect("post webhook");
        assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
    }
}

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
        alerts.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        ALERTS_EXPECTED
            .iter()
            .map(|(n, _)| *n)
            .collect::<BTreeSet<_>>(),
        "ALERTS_EXPECTED covers every alert"
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
            alerts.keys().all(|n| active.contains(n))
        })
        .await;

    eprintln!(
        "checked {checked} queries against Prometheus in {:?}",
        started.elapsed()
    );
    drop(prometheus);
    gw.stop().await;
}

#[test]
fn grafana_variables_are_substituted_in_queries() {
    assert_eq!(
        substitute(r#"sum(rate(x{channel=~"$channel"}[$__rate_interval]))"#),
        r#"sum(rate(x{channel=~".*"}[1m]))"#
    );
}

/// A missing binary fails (never skips) and names the package to install.
#[test]
#[should_panic(expected = "install Debian's `prometheus` package")]
fn a_missing_binary_fails_naming_the_debian_package() {
    binary("promtool-that-does-not-exist");
}
