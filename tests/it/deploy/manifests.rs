//! deploy/kubernetes/: valid for the Kubernetes API, and true of the
//! gateway it deploys.
//!
//! Every value the properties compare comes from the files themselves: the
//! ConfigMap's `idgate.toml` is loaded by the gateway's own loader
//! (`Config::from_toml_and_env`, with the Deployment's `IDGATE_*`
//! variables), so the grace period is checked against the drain the pods
//! will really run, and the probes against the ports they will listen on.
//!
//! `kubernetes-validate` has no schema for the Prometheus Operator's CRDs
//! (`ServiceMonitor`, `PrometheusRule`): those are checked structurally
//! here, and the PrometheusRule's groups against deploy/prometheus/.

use std::{collections::BTreeSet, path::PathBuf};

use serde_json::Value;

use super::{
    kubernetes::{DIR, Manifests, secs, strings},
    yaml::{documents, python, root},
};

/// What a stop takes beyond `drain_delay_secs + shutdown_grace_secs`
/// (closing what is left, the telemetry flush, the process exit), with
/// room to spare: the pod's grace period must exceed the two by this much
/// or SIGKILL could cut the drain short.
const MARGIN_SECS: u64 = 5;

/// API groups whose schemas `kubernetes-validate` does not ship.
const CRD_GROUP: &str = "monitoring.coreos.com/";

#[test]
fn every_manifest_validates_against_the_kubernetes_schemas() {
    let m = Manifests::load();
    // Kustomize lists every manifest of the directory, and nothing else.
    let on_disk: BTreeSet<String> = std::fs::read_dir(root().join(DIR))
        .expect("deploy/kubernetes")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    let listed: BTreeSet<String> = strings(&m.kustomization["resources"]).into_iter().collect();
    assert_eq!(on_disk, listed, "kustomization.yaml lists every manifest");

    let mut core = Vec::new();
    for (file, docs) in &m.by_file {
        let crd = docs
            .iter()
            .filter(|d| {
                d["apiVersion"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with(CRD_GROUP)
            })
            .count();
        assert!(
            crd == 0 || crd == docs.len(),
            "{file} mixes CRDs and core kinds"
        );
        if crd == 0 {
            core.push(root().join(file));
        }
    }
    // The generated ConfigMaps too, as kustomize builds them (JSON is YAML).
    let temp = crate::support::temp::dir("k8s");
    let dir = temp.path().to_path_buf();
    for name in ["idgate-config", "idgate-jwks"] {
        let map = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": m.kustomization["namespace"] },
            "data": m.config_map_files(name),
        });
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, map.to_string()).expect("write");
        core.push(path);
    }
    assert!(core.len() >= 9, "{core:?}");
    let mut args = vec!["-m", "kubernetes_validate", "--strict", "--quiet"];
    let paths: Vec<String> = core.iter().map(|p| p.display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    python(&args);
}

