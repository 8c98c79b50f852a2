//! deploy/kubernetes/ as a cluster would receive it: each overlay rendered
//! by `kubectl kustomize` (the generated ConfigMaps, the components and the
//! patches applied), read back as JSON, with the gateway configuration it
//! holds loaded as `idgate serve` would load it.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use idgate::config::Config;
use serde_json::Value;

use super::yaml::{documents, root};

/// The manifests' directory, from the repository root.
pub const DIR: &str = "deploy/kubernetes";

/// Every overlay, each a whole environment.
pub const OVERLAYS: [&str; 2] = ["dev", "production"];

/// What to install when `kubectl` is missing or too old. Debian's
/// `kubernetes-client` (1.20) predates kustomize components and `labels`.
pub const KUBECTL_HINT: &str = "install `kubectl` 1.27 or later (kustomize v5): the `kubectl` \
     package of the Kubernetes or Google Cloud apt repository; Debian's `kubernetes-client` \
     is too old for kustomize components";

/// One overlay, rendered.
pub struct Manifests {
    /// The overlay's name (`dev`, `production`).
    pub overlay: &'static str,
    /// Every object of the rendered output, in its order.
    pub objects: Vec<Value>,
}

/// `kubectl kustomize` of `dir` (relative to the repository root): the
/// rendered YAML. Fails the test naming what to install when `kubectl`
/// cannot run, and showing kustomize's error when it refuses the input.
pub fn kustomize(dir: &str) -> String {
    let output = crate::child_env::command("kubectl")
        .args(["kustomize", dir])
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl ({e}): {KUBECTL_HINT}"));
    assert!(
        output.status.success(),
        "kubectl kustomize {dir}: {}\n{}\n({KUBECTL_HINT})",
        output.status,
        String::from_utf8_lossy(&output.stderr),
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

impl Manifests {
    /// `overlay` rendered by kustomize.
    pub fn render(overlay: &'static str) -> Self {
        let rendered = kustomize(&format!("{DIR}/overlays/{overlay}"));
        let temp = crate::support::temp::dir("kustomize");
        let path = temp.path().join(format!("{overlay}.yaml"));
        std::fs::write(&path, rendered).expect("write the rendered overlay");
        let objects = documents(&[path]).pop_first().expect("the file").1;
        Self { overlay, objects }
    }

    /// Every overlay, rendered.
    pub fn each() -> Vec<Self> {
        OVERLAYS.into_iter().map(Self::render).collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Value> {
        self.objects.iter()
    }

    /// The objects of `kind`.
    pub fn of_kind<'a>(&'a self, kind: &str) -> impl Iterator<Item = &'a Value> + use<'a> {
        let kind = kind.to_owned();
        self.all().filter(move |d| d["kind"] == *kind)
    }

    /// The one object of `kind` named `name`.
    pub fn object(&self, kind: &str, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .of_kind(kind)
            .filter(|d| d["metadata"]["name"] == name)
            .collect();
        assert_eq!(found.len(), 1, "{}: one {kind} {name}", self.overlay);
        found[0]
    }

    pub fn deployment(&self) -> &Value {
        self.object("Deployment", "idgate")
    }

    pub fn pod(&self) -> &Value {
        &self.deployment()["spec"]["template"]["spec"]
    }

    pub fn container(&self) -> &Value {
        let containers = self.pod()["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "one container");
        &containers[0]
    }

    /// The generated ConfigMap `name` (kustomize suffixes a hash of its
    /// content), which a volume of the pod must reference.
    pub fn config_map(&self, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .of_kind("ConfigMap")
            .filter(|d| {
                d["metadata"]["name"]
                    .as_str()
                    .and_then(|n| n.strip_prefix(name))
                    .is_some_and(|hash| hash.starts_with('-'))
            })
            .collect();
        assert_eq!(found.len(), 1, "{}: one ConfigMap {name}-*", self.overlay);
        let generated = &found[0]["metadata"]["name"];
        assert!(
            self.pod()["volumes"]
                .as_array()
                .expect("volumes")
                .iter()
                .any(|v| v["configMap"]["name"] == *generated),
            "{}: the pod mounts {generated}",
            self.overlay
        );
        found[0]
    }

    /// The files of the generated ConfigMap `name`: file name -> text.
    pub fn config_map_files(&self, name: &str) -> BTreeMap<String, String> {
        self.config_map(name)["data"]
            .as_object()
            .expect("data")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().expect("text").to_owned()))
            .collect()
    }

    /// The ConfigMap's `idgate.toml` with the container's `IDGATE_*`
    /// variables, loaded as `idgate serve` loads it.
    pub fn gateway_config(&self) -> Config {
        let text = &self.config_map_files("idgate-config")["idgate.toml"];
        let env: Vec<(String, String)> = self.container()["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_owned(),
                    e["value"].as_str()?.to_owned(),
                ))
            })
            .filter(|(name, _)| name.starts_with("IDGATE_"))
            .collect();
        Config::from_toml_and_env(text, env).unwrap_or_else(|e| {
            panic!(
                "{}: the ConfigMap's idgate.toml does not load: {e}",
                self.overlay
            )
        })
    }

    /// The container's ports by name.
    pub fn ports(&self) -> BTreeMap<String, u64> {
        self.container()["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().expect("port name").to_owned(),
                    p["containerPort"].as_u64().expect("containerPort"),
                )
            })
            .collect()
    }

    /// A probe's or rule's `port`, a number or a container port's name.
    pub fn port(&self, port: &Value) -> u64 {
        match port {
            Value::Number(n) => n.as_u64().expect("port number"),
            Value::String(name) => *self
                .ports()
                .get(name)
                .unwrap_or_else(|| panic!("no container port named {name}")),
            other => panic!("port {other}"),
        }
    }
}

/// Every file under `dir` (relative to the root), recursively.
pub fn files_under(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), &mut out);
    out.sort();
    out
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

pub fn secs(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("seconds: {v}"))
}

/// A Kubernetes memory quantity (`512Mi`, `1Gi`, `536870912`) in bytes.
pub fn memory_bytes(quantity: &str) -> u64 {
    let (number, unit) = quantity
        .find(|c: char| !c.is_ascii_digit())
        .map_or((quantity, ""), |at| quantity.split_at(at));
    let n: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("quantity {quantity}"));
    let scale = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => panic!("memory unit {other} in {quantity}"),
    };
    n * scale
}
