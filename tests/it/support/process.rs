//! Tests that measure the whole process, and `idgate serve` as a child
//! process.
//!
//! A child's environment is built by the tests, never inherited whole
//! ([`crate::child_env`]).

use std::ffi::{OsStr, OsString};
use std::process::Command;

/// `program` with an empty environment but the
/// [`crate::child_env::PASSED_ON`] variables of `parent`.
pub fn child_command(
    program: impl AsRef<OsStr>,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
) -> Command {
    crate::child_env::command_from(program, parent)
}

/// The `idgate` binary of this build, its environment built as
/// [`child_command`] does from the test process's, its state in memory
/// ([`STATE_IN_MEMORY`]).
pub fn idgate_command() -> Command {
    let mut command = child_command(env!("CARGO_BIN_EXE_idgate"), std::env::vars_os());
    command.env(STATE_IN_MEMORY.0, STATE_IN_MEMORY.1);
    command
}

/// The override that keeps a child gateway's state in memory: on the
/// default store path (relative to the tests' working directory) parallel
/// gateways would collide on its lock. Tests of the store give each
/// gateway a directory of its own instead.
pub const STATE_IN_MEMORY: (&str, &str) = ("IDGATE_STORE__BACKEND", "memory");

/// Set in the child process that runs one test alone.
const ALONE: &str = "IDGATE_IT_ALONE";

/// For a test that measures the whole process (its RSS), which the tests
/// running beside it in this binary would blur: runs the test named `name`
/// (its path in this binary) alone in a child process of this test binary.
/// Returns true in that child, where the test's body runs; in the parent,
/// waits for the child, asserts it ran the one test and passed, and
/// returns false.
pub fn alone_in_own_process(name: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return true;
    }
    let output = child_command(
        std::env::current_exe().expect("test binary"),
        std::env::vars_os(),
    )
    .args([name, "--exact", "--test-threads=1", "--nocapture"])
    .env(ALONE, name)
    .output()
    .expect("run the test alone");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} alone: {}\n{stdout}\n{stderr}",
        output.status
    );
    print!("{stdout}");
    false
}

/// An `idgate serve` configuration in `dir`: every listener on a free
/// port, no drain delay and a 1 s shutdown grace (a test's SIGTERM ends
/// it at once), then the TOML of `more`. Returns the file.
pub fn quick_serve_config(dir: &std::path::Path, more: &str) -> std::path::PathBuf {
    let config = dir.join("idgate.toml");
    std::fs::write(
        &config,
        format!(
            "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
             [serving]\ndrain_delay_secs = 0\nshutdown_grace_secs = 1\n{more}"
        ),
    )
    .expect("write config");
    config
}

/// `idgate serve` as a child process, with its log lines on a channel.
pub struct ServeProcess {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl ServeProcess {
    pub fn start(config: &std::path::Path) -> Self {
        Self::start_from(config, std::env::vars_os())
    }

    /// [`ServeProcess::start`] as a child of a process whose environment
    /// is `parent` (see [`child_command`]).
    pub fn start_from(
        config: &std::path::Path,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Self {
        let mut command = child_command(env!("CARGO_BIN_EXE_idgate"), parent);
        command
            .args(["serve", "--config"])
            .arg(config)
            .env("IDGATE_ADMIN_TOKEN", super::gateway::ADMIN_TOKEN)
            .env(STATE_IN_MEMORY.0, STATE_IN_MEMORY.1)
            .env("RUST_LOG", "info");
        Self::spawn(command)
    }

    /// Runs `command` (an `idgate serve` the caller set up: its binary,
    /// user, directory and environment), its stdout on the channel.
    pub fn spawn(mut command: std::process::Command) -> Self {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn idgate serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The value of `key=` in the first log line containing `marker`.
    pub fn field(&self, marker: &str, key: &str) -> String {
        let line = self.line(marker);
        let at = line.find(&format!(" {key}=")).expect("field") + key.len() + 2;
        line[at..]
            .split_whitespace()
            .next()
            .expect("value")
            .to_owned()
    }

    /// The first log line not read yet that contains `marker`.
    pub fn line(&self, marker: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no log line with {marker}"));
            if line.contains(marker) {
                return line;
            }
        }
    }

    /// Every log line not read yet, up to the end of the child's stdout
    /// (call it once the child has exited; a test hung on it fails after
    /// `within`).
    pub fn lines_to_end(&self, within: std::time::Duration) -> Vec<String> {
        let give_up = std::time::Instant::now() + within;
        let mut lines = Vec::new();
        loop {
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return lines,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("stdout did not end within {within:?}")
                }
            }
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = crate::child_env::command("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success());
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServeProcess {
    /// Waits (polling, at most `within`) for the process to exit; its
    /// status, or `None` if it is still running.
    pub async fn exit_within(
        &mut self,
        within: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let give_up = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                return Some(status);
            }
            if tokio::time::Instant::now() >= give_up {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// A made-up parent environment: what `PATH` this process has, plus the
/// variables a developer's shell might export.
fn shell_with_exports() -> Vec<(OsString, OsString)> {
    let mut parent: Vec<(OsString, OsString)> = [
        ("IDGATE_LISTEN__GRPC", "not-an-address"),
        ("IDGATE_ADMIN_TOKEN", "the-shell-token"),
        ("OTEL_SERVICE_NAME", "the-shell-service"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://192.0.2.1:4317"),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect();
    parent.extend(std::env::vars_os().filter(|(k, _)| k == "PATH"));
    parent
}

#[test]
fn a_child_gets_no_idgate_or_otel_variable_of_its_parent() {
    let output = child_command("env", shell_with_exports())
        .output()
        .expect("run env (coreutils)");
    assert!(output.status.success());
    let seen = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = seen.lines().filter_map(|l| l.split('=').next()).collect();
    assert_eq!(names, ["PATH"], "{seen}");
}

#[tokio::test]
async fn idgate_serve_started_by_the_tests_ignores_its_parents_idgate_variables() {
    let dir = super::temp::dir("env");
    let config = dir.path().join("idgate.toml");
    std::fs::write(
        &config,
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
    )
    .expect("write config");
    // The export would matter: given to the child, it fails the start.
    let poisoned = idgate_command()
        .args(["serve", "--config"])
        .arg(&config)
        .env("IDGATE_ADMIN_TOKEN", super::gateway::ADMIN_TOKEN)
        .env("IDGATE_LISTEN__GRPC", "not-an-address")
        .output()
        .expect("run idgate serve");
    assert!(!poisoned.status.success());
    assert!(
        String::from_utf8_lossy(&poisoned.stderr).contains("invalid socket address"),
        "{}",
        String::from_utf8_lossy(&poisoned.stderr)
    );
    // Exported in the parent only: the child listens where its file says.
    let serve = ServeProcess::start_from(&config, shell_with_exports());
    let grpc: std::net::SocketAddr = serve
        .field("idgate listening", "grpc")
        .parse()
        .expect("the configured loopback address");
    assert!(grpc.ip().is_loopback(), "{grpc}");
}
