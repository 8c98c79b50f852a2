//! The Redis of the `[cluster]` rows: a `redis-server` this benchmark
//! starts on a free loopback port (the tests' own helper,
//! `tests/it/support/redis.rs`: no persistence, ready only once the Redis
//! on the port reports the child's pid in `INFO server`), stopped when the
//! row ends. examples/deployed_capacity starts its Redis with it too.

use std::process::{Command, Stdio};

use crate::redis_server::RedisServer;

/// Starts a `redis-server` of this benchmark's own; fails naming the
/// Debian package when the binary is missing.
pub fn start_redis() -> anyhow::Result<RedisServer> {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = found {
        anyhow::bail!(
            "cannot run redis-server ({e}): the hop's --cluster rows and examples/deployed_capacity need Debian's `redis-server` package (apt-get install redis-server)"
        );
    }
    // The helper panics if a started server never answers; run it where a
    // panic becomes an error.
    std::panic::catch_unwind(RedisServer::start)
        .map_err(|_| anyhow::anyhow!("redis-server did not start (see the panic above)"))
}
