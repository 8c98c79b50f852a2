//! The one door of the public API: a tower layer after the auth layer
//! that admits every public RPC the same way, in one order, before any
//! handler runs (like linkerd2-proxy's inbound policy, one layer that
//! matches the route, authorizes and hands the inner service a permit):
//!
//! ```text
//! AuthLayer (Arc<Caller>) --> AdmissionLayer:
//!   1. the method -> its row in rpc::RPCS (health, reflection: untouched)
//!   2. the caller's operations     else PERMISSION_DENIED/OPERATION_NOT_ALLOWED
//!   3. the caller's slot (call or stream)  else RESOURCE_EXHAUSTED/CALLER_LIMIT_REACHED
//!   4. the audit record, opened
//!   --> a Ticket in the request's extensions --> handler: admit() -> Admitted
//! ```
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
    rpc::{Rpc, rpc_of},
    slots::{CallerSlots, Slot},
};
use crate::{
    Error,
    auth::Refusals,
    domain::Caller,
    telemetry::audit::{AuditRecord, trace_id},
};

/// What the door hands the handler of an admitted call.
pub(super) struct Ticket {
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
#[derive(Clone, Default)]
pub struct AdmissionLayer {
    slots: CallerSlots,
}

impl AdmissionLayer {
    /// A door with its own per-caller slot counts.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            slots: self.slots.clone(),
        }
    }
}

/// The service of [`AdmissionLayer`].
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    slots: CallerSlots,
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
        extensions: &http::Extensions,
    ) -> Result<Ticket, Box<Response<tonic::body::Body>>> {
        let Some(caller) = extensions.get::<Arc<Caller>>().cloned() else {
            // Not through the auth layer: fail closed.
            return Err(Box::new(
                tonic::Status::from(Error::CallerUnauthenticated).into_http(),
            ));
        };
        let refusals = extensions.get::<Refusals>().cloned();
        let audit = AuditRecord::open(
            &caller,
            rpc.permission.as_str(),
            rpc.releases,
            trace_id(extensions),
        );
        let refuse = |audit: AuditRecord, error: Error, cause| {
            count_refusal(refusals.as_ref(), &error, cause);
            audit.finish(error.reason().as_str());
            Box::new(tonic::Status::from(error).into_http())
        };
        if !caller.may(rpc.permission) {
            let error = Error::OperationNotAllowed(rpc.permission);
            return Err(refuse(audit, error, rpc.permission.as_str()));
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
        Ok(Ticket {
            caller,
            audit,
            slot,
            refusals,
        })
    }
}

/// The outcome of a call no handler claimed: its response's gRPC status.
fn outcome_of<B>(response: &Response<B>) -> String {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map_or_else(
            || "cancelled".to_owned(),
            |code| format!("{:?}", tonic::Code::from_i32(code)),
        )
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
        let Some(rpc) = rpc_of(request.uri().path()) else {
            let call = self.inner.call(request);
            return Box::pin(async move { Ok(call.await?.map(tonic::body::Body::new)) });
        };
        let cell = match self.admit(rpc, request.extensions()) {
            Ok(ticket) => TicketCell(Arc::new(Mutex::new(Some(ticket)))),
            Err(refused) => return Box::pin(async move { Ok(*refused) }),
        };
        request.extensions_mut().insert(cell.clone());
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            if let Some(unclaimed) = cell.take() {
                unclaimed.audit.finish(&outcome_of(&response));
            }
            Ok(response.map(tonic::body::Body::new))
        })
    }
}