#[test]
fn readiness_is_grpc_health_of_the_public_port_and_liveness_survives_the_drain() {
    let m = Manifests::load();
    let config = m.gateway_config();
    let ports = m.ports();
    assert_eq!(ports["grpc"], u64::from(config.listen.grpc.port()));
    assert_eq!(ports["http"], u64::from(config.listen.http.port()));
    assert_eq!(ports["admin"], u64::from(config.listen.admin.port()));
    assert!(
        config.listen.grpc.ip().is_unspecified(),
        "listens on the pod's address"
    );

    let c = m.container();
    let readiness = &c["readinessProbe"];
    assert_eq!(
        m.port(&readiness["grpc"]["port"]),
        ports["grpc"],
        "{readiness}"
    );
    assert!(
        readiness["grpc"]["service"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "the overall service \"\", which flips to NOT_SERVING on SIGTERM"
    );
    // The pod leaves the endpoints before the gateway stops accepting.
    let period = secs(&readiness["periodSeconds"]);
    let failures = secs(&readiness["failureThreshold"]);
    assert!(
        config.serving.drain_delay_secs > period * failures,
        "drain_delay_secs {} must exceed the readiness probe's {period} s × {failures}",
        config.serving.drain_delay_secs
    );

    // Liveness asks whether the process is alive, never health (which
    // reports NOT_SERVING on purpose while the pod drains).
    let liveness = &c["livenessProbe"];
    assert!(liveness.get("grpc").is_none(), "{liveness}");
    assert!(liveness.get("httpGet").is_none(), "{liveness}");
    assert_eq!(m.port(&liveness["tcpSocket"]["port"]), ports["grpc"]);

    // The startup probe leaves room for the bounded Redis wait at start.
    let startup = &c["startupProbe"];
    assert_eq!(m.port(&startup["grpc"]["port"]), ports["grpc"], "{startup}");
    let cluster = &config.cluster;
    let start_ms = cluster.connect_timeout_ms + 4 * cluster.command_timeout_ms;
    assert!(
        secs(&startup["periodSeconds"]) * secs(&startup["failureThreshold"]) * 1000 > start_ms,
        "the startup probe allows the start's {start_ms} ms Redis wait"
    );
}

#[test]
fn the_grace_period_covers_the_drain_delay_the_shutdown_grace_and_a_margin() {
    let m = Manifests::load();
    let serving = m.gateway_config().serving;
    let grace = secs(&m.pod()["terminationGracePeriodSeconds"]);
    let needed = serving.drain_delay_secs + serving.shutdown_grace_secs + MARGIN_SECS;
    assert!(
        grace >= needed,
        "terminationGracePeriodSeconds {grace} < drain_delay_secs {} + shutdown_grace_secs {} + {MARGIN_SECS}",
        serving.drain_delay_secs,
        serving.shutdown_grace_secs
    );
    // A rolling update never lowers capacity: one new pod first.
    let rolling = &m.deployment()["spec"]["strategy"]["rollingUpdate"];
    assert_eq!(rolling["maxUnavailable"], 0, "{rolling}");
}

#[test]
fn the_pods_run_as_non_root_on_a_read_only_root_with_no_capability_and_bounded_resources() {
    let m = Manifests::load();
    let pod = m.pod();
    let c = m.container();
    let run_as_non_root = c["securityContext"]["runAsNonRoot"]
        .as_bool()
        .or(pod["securityContext"]["runAsNonRoot"].as_bool());
    assert_eq!(run_as_non_root, Some(true));
    let uid = c["securityContext"]["runAsUser"]
        .as_u64()
        .or(pod["securityContext"]["runAsUser"].as_u64());
    assert!(uid.is_some_and(|u| u != 0), "a non-zero runAsUser: {uid:?}");
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert!(sc["capabilities"].get("add").is_none(), "{sc}");
    assert_eq!(pod["automountServiceAccountToken"], false);
    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                c["resources"][bound][resource].is_string(),
                "resources.{bound}.{resource}"
            );
        }
    }
    // Every volume is mounted read-only: nothing in the pod is writable.
    for mount in c["volumeMounts"].as_array().expect("mounts") {
        assert_eq!(mount["readOnly"], true, "{mount}");
    }

    // The budget and the autoscaler act on these pods, and keep three.
    let labels = &m.deployment()["spec"]["template"]["metadata"]["labels"];
    for (kind, selector) in [
        ("PodDisruptionBudget", "/spec/selector/matchLabels"),
        ("Service", "/spec/selector"),
        ("NetworkPolicy", "/spec/podSelector/matchLabels"),
    ] {
        let selector = m
            .object(kind, "idgate")
            .pointer(selector)
            .expect("selector");
        for (k, v) in selector.as_object().expect("labels") {
            assert_eq!(&labels[k], v, "{kind} selects the gateway's pods");
        }
    }
    let hpa = m.object("HorizontalPodAutoscaler", "idgate");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "idgate");
    assert!(hpa["spec"]["minReplicas"].as_u64() >= m.deployment()["spec"]["replicas"].as_u64());
}

/// Key names that hold secrets in `idgate.toml` (never allowed but as a
/// `_file` or `_env` reference) and in the container's environment.
const SECRET_WORDS: [&str; 4] = ["password", "token", "secret", "key"];

