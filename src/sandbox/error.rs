//! Errors: starting or controlling the sandbox ([`SandboxError`]) and the
//! HTTP rejections of the REST operations ([`Reject`]).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why the sandbox could not start, or refused a control request.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A listener could not be bound (or its address is not `host:port`).
    #[error("cannot bind the {listener} listener")]
    Bind {
        /// Which listener (`core`, `result`, `channel <name>`).
        listener: String,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is inconsistent.
    #[error("invalid sandbox configuration: {0}")]
    Config(&'static str),
    /// A fault rule names an unknown operation or channel, or lacks a field.
    #[error("invalid fault rule: {0}")]
    InvalidFault(&'static str),
    /// A channel name that is not configured.
    #[error("unknown channel")]
    UnknownChannel,
    /// The webhook HTTP client could not be built.
    #[error("cannot build the webhook client")]
    WebhookClient(#[source] reqwest::Error),
}

/// A refused REST call: a status code and a fixed message.
///
/// Messages are static strings on purpose: an error body never echoes an
/// input value (appkeys, CPFs and images are secrets or personal data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reject {
    pub(crate) status: StatusCode,
    pub(crate) message: &'static str,
}

impl Reject {
    pub(crate) const fn new(status: StatusCode, message: &'static str) -> Self {
        Self { status, message }
    }

    /// 400: malformed request or data not correctly informed.
    pub(crate) const fn bad_request(message: &'static str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 401: not authorised, expired, or (for `/document`) data outside the
    /// expected pattern.
    pub(crate) const fn unauthorized(message: &'static str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404: appkey not found or liveness proof not performed.
    pub(crate) const fn not_found(message: &'static str) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 500: internal error.
    pub(crate) const fn internal(message: &'static str) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        message_response(self.status, self.message)
    }
}

/// The sandbox's error body: `{"message": "..."}`.
pub(crate) fn message_response(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "message": message }))).into_response()
}
