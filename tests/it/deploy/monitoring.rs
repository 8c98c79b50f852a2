//! The Prometheus Operator's objects of each overlay, which no schema
//! checks: the PrometheusRule is deploy/prometheus/ (generated from it),
//! the ServiceMonitor scrapes `/metrics` of the gateway's Service, and both
//! carry the label kube-prometheus-stack selects by default.

use std::path::PathBuf;

use serde_json::Value;

use super::{
    kubernetes::Manifests,
    yaml::{documents, python, root},
};

/// kube-prometheus-stack's default Helm release name, which its
/// Prometheus selects rules and monitors by (`release: <name>`).
const RELEASE: &str = "kube-prometheus-stack";

#[test]
fn the_prometheus_rule_is_deploy_prometheus_and_the_service_monitor_scrapes_metrics() {
    // One source of truth: the generated file is what the script writes.
    python(&["scripts/gen-prometheus-rule", "--check"]);
    for m in Manifests::each() {
        the_monitoring_of(&m);
    }
}

fn the_monitoring_of(m: &Manifests) {
    let rule = m.object("PrometheusRule", "idgate");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/prometheus"))
        .expect("deploy/prometheus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    sources.sort();
    let expected: Vec<Value> = documents(&sources)
        .into_values()
        .flat_map(|docs| docs[0]["groups"].as_array().cloned().expect("groups"))
        .collect();
    // The BTreeMap above is ordered by path, as the script copies them.
    assert_eq!(rule["spec"]["groups"].as_array(), Some(&expected));
    // The shape the operator expects (no schema ships for this CRD).
    for group in &expected {
        assert!(group["name"].is_string(), "{group}");
        for r in group["rules"].as_array().expect("rules") {
            assert!(r["record"].is_string() != r["alert"].is_string(), "{r}");
            assert!(r["expr"].is_string(), "{r}");
        }
    }

    let monitor = m.object("ServiceMonitor", "idgate");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let service = m.object("Service", "idgate");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("labels")
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "selects the Service idgate"
        );
    }
    let http = u64::from(m.gateway_config().listen.http.port());
    for endpoint in monitor["spec"]["endpoints"].as_array().expect("endpoints") {
        assert_eq!(endpoint["path"], "/metrics");
        let port = service["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .find(|p| p["name"] == endpoint["port"])
            .expect("a Service port of that name");
        assert_eq!(
            m.port(&port["targetPort"]),
            http,
            "/metrics is on the http listener"
        );
    }

    // What kube-prometheus-stack's Prometheus selects by default: its Helm
    // release's name as `release` (ruleSelector, serviceMonitorSelector).
    for object in [rule, monitor] {
        assert_eq!(
            object["metadata"]["labels"]["release"], RELEASE,
            "{}: {} selected by kube-prometheus-stack",
            m.overlay, object["kind"]
        );
    }
    // The target-down alert reads the job the ServiceMonitor produces:
    // the Service's name (no `jobLabel`).
    assert!(monitor["spec"].get("jobLabel").is_none(), "{monitor}");
    let alerts: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter(|r| r["alert"].is_string())
        .collect();
    let down = alerts
        .iter()
        .find(|r| r["alert"] == "IdgateTargetDown")
        .expect("a target-down alert");
    let job = format!(
        r#"job="{}""#,
        service["metadata"]["name"].as_str().expect("name")
    );
    assert!(
        down["expr"].as_str().expect("expr").contains(&job),
        "{down}"
    );
    for alert in alerts {
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or("");
        assert!(url.starts_with("docs/observability.md#alert-"), "{alert}");
    }
}
