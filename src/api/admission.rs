//! The one door of the public API: a tower layer after the auth layer
//! that admits every public RPC the same way, in one order, before any
//! handler runs (like linkerd2-proxy's inbound policy, one layer that
//! matches the route, authorizes and hands the inner service a permit):
//!
//! ```text
//! AuthLayer (Arc<Caller>) --> AdmissionLayer:
//!   1. the method -> its row in rpc::RPCS, or rpc::REFLECTION (health: untouched)
//!   2. the caller's operations     else PERMISSION_DENIED/OPERATION_NOT_ALLOWED
//!   3. the caller's slot (call or stream)  else RESOURCE_EXHAUSTED/CALLER_LIMIT_REACHED
//!   4. the caller's share of request bytes, and the process's, not spent
//!                                  else RESOURCE_EXHAUSTED/CALLER_LIMIT_REACHED (OVERLOADED)
//!   5. the audit record, opened
//!   --> the body held to the RPC's message limit and charged to the
//!       caller's share as it arrives (request_bytes)
//!   --> a Ticket in the request's extensions --> handler: admit() -> Admitted
//! ```
//!
//! Reflection goes through the same door as a stream of the caller's
//! (any configured caller may list the API): a caller, a stream slot, an
//! audit record `reflection`. Health alone passes untouched.
//!
//! Each refusal here is counted with the auth layer's and written as one
//! audit record. A request that reaches a handler without a ticket never
//! passed the door and is refused (`admitted::admit` fails closed). A
//! ticket no handler claimed (tonic refused the message before the
//! handler ran: too large, undecodable) is written with the status the
//! response carries.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use http::{Request, Response};
use tower::{Layer, Service};

use super::{
    request_bytes::RequestBytes,
    rpc::{REFLECTION, Rpc, is_reflection, rpc_of},
    slots::{CallerSlots, Slot},
};
use crate::{
    Error,
    auth::Refusals,
    domain::Caller,
    net::held::holding,
    telemetry::{
        audit::{AuditRecord, trace_id},
        metrics::grpc_code_name,
        usage::Usage,
    },
};

/// What the door hands the handler of an admitted call.
pub(super) struct Ticket {
    /// The call's row: what the rest of the door does before the handler.
    pub(super) rpc: &'static Rpc,
    pub(super) caller: Arc<Caller>,
    pub(super) audit: AuditRecord,
    pub(super) slot: Option<Slot>,
    pub(super) refusals: Option<Refusals>,
}

/// The ticket's place in the request's extensions (which hold only
/// `Clone` values): the handler takes it out once.
#[derive(Clone)]
pub(super) struct TicketCell(Arc<Mutex<Option<Ticket>>>);

impl TicketCell {
    /// The ticket, the first time.
    pub(super) fn take(&self) -> Option<Ticket> {
        crate::sync::lock(&self.0).take()
    }
}

/// The admission door as a tower layer. Cheap to clone.
#[derive(Clone)]
pub struct AdmissionLayer {
    slots: CallerSlots,
    bytes: RequestBytes,
    usage: Usage,
}

impl AdmissionLayer {
    /// A door with its own per-caller slot counts, bounding request bytes
    /// with `bytes`.
    pub fn new(bytes: RequestBytes) -> Self {
        Self {
            slots: CallerSlots::default(),
            bytes,
            usage: Usage::default(),
        }
    }

    /// Counts every admitted call's outcome by caller in `usage` (the
    /// audit record is the counting point).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// The request bytes each caller's calls are receiving now (for the
    /// share metrics, at scrape time).
    pub fn bytes_held(&self) -> Vec<(crate::domain::CallerName, usize)> {
        self.slots.bytes_held()
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            slots: self.slots.clone(),
            bytes: self.bytes.clone(),
            usage: self.usage.clone(),
        }
    }
}

/// The service of [`AdmissionLayer`].
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    slots: CallerSlots,
    bytes: RequestBytes,
    usage: Usage,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Counts `error` with the auth layer's refusals, if the layer left its
/// counter.
pub(super) fn count_refusal(refusals: Option<&Refusals>, error: &Error, cause: &'static str) {
    if let Some(refusals) = refusals {
        refusals.0.refused(error.reason().as_str(), cause);
    }
}

