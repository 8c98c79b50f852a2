//! The `ErrorInfo.reason` names: stable, `UPPER_SNAKE`, one per row of
//! the error table.

/// Declares [`Reason`] from one list: each variant with its wire string,
/// [`Reason::as_str`] and [`Reason::ALL`] (every variant, in the order of
/// the list) generated from it, so a new variant is in `ALL`, and so
/// before the guard of the error table (tests/it/gateway/reasons/), the
/// moment it is written.
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal,)+) => {
        /// The `ErrorInfo.reason` of an error: a stable name a caller may
        /// branch on, compared as this enum inside the crate and sent as
        /// its string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)+
        }

        impl Reason {
            /// Every reason, in the order of the error table.
            pub const ALL: [Reason; [$($wire),+].len()] = [$(Reason::$variant),+];

            /// The wire form (`UPPER_SNAKE`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $wire,)+
                }
            }
        }
    };
}

reasons! {
    /// The request is invalid; `BadRequest` names the fields.
    InvalidRequest => "INVALID_REQUEST",
    /// A 3D verification this gateway cannot route.
    SessionUnknown => "SESSION_UNKNOWN",
    /// A channel name that is not configured.
    ChannelUnknown => "CHANNEL_UNKNOWN",
    /// The named channel did not issue the session.
    ChannelMismatch => "CHANNEL_MISMATCH",
    /// Every 3D channel was drained, open or failed.
    NoChannelAvailable => "NO_CHANNEL_AVAILABLE",
    /// An operator profile that is not configured.
    OperatorProfileUnknown => "OPERATOR_PROFILE_UNKNOWN",
    /// A journey reference this gateway did not issue.
    JourneyUnknown => "JOURNEY_UNKNOWN",
    /// The admin bearer token is missing or wrong.
    AdminTokenInvalid => "ADMIN_TOKEN_INVALID",
    /// The caller's deadline passed first.
    DeadlineExceeded => "DEADLINE_EXCEEDED",
    /// A fault inside the gateway.
    Internal => "INTERNAL",
    /// Too many watchers.
    WatchLimitReached => "WATCH_LIMIT_REACHED",
    /// The result still said processing after the notice.
    ResultNotSettled => "RESULT_NOT_SETTLED",
    /// A `WatchJourney` stream reached `[watch] max_stream_secs`; watch
    /// again to go on.
    WatchLifetimeReached => "WATCH_LIFETIME_REACHED",
    /// A `WatchJourney` stream's connection reached
    /// `[serving] max_connection_age_secs`; watch again to go on.
    ConnectionAged => "CONNECTION_AGED",
    /// The gateway is shutting down.
    ShuttingDown => "SHUTTING_DOWN",
    /// The fleet's shared state (Redis) is unreachable; the admin change
    /// was applied nowhere.
    ClusterUnavailable => "CLUSTER_UNAVAILABLE",
    /// The request's bytes are not a valid protobuf message.
    MalformedRequest => "MALFORMED_REQUEST",
    /// A message over `max_grpc_message_bytes`.
    MessageTooLarge => "MESSAGE_TOO_LARGE",
    /// A concurrency limit of the gateway is reached; retry after the delay.
    Overloaded => "OVERLOADED",
    /// The request body did not arrive in time.
    RequestBodyTimeout => "REQUEST_BODY_TIMEOUT",
    /// A call that consumes the appkey failed ambiguously; not retried.
    OutcomeUnknown => "OUTCOME_UNKNOWN",
    /// `/document` found no usable document.
    DocumentUnusable => "DOCUMENT_UNUSABLE",
    /// The service answered 400.
    UpstreamRejectedRequest => "UPSTREAM_REJECTED_REQUEST",
    /// The service refused the operator's login or credential.
    OperatorCredentialsRejected => "OPERATOR_CREDENTIALS_REJECTED",
    /// 401 on the digital licence: an expired appkey or a licence out of pattern.
    AppkeyExpiredOrLicenceRejected => "APPKEY_EXPIRED_OR_LICENCE_REJECTED",
    /// The appkey is expired, finished or unknown.
    AppkeyExpired => "APPKEY_EXPIRED",
    /// The service answered 403.
    UpstreamPermissionDenied => "UPSTREAM_PERMISSION_DENIED",
    /// The service answered 404.
    ResultNotAvailable => "RESULT_NOT_AVAILABLE",
    /// The service answered 409.
    UpstreamConflict => "UPSTREAM_CONFLICT",
    /// The service answered 429.
    UpstreamRateLimited => "UPSTREAM_RATE_LIMITED",
    /// The service could not be reached, or answered 502-504.
    UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
    /// The service answered another 5xx.
    UpstreamInternal => "UPSTREAM_INTERNAL",
    /// The service answered a status the contract does not use.
    UpstreamUnexpectedStatus => "UPSTREAM_UNEXPECTED_STATUS",
    /// The service did not answer in time.
    UpstreamTimeout => "UPSTREAM_TIMEOUT",
    /// The service's answer could not be read.
    UpstreamMalformedResponse => "UPSTREAM_MALFORMED_RESPONSE",
    /// The service's answer exceeded `max_response_bytes`.
    UpstreamResponseTooLarge => "UPSTREAM_RESPONSE_TOO_LARGE",
    /// A `request_id` already used with a different request.
    RequestIdReused => "REQUEST_ID_REUSED",
    /// The call with the same `request_id` this one waited for did not
    /// complete; nothing was created for this call.
    ConcurrentCallFailed => "CONCURRENT_CALL_FAILED",
    /// A `[[budgets]]` limit of the operator profile is spent; retry after
    /// the delay, when the window reopens.
    BudgetExceeded => "BUDGET_EXCEEDED",
    /// No caller credential, or an invalid one (public listener).
    CallerUnauthenticated => "CALLER_UNAUTHENTICATED",
    /// A valid identity that no `[[callers]]` entry names.
    CallerUnknown => "CALLER_UNKNOWN",
    /// The caller's policy does not grant the operation.
    OperationNotAllowed => "OPERATION_NOT_ALLOWED",
    /// The caller's policy does not grant the operator profile.
    ProfileNotAllowed => "PROFILE_NOT_ALLOWED",
    /// A configuration reload removed the caller of an open `WatchJourney`
    /// stream, took `watch` from it, or narrowed its journeys away from
    /// the watched one: the stream ends (`cause` in the metadata).
    CallerRevoked => "CALLER_REVOKED",
    /// The journey was created by another caller and the caller's policy
    /// is `journeys = "own"`.
    JourneyNotOwned => "JOURNEY_NOT_OWNED",
    /// The caller has as many calls or `WatchJourney` streams in flight as
    /// its `[[callers]]` limits allow; retry after the delay.
    CallerLimitReached => "CALLER_LIMIT_REACHED",
    /// The vendor issued an appkey it had already issued for a journey
    /// this gateway holds; the journey stays its first creator's.
    AppkeyRepeated => "APPKEY_REPEATED",
    /// A rollout is already running, or none is running to abort.
    RolloutConflict => "ROLLOUT_CONFLICT",
    /// The channel failed its last conformance probe; pass `force`.
    ChannelNotConforming => "CHANNEL_NOT_CONFORMING",
    /// `ProbeChannel` needs `[probe] persons`, which the gateway's
    /// configuration lacks.
    ProbeNotConfigured => "PROBE_NOT_CONFIGURED",
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
