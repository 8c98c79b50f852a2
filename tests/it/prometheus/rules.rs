//! The rule files checked offline: `promtool` accepts them and their unit
//! tests pass, every alert is tested firing and silent and has a runbook
//! section, and a missing binary fails loudly instead of skipping.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// The doc the alerts' runbook annotations point into.
fn docs() -> String {
    std::fs::read_to_string(repo().join("docs/observability.md")).expect("docs/observability.md")
}

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_pass() {
    let promtool = binary("promtool");
    let out = run(crate::child_env::command(&promtool)
        .args(["check", "rules"])
        .args(rule_files()));
    assert!(out.contains("SUCCESS"), "{out}");

    let tests = rule_test_files();
    assert!(
        !tests.is_empty(),
        "no promtool tests in deploy/prometheus/tests"
    );
    let out = run(crate::child_env::command(&promtool)
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
            rules.contains(&format!("runbook_url: docs/observability.md#{anchor}")),
            "{name}: runbook_url annotation"
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

/// A missing binary fails (never skips) and names the package to install.
#[test]
#[should_panic(expected = "install Debian's `prometheus` package")]
fn a_missing_binary_fails_naming_the_debian_package() {
    binary("promtool-that-does-not-exist");
}
