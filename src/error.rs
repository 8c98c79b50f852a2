//! The crate's error type and its mapping to `tonic::Status` with
//! `google.rpc` details (AIP-193).
//!
//! Every message here is written for a caller and is free of secrets and
//! personal data by construction: variants carry field names, operation
//! names, channel names and status codes, never values.

use std::time::Duration;

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use crate::upstream::{Operation, UpstreamError};

/// The `ErrorInfo.domain` of every idgate error.
pub const ERROR_DOMAIN: &str = "idgate";

/// How long a caller should wait before retrying a retry-safe failure.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// One invalid request field: its path and what is wrong, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Path of the field in the request, e.g. `snapshots[2].image`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

impl FieldViolation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

/// Everything that can fail in the gateway.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is invalid; nothing was sent upstream.
    #[error("invalid request: {}", fields(.0))]
    InvalidArgument(Vec<FieldViolation>),
    /// An upstream REST call failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// A 3D verification names no channel and this gateway did not issue
    /// its session.
    #[error(
        "the 3D session is unknown to this gateway and the request names no channel; pass the channel returned by StartSession3D"
    )]
    SessionUnknown,
    /// A request or command names a channel that is not configured.
    #[error("channel `{0}` is not configured")]
    ChannelUnknown(String),
    /// A 3D verification names a channel other than the one this gateway
    /// saw issue the session; refused before anything is sent, because a
    /// verification on the wrong channel could finish the appkey.
    #[error(
        "the request names channel `{requested}` but the session was issued by channel `{issuing}`; omit the channel or pass the issuing one"
    )]
    ChannelMismatch {
        /// The channel the request names.
        requested: String,
        /// The channel that issued the session.
        issuing: String,
    },
    /// Every candidate channel was drained, open or failed.
    #[error("no 3D liveness channel could start a session ({0})")]
    NoChannelAvailable(String),
    /// The operator profile named in the request is not configured.
    #[error("operator profile `{0}` is not configured")]
    OperatorProfileUnknown(String),
    /// A journey reference that this gateway did not issue.
    #[error("journey reference unknown to this gateway; watch by appkey instead")]
    JourneyUnknown,
    /// The admin bearer token is missing or wrong.
    #[error("missing or invalid admin bearer token")]
    AdminUnauthenticated,
    /// The caller's deadline passed before the work was done.
    #[error("deadline exceeded before {0} completed")]
    DeadlineExceeded(&'static str),
    /// A fault inside the gateway.
    #[error("internal error: {0}")]
    Internal(String),
    /// A `WatchJourney` limit (watchers of one journey, or journeys watched
    /// at once) is reached; retry later.
    #[error("too many watchers: {0}")]
    WatchLimit(&'static str),
    /// The completion notice arrived but the result still said processing
    /// when the settle limit passed; reading the result later is safe.
    #[error(
        "the service reported the journey finished, but its result still said processing after {0} s; read it again later"
    )]
    ResultNotSettled(u64),
    /// The gateway is shutting down; the call may be retried on another
    /// instance or after the restart.
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

fn fields(v: &[FieldViolation]) -> String {
    v.iter()
        .map(|f| f.field.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Error {
    /// One invalid field.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Error::InvalidArgument(vec![FieldViolation::new(field, description)])
    }

    /// The gRPC code, the `ErrorInfo` reason and whether a retry is safe.
    pub fn classify(&self) -> (Code, &'static str, bool) {
        match self {
            Error::InvalidArgument(_) => (Code::InvalidArgument, "INVALID_REQUEST", false),
            Error::Upstream(e) => classify_upstream(e),
            Error::SessionUnknown => (Code::FailedPrecondition, "SESSION_UNKNOWN", false),
            Error::ChannelUnknown(_) => (Code::InvalidArgument, "CHANNEL_UNKNOWN", false),
            Error::ChannelMismatch { .. } => (Code::FailedPrecondition, "CHANNEL_MISMATCH", false),
            Error::NoChannelAvailable(_) => (Code::Unavailable, "NO_CHANNEL_AVAILABLE", true),
            Error::OperatorProfileUnknown(_) => {
                (Code::InvalidArgument, "OPERATOR_PROFILE_UNKNOWN", false)
            }
            Error::JourneyUnknown => (Code::NotFound, "JOURNEY_UNKNOWN", false),
            Error::AdminUnauthenticated => (Code::Unauthenticated, "ADMIN_TOKEN_INVALID", false),
            Error::DeadlineExceeded(_) => (Code::DeadlineExceeded, "DEADLINE_EXCEEDED", false),
            Error::Internal(_) => (Code::Internal, "INTERNAL", false),
            Error::WatchLimit(_) => (Code::ResourceExhausted, "WATCH_LIMIT_REACHED", true),
            Error::ResultNotSettled(_) => (Code::Unavailable, "RESULT_NOT_SETTLED", true),
            Error::ShuttingDown => (Code::Unavailable, "SHUTTING_DOWN", true),
        }
    }

    /// The `ErrorInfo.reason`.
    pub fn reason(&self) -> &'static str {
        self.classify().1
    }
}

