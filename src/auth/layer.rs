//! Authentication of every call on the public gRPC listener.
//!
//! The [`Authenticator`] turns a request's credential into a caller: the
//! `authorization: Bearer` token when the mode accepts tokens and the call
//! carries one (a token that fails is refused, never passed over for the
//! certificate), else the verified client certificate when the mode
//! accepts mTLS. [`AuthLayer`] runs it before the handlers, inserts the
//! `Arc<Caller>` into the request's extensions, and answers a refusal at
//! once: `UNAUTHENTICATED`/`CALLER_UNAUTHENTICATED` or
//! `PERMISSION_DENIED`/`CALLER_UNKNOWN`. Health checks pass untouched, so
//! probes need no credential.
//!
//! Refusals cost little: a refused token is refused again from memory
//! (`jwt`), and a connection whose last [`MAX_REFUSALS_IN_A_ROW`] calls
//! were all refused is told to go away (HTTP/2 GOAWAY): its client must
//! open a new connection, a TCP and TLS handshake, to try again.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http::{HeaderMap, Request, Response, header::AUTHORIZATION};
use tonic::transport::server::TlsConnectInfo;
use tower::{Layer, Service};

use super::{
    AuthEvents, Refusals,
    config::{AuthConfig, AuthMode, CallerConfig},
    jwks::{Jwks, JwksError, Refresh},
    jwt::{JwtRefusal, JwtVerifier, Refused},
    mtls::{NoIdentity, identity_of},
    policy::{CallerTable, Identity, Policy},
};
use crate::{
    Error,
    config_source::ConfigError,
    domain::{Caller, authorization_credentials},
    net::ConnInfo,
    telemetry::{
        audit::{self, RefusalLog},
        trust_baggage,
    },
};

/// Paths never authenticated: health probes.
const OPEN_PREFIX: &str = "/grpc.health.v1.Health/";

/// Refused calls in a row after which a connection is told to go away.
pub const MAX_REFUSALS_IN_A_ROW: u32 = 20;

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credential, or an invalid one; the cause is a fixed word.
    Unauthenticated(&'static str),
    /// A valid identity that is no configured caller; the identity's kind
    /// (`jwt`, `mtls`), never its value.
    Unknown(&'static str),
}

impl Refusal {
    /// The crate error it is answered with.
    pub fn error(self) -> Error {
        match self {
            Refusal::Unauthenticated(_) => Error::CallerUnauthenticated,
            Refusal::Unknown(_) => Error::CallerUnknown,
        }
    }

    /// The metric's `cause` label.
    pub fn cause(self) -> &'static str {
        match self {
            Refusal::Unauthenticated(cause) => cause,
            Refusal::Unknown(_) => "no_caller_entry",
        }
    }
}

impl From<JwtRefusal> for Refusal {
    fn from(r: JwtRefusal) -> Self {
        Refusal::Unauthenticated(r.as_str())
    }
}

/// Why authentication could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The JWKS file could not be loaded.
    #[error(transparent)]
    Jwks(#[from] JwksError),
}

/// Credentials to callers, per the mode.
pub struct Authenticator {
    mode: AuthMode,
    jwt: Option<JwtVerifier>,
    policy: Policy,
    open: Arc<Caller>,
    events: Arc<dyn AuthEvents>,
    /// Unauthenticated refusals, said once per 10 s with their count.
    unauthenticated: RefusalLog,
}

impl Authenticator {
    /// Everything allowed: `[auth] mode = "none"` and the embedded sandbox.
    pub fn open(events: Arc<dyn AuthEvents>) -> Self {
        Self {
            mode: AuthMode::None,
            jwt: None,
            policy: Policy::default(),
            open: Arc::new(Caller::open()),
            events,
            unauthenticated: RefusalLog::on("grpc"),
        }
    }

