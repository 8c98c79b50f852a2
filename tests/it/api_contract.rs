//! The API's contract check (`scripts/api-contract`: buf format, lint and
//! breaking against the released image) passes on the API as it is and
//! fails on a breaking edit, naming the field. Both run on a copy of
//! `buf.yaml` and `proto/` in a temporary directory, never on the checkout.
//!
//! The script installs the pinned buf CLI from npm into `target/tools/`
//! when missing (one install at a time); without `npm` it fails naming the
//! package, and so do these tests.

use std::{path::Path, process::Output};

use crate::support::{process::child_command, temp};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A copy of the checkout's `buf.yaml` and `proto/` (the released image
/// included) in a fresh temporary directory.
fn scratch_copy() -> tempfile::TempDir {
    let dir = temp::dir("api-contract");
    let status = crate::child_env::command("cp")
        .arg("-R")
        .arg(Path::new(REPO).join("buf.yaml"))
        .arg(Path::new(REPO).join("proto"))
        .arg(dir.path())
        .status()
        .expect("run cp");
    assert!(status.success(), "copy buf.yaml and proto/: {status}");
    dir
}

/// `scripts/api-contract` on `dir`.
fn check(dir: &Path) -> Output {
    child_command(
        Path::new(REPO).join("scripts/api-contract"),
        std::env::vars_os(),
    )
    .arg(dir)
    .output()
    .expect("run scripts/api-contract")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_api_as_it_is_passes_format_lint_and_breaking_against_the_release() {
    let dir = scratch_copy();
    let output = check(dir.path());
    assert!(
        output.status.success(),
        "the contract check fails on the API as it is:\n{}",
        text(&output)
    );
}

#[test]
fn a_renumbered_field_fails_the_contract_check_naming_the_field() {
    let dir = scratch_copy();
    let file = dir.path().join("proto/idgate/v1/journey.proto");
    let proto = std::fs::read_to_string(&file).expect("read journey.proto");
    let field = "string customer_reference = 4;";
    assert!(proto.contains(field), "journey.proto declares {field}");
    std::fs::write(
        &file,
        proto.replace(field, "string customer_reference = 7;"),
    )
    .expect("write journey.proto");

    let output = check(dir.path());
    let text = text(&output);
    assert!(
        !output.status.success(),
        "a renumbered field passed the contract check:\n{text}"
    );
    assert!(
        text.contains("customer_reference") && text.contains("breaking change"),
        "the failure names the field and says it breaks the release:\n{text}"
    );
}
