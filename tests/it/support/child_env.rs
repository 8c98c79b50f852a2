//! The environment of every child process the tests and the fleet
//! examples start (redis-server, redis-cli, prometheus, promtool, python3,
//! envoy, kill, idgate): empty but for a few variables, never inherited
//! whole. A developer's shell exporting `IDGATE_*` (configuration
//! overrides), `OTEL_*` (service name, exporter endpoint) or a Python
//! setting (`PYTHONPATH`) would otherwise change what the child does and
//! fail, or pass, asserts by accident.
//!
//! One copy per crate, declared at its root (`crate::child_env`), as
//! `fixed_port` is: tests/it and every example that includes
//! `support/redis.rs` or the rolling restart's harness by path.

use std::{
    ffi::{OsStr, OsString},
    process::Command,
};

/// The only variables of the parent a child gets: what finding programs
/// (PATH: scripts/test puts its Python environment's `bin` first), a home,
/// temporary files, the locale and backtraces need.
pub const PASSED_ON: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "RUST_BACKTRACE",
    "LLVM_PROFILE_FILE",
    // Where the machine's trusted CAs are (a network that inspects TLS
    // adds its own): a child that installs a tool (npm, pip) reaches the
    // registry with them. Nothing in them changes what idgate does with
    // the tests' own loopback servers, whose CAs the tests configure.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
];

/// `program` with an empty environment but the [`PASSED_ON`] variables of
/// `parent` (the test process's, `std::env::vars_os()`, in real use; a
/// made-up one in the test of this rule, since changing the test
/// process's own environment is unsafe beside tests on other threads).
pub fn command_from(
    program: impl AsRef<OsStr>,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
) -> Command {
    let mut command = Command::new(program);
    command.env_clear().envs(
        parent
            .into_iter()
            .filter(|(key, _)| PASSED_ON.iter().any(|kept| key == kept)),
    );
    command
}

/// `program` with the [`PASSED_ON`] variables of this process only.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    command_from(program, std::env::vars_os())
}
