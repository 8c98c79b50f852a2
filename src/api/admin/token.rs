//! The admin token check: an interceptor in front of every handler of
//! `ChannelAdminService`, so that no handler can forget it. The
//! comparison is constant-time over SHA-256 digests (`secrets_match`), so
//! neither the content nor the length of the expected token leaks through
//! timing.

use tonic::{Request, Status, service::Interceptor};

use super::ChannelAdmin;
use crate::{
    Error,
    domain::{AdminToken, authorization_credentials, secrets_match},
    proto::services::ChannelAdminServiceServer,
    telemetry::trust_baggage,
};

/// The interceptor that admits only `authorization: Bearer <token>`.
#[derive(Clone)]
pub struct AdminAuth {
    token: AdminToken,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth(<redacted>)")
    }
}

/// An interceptor checking the admin bearer token in constant time and
/// refusing with `UNAUTHENTICATED` (`ADMIN_TOKEN_INVALID`).
pub fn admin_auth_interceptor(token: &AdminToken) -> AdminAuth {
    AdminAuth {
        token: token.clone(),
    }
}

impl Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let ok = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| authorization_credentials(v, "bearer"))
            .is_some_and(|t| secrets_match(t, self.token.expose()));
        if ok {
            trust_baggage(request.extensions());
            Ok(request)
        } else {
            tracing::warn!("admin call refused: missing or invalid bearer token");
            Err(Error::AdminUnauthenticated.into())
        }
    }
}

/// The admin service type the lead serves on the admin listener.
pub type AdminServer = tonic::service::interceptor::InterceptedService<
    ChannelAdminServiceServer<ChannelAdmin>,
    AdminAuth,
>;

/// `ChannelAdminService` with the handlers of `admin`, behind the
/// bearer-token interceptor.
pub fn admin_service(admin: ChannelAdmin, token: &AdminToken) -> AdminServer {
    ChannelAdminServiceServer::with_interceptor(admin, admin_auth_interceptor(token))
}
