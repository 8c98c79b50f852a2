//! The crate's error type and its mapping to `tonic::Status` with
//! `google.rpc` details (AIP-193).
//!
//! Every message here is written for a caller and is free of secrets and
//! personal data by construction: variants carry field names, operation
//! names, channel names and status codes, never values.

use std::time::Duration;

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use crate::{domain::Operation, upstream::UpstreamError};

/// The `ErrorInfo.domain` of every idgate error.
pub use crate::proto::codec::ERROR_DOMAIN;

/// How long a caller should wait before retrying a retry-safe failure.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// The `ErrorInfo.reason` of an error: a stable name a caller may branch
/// on, compared as this enum inside the crate and sent as its string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The request is invalid; `BadRequest` names the fields.
    InvalidRequest,
    /// A 3D verification this gateway cannot route.
    SessionUnknown,
    /// A channel name that is not configured.
    ChannelUnknown,
    /// The named channel did not issue the session.
    ChannelMismatch,
    /// Every 3D channel was drained, open or failed.
    NoChannelAvailable,
    /// An operator profile that is not configured.
    OperatorProfileUnknown,
    /// A journey reference this gateway did not issue.
    JourneyUnknown,
    /// The admin bearer token is missing or wrong.
    AdminTokenInvalid,
    /// The caller's deadline passed first.
    DeadlineExceeded,
    /// A fault inside the gateway.
    Internal,
    /// Too many watchers.
    WatchLimitReached,
    /// The result still said processing after the notice.
    ResultNotSettled,
    /// The gateway is shutting down.
    ShuttingDown,
    /// The fleet's shared state (Redis) is unreachable; the admin change
    /// was applied nowhere.
    ClusterUnavailable,
    /// The request's bytes are not a valid protobuf message.
    MalformedRequest,
    /// A message over `max_grpc_message_bytes`.
    MessageTooLarge,
    /// A concurrency limit of the gateway is reached; retry after the delay.
    Overloaded,
    /// The request body did not arrive in time.
    RequestBodyTimeout,
    /// A call that consumes the appkey failed ambiguously; not retried.
    OutcomeUnknown,
    /// `/document` found no usable document.
    DocumentUnusable,
    /// The service answered 400.
    UpstreamRejectedRequest,
    /// The service refused the operator's login or credential.
    OperatorCredentialsRejected,
    /// 401 on the digital licence: an expired appkey or a licence out of pattern.
    AppkeyExpiredOrLicenceRejected,
    /// The appkey is expired, finished or unknown.
    AppkeyExpired,
    /// The service answered 403.
    UpstreamPermissionDenied,
    /// The service answered 404.
    ResultNotAvailable,
    /// The service answered 409.
    UpstreamConflict,
    /// The service answered 429.
    UpstreamRateLimited,
    /// The service could not be reached, or answered 502-504.
    UpstreamUnavailable,
    /// The service answered another 5xx.
    UpstreamInternal,
    /// The service answered a status the contract does not use.
    UpstreamUnexpectedStatus,
    /// The service did not answer in time.
    UpstreamTimeout,
    /// The service's answer could not be read.
    UpstreamMalformedResponse,
    /// The service's answer exceeded `max_response_bytes`.
    UpstreamResponseTooLarge,
    /// A `request_id` already used with a different request.
    RequestIdReused,
    /// The call with the same `request_id` this one waited for did not
    /// complete; nothing was created for this call.
    ConcurrentCallFailed,
    /// A `[[budgets]]` limit of the operator profile is spent; retry after
    /// the delay, when the window reopens.
    BudgetExceeded,
}

impl Reason {
    /// Every reason, in the order of the error table.
    pub const ALL: [Reason; 37] = [
        Reason::InvalidRequest,
        Reason::SessionUnknown,
        Reason::ChannelUnknown,
        Reason::ChannelMismatch,
        Reason::NoChannelAvailable,
        Reason::OperatorProfileUnknown,
        Reason::JourneyUnknown,
        Reason::AdminTokenInvalid,
        Reason::DeadlineExceeded,
        Reason::Internal,
        Reason::WatchLimitReached,
        Reason::ResultNotSettled,
        Reason::ShuttingDown,
        Reason::ClusterUnavailable,
        Reason::MalformedRequest,
        Reason::MessageTooLarge,
        Reason::Overloaded,
        Reason::RequestBodyTimeout,
        Reason::OutcomeUnknown,
        Reason::DocumentUnusable,
        Reason::UpstreamRejectedRequest,
        Reason::OperatorCredentialsRejected,
        Reason::AppkeyExpiredOrLicenceRejected,
        Reason::AppkeyExpired,
        Reason::UpstreamPermissionDenied,
        Reason::ResultNotAvailable,
        Reason::UpstreamConflict,
        Reason::UpstreamRateLimited,
        Reason::UpstreamUnavailable,
        Reason::UpstreamInternal,
        Reason::UpstreamUnexpectedStatus,
        Reason::UpstreamTimeout,
        Reason::UpstreamMalformedResponse,
        Reason::UpstreamResponseTooLarge,
        Reason::RequestIdReused,
        Reason::ConcurrentCallFailed,
        Reason::BudgetExceeded,
    ];

