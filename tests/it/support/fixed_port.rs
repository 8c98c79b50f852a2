//! Free loopback ports for processes that bind them themselves, later,
//! and bind them again when they restart: a `redis-server` (it cannot bind
//! port 0 and say which port it got), a replica and Envoy (their ports are
//! written into configuration files).
//!
//! The ports are below the kernel's ephemeral range, from which every
//! `connect` on the machine takes its local port and every `bind` to port
//! 0 its port. A port from that range, once checked and released, can be
//! taken by any connection of the suite before the process binds it, or
//! while a restarting process is down. That happened: Envoy exited with
//! "Address already in use". Below the range nothing takes a port unasked.
//!
//! One copy per crate, declared at its root (`crate::fixed_port`):
//! tests/it and every example that includes `support/redis.rs` or the
//! rolling restart's `replica.rs` by path. A port handed out is not handed
//! out again by this process. Where the ephemeral range starts too low to
//! leave room, the kernel picks the port.

use std::{
    collections::BTreeSet,
    hash::{BuildHasher as _, RandomState},
    sync::Mutex,
    time::Instant,
};

/// Lowest port handed out: above the services a development machine runs
/// (databases, brokers), below the ephemeral range.
pub const FIXED_PORTS_FROM: u16 = 20_000;

/// Where the kernel's ephemeral range starts on this machine.
pub fn ephemeral_from() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768)
}

/// A loopback port free now, below the ephemeral range when there is room,
/// never one this process handed out before.
pub fn fixed_port() -> std::io::Result<u16> {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    if let Some(room) = ephemeral_from()
        .checked_sub(FIXED_PORTS_FROM)
        .filter(|r| *r >= 1_000)
    {
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        let hasher = RandomState::new();
        for attempt in 0u32..1_000 {
            let offset = hasher.hash_one((attempt, Instant::now())) % u64::from(room);
            let port = FIXED_PORTS_FROM + offset as u16;
            if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
