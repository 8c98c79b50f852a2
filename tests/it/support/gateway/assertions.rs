//! The details of a refused call's status: its `ErrorInfo` reason and
//! domain, the fields its `BadRequest` names, and whether it is retryable.

use tonic_types::StatusExt;

/// The `ErrorInfo.reason` of a status.
pub fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default()
}

/// The fields named by a status's `BadRequest`.
pub fn bad_fields(status: &tonic::Status) -> Vec<String> {
    status
        .get_details_bad_request()
        .map(|b| b.field_violations.into_iter().map(|v| v.field).collect())
        .unwrap_or_default()
}

/// True when the status carries a `RetryInfo`.
pub fn retryable(status: &tonic::Status) -> bool {
    status.get_details_retry_info().is_some()
}

/// Asserts `status` has `code` and `ErrorInfo.reason` `reason`.
#[track_caller]
pub fn assert_error(status: &tonic::Status, code: tonic::Code, reason_: &str) {
    assert_eq!(
        (status.code(), reason(status).as_str()),
        (code, reason_),
        "unexpected status: {status:?}"
    );
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.domain, "idgate");
}