    /// The wire form (`UPPER_SNAKE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidRequest => "INVALID_REQUEST",
            Reason::SessionUnknown => "SESSION_UNKNOWN",
            Reason::ChannelUnknown => "CHANNEL_UNKNOWN",
            Reason::ChannelMismatch => "CHANNEL_MISMATCH",
            Reason::NoChannelAvailable => "NO_CHANNEL_AVAILABLE",
            Reason::OperatorProfileUnknown => "OPERATOR_PROFILE_UNKNOWN",
            Reason::JourneyUnknown => "JOURNEY_UNKNOWN",
            Reason::AdminTokenInvalid => "ADMIN_TOKEN_INVALID",
            Reason::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Reason::Internal => "INTERNAL",
            Reason::WatchLimitReached => "WATCH_LIMIT_REACHED",
            Reason::ResultNotSettled => "RESULT_NOT_SETTLED",
            Reason::ShuttingDown => "SHUTTING_DOWN",
            Reason::ClusterUnavailable => "CLUSTER_UNAVAILABLE",
            Reason::MalformedRequest => "MALFORMED_REQUEST",
            Reason::MessageTooLarge => "MESSAGE_TOO_LARGE",
            Reason::Overloaded => "OVERLOADED",
            Reason::RequestBodyTimeout => "REQUEST_BODY_TIMEOUT",
            Reason::OutcomeUnknown => "OUTCOME_UNKNOWN",
            Reason::DocumentUnusable => "DOCUMENT_UNUSABLE",
            Reason::UpstreamRejectedRequest => "UPSTREAM_REJECTED_REQUEST",
            Reason::OperatorCredentialsRejected => "OPERATOR_CREDENTIALS_REJECTED",
            Reason::AppkeyExpiredOrLicenceRejected => "APPKEY_EXPIRED_OR_LICENCE_REJECTED",
            Reason::AppkeyExpired => "APPKEY_EXPIRED",
            Reason::UpstreamPermissionDenied => "UPSTREAM_PERMISSION_DENIED",
            Reason::ResultNotAvailable => "RESULT_NOT_AVAILABLE",
            Reason::UpstreamConflict => "UPSTREAM_CONFLICT",
            Reason::UpstreamRateLimited => "UPSTREAM_RATE_LIMITED",
            Reason::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
            Reason::UpstreamInternal => "UPSTREAM_INTERNAL",
            Reason::UpstreamUnexpectedStatus => "UPSTREAM_UNEXPECTED_STATUS",
            Reason::UpstreamTimeout => "UPSTREAM_TIMEOUT",
            Reason::UpstreamMalformedResponse => "UPSTREAM_MALFORMED_RESPONSE",
            Reason::UpstreamResponseTooLarge => "UPSTREAM_RESPONSE_TOO_LARGE",
            Reason::RequestIdReused => "REQUEST_ID_REUSED",
            Reason::ConcurrentCallFailed => "CONCURRENT_CALL_FAILED",
            Reason::BudgetExceeded => "BUDGET_EXCEEDED",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

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
    /// A fleet-wide change (routing mode, drain) could not reach the
    /// fleet's shared state; it was applied on no replica, so a retry is
    /// safe.
    #[error("the fleet's shared state is unavailable; the change was not applied on any replica")]
    ClusterUnavailable,
    /// A concurrency limit is reached (what: which one); nothing was
    /// queued or sent, so a retry after the delay is safe.
    #[error("the gateway is at its limit of {0}; retry later")]
    Overloaded(&'static str),
    /// A request message is over the configured size.
    #[error("the request message is over the {0} bytes this gateway accepts")]
    MessageTooLarge(usize),
    /// The request body did not arrive within the body timeout.
    #[error("the request body did not arrive within {0} ms")]
    RequestBodyTimeout(u64),
    /// The `request_id` of a `CreateJourney` was used before with a
    /// different request (AIP-155); nothing was created.
    #[error(
        "request_id was already used with a different request; use a new request_id for a new journey"
    )]
    RequestIdReused,
    /// Another call with the same `request_id` was in flight, and this one
    /// waited for it; it failed (or its replica vanished) without a
    /// journey. This call created nothing, so a retry with the same
    /// `request_id` is safe and makes its own attempt.
    #[error(
        "the call with the same request_id that this one waited for did not complete; retry with the same request_id"
    )]
    ConcurrentCallFailed,
    /// The fleet's shared state could not record the `request_id`, so
    /// idempotency could not be promised; nothing was created.
    #[error(
        "the fleet's shared state is unavailable, so the request_id cannot be honoured; nothing was created"
    )]
    IdempotencyUnavailable,
    /// A `[[budgets]]` limit is spent; refused before any upstream call.
    /// Carries configuration names only (profile, operation, window).
    #[error(
        "the {window} budget of `{operation}` for operator profile `{operator}` is spent; it reopens in {} s",
        whole_seconds(*.retry_after)
    )]
    BudgetExceeded {
        /// The operator profile.
        operator: String,
        /// The billed operation's configuration name.
        operation: &'static str,
        /// `minute` or `day`.
        window: &'static str,
        /// When the window reopens.
        retry_after: Duration,
    },
}

