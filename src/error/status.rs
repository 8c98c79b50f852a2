//! Every `tonic::Status` the gateway sends, with its `google.rpc`
//! details (AIP-193): `ErrorInfo` always, `BadRequest` for the fields at
//! fault, `RetryInfo` only when a retry is safe.

use tonic_types::{ErrorDetails, StatusExt};

use super::{ERROR_DOMAIN, Error, Reason};
use crate::upstream::UpstreamError;

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        status(err, None)
    }
}

impl Error {
    /// This error as a `Status` for a request whose field `field` caused
    /// it: an unknown channel also gets a `BadRequest` violation naming
    /// `field` (the admin API's `SetRoutingMode`, `DrainChannel`, ...).
    pub fn into_status_at(self, field: &str) -> tonic::Status {
        status(self, Some(field))
    }
}

/// The `Status` of `err` with its details; `field` names the request
/// field that caused it, when the caller knows.
fn status(err: Error, field: Option<&str>) -> tonic::Status {
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
            if let Some(field) = field {
                details.add_bad_request_violation(field, err.to_string());
            }
            metadata.insert("channel".to_owned(), name.clone());
        }
        Error::ChannelNotConforming(name) => {
            if let Some(field) = field {
                details.add_bad_request_violation(field, err.to_string());
            }
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
        Error::ProbeNotConfigured => {
            details.add_precondition_failure_violation(
                "CONFIGURATION",
                "[probe] persons",
                "no probe persons are configured",
            );
        }
        Error::CallerShareSpent { key, share, .. } => {
            metadata.insert("key".to_owned(), (*key).to_owned());
            metadata.insert("share".to_owned(), share.to_string());
        }
        Error::OperationNotAllowed(permission) => {
            metadata.insert("operation".to_owned(), permission.as_str().to_owned());
        }
        Error::CallerRevoked(why) => {
            metadata.insert("cause".to_owned(), why.as_str().to_owned());
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
