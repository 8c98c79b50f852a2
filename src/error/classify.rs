//! The error table: each error, an upstream failure included, to its
//! gRPC code, its `ErrorInfo` reason and whether a retry is safe.

use tonic::Code;

use super::{Error, Reason};
use crate::{domain::Operation, upstream::UpstreamError};

impl Error {
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
            Error::WatchLifetimeReached(_) => {
                (Code::Unavailable, Reason::WatchLifetimeReached, true)
            }
            Error::ConnectionAged => (Code::Unavailable, Reason::ConnectionAged, true),
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
            Error::CallerUnauthenticated => {
                (Code::Unauthenticated, Reason::CallerUnauthenticated, false)
            }
            Error::CallerUnknown => (Code::PermissionDenied, Reason::CallerUnknown, false),
            Error::OperationNotAllowed(_) => {
                (Code::PermissionDenied, Reason::OperationNotAllowed, false)
            }
            Error::ProfileNotAllowed => (Code::PermissionDenied, Reason::ProfileNotAllowed, false),
            Error::CallerRevoked(_) => (Code::PermissionDenied, Reason::CallerRevoked, false),
            Error::JourneyNotOwned => (Code::PermissionDenied, Reason::JourneyNotOwned, false),
            Error::AppkeyUnknown => (Code::NotFound, Reason::JourneyUnknown, false),
            Error::CallerLimitReached(_) => {
                (Code::ResourceExhausted, Reason::CallerLimitReached, true)
            }
            Error::CallerShareSpent { .. } => {
                (Code::ResourceExhausted, Reason::CallerLimitReached, true)
            }
            Error::AppkeyRepeated => (Code::Internal, Reason::AppkeyRepeated, false),
            Error::RolloutConflict(_) => (Code::FailedPrecondition, Reason::RolloutConflict, false),
            Error::ChannelNotConforming(_) => (
                Code::FailedPrecondition,
                Reason::ChannelNotConforming,
                false,
            ),
            Error::ProbeNotConfigured => {
                (Code::FailedPrecondition, Reason::ProbeNotConfigured, false)
            }
        }
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
