//! The Prometheus rules and the Grafana dashboard of `deploy/`, proven
//! with Debian's `promtool` and against a real `prometheus`.
//!
//! - [`rules`]: `promtool check rules` and `promtool test rules` pass, and
//!   every alert has a promtool case where it fires and one where it does
//!   not;
//! - [`dashboard`]: the dashboard is a valid Grafana JSON model (unique
//!   panel ids, the datasource as a variable, trace links by
//!   `idgate.journey_ref`);
//! - [`live`]: a real Prometheus ([`server`]) scrapes a gateway on the
//!   embedded sandbox while journeys run with injected channel faults
//!   ([`scenario`]); then every recording rule, every alert expression and
//!   every dashboard query is evaluated through Prometheus's HTTP API: each
//!   parses, and each one expected to have data returns series
//!   ([`live::NO_DATA_EXPECTED`] lists the exceptions and why).
//!
//! A missing `promtool` or `prometheus` binary fails these tests (never a
//! silent skip): install Debian's `prometheus` package.
//!
//! Self-contained: its own small helpers over idgate's public API. This
//! module holds what the submodules share: the paths of `deploy/`, the
//! binaries, and reading the dashboard's queries.

mod dashboard;
mod live;
mod rules;
mod scenario;
mod server;

use std::{path::PathBuf, process::Command, time::Duration};

use serde_json::Value;

const PACKAGE_HINT: &str = "install Debian's `prometheus` package (`apt-get install -y prometheus`), \
     which provides both `prometheus` and `promtool`; scripts/test installs it when missing";

/// Longest any wait of this file lasts (Prometheus start, scrapes, rule
/// evaluation, a watch stream).
const WAIT: Duration = Duration::from_secs(30);

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
