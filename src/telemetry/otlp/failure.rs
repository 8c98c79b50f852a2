//! Why an export failed: what the transport reports and the retry policy
//! reads, so that neither has to import the other for it.

use std::time::Duration;

/// Why an export failed. No variant carries a header value, nor the
/// collector's own message, which may echo the API key it refused.
#[derive(Debug, thiserror::Error)]
pub enum ExportFailure {
    /// The collector answered with a gRPC error.
    #[error("the collector answered {code:?}")]
    Grpc {
        /// The status code.
        code: tonic::Code,
        /// The wait its `RetryInfo` asks for, if any.
        retry_after: Option<Duration>,
    },
    /// The collector answered with an HTTP error.
    #[error("the collector answered HTTP {status}")]
    Http {
        /// The status.
        status: u16,
        /// The wait its `Retry-After` asks for, if any.
        retry_after: Option<Duration>,
    },
    /// The request could not be sent, or its answer not read.
    #[error("cannot reach the collector: {0}")]
    Transport(String),
    /// No answer within the export timeout.
    #[error("the collector did not answer within {0:?}")]
    Timeout(Duration),
}
