//! The REST client of the identity-verification service.
//!
//! # Layout
//!
//! - [`UpstreamConfig`] (`config`): `[upstream]`, its paths and the field
//!   names the spec does not show.
//! - [`wire`]: serde mirrors of the answers with the spec's field names,
//!   and [`wire::field`], the request field names the spec fixes; lenient
//!   scalars, Base64 images, value-free parse errors.
//! - [`convert`]: wire answers -> `idgate.v1` messages (codes typed and
//!   raw, omitted objects unset, images decoded once).
//! - [`body`]: request bodies written into one pre-sized buffer, Base64
//!   included.
//! - `endpoint`: URLs joined and parsed once; [`ChannelEndpoint`], where a
//!   3D channel's two operations go.
//! - `request`: one request built once, ready to send again.
//! - `pool`: where a call finds its connection pool ([`HttpPools`], made
//!   by an [`HttpClientFactory`]): one [`SharedPool`] by default, or the
//!   serving runtime's pools, one per serving thread (this module never
//!   knows which).
//! - `send`: the retry loop within the caller's deadline
//!   ([`CallContext`](crate::context::CallContext)) and one attempt under
//!   its client span; `read`: the bounded body read.
//! - [`UpstreamClient`] (`client`): one method per operation on those
//!   pools.
//! - [`UpstreamError`] (`error`): how a call failed, classified once for
//!   the gRPC mapping, retries, breakers, spans and metrics; messages carry
//!   no values.

pub mod body;
mod client;
mod config;
pub mod convert;
mod endpoint;
mod error;
mod pool;
mod read;
mod request;
mod send;
pub mod wire;

pub use client::{CredentialGrant, DocumentReceipt, UpstreamClient, parse_expires};
pub use config::{DEFAULT_MAX_CONCURRENT_REQUESTS, FieldsConfig, PathsConfig, UpstreamConfig};
pub use convert::WireTimes;
pub use endpoint::{Bulkhead, ChannelEndpoint};
pub use error::{ClientSetupError, UpstreamError};
pub use pool::{HttpClient, HttpClientFactory, HttpPools, SharedPool};
