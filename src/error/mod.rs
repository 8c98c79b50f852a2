//! The crate's error type and its mapping to `tonic::Status` with
//! `google.rpc` details (AIP-193).
//!
//! Every message here is written for a caller and is free of secrets and
//! personal data by construction: variants carry field names, operation
//! names, channel names and status codes, never values.
//!
//! # Layout
//!
//! - this file: [`Error`], what can fail;
//! - `reason`: [`Reason`], the stable `ErrorInfo.reason` names;
//! - `classify`: the one table from an error (an upstream failure
//!   included) to its gRPC code, reason and retry safety;
//! - `status`: every `tonic::Status` and its `google.rpc` details
//!   (`ErrorInfo`, `BadRequest`, `RetryInfo`), built in one place.

use std::time::Duration;

use crate::{
    domain::{Permission, Revocation},
    upstream::UpstreamError,
};

mod classify;
mod reason;
mod status;

pub use reason::Reason;

/// The `ErrorInfo.domain` of every idgate error.
pub use crate::proto::codec::ERROR_DOMAIN;

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
    /// A `WatchJourney` stream was open for `[watch] max_stream_secs` (the
    /// value); nothing is lost, so watching again at once is safe.
    #[error("the watch reached its longest lifetime of {0} s; watch the journey again to go on")]
    WatchLifetimeReached(u64),
    /// The stream's connection reached its maximum age
    /// (`[serving] max_connection_age_secs`) and was told to go away;
    /// nothing is lost, so watching again (on a new connection, which the
    /// client's channel opens) is safe.
    #[error(
        "the connection reached its maximum age and is going away; watch the journey again to go on"
    )]
    ConnectionAged,
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
    #[error("the request message is over the {0} bytes this method accepts")]
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
    /// The public listener found no caller credential, or an invalid one.
    /// Says nothing of which rule failed, nor any value of the credential.
    #[error("missing or invalid caller credential (a bearer token or a client certificate)")]
    CallerUnauthenticated,
    /// The credential is valid but no `[[callers]]` entry names its
    /// identity.
    #[error("the caller's identity is valid but is not a configured caller")]
    CallerUnknown,
    /// The caller's policy does not grant this operation.
    #[error("the caller may not call `{0}`")]
    OperationNotAllowed(Permission),
    /// A configuration reload removed the caller of an open
    /// `WatchJourney` stream, or narrowed its entry so that the stream is
    /// no longer allowed; the stream ends. Names no identity or journey.
    #[error("{}", revoked_message(*.0))]
    CallerRevoked(Revocation),
    /// The caller's policy does not grant the requested operator profile.
    #[error("the caller may not create journeys on the requested operator profile")]
    ProfileNotAllowed,
    /// The caller's policy (`journeys = "own"`) does not cover a journey
    /// another caller created. Names no journey, appkey or owner.
    #[error("the journey was created by another caller")]
    JourneyNotOwned,
    /// An appkey this gateway did not issue (not in its journey directory),
    /// refused before any vendor call or billing unless `[journeys]
    /// accept_foreign_appkeys` is set.
    #[error("this gateway did not issue the journey's appkey (or has forgotten it)")]
    AppkeyUnknown,
    /// The caller has as many calls or streams in flight as its
    /// `[[callers]]` limits allow (what: which one); nothing was started.
    #[error("the caller is at its limit of {0}; retry later")]
    CallerLimitReached(&'static str),
    /// The caller holds its whole share of a resource the process shares
    /// among its callers (what, the `[[callers]]` key, the share): this
    /// caller alone is refused, and the message names its share, never
    /// the process's bound.
    #[error("the caller holds its share of {what} ({share}, `[[callers]] {key}`); retry later")]
    CallerShareSpent {
        /// What is shared: "request bytes in flight", "live journeys".
        what: &'static str,
        /// The `[[callers]]` key that sets the share.
        key: &'static str,
        /// The caller's share.
        share: usize,
    },
    /// The vendor answered `/appkey` with an appkey of a journey this
    /// gateway already holds (the contract says each call issues a new
    /// one). The journey stays its first creator's; this call gets
    /// nothing, and is not retried (the vendor may have billed it).
    #[error(
        "the service issued an appkey it had already issued for another journey; nothing was handed out"
    )]
    AppkeyRepeated,
    /// A rollout is already running (start), or none is (abort).
    #[error("{0}")]
    RolloutConflict(&'static str),
    /// The channel failed its last conformance probe (`ProbeChannel`):
    /// it gets no weight unless the request forces it.
    #[error("channel `{0}` failed its last conformance probe; probe it again or force")]
    ChannelNotConforming(String),
    /// `ProbeChannel` on a gateway without probe persons: the
    /// configuration, not the request, is what is missing.
    #[error(
        "no probe persons are configured: add [probe] persons (test persons the vendor accepts) to the gateway's configuration"
    )]
    ProbeNotConfigured,
}

/// What a caller is told of a revocation: what changed, never whose.
fn revoked_message(why: Revocation) -> &'static str {
    match why {
        Revocation::Removed => {
            "a configuration reload removed this caller: its identity names no [[callers]] entry (or another one); the stream ends"
        }
        Revocation::Operation => {
            "a configuration reload took `watch` from this caller's operations; the stream ends"
        }
        Revocation::Journeys => {
            "a configuration reload narrowed this caller's journeys to its own, and this journey was created by another caller; the stream ends"
        }
    }
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
