//! The NetworkPolicy of each overlay: who may reach the gateway, and that
//! its egress reaches exactly what its configuration names (DNS, then one
//! rule per dependency: the vendor, Redis behind Sentinel, the OTLP
//! collector), each dependency's rule coming from its own component.

use std::{collections::BTreeSet, path::Path};

use serde_json::Value;

use super::{
    kubernetes::{DIR, Manifests, kustomize},
    yaml::{documents, root},
};

/// The egress ports of `m`'s NetworkPolicy.
fn egress_ports(m: &Manifests, policy: &Value) -> BTreeSet<u64> {
    policy["spec"]["egress"]
        .as_array()
        .expect("egress")
        .iter()
        .flat_map(|r| r["ports"].as_array().cloned().unwrap_or_default())
        .map(|p| m.port(&p["port"]))
        .collect()
}

/// The port of `url`, or its scheme's default.
fn url_port(url: &str) -> u64 {
    let url = reqwest::Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    url.port().map(u64::from).unwrap_or(match url.scheme() {
        "https" => 443,
        "http" => 80,
        "rediss" | "redis" => 6379,
        s => panic!("scheme {s}"),
    })
}

#[test]
fn the_network_policy_admits_callers_ops_and_scrapes_and_reaches_what_the_configuration_names() {
    for m in Manifests::each() {
        let config = m.gateway_config();
        let policy = m.object("NetworkPolicy", "idgate");
        let ports = m.ports();
        let ingress = policy["spec"]["ingress"].as_array().expect("ingress");
        let rule_for = |port: u64| -> &Value {
            let rules: Vec<&Value> = ingress
                .iter()
                .filter(|r| {
                    r["ports"]
                        .as_array()
                        .is_some_and(|ps| ps.iter().any(|p| m.port(&p["port"]) == port))
                })
                .collect();
            assert_eq!(rules.len(), 1, "one ingress rule for port {port}");
            rules[0]
        };
        let grpc = rule_for(ports["grpc"]);
        assert!(
            grpc["from"][0]["podSelector"]["matchLabels"].is_object(),
            "gRPC only from labelled callers: {grpc}"
        );
        let admin = rule_for(ports["admin"]);
        for from in admin["from"].as_array().expect("from") {
            assert!(from.get("podSelector").is_none() && from.get("ipBlock").is_none());
            assert!(
                from["namespaceSelector"]["matchLabels"].is_object(),
                "{from}"
            );
        }
        rule_for(ports["http"]);

        // Egress: DNS, and each dependency the configuration names.
        let egress = egress_ports(&m, policy);
        assert!(egress.contains(&53), "{}: DNS", m.overlay);
        let mut needed: Vec<(String, u64)> = Vec::new();
        if let Some(upstream) = &config.upstream {
            for url in [&upstream.base_url, &upstream.result_base_url] {
                needed.push((url.clone(), url_port(url)));
            }
        }
        let cluster = &config.cluster;
        if let Some(url) = &cluster.redis_url {
            needed.push((url.clone(), url_port(url)));
        }
        for sentinel in &cluster.sentinels {
            let port = sentinel
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(26379);
            needed.push((sentinel.clone(), port));
        }
        if !cluster.sentinels.is_empty() {
            // The master the sentinels name, on Redis's own port.
            needed.push(("the Sentinel master".into(), 6379));
        }
        let otlp = m.container()["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT")
            .and_then(|e| e["value"].as_str());
        if let Some(url) = otlp {
            needed.push((url.to_owned(), url_port(url)));
        }
        for (what, port) in &needed {
            assert!(
                egress.contains(port),
                "{}: egress to {what} (port {port}) in {egress:?}",
                m.overlay
            );
        }
        if m.overlay == "dev" {
            // The embedded sandbox is on loopback: DNS is all dev reaches.
            assert!(needed.is_empty(), "{needed:?}");
            assert_eq!(egress, BTreeSet::from([53]), "dev reaches DNS only");
        } else {
            assert!(needed.len() >= 5, "{needed:?}");
        }
    }
}

/// A kustomization in a temporary directory over the base and
/// `components`, rendered: what the components add to the base alone.
fn base_with(components: &[&str]) -> Vec<Value> {
    let temp = crate::support::temp::dir("component");
    let dir = temp.path().canonicalize().expect("temp dir");
    // kustomize takes relative paths only: from the temporary directory
    // up to `/`, then down to the repository.
    let up = "../".repeat(dir.components().count() - 1);
    let repo = root().canonicalize().expect("repository root");
    let repo = repo.strip_prefix("/").expect("an absolute path");
    let path = |sub: &str| format!("{up}{}/{DIR}/{sub}", repo.display());
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\n",
        path("base")
    );
    if !components.is_empty() {
        text.push_str("components:\n");
        for c in components {
            text.push_str(&format!("  - {}\n", path(&format!("components/{c}"))));
        }
    }
    std::fs::write(dir.join("kustomization.yaml"), text).expect("write kustomization");
    let rendered = kustomize(&dir.display().to_string());
    let out = dir.join("rendered.yaml");
    std::fs::write(&out, rendered).expect("write rendered");
    documents(&[out]).pop_first().expect("the file").1
}

/// The `(port, namespace)` pairs of the egress rules of the rendered
/// NetworkPolicy.
fn egress_rules(objects: &[Value]) -> BTreeSet<(u64, String)> {
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy");
    let mut out = BTreeSet::new();
    for rule in policy["spec"]["egress"].as_array().expect("egress") {
        let to = rule["to"]
            .as_array()
            .and_then(|t| t.first())
            .map(|t| {
                t["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    .as_str()
                    .unwrap_or("any")
                    .to_owned()
            })
            .unwrap_or_default();
        for p in rule["ports"].as_array().expect("ports") {
            out.insert((p["port"].as_u64().expect("numeric port"), to.clone()));
        }
    }
    out
}

#[test]
fn each_egress_component_adds_its_dependencys_ports_to_the_base_which_reaches_dns_only() {
    let base = egress_rules(&base_with(&[]));
    assert_eq!(
        base,
        BTreeSet::from([(53, "kube-system".to_owned())]),
        "the base reaches DNS only"
    );
    let expected: [(&str, &[(u64, &str)]); 3] = [
        (
            "otlp-egress",
            &[(4317, "observability"), (4318, "observability")],
        ),
        (
            "sentinel-egress",
            &[
                (26379, "idgate-deps"),
                (6379, "idgate-deps"),
                (6380, "idgate-deps"),
            ],
        ),
        (
            "mesh-egress",
            &[
                (15012, "istio-system"),
                (8080, "linkerd"),
                (8086, "linkerd"),
                (8090, "linkerd"),
                (4143, "any"),
            ],
        ),
    ];
    let on_disk: BTreeSet<String> = std::fs::read_dir(root().join(DIR).join("components"))
        .expect("components")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        on_disk,
        expected.iter().map(|(c, _)| (*c).to_owned()).collect(),
        "every component is tested here"
    );
    for (component, ports) in expected {
        let with = egress_rules(&base_with(&[component]));
        let added: BTreeSet<(u64, String)> = with.difference(&base).cloned().collect();
        let wanted: BTreeSet<(u64, String)> =
            ports.iter().map(|(p, ns)| (*p, (*ns).to_owned())).collect();
        assert_eq!(added, wanted, "{component}");
        // Documented where operators look.
        let docs = std::fs::read_to_string(root().join("docs/operations.md")).expect("docs");
        assert!(
            docs.contains(component),
            "docs/operations.md names {component}"
        );
    }
    assert!(Path::new(&root().join(DIR).join("components")).is_dir());
}