#[test]
fn no_manifest_holds_a_secret_value() {
    let m = Manifests::load();
    for doc in m.all() {
        assert_ne!(doc["kind"], "Secret", "a Secret object in the manifests");
    }
    // The environment takes secrets by secretKeyRef only.
    for e in m.container()["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().expect("name").to_lowercase();
        if SECRET_WORDS.iter().any(|w| name.contains(w)) {
            assert!(e.get("value").is_none(), "{name} given a value");
            assert!(e["valueFrom"]["secretKeyRef"].is_object(), "{e}");
        }
    }
    // idgate.toml names files of the mounted Secret, never a value.
    let secret_mounts: Vec<String> = m.pod()["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v["secret"].is_object())
        .flat_map(|v| {
            m.container()["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .filter(|mount| mount["name"] == v["name"])
                .map(|mount| mount["mountPath"].as_str().expect("path").to_owned())
        })
        .collect();
    assert!(
        !secret_mounts.is_empty(),
        "secrets come from a mounted Secret"
    );
    let text = &m.config_map_files("idgate-config")["idgate.toml"];
    let table: toml::Table = toml::from_str(text).expect("idgate.toml is TOML");
    let mut references = 0;
    walk(&toml::Value::Table(table), "", &mut |key, value| {
        let last = key.rsplit('.').next().unwrap_or(key).to_lowercase();
        if !SECRET_WORDS.iter().any(|w| last.contains(w)) || last == "key_prefix" {
            return;
        }
        assert!(
            last.ends_with("_file") || last.ends_with("_env"),
            "{key} holds a value, not a reference"
        );
        if last.ends_with("_file") {
            let path = value.as_str().expect("a path");
            assert!(
                secret_mounts
                    .iter()
                    .any(|m| path.starts_with(&format!("{m}/"))),
                "{key} names a file outside the mounted Secret"
            );
            references += 1;
        }
    });
    assert!(
        references >= 5,
        "the secrets are read from files: {references}"
    );
    // The JWKS holds public keys only.
    let jwks: Value =
        serde_json::from_str(&m.config_map_files("idgate-jwks")["jwks.json"]).expect("jwks.json");
    for key in jwks["keys"].as_array().expect("keys") {
        for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            assert!(
                key.get(private).is_none(),
                "jwks.json holds private member {private}"
            );
        }
    }
    // And no file of deploy/ carries key material or a webhook secret.
    for dir in ["deploy/kubernetes", "deploy/prometheus", "deploy/grafana"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("dir") {
            let path = entry.expect("entry").path();
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for marker in ["PRIVATE KEY", "whsec_", "password =", "token ="] {
                assert!(
                    !text.contains(marker),
                    "{} contains {marker:?}",
                    path.display()
                );
            }
        }
    }
}

/// Calls `f` with every leaf of `value` and its dotted key.
fn walk(value: &toml::Value, key: &str, f: &mut impl FnMut(&str, &toml::Value)) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let path = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                walk(v, &path, f);
            }
        }
        toml::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                walk(v, &format!("{key}.{i}"), f);
            }
        }
        leaf => f(key, leaf),
    }
}

#[test]
fn the_network_policy_admits_callers_ops_and_scrapes_and_reaches_redis_and_the_vendor() {
    let m = Manifests::load();
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

    // Egress: the Redis and the vendor the configuration names.
    let egress_ports: BTreeSet<u64> = policy["spec"]["egress"]
        .as_array()
        .expect("egress")
        .iter()
        .flat_map(|r| r["ports"].as_array().cloned().unwrap_or_default())
        .map(|p| m.port(&p["port"]))
        .collect();
    let upstream = config.upstream.as_ref().expect("[upstream]");
    let redis = config
        .cluster
        .redis_url
        .as_deref()
        .expect("[cluster] redis_url");
    for url in [
        upstream.base_url.as_str(),
        upstream.result_base_url.as_str(),
        redis,
    ] {
        let url = reqwest::Url::parse(url).expect("url");
        let port = url.port().map(u64::from).unwrap_or(match url.scheme() {
            "https" => 443,
            "rediss" | "redis" => 6379,
            s => panic!("scheme {s}"),
        });
        assert!(
            egress_ports.contains(&port),
            "egress to {url} (port {port})"
        );
    }
    assert!(egress_ports.contains(&53), "DNS");
}

#[test]
fn the_prometheus_rule_is_deploy_prometheus_and_the_service_monitor_scrapes_metrics() {
    // One source of truth: the generated file is what the script writes.
    python(&["scripts/gen-prometheus-rule", "--check"]);
    let m = Manifests::load();
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
}

#[test]
fn the_container_arguments_parse_and_name_the_mounted_config_as_the_image_does() {
    let m = Manifests::load();
    let args = strings(&m.container()["args"]);
    let at = args.iter().position(|a| a == "--config").expect("--config");
    let config = PathBuf::from(&args[at + 1]);
    // The path is the ConfigMap's file in its mounted volume.
    let mount = m.container()["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|v| v["name"] == "config")
        .expect("the config mount");
    assert_eq!(
        config.parent(),
        Some(std::path::Path::new(
            mount["mountPath"].as_str().expect("path")
        ))
    );
    assert!(
        m.config_map_files("idgate-config")
            .contains_key(config.file_name().and_then(|n| n.to_str()).expect("name"))
    );
    // The image's default command names the same file.
    let containerfile =
        std::fs::read_to_string(root().join("Containerfile")).expect("Containerfile");
    let cmd = containerfile
        .lines()
        .find(|l| l.starts_with("CMD "))
        .expect("CMD");
    assert!(cmd.contains(&format!("\"{}\"", config.display())), "{cmd}");
    // The binary accepts the arguments: here it gets past the command line
    // and fails only on the file, absent outside the pod (clap's usage
    // errors exit 2).
    let out = crate::support::process::idgate_command()
        .args(&args)
        .output()
        .expect("run idgate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("loading configuration"), "{stderr}");
}