/// A delay in whole seconds, rounded up (a caller told "0 s" would retry
/// too early).
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
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
    pub fn classify(&self) -> (Code, Reason, bool) {
        match self {
            Error::InvalidArgument(_) => (Code::InvalidArgument, Reason::InvalidRequest, false),
            Error::Upstream(e) => classify_upstream(e),
            Error::SessionUnknown => (Code::FailedPrecondition, Reason::SessionUnknown, false),
            Error::ChannelUnknown(_) => (Code::InvalidArgument, Reason::ChannelUnknown, false),
            Error::ChannelMismatch { .. } => {
                (Code::FailedPrecondition, Reason::ChannelMismatch, false)
            }
            Error::NoChannelAvailable(_) => (Code::Unavailable, Reason::NoChannelAvailable, true),
            Error::OperatorProfileUnknown(_) => {
                (Code::InvalidArgument, Reason::OperatorProfileUnknown, false)
            }
            Error::JourneyUnknown => (Code::NotFound, Reason::JourneyUnknown, false),
            Error::AdminUnauthenticated => {
                (Code::Unauthenticated, Reason::AdminTokenInvalid, false)
            }
            Error::DeadlineExceeded(_) => (Code::DeadlineExceeded, Reason::DeadlineExceeded, false),
            Error::Internal(_) => (Code::Internal, Reason::Internal, false),
            Error::WatchLimit(_) => (Code::ResourceExhausted, Reason::WatchLimitReached, true),
            Error::ResultNotSettled(_) => (Code::Unavailable, Reason::ResultNotSettled, true),
            Error::ShuttingDown => (Code::Unavailable, Reason::ShuttingDown, true),
            Error::ClusterUnavailable => (Code::Unavailable, Reason::ClusterUnavailable, true),
            Error::Overloaded(_) => (Code::ResourceExhausted, Reason::Overloaded, true),
            Error::MessageTooLarge(_) => (Code::ResourceExhausted, Reason::MessageTooLarge, false),
            Error::RequestBodyTimeout(_) => {
                (Code::DeadlineExceeded, Reason::RequestBodyTimeout, false)
            }
            Error::RequestIdReused => (Code::InvalidArgument, Reason::RequestIdReused, false),
            Error::ConcurrentCallFailed => (Code::Aborted, Reason::ConcurrentCallFailed, true),
            Error::IdempotencyUnavailable => (Code::Unavailable, Reason::ClusterUnavailable, true),
            Error::BudgetExceeded { .. } => (Code::ResourceExhausted, Reason::BudgetExceeded, true),
        }
    }

    /// How long a caller should wait before retrying, when a retry is safe:
    /// until the budget window reopens, else one second.
    pub fn retry_delay(&self) -> Duration {
        match self {
            Error::BudgetExceeded { retry_after, .. } => *retry_after,
            _ => RETRY_DELAY,
        }
    }

    /// The `ErrorInfo.reason`.
    pub fn reason(&self) -> Reason {
        self.classify().1
    }
}

