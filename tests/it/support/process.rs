//! Tests that measure the whole process, and `idgate serve` as a child
//! process.

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
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
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

/// `idgate serve` as a child process, with its log lines on a channel.
pub struct ServeProcess {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl ServeProcess {
    pub fn start(config: &std::path::Path) -> Self {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_idgate"));
        command
            .args(["serve", "--config"])
            .arg(config)
            .env("IDGATE_ADMIN_TOKEN", super::gateway::ADMIN_TOKEN)
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
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
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no log line with {marker}"));
            if line.contains(marker) {
                let at = line.find(&format!(" {key}=")).expect("field") + key.len() + 2;
                return line[at..]
                    .split_whitespace()
                    .next()
                    .expect("value")
                    .to_owned();
            }
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
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