    /// Sets up `[auth]` and `[[callers]]` (validated before): loads the
    /// JWKS, starts its background refresh, builds the caller table.
    pub async fn from_config(
        auth: &AuthConfig,
        callers: &[CallerConfig],
        events: Arc<dyn AuthEvents>,
    ) -> Result<Self, AuthSetupError> {
        if auth.mode == AuthMode::None {
            return Ok(Self::open(events));
        }
        let jwt = match (&auth.jwt, auth.mode.accepts_jwt()) {
            (Some(config), true) => {
                let refresh = Refresh {
                    every: std::time::Duration::from_secs(config.refresh_secs),
                    min_interval: std::time::Duration::from_secs(config.min_refresh_interval_secs),
                    timeout: std::time::Duration::from_millis(config.fetch_timeout_ms),
                };
                let jwks = Jwks::load(&config.location()?, refresh, Arc::clone(&events)).await?;
                jwks.spawn_refresh();
                Some(JwtVerifier::new(config, jwks))
            }
            _ => None,
        };
        Ok(Self {
            mode: auth.mode,
            jwt,
            policy: Policy::new(CallerTable::build(callers)?),
            open: Arc::new(Caller::open()),
            events,
            unauthenticated: RefusalLog::on("grpc"),
        })
    }

    /// What [`Authenticator::from_config`] reads and refuses, with no
    /// network call: the JWKS file parsed (a URL's client built, nothing
    /// fetched) and the caller table built. `Some` of the JWKS file's key
    /// count. For `idgate check`.
    pub fn check(
        auth: &AuthConfig,
        callers: &[CallerConfig],
    ) -> Result<Option<usize>, AuthSetupError> {
        if auth.mode == AuthMode::None {
            return Ok(None);
        }
        let keys = match (&auth.jwt, auth.mode.accepts_jwt()) {
            (Some(config), true) => Jwks::check(&config.location()?)?,
            _ => None,
        };
        CallerTable::build(callers)?;
        Ok(keys)
    }

    /// The mode.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Whether calls are authenticated at all.
    pub fn enabled(&self) -> bool {
        self.mode != AuthMode::None
    }

    /// The current caller table.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// SIGHUP: a new caller table, and the JWKS file read again (a URL is
    /// refreshed on its own). On any error the old table and keys stay.
    pub async fn reload(&self, callers: &[CallerConfig]) -> Result<(), AuthSetupError> {
        let table = CallerTable::build(callers)?;
        if let Some(jwks) = self.jwt.as_ref().map(JwtVerifier::jwks)
            && jwks.is_file()
        {
            jwks.reload().await?;
        }
        if self.enabled() {
            self.policy.replace(table);
        }
        Ok(())
    }

    /// The key source, if tokens are accepted.
    pub fn jwks(&self) -> Option<&Arc<Jwks>> {
        self.jwt.as_ref().map(JwtVerifier::jwks)
    }

    /// The caller of a request, from its headers and connection.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        extensions: &http::Extensions,
    ) -> Result<Arc<Caller>, Refusal> {
        if self.mode == AuthMode::None {
            return Ok(Arc::clone(&self.open));
        }
        let identity = match (&self.jwt, bearer(headers)) {
            (Some(verifier), Some(token)) => Identity::JwtSubject(
                verifier
                    .verify(token?)
                    .await
                    .map_err(|r| self.refused_token(r))?,
            ),
            _ if self.mode.accepts_mtls() => Identity::Mtls(
                peer_identity(extensions).map_err(|no| Refusal::Unauthenticated(no.as_str()))?,
            ),
            _ => return Err(Refusal::Unauthenticated("no_credential")),
        };
        let kind = match identity {
            Identity::JwtSubject(_) => "jwt",
            Identity::Mtls(_) => "mtls",
        };
        self.policy.resolve(&identity).ok_or(Refusal::Unknown(kind))
    }

    /// A refused token as a refusal; one refused from memory counted.
    fn refused_token(&self, refused: Refused) -> Refusal {
        if refused.remembered {
            self.events.refused_from_memory();
        }
        refused.refusal.into()
    }

    /// Counts a refusal on the connection of `extensions`, and tells the
    /// connection to go away when it is the last of a row too long.
    fn refused_on_connection(&self, extensions: &http::Extensions) {
        let Some(conn) = ConnInfo::of(extensions) else {
            return;
        };
        if conn.activity.refused() >= MAX_REFUSALS_IN_A_ROW && conn.age.go_away() {
            self.events.connection_closed_for_refusals();
            tracing::debug!(
                refused_in_a_row = MAX_REFUSALS_IN_A_ROW,
                "connection told to go away after refused calls"
            );
        }
    }

    /// Answers a refusal: counted; a valid identity that is no caller is
    /// one audit record (its kind, never its value); the unauthenticated
    /// are said once per interval with their count, never a line each.
    /// `operation`: the audit record's name of the call's RPC.
    fn refused(
        &self,
        refusal: Refusal,
        operation: &'static str,
        extensions: &http::Extensions,
    ) -> Response<tonic::body::Body> {
        let error = refusal.error();
        self.events
            .refused(error.reason().as_str(), refusal.cause());
        match refusal {
            Refusal::Unknown(kind) => {
                audit::refused_identity(kind, operation, &audit::trace_id(extensions));
            }
            Refusal::Unauthenticated(cause) => {
                self.unauthenticated.refused(cause);
            }
        }
        tonic::Status::from(error).into_http()
    }
}

