//! The sandbox standing in for the vendor: `idgate sandbox --config F` as
//! a child process of its own, so that /proc tells its CPU apart from the
//! gateway's and the load generator's. Its addresses are read from what it
//! prints (its listeners bind free loopback ports); the rest of its stdout
//! is drained, and it is killed when dropped, however the run ends.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    path::Path,
    process::{Child, Stdio},
    sync::mpsc,
    time::Duration,
};

use anyhow::Context as _;

use crate::setup::SandboxAddresses;

/// How long the sandbox has to print its addresses.
const START_WAIT: Duration = Duration::from_secs(30);

/// The running sandbox.
pub struct SandboxChild {
    child: Child,
    pub addresses: SandboxAddresses,
}

impl SandboxChild {
    /// Runs `binary sandbox --config config` (an environment of its own:
    /// `child_env`, `RUST_LOG=warn`), its stderr into `stderr_log`, and
    /// waits until it printed every address.
    pub fn start(binary: &Path, config: &Path, stderr_log: &Path) -> anyhow::Result<Self> {
        let stderr = std::fs::File::create(stderr_log)?;
        let mut child = crate::child_env::command(binary)
            .args(["sandbox", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {} sandbox", binary.display()))?;
        let stdout = child.stdout.take().context("the sandbox's stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("sandbox-stdout".to_owned())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut addresses = SandboxAddresses::default();
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(1..)) {
                    if addresses.read_line(&line) {
                        break;
                    }
                    line.clear();
                }
                let _ = tx.send(addresses);
                // Whatever it writes later is read and dropped, so it
                // never blocks on a full pipe.
                let mut rest = reader.into_inner();
                let mut buf = vec![0u8; 16 * 1024];
                while matches!(rest.read(&mut buf), Ok(1..)) {}
            })?;
        let mut sandbox = SandboxChild {
            child,
            addresses: SandboxAddresses::default(),
        };
        let addresses = rx.recv_timeout(START_WAIT).map_err(|_| {
            anyhow::anyhow!(
                "the sandbox printed no addresses within {START_WAIT:?} (see {})",
                stderr_log.display()
            )
        })?;
        anyhow::ensure!(
            addresses.complete(),
            "the sandbox exited or printed too little ({:?}); see {}",
            sandbox.child.try_wait()?,
            stderr_log.display()
        );
        sandbox.addresses = addresses;
        Ok(sandbox)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
