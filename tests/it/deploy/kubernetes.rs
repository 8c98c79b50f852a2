//! deploy/kubernetes/ read for the tests: the kustomization, the
//! manifests it lists, the files of its generated ConfigMaps, and the
//! gateway configuration they hold as `idgate serve` would load it.

use std::{collections::BTreeMap, path::PathBuf};

use idgate::config::Config;
use serde_json::Value;

use super::yaml::{document, documents, root};

/// The manifests' directory, from the repository root.
pub const DIR: &str = "deploy/kubernetes";

/// The kustomization and every resource it lists, parsed.
pub struct Manifests {
    pub kustomization: Value,
    pub by_file: BTreeMap<String, Vec<Value>>,
}

impl Manifests {
    pub fn load() -> Self {
        let kustomization = document(&PathBuf::from(format!("{DIR}/kustomization.yaml")));
        let files: Vec<PathBuf> = strings(&kustomization["resources"])
            .into_iter()
            .map(|r| PathBuf::from(format!("{DIR}/{r}")))
            .collect();
        Self {
            kustomization,
            by_file: documents(&files),
        }
    }

    pub fn all(&self) -> impl Iterator<Item = &Value> {
        self.by_file.values().flatten()
    }

    /// The one object of `kind` named `name`.
    pub fn object(&self, kind: &str, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .all()
            .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .collect();
        assert_eq!(found.len(), 1, "one {kind} {name}");
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

    /// The files of the generated ConfigMap `name`: file name -> text.
    pub fn config_map_files(&self, name: &str) -> BTreeMap<String, String> {
        let generator = self.kustomization["configMapGenerator"]
            .as_array()
            .expect("configMapGenerator")
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("a configMapGenerator named {name}"));
        strings(&generator["files"])
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(root().join(DIR).join(&f)).expect("file");
                (f, text)
            })
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
        Config::from_toml_and_env(text, env)
            .unwrap_or_else(|e| panic!("the ConfigMap's idgate.toml does not load: {e}"))
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
