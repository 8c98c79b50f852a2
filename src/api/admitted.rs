//! What a handler holds of an admitted call, and the two ends of every
//! handler: [`admit`] (the door's ticket, the call's context, the
//! message) and [`Admitted::finish`] (the audit record written with the
//! outcome, the crate's error converted to a `Status` once, here).
//!
//! Every public handler is the same shim:
//!
//! ```text
//! let (mut admitted, message) = admit(request)?;
//! let result = self.inner_x(&mut admitted, message).await;   // Result<_, crate::Error>
//! admitted.finish(result)
//! ```

use futures_util::StreamExt as _;
use tonic::{Request, Response, Status};

use super::admission::{Ticket, TicketCell, count_refusal};
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
    pub fn journey_of(&mut self, appkey: &Appkey) -> JourneyRef {
        let journey = JourneyRef::from_appkey(appkey);
        match &self.span {
            Some(span) => telemetry::record_journey(span, &journey),
            None => telemetry::record_journey(&tracing::Span::current(), &journey),
        }
        self.ticket.audit.journey(&journey);
        journey
    }

    /// The journey the call names by reference, on the audit record.
    pub fn journey(&mut self, journey: &JourneyRef) {
        self.ticket.audit.journey(journey);
    }

    /// `operation` is being sent upstream: a call cancelled from now on is
    /// recorded with it.
    pub fn sending(&mut self, operation: Operation) {
        self.ticket.audit.upstream(operation.as_str());
    }

    /// [`Admitted::sending`] for code that runs later, out of the
    /// handler's reach (the guard's `create` closure, after its checks).
    pub fn upstream_marker(&self) -> Upstream {
        self.ticket.audit.upstream_marker()
    }

    /// Whether the caller may create journeys on `profile` (`None`: the
    /// default profile, named by `default_profile`); else
    /// `PERMISSION_DENIED`/`PROFILE_NOT_ALLOWED`. The profile is in the
    /// message, so the door cannot check it before the handler.
    pub fn check_profile(
        &self,
        profile: Option<&str>,
        default_profile: Option<&str>,
    ) -> Result<(), Error> {
        let allowed = profile
            .or(default_profile)
            .is_some_and(|p| self.caller().may_use_profile(p));
        match allowed {
            true => Ok(()),
            false => Err(Error::ProfileNotAllowed),
        }
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
