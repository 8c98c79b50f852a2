//! What each environment runs, from its rendered overlay: who owns the
//! scale and how replicas spread, the connection age that lets new
//! replicas reach existing callers, the memory the request budget needs,
//! and what sets dev (one open replica on the embedded sandbox) and
//! production (TLS, Sentinel, OTLP, a pinned image) apart.

use idgate::auth::AuthMode;
use serde_json::Value;

use super::{
    kubernetes::{DIR, Manifests, memory_bytes, strings},
    yaml::root,
};

const MIB: u64 = 1 << 20;

/// The gateway's RSS before any call, rounded up from the 61 MiB measured
/// by examples/memory_budget (docs/capacity.md#memory-per-pod).
const IDLE_RSS: u64 = 64 * MIB;

/// Resident bytes per request byte in flight, rounded up from the 6.4
/// measured with the largest messages (the decode buffer, the decoded
/// images, their Base64 and the JSON body sent upstream, buffers growing
/// by doubling) in docs/capacity.md#memory-per-pod.
const RSS_PER_BUDGET_BYTE: u64 = 7;

/// Resident bytes per open `WatchJourney` stream, rounded up from the 31
/// KiB measured by examples/deployed_capacity with 10,000 open
/// (docs/capacity.md#open-watches).
const RSS_PER_WATCH: u64 = 32 * 1024;

/// What the rest of the heap gets beyond idle, the bodies in flight and
/// the watch streams: connections, caches, the allocator's slack.
const HEAP_ROOM: u64 = 96 * MIB;

#[test]
fn the_autoscaler_alone_owns_the_scale_and_replicas_spread_over_nodes_and_zones() {
    // The base Deployment says nothing of the scale: an apply would reset
    // what the HPA chose.
    let base = std::fs::read_to_string(root().join(DIR).join("base/deployment.yaml"))
        .expect("base deployment");
    assert!(
        !base
            .lines()
            .any(|l| l.trim_start().starts_with("replicas:")),
        "no replicas in the Deployment the HPA targets"
    );
    for m in Manifests::each() {
        let deployment = m.deployment();
        let hpas: Vec<&Value> = m.of_kind("HorizontalPodAutoscaler").collect();
        match m.overlay {
            "dev" => {
                assert!(hpas.is_empty(), "dev: one replica, no autoscaler");
                assert_eq!(deployment["spec"]["replicas"], 1);
            }
            _ => {
                assert_eq!(hpas.len(), 1, "{}: one HPA", m.overlay);
                let hpa = hpas[0];
                assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
                assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "idgate");
                assert!(hpa["spec"]["minReplicas"].as_u64() >= Some(3), "{hpa}");
                assert!(
                    deployment["spec"].get("replicas").is_none(),
                    "{}: the HPA owns the scale",
                    m.overlay
                );
            }
        }
        // Spread over nodes (hard) and zones (soft), among the pods of
        // one ReplicaSet.
        let labels = &deployment["spec"]["template"]["metadata"]["labels"];
        let spread = m.pod()["topologySpreadConstraints"]
            .as_array()
            .expect("topologySpreadConstraints");
        let by = |key: &str| -> &Value {
            spread
                .iter()
                .find(|c| c["topologyKey"] == key)
                .unwrap_or_else(|| panic!("{}: spread by {key}", m.overlay))
        };
        let node = by("kubernetes.io/hostname");
        assert_eq!(node["whenUnsatisfiable"], "DoNotSchedule", "{node}");
        let zone = by("topology.kubernetes.io/zone");
        assert_eq!(zone["whenUnsatisfiable"], "ScheduleAnyway", "{zone}");
        for c in [node, zone] {
            assert_eq!(c["maxSkew"], 1, "{c}");
            assert_eq!(strings(&c["matchLabelKeys"]), ["pod-template-hash"]);
            for (k, v) in c["labelSelector"]["matchLabels"]
                .as_object()
                .expect("labels")
            {
                assert_eq!(&labels[k], v, "the spread counts the gateway's pods");
            }
        }
    }
}

#[test]
fn connections_age_within_minutes_so_new_replicas_reach_existing_callers() {
    for m in Manifests::each() {
        let serving = m.gateway_config().serving;
        assert!(
            (60..=600).contains(&serving.max_connection_age_secs),
            "{}: max_connection_age_secs {} rebalances within minutes",
            m.overlay,
            serving.max_connection_age_secs
        );
        assert!(serving.max_connection_age_grace_secs >= 1);
    }
}

