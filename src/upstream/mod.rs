//! The REST client of the identity-verification service.
//!
//! # Layout
//!
//! - [`operation`](Operation): the REST operations, and which ones consume
//!   the appkey (never retried once sent).
//! - [`error`](UpstreamError): how a call failed, classified for the gRPC
//!   mapping in [`crate::error`]; messages carry no values.
//! - [`wire`]: serde mirrors of the answers with the spec's field names;
//!   lenient scalars, Base64 images, value-free parse errors.
//! - [`convert`]: wire answers -> `idgate.v1` messages (codes typed and
//!   raw, omitted objects unset, images decoded once).
//! - `body`: request bodies written into one pre-sized buffer, Base64
//!   included.
//! - [`UpstreamClient`] (`client`): one method per operation on a shared
//!   connection pool, bounded by timeouts, the caller's deadline
//!   ([`CallContext`]) and `max_response_bytes`; retries per operation.
//! - [`Credentials`] (`credentials`): the per-profile credential cache
//!   with single-flight refresh and the one-refresh retry of `/appkey`.

pub mod body;
mod client;
pub mod convert;
mod credentials;
mod error;
mod operation;
pub mod wire;

pub use client::{
    CallContext, ChannelEndpoint, ClientSetupError, CredentialGrant, DocumentReceipt,
    UpstreamClient, parse_expires,
};
pub use convert::Session3D;
pub use credentials::{CredentialPolicy, Credentials};
pub use error::UpstreamError;
pub use operation::Operation;