/// Upstream failure -> (code, reason, retry-safe), as `docs/upstream.md`
/// (Status codes) tells it: 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED,
/// 404 NOT_FOUND, 500 INTERNAL,
/// timeout DEADLINE_EXCEEDED, connect or 502/503/504 UNAVAILABLE; an
/// ambiguous failure of a call that consumes the appkey is OUTCOME_UNKNOWN.
fn classify_upstream(e: &UpstreamError) -> (Code, Reason, bool) {
    let op = e.operation();
    if e.outcome_unknown() {
        let code = match e {
            UpstreamError::Timeout { .. } => Code::DeadlineExceeded,
            _ => Code::Unknown,
        };
        return (code, Reason::OutcomeUnknown, false);
    }
    // Nothing consumed: a retry by the caller is safe for transient faults.
    let transient_retry = !op.outcome_matters_to_caller() || e.request_not_sent();
    match e {
        UpstreamError::Status { status, .. } => match *status {
            400 if matches!(op, Operation::DocumentImages) => {
                (Code::InvalidArgument, Reason::DocumentUnusable, false)
            }
            400 => (
                Code::InvalidArgument,
                Reason::UpstreamRejectedRequest,
                false,
            ),
            401 => match op {
                Operation::Credential | Operation::Appkey => (
                    Code::Unauthenticated,
                    Reason::OperatorCredentialsRejected,
                    false,
                ),
                Operation::DigitalLicence => (
                    Code::Unauthenticated,
                    Reason::AppkeyExpiredOrLicenceRejected,
                    false,
                ),
                _ => (Code::Unauthenticated, Reason::AppkeyExpired, false),
            },
            403 => (
                Code::PermissionDenied,
                Reason::UpstreamPermissionDenied,
                false,
            ),
            404 => (Code::NotFound, Reason::ResultNotAvailable, false),
            409 => (Code::Aborted, Reason::UpstreamConflict, false),
            429 => (
                Code::ResourceExhausted,
                Reason::UpstreamRateLimited,
                transient_retry,
            ),
            502..=504 => (
                Code::Unavailable,
                Reason::UpstreamUnavailable,
                transient_retry,
            ),
            s if s >= 500 => (Code::Internal, Reason::UpstreamInternal, false),
            _ => (Code::Internal, Reason::UpstreamUnexpectedStatus, false),
        },
        UpstreamError::Connect { .. } => (Code::Unavailable, Reason::UpstreamUnavailable, true),
        UpstreamError::Timeout { .. } => (
            Code::DeadlineExceeded,
            Reason::UpstreamTimeout,
            transient_retry,
        ),
        UpstreamError::Transport { .. } => (
            Code::Unavailable,
            Reason::UpstreamUnavailable,
            transient_retry,
        ),
        UpstreamError::Malformed { .. } => {
            (Code::Internal, Reason::UpstreamMalformedResponse, false)
        }
        UpstreamError::Oversize { .. } => (Code::Internal, Reason::UpstreamResponseTooLarge, false),
        UpstreamError::DeadlineExceeded { .. } => {
            (Code::DeadlineExceeded, Reason::DeadlineExceeded, false)
        }
        UpstreamError::Saturated { .. } => (Code::ResourceExhausted, Reason::Overloaded, true),
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
            Error::RequestIdReused => {
                details.add_bad_request_violation(
                    "request_id",
                    "already used with a different request; use a new request_id",
                );
            }
            Error::BudgetExceeded {
                operator,
                operation,
                window,
                ..
            } => {
                metadata.insert("operator_profile".to_owned(), operator.clone());
                metadata.insert("operation".to_owned(), (*operation).to_owned());
                metadata.insert("window".to_owned(), (*window).to_owned());
            }
            _ => {}
        }
        details.set_error_info(reason.as_str(), ERROR_DOMAIN, metadata);
        if retry_safe {
            details.set_retry_info(Some(err.retry_delay()));
        }
        let message = match &err {
            Error::Upstream(e) if reason == Reason::OutcomeUnknown => format!(
                "{e}; the {} may or may not have taken effect and was not retried",
                e.operation()
            ),
            Error::Upstream(e) if reason == Reason::AppkeyExpired => {
                format!("{e}: the appkey is expired, finished or unknown")
            }
            _ => err.to_string(),
        };
        tonic::Status::with_error_details(code, message, details)
    }
}
