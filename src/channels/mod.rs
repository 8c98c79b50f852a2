//! 3D liveness vendor channels: configuration, routing with failover,
//! circuit breakers, sticky session bindings and run-time control.
//!
//! - [`config`]: `[[channels]]`, `[routing]`, `[admin]`.
//! - [`transport`]: the seam to the REST client ([`Liveness3DTransport`]).
//! - [`router`]: [`ChannelRouter`], which picks the channel of every call.
//! - [`breaker`]: the per-channel circuit breaker.
//! - [`bindings`]: which channel issued the session of an appkey.
//! - [`channel`]: a channel at run time, its counters and snapshots.
//! - [`admin`]: `ChannelAdminService` behind a bearer token.
//! - [`cli`]: `idgate channels ...` helpers.
//!
//! Operators' guide: the README's "For platform teams" section.

pub mod admin;
pub mod bindings;
pub mod breaker;
pub mod channel;
pub mod cli;
pub mod config;
pub mod http;
pub mod router;
pub mod transport;

pub use admin::{AdminServer, AdminToken, admin_auth_interceptor, admin_service};
pub use breaker::CircuitState;
pub use channel::ChannelSnapshot;
pub use config::{
    AdminConfig, BreakerConfig, ChannelSpec, EmbeddedChannelsConfig, RoutingConfig, RoutingMode,
};
pub use http::HttpTransport;
pub use router::{ChannelRouter, ReloadSummary, RouterSnapshot, StartedSession};
pub use transport::{Liveness3DTransport, SessionGrant};
