//! Each RPC checked against its caller's policy (OWASP API1/API5: every
//! call is authorized, not only authenticated).
//!
//! The auth layer of the public listener puts the caller into the
//! request's extensions as `Arc<Caller>` (see [`crate::auth::AuthLayer`]);
//! [`caller_of`] takes it out for any handler. A request that did not pass
//! the layer has no caller and is refused: authorization fails closed.
//! Refusals here are counted with the layer's, through the [`Refusals`]
//! handle it leaves beside the caller.

use std::sync::Arc;

use tonic::Request;

use crate::{
    Error,
    auth::Refusals,
    domain::{Caller, Permission},
};

/// The caller of `request`, as the auth layer found it.
pub fn caller_of<T>(request: &Request<T>) -> Result<Arc<Caller>, Error> {
    request
        .extensions()
        .get::<Arc<Caller>>()
        .cloned()
        .ok_or(Error::CallerUnauthenticated)
}

/// The caller of `request`, if it may perform `permission`; else
/// `PERMISSION_DENIED`/`OPERATION_NOT_ALLOWED`.
pub fn authorize<T>(request: &Request<T>, permission: Permission) -> Result<Arc<Caller>, Error> {
    let caller = caller_of(request)?;
    if caller.may(permission) {
        return Ok(caller);
    }
    refused(
        request,
        &Error::OperationNotAllowed(permission),
        permission.as_str(),
    );
    Err(Error::OperationNotAllowed(permission))
}

/// Whether `caller` may create journeys on `profile` (`None`: the default
/// profile, named by `default_profile`); else
/// `PERMISSION_DENIED`/`PROFILE_NOT_ALLOWED`.
pub fn authorize_profile<T>(
    request: &Request<T>,
    caller: &Caller,
    profile: Option<&str>,
    default_profile: Option<&str>,
) -> Result<(), Error> {
    let allowed = profile
        .or(default_profile)
        .is_some_and(|p| caller.may_use_profile(p));
    if allowed {
        return Ok(());
    }
    refused(request, &Error::ProfileNotAllowed, "operator_profile");
    Err(Error::ProfileNotAllowed)
}

fn refused<T>(request: &Request<T>, error: &Error, cause: &'static str) {
    refused_in(request.extensions(), error, cause);
}

/// Counts a refusal of the request of `extensions` with the auth layer's.
pub(super) fn refused_in(extensions: &tonic::Extensions, error: &Error, cause: &'static str) {
    if let Some(refusals) = extensions.get::<Refusals>() {
        refusals.0.refused(error.reason().as_str(), cause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{CallerLimits, CallerName, JourneyScope, ProfileGrant, ResultView};

    fn request_of(caller: Option<Caller>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(c) = caller {
            r.extensions_mut().insert(Arc::new(c));
        }
        r
    }

    fn reader() -> Caller {
        Caller {
            name: CallerName::new("reader"),
            permissions: [Permission::ReadResult, Permission::CreateJourney]
                .into_iter()
                .collect(),
            profiles: ProfileGrant::Only(vec!["default".to_owned()].into()),
            journeys: JourneyScope::Own,
            result_view: ResultView::NoImages,
            limits: CallerLimits::default(),
        }
    }

    #[test]
    fn no_caller_is_refused() {
        let e = authorize(&request_of(None), Permission::Watch).unwrap_err();
        assert!(matches!(e, Error::CallerUnauthenticated));
    }

    #[test]
    fn an_operation_outside_the_policy_is_refused() {
        let r = request_of(Some(reader()));
        assert!(authorize(&r, Permission::ReadResult).is_ok());
        let e = authorize(&r, Permission::Watch).unwrap_err();
        assert_eq!(e.reason().as_str(), "OPERATION_NOT_ALLOWED");
        let status = tonic::Status::from(e);
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn profiles_are_checked_the_default_included() {
        let r = request_of(Some(reader()));
        let c = reader();
        assert!(authorize_profile(&r, &c, Some("default"), Some("default")).is_ok());
        assert!(authorize_profile(&r, &c, None, Some("default")).is_ok());
        let e = authorize_profile(&r, &c, Some("premium"), Some("default")).unwrap_err();
        assert_eq!(e.reason().as_str(), "PROFILE_NOT_ALLOWED");
        assert!(authorize_profile(&r, &c, None, Some("premium")).is_err());
        assert!(authorize_profile(&r, &Caller::open(), Some("x"), None).is_ok());
    }
}
