//! The `ErrorInfo.reason` names: stable, `UPPER_SNAKE`, one per row of
//! the error table.

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
    /// A `WatchJourney` stream reached `[watch] max_stream_secs`; watch
    /// again to go on.
    WatchLifetimeReached,
    /// A `WatchJourney` stream's connection reached
    /// `[serving] max_connection_age_secs`; watch again to go on.
    ConnectionAged,
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
    /// No caller credential, or an invalid one (public listener).
    CallerUnauthenticated,
    /// A valid identity that no `[[callers]]` entry names.
    CallerUnknown,
    /// The caller's policy does not grant the operation.
    OperationNotAllowed,
    /// The caller's policy does not grant the operator profile.
    ProfileNotAllowed,
    /// The journey was created by another caller and the caller's policy
    /// is `journeys = "own"`.
    JourneyNotOwned,
    /// The caller has as many calls or `WatchJourney` streams in flight as
    /// its `[[callers]]` limits allow; retry after the delay.
    CallerLimitReached,
    /// A rollout is already running, or none is running to abort.
    RolloutConflict,
    /// The channel failed its last conformance probe; pass `force`.
    ChannelNotConforming,
}

impl Reason {
    /// Every reason, in the order of the error table.
    pub const ALL: [Reason; 47] = [
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
        Reason::WatchLifetimeReached,
        Reason::ConnectionAged,
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
        Reason::CallerUnauthenticated,
        Reason::CallerUnknown,
        Reason::OperationNotAllowed,
        Reason::ProfileNotAllowed,
        Reason::JourneyNotOwned,
        Reason::CallerLimitReached,
        Reason::RolloutConflict,
        Reason::ChannelNotConforming,
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
            Reason::WatchLifetimeReached => "WATCH_LIFETIME_REACHED",
            Reason::ConnectionAged => "CONNECTION_AGED",
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
            Reason::CallerUnauthenticated => "CALLER_UNAUTHENTICATED",
            Reason::CallerUnknown => "CALLER_UNKNOWN",
            Reason::OperationNotAllowed => "OPERATION_NOT_ALLOWED",
            Reason::ProfileNotAllowed => "PROFILE_NOT_ALLOWED",
            Reason::JourneyNotOwned => "JOURNEY_NOT_OWNED",
            Reason::CallerLimitReached => "CALLER_LIMIT_REACHED",
            Reason::RolloutConflict => "ROLLOUT_CONFLICT",
            Reason::ChannelNotConforming => "CHANNEL_NOT_CONFORMING",
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
