//! How an upstream REST call failed, classified for the gRPC mapping.
//!
//! Messages name the operation and the class of failure only: never a
//! body, a URL query, a header or a field value, because upstream bodies
//! and serde messages can quote personal data.

use crate::domain::Operation;

/// A failed upstream call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream answered with a non-success HTTP status.
    #[error("upstream {op} answered HTTP {status}")]
    Status {
        /// The operation.
        op: Operation,
        /// The HTTP status code.
        status: u16,
    },
    /// No connection could be made: the request never left the gateway.
    #[error("could not connect to the upstream for {op}")]
    Connect {
        /// The operation.
        op: Operation,
    },
    /// The upstream did not answer in time. The request may have been
    /// received.
    #[error("upstream {op} timed out")]
    Timeout {
        /// The operation.
        op: Operation,
    },
    /// The connection failed after the request may have been sent.
    #[error("connection to the upstream failed during {op}")]
    Transport {
        /// The operation.
        op: Operation,
    },
    /// The upstream answered 2xx with a body that is not the expected shape.
    #[error("upstream {op} sent a malformed body ({detail})")]
    Malformed {
        /// The operation.
        op: Operation,
        /// Where parsing failed (category, line, column), never a value.
        detail: String,
    },
    /// The caller's deadline had passed before the request was sent (or
    /// before a retry could be): nothing reached the upstream.
    #[error("deadline exceeded before upstream {op} was sent")]
    DeadlineExceeded {
        /// The operation.
        op: Operation,
    },
    /// The upstream (or the 3D channel) already has as many requests in
    /// flight as its bulkhead allows: nothing was sent, and nothing queued.
    #[error("upstream {op} is at its concurrency limit; nothing was sent")]
    Saturated {
        /// The operation.
        op: Operation,
    },
    /// The upstream body exceeded the configured bound.
    #[error("upstream {op} sent a body over {limit} bytes")]
    Oversize {
        /// The operation.
        op: Operation,
        /// The bound, in bytes.
        limit: usize,
    },
}

impl UpstreamError {
    /// The operation that failed.
    pub fn operation(&self) -> Operation {
        match self {
            UpstreamError::Status { op, .. }
            | UpstreamError::Connect { op }
            | UpstreamError::Timeout { op }
            | UpstreamError::Transport { op }
            | UpstreamError::Malformed { op, .. }
            | UpstreamError::Oversize { op, .. }
            | UpstreamError::Saturated { op }
            | UpstreamError::DeadlineExceeded { op } => *op,
        }
    }

    /// A short class for metrics and channel health (`timeout`, `connect`,
    /// `http_5xx`, ...).
    pub fn class(&self) -> &'static str {
        match self {
            UpstreamError::Status { status, .. } if *status >= 500 => "http_5xx",
            UpstreamError::Status { .. } => "http_4xx",
            UpstreamError::Connect { .. } => "connect",
            UpstreamError::Timeout { .. } => "timeout",
            UpstreamError::Transport { .. } => "transport",
            UpstreamError::Malformed { .. } => "malformed",
            UpstreamError::Oversize { .. } => "oversize",
            UpstreamError::DeadlineExceeded { .. } => "deadline",
            UpstreamError::Saturated { .. } => "saturated",
        }
    }

    /// True when the failure says the upstream is unhealthy (as opposed to
    /// rejecting this request): what circuit breakers and failover count.
    pub fn is_upstream_fault(&self) -> bool {
        match self {
            UpstreamError::Status { status, .. } => *status >= 500,
            UpstreamError::Connect { .. }
            | UpstreamError::Timeout { .. }
            | UpstreamError::Transport { .. }
            | UpstreamError::Malformed { .. }
            | UpstreamError::Oversize { .. } => true,
            // The caller ran out of time, or this gateway's own bulkhead
            // refused: the upstream did nothing wrong.
            UpstreamError::DeadlineExceeded { .. } | UpstreamError::Saturated { .. } => false,
        }
    }

    /// True when the same request may succeed if sent again soon: the
    /// connection failed, timed out or broke, or the upstream said it is
    /// briefly unavailable (502-504). Whether it may be sent again is the
    /// operation's business ([`Operation::consumes_appkey`]).
    pub fn is_transient(&self) -> bool {
        match self {
            UpstreamError::Connect { .. }
            | UpstreamError::Timeout { .. }
            | UpstreamError::Transport { .. } => true,
            UpstreamError::Status { status, .. } => matches!(status, 502..=504),
            UpstreamError::Malformed { .. }
            | UpstreamError::Oversize { .. }
            | UpstreamError::Saturated { .. }
            | UpstreamError::DeadlineExceeded { .. } => false,
        }
    }

    /// True when the request certainly never reached the upstream.
    pub fn request_not_sent(&self) -> bool {
        matches!(
            self,
            UpstreamError::Connect { .. }
                | UpstreamError::DeadlineExceeded { .. }
                | UpstreamError::Saturated { .. }
        )
    }

    /// True when a call that consumes the appkey may or may not have taken
    /// effect: the caller must not assume either.
    pub fn outcome_unknown(&self) -> bool {
        if !self.operation().outcome_matters_to_caller() {
            return false;
        }
        match self {
            UpstreamError::Status { status, .. } => *status >= 500,
            UpstreamError::Connect { .. }
            | UpstreamError::DeadlineExceeded { .. }
            | UpstreamError::Saturated { .. } => false,
            UpstreamError::Timeout { .. }
            | UpstreamError::Transport { .. }
            | UpstreamError::Malformed { .. }
            | UpstreamError::Oversize { .. } => true,
        }
    }
}

/// The client could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    /// A configured URL does not parse.
    #[error("upstream.{key} is not a valid URL")]
    InvalidUrl {
        /// The configuration key.
        key: &'static str,
    },
    /// The HTTP client could not be built (the TLS trust store).
    #[error("cannot build the upstream HTTP client: {0}")]
    Tls(#[source] rustls::Error),
}
