//! What a handler holds of an admitted call, and the two ends of every
//! handler: [`admit`] (the door's ticket, the call's context, the
//! message; [`super::ApiContext::enter`] takes it from there) and
//! [`Admitted::finish`] (the audit record written with the outcome, the
//! crate's error converted to a `Status` once, here).
//!
//! Every public handler is the same shim:
//!
//! ```text
//! let (admitted, request, journey) = self.api.enter(request).await?;   // the door's whole job
//! let result = self.inner_x(&admitted, request, journey).await;        // Result<_, crate::Error>
//! admitted.finish(result)
//! ```

use futures_util::StreamExt as _;
use tonic::{Request, Response, Status};

use super::{
    admission::{Ticket, TicketCell, count_refusal},
    rpc::Rpc,
};
use crate::{
    Error,
    context::CallContext,
    domain::{Appkey, Caller, JourneyRef, Operation},
    events::WatchStream,
    telemetry::{self, ServerSpan, audit::Upstream},
};

/// An admitted call: its caller, context, server span and audit record,
/// and the caller's slot, held until the call (or its stream) ends.
pub struct Admitted {
    ticket: Ticket,
    ctx: CallContext,
    span: Option<tracing::Span>,
}

/// Takes the door's ticket out of `request` and splits off the message;
/// a request without a ticket did not pass the door and is refused.
pub fn admit<T>(request: Request<T>) -> Result<(Admitted, T), Status> {
    let ctx = CallContext::of(&request);
    let (_, extensions, message) = request.into_parts();
    let span = extensions.get::<ServerSpan>().map(|s| s.0.clone());
    let ticket = extensions
        .get::<TicketCell>()
        .and_then(TicketCell::take)
        .ok_or_else(|| Status::from(Error::CallerUnauthenticated))?;
    Ok((Admitted { ticket, ctx, span }, message))
}

impl Admitted {
    /// The call's row of the RPC table.
    pub fn rpc(&self) -> &'static Rpc {
        self.ticket.rpc
    }

    /// The caller, as the auth layer found it.
    pub fn caller(&self) -> &Caller {
        &self.ticket.caller
    }

    /// The caller's deadline.
    pub fn ctx(&self) -> &CallContext {
        &self.ctx
    }

    /// The call's server span, if the telemetry layer opened one.
    pub fn span(&self) -> Option<&tracing::Span> {
        self.span.as_ref()
    }

    /// The journey of `appkey`: put on the server span (so every span of
    /// the journey can be found by it) and on the audit record.
    pub(super) fn journey_of(&mut self, appkey: &Appkey) -> JourneyRef {
        let journey = JourneyRef::from_appkey(appkey);
        match &self.span {
            Some(span) => telemetry::record_journey(span, &journey),
            None => telemetry::record_journey(&tracing::Span::current(), &journey),
        }
        self.ticket.audit.journey(&journey);
        journey
    }

    /// The journey the call names by reference, on the audit record.
    pub(super) fn journey(&mut self, journey: &JourneyRef) {
        self.ticket.audit.journey(journey);
    }

    /// `operation` is being sent upstream: a call cancelled from now on is
    /// recorded with it.
    pub(super) fn sending(&mut self, operation: Operation) {
        self.ticket.audit.upstream(operation.as_str());
    }

    /// [`Admitted::sending`] for code that runs later, out of the door's
    /// reach (journey creation, after its own checks).
    pub(super) fn upstream_marker(&self, operation: Operation) -> Upstream {
        self.ticket.audit.upstream_marker(operation.as_str())
    }

    /// Records and converts a call refused before its handler ran.
    pub(super) fn refuse(self, error: Error) -> Status {
        refused(self.ticket, error)
    }

    /// Writes the audit record with the outcome of `result` and converts
    /// it, once.
    pub fn finish<T>(self, result: Result<T, Error>) -> Result<Response<T>, Status> {
        let Admitted { ticket, .. } = self;
        match result {
            Ok(message) => {
                ticket.audit.finish("ok");
                Ok(Response::new(message))
            }
            Err(error) => Err(refused(ticket, error)),
        }
    }

    /// [`Admitted::finish`] for `WatchJourney`: the call's record, then a
    /// `watch_result` record per result the stream delivers; the caller's
    /// stream slot lives as long as the stream.
    pub fn finish_stream(
        self,
        result: Result<WatchStream, Error>,
    ) -> Result<Response<WatchStream>, Status> {
        let Admitted { ticket, .. } = self;
        let stream = match result {
            Ok(stream) => stream,
            Err(error) => return Err(refused(ticket, error)),
        };
        let Ticket { audit, slot, .. } = ticket;
        let deliveries = audit.deliveries();
        audit.finish("ok");
        let stream = stream.inspect(move |item| {
            let _held = &slot;
            if let Ok(response) = item
                && response.result.is_some()
            {
                deliveries.delivered();
            }
        });
        Ok(Response::new(Box::pin(stream) as WatchStream))
    }
}

/// Records and converts a failed call; authorization refusals found by
/// the handler (the journey's owner, the message's profile) are counted
/// with the door's.
fn refused(ticket: Ticket, error: Error) -> Status {
    let cause = match &error {
        Error::JourneyNotOwned => Some("journey"),
        Error::ProfileNotAllowed => Some("operator_profile"),
        _ => None,
    };
    if let Some(cause) = cause {
        count_refusal(ticket.refusals.as_ref(), &error, cause);
    }
    ticket.audit.finish(error.reason().as_str());
    Status::from(error)
}