impl<S> Admission<S> {
    /// Admits the call of `rpc`, or answers why not (counted, recorded).
    fn admit(
        &self,
        rpc: &'static Rpc,
        request: &mut Request<tonic::body::Body>,
    ) -> Result<Ticket, Box<Response<tonic::body::Body>>> {
        let extensions = request.extensions();
        let Some(caller) = extensions.get::<Arc<Caller>>().cloned() else {
            // Not through the auth layer: fail closed.
            return Err(Box::new(
                tonic::Status::from(Error::CallerUnauthenticated).into_http(),
            ));
        };
        let refusals = extensions.get::<Refusals>().cloned();
        let operation = rpc.operation();
        let audit = AuditRecord::open(&caller, operation, rpc.releases, trace_id(extensions))
            .counted(self.usage.caller(caller.name.as_str()));
        let refuse = |audit: AuditRecord, error: Error, cause| {
            count_refusal(refusals.as_ref(), &error, cause);
            audit.finish(error.reason().as_str());
            Box::new(tonic::Status::from(error).into_http())
        };
        if let Some(permission) = rpc.permission
            && !caller.may(permission)
        {
            let error = Error::OperationNotAllowed(permission);
            return Err(refuse(audit, error, permission.as_str()));
        }
        let slot = match rpc.stream {
            true => self.slots.stream(&caller),
            false => self.slots.call(&caller),
        };
        let slot = match slot {
            Ok(slot) => slot,
            Err(error) => {
                let cause = match rpc.stream {
                    true => "max_watch_streams",
                    false => "max_in_flight",
                };
                return Err(refuse(audit, error, cause));
            }
        };
        let share = self.slots.bytes(&caller, slot.as_ref());
        if let Some(error) = self
            .bytes
            .spent(share.as_ref().map(|(held, share)| (&**held, *share)))
        {
            return Err(refuse(audit, error, "max_body_bytes"));
        }
        let bytes = self.bytes.clone();
        let body = std::mem::take(request.body_mut());
        *request.body_mut() = tonic::body::Body::new(bytes.charge(body, rpc.message, share));
        Ok(Ticket {
            rpc,
            caller,
            audit,
            slot,
            refusals,
        })
    }
}

/// The outcome of a call no handler claimed: its response's gRPC code
/// name (`ok` for OK), `cancelled` without one.
fn outcome_of<B>(response: &Response<B>) -> &'static str {
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from_i32);
    match code {
        None => "cancelled",
        Some(tonic::Code::Ok) => "ok",
        Some(code) => grpc_code_name(code),
    }
}

impl<S, ResBody> Service<Request<tonic::body::Body>> for Admission<S>
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
        let path = request.uri().path();
        let rpc = match rpc_of(path) {
            Some(rpc) => rpc,
            None if is_reflection(path) => &REFLECTION,
            None => {
                let call = self.inner.call(request);
                return Box::pin(async move { Ok(call.await?.map(tonic::body::Body::new)) });
            }
        };
        let cell = match self.admit(rpc, &mut request) {
            Ok(ticket) => TicketCell(Arc::new(Mutex::new(Some(ticket)))),
            Err(refused) => return Box::pin(async move { Ok(*refused) }),
        };
        request.extensions_mut().insert(cell.clone());
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            let Some(unclaimed) = cell.take() else {
                return Ok(response.map(tonic::body::Body::new));
            };
            // A public RPC's ticket no handler claimed: tonic refused the
            // message before its handler ran.
            if rpc.permission.is_some() {
                unclaimed.audit.finish(outcome_of(&response));
                return Ok(response.map(tonic::body::Body::new));
            }
            // Reflection: no handler claims the ticket; the stream keeps
            // the caller's slot for as long as it is open.
            match response.headers().contains_key("grpc-status") {
                true => unclaimed.audit.finish(outcome_of(&response)),
                false => unclaimed.audit.finish("ok"),
            }
            let slot = unclaimed.slot;
            Ok(response.map(|body| tonic::body::Body::new(holding(body, slot))))
        })
    }
}
