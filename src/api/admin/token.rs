//! The admin token check: an interceptor in front of every handler of
//! `ChannelAdminService`, so that no handler can forget it. The
//! comparison is constant-time over SHA-256 digests (`secrets_match`), so
//! neither the content nor the length of the expected token leaks through
//! timing. Refusals are counted by cause and logged at most once per
//! interval; the caller's baggage is trusted only once the token matched.

use std::sync::Arc;

use tonic::{Request, Status, service::Interceptor};

use super::ChannelAdmin;
use crate::{
    Error,
    domain::{AdminToken, authorization_credentials, secrets_match},
    proto::services::ChannelAdminServiceServer,
    telemetry::{Metrics, audit::RefusalLog, trust_baggage},
};

/// The interceptor that admits only `authorization: Bearer <token>`.
/// Clones share their refusal count and log line.
#[derive(Clone)]
pub struct AdminAuth {
    token: AdminToken,
    refusals: Arc<Refusals>,
}

/// How refused calls are told: counted by cause (when the gateway's
/// metrics are given), and said at most once per 10 s with the count
/// since (`listener="admin"`), never a line each: a client hammering the
/// admin port cannot flood the log.
struct Refusals {
    metrics: Option<Metrics>,
    log: RefusalLog,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth(<redacted>)")
    }
}

/// An interceptor checking the admin bearer token in constant time and
/// refusing with `UNAUTHENTICATED` (`ADMIN_TOKEN_INVALID`); its refusals
/// are logged, throttled, and counted nowhere (see [`AdminAuth::counted`]).
pub fn admin_auth_interceptor(token: &AdminToken) -> AdminAuth {
    AdminAuth {
        token: token.clone(),
        refusals: Arc::new(Refusals {
            metrics: None,
            log: RefusalLog::on("admin"),
        }),
    }
}

impl AdminAuth {
    /// The same check, its refusals counted in `metrics`
    /// (`idgate_admin_refusals_total{cause}`).
    pub fn counted(self, metrics: Metrics) -> Self {
        Self {
            token: self.token,
            refusals: Arc::new(Refusals {
                metrics: Some(metrics),
                log: RefusalLog::on("admin"),
            }),
        }
    }

    /// Why `request` is refused (a fixed word, one of
    /// `ADMIN_REFUSAL_CAUSES`), or `None` when it carries the token.
    fn refusal(&self, request: &Request<()>) -> Option<&'static str> {
        let Some(header) = request.metadata().get("authorization") else {
            return Some("no_credential");
        };
        let Some(presented) = header
            .to_str()
            .ok()
            .and_then(|v| authorization_credentials(v, "bearer"))
        else {
            return Some("malformed");
        };
        (!secrets_match(presented, self.token.expose())).then_some("wrong_token")
    }
}

impl Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match self.refusal(&request) {
            None => {
                trust_baggage(request.extensions());
                Ok(request)
            }
            Some(cause) => {
                if let Some(metrics) = &self.refusals.metrics {
                    metrics.record_admin_refusal(cause);
                }
                self.refusals.log.refused(cause);
                Err(Error::AdminUnauthenticated.into())
            }
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
