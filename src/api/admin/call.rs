//! What every admin handler holds, and its two ends, as on the public
//! listener ([`crate::api::Admitted`]): [`AdminCall::open`] opens the
//! call's audit record (the operation, the admin token's holder, the
//! channel the request names when it is a configured one, never whatever
//! else was sent) and [`AdminCall::finish`] writes it with the outcome
//! and converts a refusal to a `Status`, once, here.
//!
//! ```text
//! let call = self.open(&request, OPERATION, channel);
//! let result = self.inner_x(request.into_inner()).await;   // Result<_, Refusal>
//! call.finish(result)
//! ```

use tonic::{Response, Status};

use super::convert::to_status;
use crate::{
    Error,
    telemetry::audit::{AuditRecord, trace_id},
};

/// An admin call refused: the crate's error, and the request field it is
/// reported against when one is to blame (its `BadRequest` names it).
#[derive(Debug)]
pub(super) struct Refusal {
    field: Option<String>,
    error: Error,
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Self { field: None, error }
    }
}

/// Reports an error against a request field.
pub(super) trait At<T> {
    /// The error, reported against `field`.
    fn at(self, field: &str) -> Result<T, Refusal>;
}

impl<T> At<T> for Result<T, Error> {
    fn at(self, field: &str) -> Result<T, Refusal> {
        self.map_err(|error| Refusal {
            field: Some(field.to_owned()),
            error,
        })
    }
}

/// An admin call under way: its audit record, written once.
pub(super) struct AdminCall {
    audit: AuditRecord,
}

impl AdminCall {
    /// Opens the record of `operation` on the request with `extensions`,
    /// naming `channel` (empty: none, or not a configured one).
    pub(super) fn open(
        extensions: &http::Extensions,
        operation: &'static str,
        channel: &str,
    ) -> Self {
        Self {
            audit: AuditRecord::admin(operation, channel, trace_id(extensions)),
        }
    }

    /// Writes the record with the outcome of `result` and converts it.
    pub(super) fn finish<T>(self, result: Result<T, Refusal>) -> Result<Response<T>, Status> {
        match result {
            Ok(message) => {
                self.audit.finish("ok");
                Ok(Response::new(message))
            }
            Err(Refusal { field, error }) => {
                self.audit.finish(error.reason().as_str());
                Err(match field {
                    Some(field) => to_status(&field, error),
                    None => error.into(),
                })
            }
        }
    }
}
