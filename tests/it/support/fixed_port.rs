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
//! rolling restart's harness by path. A port handed out is not handed
//! out again by this process. Where the ephemeral range starts too low to
//! leave room, or no port of the room is free, it fails naming the range
//! rather than fall back to a port of the ephemeral range, which would
//! bring back the race above.

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

/// The fewest ports below the ephemeral range this module needs: the
/// suite asks for a few dozen, and picks at random among the room.
pub const LEAST_ROOM: u16 = 1_000;

/// A loopback port free now, below the ephemeral range, never one this
/// process handed out before; an error naming the range when the range
/// leaves less than [`LEAST_ROOM`] ports below it or none of 1,000 tries
/// found one free.
pub fn fixed_port() -> std::io::Result<u16> {
    port_below(ephemeral_from())
}

/// [`fixed_port`] for an ephemeral range that starts at `ephemeral`.
fn port_below(ephemeral: u16) -> std::io::Result<u16> {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let room = ephemeral
        .checked_sub(FIXED_PORTS_FROM)
        .filter(|r| *r >= LEAST_ROOM)
        .ok_or_else(|| {
            std::io::Error::other(format!(
                "the ephemeral range starts at {ephemeral} (/proc/sys/net/ipv4/ip_local_port_range): \
                 fixed ports need {LEAST_ROOM} ports from {FIXED_PORTS_FROM} below it; \
                 raise the range's start (sysctl net.ipv4.ip_local_port_range)"
            ))
        })?;
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
    Err(std::io::Error::other(format!(
        "no free port in {FIXED_PORTS_FROM}..{ephemeral} after 1,000 tries"
    )))
}

#[cfg(test)]
#[test]
fn an_ephemeral_range_that_leaves_too_little_room_below_it_is_an_error_naming_it() {
    let error = port_below(FIXED_PORTS_FROM + LEAST_ROOM - 1).expect_err("no room");
    assert!(
        error.to_string().starts_with(&format!(
            "the ephemeral range starts at {}",
            FIXED_PORTS_FROM + LEAST_ROOM - 1
        )),
        "{error}"
    );
    let port = port_below(FIXED_PORTS_FROM + LEAST_ROOM).expect("room enough");
    assert!((FIXED_PORTS_FROM..FIXED_PORTS_FROM + LEAST_ROOM).contains(&port));
}
