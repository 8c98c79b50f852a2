//! The REST client of the identity-verification service.

mod error;
mod operation;

pub use error::UpstreamError;
pub use operation::Operation;
