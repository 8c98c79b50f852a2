//! deploy/kubernetes/: each overlay, as kustomize renders it, valid for
//! the Kubernetes API and true of the gateway it deploys: probes, the
//! grace period, the restricted pod, no secret value, the arguments.
//!
//! Every value the properties compare comes from the rendered output: the
//! generated ConfigMap's `idgate.toml` is loaded by the gateway's own
//! loader (`Config::from_toml_and_env`, with the Deployment's `IDGATE_*`
//! variables, patches included), so the grace period is checked against
//! the drain the pods will really run, and the probes against the ports
//! they will listen on.
//!
//! `kubernetes-validate` has no schema for the Prometheus Operator's CRDs
//! (`ServiceMonitor`, `PrometheusRule`): `monitoring` checks those.

use std::{collections::BTreeSet, path::PathBuf};

use serde_json::Value;

use super::{
    kubernetes::{DIR, Manifests, files_under, secs, strings},
    yaml::{python, root},
};

/// What a stop takes beyond `drain_delay_secs + shutdown_grace_secs`
/// (closing what is left, the telemetry flush, the process exit), with
/// room to spare: the pod's grace period must exceed the two by this much
/// or SIGKILL could cut the drain short.
const MARGIN_SECS: u64 = 5;

/// API groups whose schemas `kubernetes-validate` does not ship.
const CRD_GROUP: &str = "monitoring.coreos.com/";

#[test]
fn every_overlay_renders_and_validates_strictly_against_the_kubernetes_schemas() {
    for m in Manifests::each() {
        // Every object but the Prometheus Operator's, one file each (JSON
        // is YAML), validated strictly: an unknown field fails.
        let temp = crate::support::temp::dir("k8s");
        let mut paths = Vec::new();
        for (i, object) in m.all().enumerate() {
            let api = object["apiVersion"].as_str().unwrap_or("");
            if api.starts_with(CRD_GROUP) {
                continue;
            }
            let path = temp.path().join(format!("{i}.yaml"));
            std::fs::write(&path, object.to_string()).expect("write");
            paths.push(path.display().to_string());
        }
        let kinds: BTreeSet<&str> = m.all().filter_map(|o| o["kind"].as_str()).collect();
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ConfigMap",
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ServiceMonitor",
            "PrometheusRule",
        ] {
            assert!(kinds.contains(kind), "{}: no {kind}", m.overlay);
        }
        let mut args = vec!["-m", "kubernetes_validate", "--strict", "--quiet"];
        args.extend(paths.iter().map(String::as_str));
        python(&args);
        // Every namespaced object in the overlay's namespace.
        let namespace =
            m.of_kind("Namespace").next().expect("namespace")["metadata"]["name"].clone();
        for object in m.all().filter(|o| o["kind"] != "Namespace") {
            assert_eq!(
                object["metadata"]["namespace"], namespace,
                "{}: {} {}",
                m.overlay, object["kind"], object["metadata"]["name"]
            );
        }
    }
    // The base names no namespace: each overlay sets its own.
    let base = std::fs::read_to_string(root().join(DIR).join("base/kustomization.yaml"))
        .expect("base kustomization");
    assert!(!base.lines().any(|l| l.starts_with("namespace:")), "{base}");
}

/// The readiness a kubelet probe reads: gRPC health of the public port
/// when it is plaintext (the kubelet's gRPC probe cannot speak TLS), else
/// `/healthz` of the HTTP listener; both turn NOT_SERVING on SIGTERM.
fn assert_probe_reads_readiness(m: &Manifests, probe: &Value, config: &idgate::config::Config) {
    let ports = m.ports();
    if let Some(grpc) = probe.get("grpc") {
        assert_eq!(m.port(&grpc["port"]), ports["grpc"], "{probe}");
        assert!(
            config.tls.grpc.is_none(),
            "{}: a gRPC probe on a TLS listener always fails",
            m.overlay
        );
        assert!(
            grpc["service"].as_str().unwrap_or("").is_empty(),
            "the overall service \"\", which flips to NOT_SERVING on SIGTERM"
        );
    } else {
        let http = &probe["httpGet"];
        assert_eq!(http["path"], "/healthz", "{probe}");
        assert_eq!(m.port(&http["port"]), ports["http"], "{probe}");
        let https = http["scheme"] == "HTTPS";
        assert_eq!(https, config.tls.http.is_some(), "{}: {probe}", m.overlay);
    }
}