/// Upstream failure -> (code, reason, retry-safe), per DESIGN.md: 400
/// INVALID_ARGUMENT, 401 UNAUTHENTICATED, 404 NOT_FOUND, 500 INTERNAL,
/// timeout DEADLINE_EXCEEDED, connect or 502/503/504 UNAVAILABLE; an
/// ambiguous failure of a call that consumes the appkey is OUTCOME_UNKNOWN.
fn classify_upstream(e: &UpstreamError) -> (Code, &'static str, bool) {
    let op = e.operation();
    if e.outcome_unknown() {
        let code = match e {
            UpstreamError::Timeout { .. } => Code::DeadlineExceeded,
            _ => Code::Unknown,
        };
        return (code, "OUTCOME_UNKNOWN", false);
    }
    // Nothing consumed: a retry by the caller is safe for transient faults.
    let transient_retry = !op.outcome_matters_to_caller() || e.request_not_sent();
    match e {
        UpstreamError::Status { status, .. } => match *status {
            400 if matches!(op, Operation::DocumentImages) => {
                (Code::InvalidArgument, "DOCUMENT_UNUSABLE", false)
            }
            400 => (Code::InvalidArgument, "UPSTREAM_REJECTED_REQUEST", false),
            401 => match op {
                Operation::Credential | Operation::Appkey => (
                    Code::Unauthenticated,
                    "OPERATOR_CREDENTIALS_REJECTED",
                    false,
                ),
                Operation::DigitalLicence => (
                    Code::Unauthenticated,
                    "APPKEY_EXPIRED_OR_LICENCE_REJECTED",
                    false,
                ),
                _ => (Code::Unauthenticated, "APPKEY_EXPIRED", false),
            },
            403 => (Code::PermissionDenied, "UPSTREAM_PERMISSION_DENIED", false),
            404 => (Code::NotFound, "RESULT_NOT_AVAILABLE", false),
            409 => (Code::Aborted, "UPSTREAM_CONFLICT", false),
            429 => (
                Code::ResourceExhausted,
                "UPSTREAM_RATE_LIMITED",
                transient_retry,
            ),
            502..=504 => (Code::Unavailable, "UPSTREAM_UNAVAILABLE", transient_retry),
            s if s >= 500 => (Code::Internal, "UPSTREAM_INTERNAL", false),
            _ => (Code::Internal, "UPSTREAM_UNEXPECTED_STATUS", false),
        },
        UpstreamError::Connect { .. } => (Code::Unavailable, "UPSTREAM_UNAVAILABLE", true),
        UpstreamError::Timeout { .. } => {
            (Code::DeadlineExceeded, "UPSTREAM_TIMEOUT", transient_retry)
        }
        UpstreamError::Transport { .. } => {
            (Code::Unavailable, "UPSTREAM_UNAVAILABLE", transient_retry)
        }
        UpstreamError::Malformed { .. } => (Code::Internal, "UPSTREAM_MALFORMED_RESPONSE", false),
        UpstreamError::Oversize { .. } => (Code::Internal, "UPSTREAM_RESPONSE_TOO_LARGE", false),
        UpstreamError::DeadlineExceeded { .. } => {
            (Code::DeadlineExceeded, "DEADLINE_EXCEEDED", false)
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let (code, reason, retry_safe) = err.classify();
        let mut details = ErrorDetails::new();
        let mut metadata = std::collections::HashMap::new();
        match &err {
            Error::InvalidArgument(violations) => {
                for v in violations {
                    details.add_bad_request_violation(v.field.clone(), v.description.clone());
                }
            }
            Error::Upstream(e) => {
                metadata.insert("operation".to_owned(), e.operation().as_str().to_owned());
                if let UpstreamError::Status { status, .. } = e {
                    metadata.insert("upstream_status".to_owned(), status.to_string());
                }
            }
            Error::ChannelUnknown(name) => {
                metadata.insert("channel".to_owned(), name.clone());
            }
            Error::ChannelMismatch { requested, issuing } => {
                metadata.insert("channel".to_owned(), requested.clone());
                metadata.insert("issuing_channel".to_owned(), issuing.clone());
            }
            _ => {}
        }
        details.set_error_info(reason, ERROR_DOMAIN, metadata);
        if retry_safe {
            details.set_retry_info(Some(RETRY_DELAY));
        }
        let message = match &err {
            Error::Upstream(e) if reason == "OUTCOME_UNKNOWN" => format!(
                "{e}; the {} may or may not have taken effect and was not retried",
                e.operation()
            ),
            Error::Upstream(e) if reason == "APPKEY_EXPIRED" => {
                format!("{e}: the appkey is expired, finished or unknown")
            }
            _ => err.to_string(),
        };
        tonic::Status::with_error_details(code, message, details)
    }
}