/// The bearer token of `authorization`, if the header is there: `Err` for
/// a header that is not `Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<Result<&str, Refusal>> {
    let value = headers.get(AUTHORIZATION)?;
    let malformed = Refusal::Unauthenticated("malformed");
    let parsed = value
        .to_str()
        .ok()
        .and_then(|v| authorization_credentials(v, "bearer"))
        .filter(|token| !token.is_empty());
    Some(parsed.ok_or(malformed))
}

/// The identity of the connection's verified client certificate.
fn peer_identity(extensions: &http::Extensions) -> Result<super::mtls::MtlsIdentity, NoIdentity> {
    let certs = extensions
        .get::<TlsConnectInfo<ConnInfo>>()
        .and_then(TlsConnectInfo::peer_certs)
        .ok_or(NoIdentity::NoName)?;
    identity_of(certs.first().ok_or(NoIdentity::NoName)?)
}

/// The name an audit record gives the call to a path: the RPC table's
/// (`api::rpc::audit_operation`), handed in from above, since the table
/// lives with the API this module sits under.
pub type OperationOf = fn(&str) -> &'static str;

/// [`Authenticator`] as a tower layer for the public listener.
#[derive(Clone)]
pub struct AuthLayer {
    auth: Arc<Authenticator>,
    operation_of: OperationOf,
}

impl AuthLayer {
    /// The layer over `auth`; a `CALLER_UNKNOWN` record names the call as
    /// `operation_of` says (never by the path the caller sent).
    pub fn new(auth: Arc<Authenticator>, operation_of: OperationOf) -> Self {
        Self { auth, operation_of }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            auth: Arc::clone(&self.auth),
            operation_of: self.operation_of,
        }
    }
}

/// The service of [`AuthLayer`].
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    auth: Arc<Authenticator>,
    operation_of: OperationOf,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ResBody> Service<Request<tonic::body::Body>> for Authenticated<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<tonic::body::Body>) -> Self::Future {
        let probe = request.uri().path().starts_with(OPEN_PREFIX);
        if probe || !self.auth.enabled() {
            // Health checks, and every call of an open gateway: nothing to
            // wait for, so no clone of the inner service and no extra task
            // state on the call path.
            if !probe {
                request.extensions_mut().insert(Arc::clone(&self.auth.open));
                trust_baggage(request.extensions());
            }
            let call = self.inner.call(request);
            return Box::pin(async move { Ok(call.await?.map(tonic::body::Body::new)) });
        }
        // The ready service goes into the future; its clone stays for the
        // next call (tower's usual swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = Arc::clone(&self.auth);
        let operation_of = self.operation_of;
        Box::pin(async move {
            match auth
                .authenticate(request.headers(), request.extensions())
                .await
            {
                Ok(caller) => {
                    if let Some(conn) = ConnInfo::of(request.extensions()) {
                        conn.activity.authenticated();
                    }
                    trust_baggage(request.extensions());
                    let extensions = request.extensions_mut();
                    extensions.insert(caller);
                    extensions.insert(Refusals(Arc::clone(&auth.events)));
                    Ok(inner.call(request).await?.map(tonic::body::Body::new))
                }
                Err(refusal) => {
                    auth.refused_on_connection(request.extensions());
                    let operation = operation_of(request.uri().path());
                    Ok(auth.refused(refusal, operation, request.extensions()))
                }
            }
        })
    }
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
