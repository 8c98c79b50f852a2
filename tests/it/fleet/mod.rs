//! Gateway replicas sharing journey state on Redis (issue 11), each test
//! on a fleet of its own: a `redis-server` on a free loopback port (never
//! the machine's shared 6379), one sandbox, and replicas pointed at both,
//! all over real sockets (`support::fleet`, `support::redis`). Waits are on
//! the event, bounded only against a hang (no timed assertion).
//!
//! - `notices`: a completion notice on one replica reaches every other,
//!   deduplicated fleet-wide, and one cut off from Redis reads it once back;
//! - `journeys`: references and 3D sessions resolve on any replica;
//! - `routing`: drains, modes, weighted splits and contingency holds are
//!   the fleet's;
//! - `outage`: without Redis (stopped, or the wrong password) core RPCs
//!   work, fleet changes are refused, and the fleet converges after;
//! - `secrecy`: nothing personal in clear in Redis or in its spans;
//! - `redis_traffic`: a watched journey with photos of a real capture's
//!   size sends Redis facts, not photos, and the vendor one result read
//!   per replica holding watchers;
//! - `guard`: idempotent `CreateJourney` and budgets across replicas;
//! - `figures`: vendor figures of every replica, through any one;
//! - `tls`: `rediss://` with a private CA (`[cluster] ca_file`), client
//!   certificates, TLS sentinels and a TLS Redis Cluster;
//! - `failover`: a Sentinel set loses its master mid-run and the fleet
//!   follows the promoted replica;
//! - `redis_cluster`: the fleet on a three-master Redis Cluster;
//! - `rollout`: a guarded rollout carried on by another replica when its
//!   driver stops.

pub use crate::support::wait::EVENT_WAIT;

mod failover;
mod figures;
mod journeys;
mod notices;
mod outage;
mod redis_cluster;
mod redis_traffic;
mod rollout;
mod routing;
mod secrecy;
mod spend;
mod tls;
mod watch_reads;
