//! The idgate binary an example runs as a child, and the free loopback
//! ports it listens on. Shared by examples/hop, examples/deployed_capacity
//! and examples/store_cost (included by path: examples cannot share a
//! library).

use std::path::PathBuf;

use anyhow::Context as _;

/// A loopback port free now (the child binds it a moment later).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `--idgate-bin`, else `idgate` beside this example.
pub fn idgate_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path);
    }
    // target/<profile>/examples/<example> -> target/<profile>/idgate
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("idgate"))
        .context("the idgate binary beside the examples")?;
    anyhow::ensure!(
        path.exists(),
        "{} is missing: run `cargo build --release` first",
        path.display()
    );
    Ok(path)
}