#[test]
fn the_request_byte_budget_and_the_open_watches_fit_the_pod_memory_limit_with_room_for_the_heap() {
    for m in Manifests::each() {
        let config = m.gateway_config();
        let budget = config.serving.max_body_bytes_in_flight as u64;
        let message = config.limits.grpc_message_bytes() as u64;
        let resources = &m.container()["resources"];
        let limit = memory_bytes(resources["limits"]["memory"].as_str().expect("limit"));
        let request = memory_bytes(resources["requests"]["memory"].as_str().expect("request"));
        let watches = config.serving.max_streams as u64 * RSS_PER_WATCH;
        let needed = IDLE_RSS + RSS_PER_BUDGET_BYTE * budget + watches + HEAP_ROOM;
        assert!(
            needed <= limit,
            "{}: {} MiB idle + {RSS_PER_BUDGET_BYTE} × {} MiB of request bytes in flight + {} MiB \
             of open watches ({} streams) + {} MiB of heap = {} MiB > the {} MiB limit",
            m.overlay,
            IDLE_RSS / MIB,
            budget / MIB,
            watches / MIB,
            config.serving.max_streams,
            HEAP_ROOM / MIB,
            needed / MIB,
            limit / MIB
        );
        // The largest valid request fits in the budget (the loader checks
        // it too), and the request leaves the pod schedulable under it.
        assert!(message <= budget, "{}", m.overlay);
        assert!(request <= limit, "{}", m.overlay);
        assert!(request >= IDLE_RSS, "{}", m.overlay);
    }
}

#[test]
fn dev_runs_one_open_replica_on_the_embedded_sandbox_with_no_secret() {
    let m = Manifests::render("dev");
    let config = m.gateway_config();
    assert!(
        config.upstream.is_none(),
        "no [upstream]: the embedded sandbox"
    );
    let auth = config.auth.as_ref().expect("[auth] said explicitly");
    assert_eq!(auth.mode, AuthMode::None, "open access, explicit");
    assert!(config.cluster.redis_url.is_none() && config.cluster.sentinels.is_empty());
    for volume in m.pod()["volumes"].as_array().expect("volumes") {
        assert!(
            volume.get("secret").is_none(),
            "dev needs no Secret: {volume}"
        );
    }
}

#[test]
fn production_serves_tls_shares_state_through_sentinel_exports_spans_and_pins_its_image() {
    let m = Manifests::render("production");
    let config = m.gateway_config();
    let mounted: Vec<String> = m.container()["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .map(|v| v["mountPath"].as_str().expect("path").to_owned())
        .collect();
    for (listener, tls) in [("grpc", &config.tls.grpc), ("admin", &config.tls.admin)] {
        let tls = tls.as_ref().unwrap_or_else(|| panic!("[tls.{listener}]"));
        for file in [&tls.cert_file, &tls.key_file] {
            assert!(
                mounted.iter().any(|dir| file.starts_with(dir)),
                "{} is in a mounted volume",
                file.display()
            );
        }
    }
    assert!(config.upstream.is_some(), "a real upstream");
    assert!(config.cluster.sentinels.len() >= 3, "Redis behind Sentinel");
    assert!(config.cluster.master_name.is_some());
    let env = |name: &str| -> Option<String> {
        m.container()["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str().map(str::to_owned))
    };
    assert!(
        env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some(),
        "spans exported"
    );
    // The issuer comes from the overlay's patch, not from idgate.toml.
    let issuer = env("IDGATE_AUTH__JWT__ISSUER").expect("the issuer patch");
    let toml = &m.config_map_files("idgate-config")["idgate.toml"];
    assert!(!toml.contains("issuer ="), "the issuer is a patch");
    let auth = config.auth.as_ref().expect("[auth]");
    assert_eq!(auth.mode, AuthMode::Jwt);
    assert_eq!(auth.jwt.as_ref().expect("[auth.jwt]").issuer, issuer);
    // Pinned by digest: `name@sha256:` and 64 hex digits.
    let image = m.container()["image"].as_str().expect("image");
    let digest = image
        .split_once("@sha256:")
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("{image} is not pinned by digest"));
    assert!(
        digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()),
        "{image}"
    );
}
