//! 3D liveness vendor channels: configuration, routing with failover,
//! circuit breakers, sticky session bindings and run-time control.
//!
//! - [`config`]: `[[channels]]`, `[routing]`, `[embedded_channels]`.
//! - [`transport`]: the seam to the REST client ([`Liveness3DTransport`]).
//! - [`router`]: [`ChannelRouter`], which picks the channel of every call.
//! - [`breaker`]: the per-channel circuit breaker.
//! - [`channel`]: a channel at run time, its counters and snapshots.
//! - [`weighted`]: the per-journey weighted split of new sessions.
//! - [`outcome`]: one record per call, and the one place that counts it.
//! - [`figures`]: per-channel vendor figures over a rolling window.
//! - [`rollout`]: the guarded rollout from one channel to another.
//! - [`probe`]: each channel's conformance to the REST contract.
//!
//! The run-time control API (`ChannelAdminService`) lives with the other
//! tonic services in `api::admin`; `idgate channels` in `cli::channels`.
//! Operators' guide: `docs/channels.md`.

pub mod breaker;
pub mod call_outcome;
pub mod channel;
pub mod config;
pub mod figures;
pub mod http;
mod names;
pub mod outcome;
pub mod probe;
pub mod rollout;
pub mod router;
pub mod transport;
pub mod weighted;

pub use breaker::CircuitState;
pub use channel::ChannelSnapshot;
pub use config::{
    BreakerConfig, ChannelConfigError, ChannelSpec, EmbeddedChannelsConfig, RoutingConfig,
    RoutingMode, valid_name,
};
pub use http::HttpTransport;
pub use router::{ChannelReload, ChannelRouter, ReloadSummary, RouterSnapshot, StartedSession};
pub use transport::{Liveness3DTransport, SessionGrant};
pub use weighted::{SplitError, WeightedSplit};
