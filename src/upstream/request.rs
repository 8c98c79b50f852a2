//! One upstream request, built once and ready to send again: its
//! operation, URL, body, per-attempt timeout, attempts allowed, and what
//! its client span should say (channel, journey).

use std::time::Duration;

use bytes::Bytes;

use super::{
    body::{self, FormBody},
    endpoint::{Bulkhead, ChannelEndpoint, Target},
};
use crate::{
    domain::{Appkey, JourneyRef, Operation},
    telemetry::ChannelLabel,
};

/// Reads the journey a call created from its answer body.
pub(super) type JourneyOfAnswer = fn(&[u8]) -> Option<JourneyRef>;

/// The client-wide defaults a request starts from.
#[derive(Debug, Clone)]
pub(super) struct RequestDefaults {
    /// Timeout of one attempt.
    pub(super) timeout: Duration,
    /// Attempts of an operation that consumes nothing.
    pub(super) safe_attempts: u32,
    /// The core service's bulkhead.
    pub(super) bulkhead: Bulkhead,
}

/// One request, ready to send (again).
pub(super) struct Prepared {
    pub(super) op: Operation,
    pub(super) target: Target,
    pub(super) content_type: &'static str,
    pub(super) body: Bytes,
    pub(super) timeout: Duration,
    pub(super) attempts: u32,
    /// The bulkhead of where it goes: one slot for all its attempts.
    pub(super) bulkhead: Bulkhead,
    /// The 3D channel (its name as a label), for spans and metrics.
    pub(super) channel: Option<ChannelLabel>,
    /// The journey, for spans (derived from the appkey, never the appkey).
    pub(super) journey: Option<JourneyRef>,
    /// For a call that creates the journey (`/appkey`): how its span
    /// learns the journey from the answer.
    pub(super) journey_from_answer: Option<JourneyOfAnswer>,
}

impl Prepared {
    /// A form-encoded request of `op` to `url`.
    pub(super) fn form(
        op: Operation,
        target: &Target,
        form: FormBody,
        d: &RequestDefaults,
    ) -> Self {
        Self::new(op, target, body::FORM, form.finish(), d)
    }

    /// A JSON request of `op` to `url`.
    pub(super) fn json(op: Operation, target: &Target, json: String, d: &RequestDefaults) -> Self {
        Self::new(op, target, body::JSON, json, d)
    }

    fn new(
        op: Operation,
        target: &Target,
        content_type: &'static str,
        body: String,
        d: &RequestDefaults,
    ) -> Self {
        Prepared {
            op,
            target: target.clone(),
            content_type,
            body: Bytes::from(body),
            timeout: d.timeout,
            attempts: if op.consumes_appkey() {
                // One retry, and only after a connect failure.
                2
            } else {
                d.safe_attempts.max(1)
            },
            bulkhead: d.bulkhead.clone(),
            channel: None,
            journey: None,
            journey_from_answer: None,
        }
    }

    /// Tags the call with the journey of `appkey` (its reference only).
    pub(super) fn for_appkey(mut self, appkey: &Appkey) -> Self {
        self.journey = Some(JourneyRef::from_appkey(appkey));
        self
    }

    /// Sends on `channel`: its name on spans and metrics, its timeout and
    /// its bulkhead. One attempt: the channel router owns retries and
    /// failover (`/3d/liveness` keeps its one retry after a connect
    /// failure, which proves nothing was sent).
    pub(super) fn on_channel(mut self, channel: &ChannelEndpoint) -> Self {
        self.channel = Some(channel.label().clone());
        self.timeout = channel.timeout();
        self.bulkhead = channel.bulkhead().clone();
        if !self.op.consumes_appkey() {
            self.attempts = 1;
        }
        self
    }

    /// Lets the call's span learn its journey from the answer.
    pub(super) fn learning_journey(mut self, learn: JourneyOfAnswer) -> Self {
        self.journey_from_answer = Some(learn);
        self
    }
}
