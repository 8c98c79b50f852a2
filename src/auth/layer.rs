//! Authentication of every call on the public gRPC listener.
//!
//! The [`Authenticator`] turns a request's credential into a caller: the
//! `authorization: Bearer` token when the mode accepts tokens and the call
//! carries one (a token that fails is refused, never passed over for the
//! certificate), else the verified client certificate when the mode
//! accepts mTLS. [`AuthLayer`] runs it before the handlers, inserts the
//! `Arc<Caller>` and the [`Identity`] it was resolved from into the
//! request's extensions, and answers a refusal at
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
    jwks::{Jwks, JwksError, KeySet, Refresh},
    jwt::{JwtRefusal, JwtVerifier, Refused},
    mtls::{NoIdentity, identity_of},
    policy::{CallerTable, CallerUpdates, Identity, Policy, Shares},
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

/// A reload of `[[callers]]` and of a JWKS file, checked and not yet in
/// use ([`Authenticator::prepare_reload`]); dropping it changes nothing.
pub struct CallersReload<'a> {
    auth: &'a Authenticator,
    table: CallerTable,
    /// `None`: no JWKS file to read again.
    keys: Option<KeySet>,
}

impl CallersReload<'_> {
    /// How many callers the new table has.
    pub fn callers(&self) -> usize {
        self.table.callers().len()
    }

    /// Puts the reload in use: the keys, then the table (an open gateway
    /// keeps its open caller). Every open stream that
    /// [subscribed](Authenticator::caller_updates) is woken.
    pub fn commit(self) {
        let Self { auth, table, keys } = self;
        if let (Some(keys), Some(verifier)) = (keys, auth.jwt.as_ref()) {
            verifier.jwks().install(keys);
        }
        if auth.enabled() {
            auth.policy.replace(table);
        }
    }
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
    /// What the caller table divides among callers, kept for reloads.
    shares: Shares,
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
            shares: Shares::UNBOUNDED,
        }
    }

    /// Sets up `[auth]` and `[[callers]]` (validated before): loads the
    /// JWKS, starts its background refresh, builds the caller table.
    pub async fn from_config(
        auth: &AuthConfig,
        callers: &[CallerConfig],
        shares: Shares,
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
            policy: Policy::new(CallerTable::build(callers, &shares)?),
            open: Arc::new(Caller::open()),
            events,
            unauthenticated: RefusalLog::on("grpc"),
            shares,
        })
    }

    /// What [`Authenticator::from_config`] reads and refuses, with no
    /// network call: the JWKS file parsed (a URL's client built, nothing
    /// fetched) and the caller table built. `Some` of the JWKS file's key
    /// count. For `idgate check`.
    pub fn check(
        auth: &AuthConfig,
        callers: &[CallerConfig],
        shares: Shares,
    ) -> Result<Option<usize>, AuthSetupError> {
        if auth.mode == AuthMode::None {
            return Ok(None);
        }
        let keys = match (&auth.jwt, auth.mode.accepts_jwt()) {
            (Some(config), true) => Jwks::check(&config.location()?)?,
            _ => None,
        };
        CallerTable::build(callers, &shares)?;
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

    /// The checking half of a SIGHUP: the new caller table built and the
    /// JWKS file read again (a URL is refreshed on its own), neither in
    /// use until [`CallersReload::commit`]. Changes nothing.
    pub fn prepare_reload(
        &self,
        callers: &[CallerConfig],
    ) -> Result<CallersReload<'_>, AuthSetupError> {
        let table = CallerTable::build(callers, &self.shares)?;
        let keys = match self.jwt.as_ref() {
            Some(verifier) => verifier.jwks().read_file_again()?,
            None => None,
        };
        Ok(CallersReload {
            auth: self,
            table,
            keys,
        })
    }

    /// The caller tables that replace the current one from now on: what
    /// an open stream watches to end or narrow itself when a reload
    /// removes or narrows its caller.
    pub fn caller_updates(&self) -> CallerUpdates {
        self.policy.subscribe()
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
        let (caller, _) = self.identify(headers, extensions).await?;
        Ok(caller)
    }

    /// [`Authenticator::authenticate`], with the identity the caller was
    /// resolved from (`None`: the open caller), by which an open stream
    /// re-checks its caller after a reload.
    pub async fn identify(
        &self,
        headers: &HeaderMap,
        extensions: &http::Extensions,
    ) -> Result<(Arc<Caller>, Option<Identity>), Refusal> {
        if self.mode == AuthMode::None {
            return Ok((Arc::clone(&self.open), None));
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
        match self.policy.resolve(&identity) {
            Some(caller) => Ok((caller, Some(identity))),
            None => Err(Refusal::Unknown(kind)),
        }
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
            match auth.identify(request.headers(), request.extensions()).await {
                Ok((caller, identity)) => {
                    if let Some(conn) = ConnInfo::of(request.extensions()) {
                        conn.activity.authenticated();
                    }
                    trust_baggage(request.extensions());
                    let extensions = request.extensions_mut();
                    extensions.insert(caller);
                    if let Some(identity) = identity {
                        extensions.insert(identity);
                    }
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