#[test]
fn readiness_reads_health_tolerates_one_slow_probe_and_liveness_survives_the_drain() {
    for m in Manifests::each() {
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
        assert_probe_reads_readiness(&m, readiness, &config);
        // One slow or failed answer does not take the pod out.
        let period = secs(&readiness["periodSeconds"]);
        let failures = secs(&readiness["failureThreshold"]);
        let timeout = secs(&readiness["timeoutSeconds"]);
        assert!(failures >= 3, "{}: {readiness}", m.overlay);
        assert!(
            (2..=period.max(2)).contains(&timeout),
            "{}: {readiness}",
            m.overlay
        );
        // The pod leaves the endpoints before the gateway stops accepting.
        assert!(
            config.serving.drain_delay_secs > period * failures,
            "{}: drain_delay_secs {} must exceed the readiness probe's {period} s × {failures}",
            m.overlay,
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
        assert_probe_reads_readiness(&m, startup, &config);
        let cluster = &config.cluster;
        let start_ms = cluster.connect_timeout_ms + 4 * cluster.command_timeout_ms;
        assert!(
            secs(&startup["periodSeconds"]) * secs(&startup["failureThreshold"]) * 1000 > start_ms,
            "the startup probe allows the start's {start_ms} ms Redis wait"
        );
    }
}

#[test]
fn the_grace_period_covers_the_drain_delay_the_shutdown_grace_and_a_margin() {
    for m in Manifests::each() {
        the_grace_period_covers_the_drain_of(&m);
    }
}

fn the_grace_period_covers_the_drain_of(m: &Manifests) {
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
    for m in Manifests::each() {
        the_pods_run_restricted_in(&m);
    }
}

fn the_pods_run_restricted_in(m: &Manifests) {
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
    // Every volume is mounted read-only but the embedded store's, where
    // the overlay's single replica keeps its state: nothing else in the
    // pod is writable, and a fleet (`[cluster]`) writes nothing at all.
    let config = m.gateway_config();
    for mount in c["volumeMounts"].as_array().expect("mounts") {
        if mount["readOnly"] == true {
            continue;
        }
        assert!(
            !config.cluster.is_enabled(),
            "a fleet writes no file: {mount}"
        );
        assert_eq!(config.store.backend, idgate::config::StoreBackend::Embedded);
        assert_eq!(
            mount["mountPath"].as_str().map(std::path::Path::new),
            Some(config.store.path.as_path()),
            "the one writable mount is the store's: {mount}"
        );
    }

    // The budget and the policies act on these pods.
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
}

/// Key names that hold secrets in `idgate.toml` (never allowed but as a
/// `_file` or `_env` reference) and in the container's environment.
const SECRET_WORDS: [&str; 4] = ["password", "token", "secret", "key"];

#[test]
fn no_manifest_holds_a_secret_value() {
    for m in Manifests::each() {
        no_secret_value_in(&m);
    }
    // And no file of deploy/ carries key material or a webhook secret.
    for dir in ["deploy/kubernetes", "deploy/prometheus", "deploy/grafana"] {
        for path in files_under(dir) {
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

/// Secrets come from mounted Secrets by file, in the environment by
/// `secretKeyRef`, never as values.
fn no_secret_value_in(m: &Manifests) {
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
    // Production reads its passwords and keys from the Secret's files;
    // dev (the embedded sandbox, open access) has none to read.
    if m.overlay == "production" {
        assert!(
            references >= 5,
            "the secrets are read from files: {references}"
        );
        // The JWKS holds public keys only.
        let jwks: Value = serde_json::from_str(&m.config_map_files("idgate-jwks")["jwks.json"])
            .expect("jwks.json");
        for key in jwks["keys"].as_array().expect("keys") {
            for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
                assert!(
                    key.get(private).is_none(),
                    "jwks.json holds private member {private}"
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
fn the_container_arguments_parse_and_name_the_mounted_config_as_the_image_does() {
    for m in Manifests::each() {
        the_container_arguments_of(&m);
    }
}

fn the_container_arguments_of(m: &Manifests) {
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
