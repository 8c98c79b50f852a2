//! Request bytes, bounded where they are read, as Envoy bounds its buffers
//! (`per_connection_buffer_limit_bytes`, the overload manager) and grpc-go
//! its messages (`MaxRecvMsgSize` per method):
//!
//! - each message's length prefix is read as its first bytes arrive and
//!   refused at once when it is over its RPC's limit
//!   ([`MessageSize`](super::rpc::MessageSize)): `RESOURCE_EXHAUSTED` /
//!   `MESSAGE_TOO_LARGE` naming that limit, before the message is
//!   buffered;
//! - the bytes a call is receiving are charged frame by frame to its
//!   caller's share (`[[callers]] max_body_bytes`) and to the process's
//!   budget (`[serving] max_body_bytes_in_flight`). A frame past the
//!   caller's share fails the body with `RESOURCE_EXHAUSTED` /
//!   `CALLER_LIMIT_REACHED` naming the share; past the process's, with
//!   `OVERLOADED`. Nothing waits for room.
//! - a message's bytes are given back once it is decoded and handed to the
//!   handler: when the decoder asks for more (it takes every whole message
//!   out first), or when the body is dropped, which tonic does after a
//!   unary or server-streaming request's one message. A `WatchJourney`
//!   holds its bytes for the microseconds of its decoding, not for the
//!   hour of its stream, and a stream of requests (reflection) holds only
//!   the message it is receiving.
//!
//! Health and reflection are never charged: they carry no caller data and
//! are bounded by count at the edge.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    task::Context,
};

use bytes::Bytes;
use http_body::Frame;

use super::rpc::MessageSize;
use crate::{
    Error,
    net::body::{BoxError, FrameHook, HookedBody, LastFrame},
    telemetry::Metrics,
};

/// The `limit` label of `idgate_rpc_shed_total` for refusals by the
/// process's budget.
pub(super) const SHED_PROCESS: &str = "body_bytes";
/// The label for refusals by a caller's share.
pub(super) const SHED_CALLER: &str = "caller_body_bytes";
/// The label for a message over its RPC's limit.
pub(super) const SHED_MESSAGE: &str = "message_bytes";

/// A count of bytes under a limit that each charge states: the process's
/// budget, or one caller's share of it.
#[derive(Debug, Default)]
pub(super) struct Tally(AtomicUsize);

impl Tally {
    /// Adds `n` if the total stays within `limit`.
    pub(super) fn try_add(&self, n: usize, limit: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|total| *total <= limit)
            })
            .is_ok()
    }

    fn sub(&self, n: usize) {
        self.0.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes held now.
    pub(super) fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// What the admission door bounds request bytes with: the process's
/// budget and the two message limits. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RequestBytes {
    process: Arc<Tally>,
    max_in_flight: usize,
    small: usize,
    document: usize,
    metrics: Metrics,
}

impl RequestBytes {
    /// `max_in_flight` bytes for all calls together; messages of at most
    /// `small` and `document` bytes; refusals counted in `metrics`.
    pub fn new(max_in_flight: usize, small: usize, document: usize, metrics: Metrics) -> Self {
        Self {
            process: Arc::default(),
            max_in_flight: max_in_flight.max(1),
            small,
            document,
            metrics,
        }
    }

    /// The limit of a message of `size`.
    pub(super) fn limit_of(&self, size: MessageSize) -> usize {
        match size {
            MessageSize::Small => self.small,
            MessageSize::Document => self.document,
        }
    }

    /// Why a new call cannot even start: the process's budget or the
    /// caller's share (`held` of `share`) has not one byte left.
    pub(super) fn spent(&self, caller: Option<(&Tally, usize)>) -> Option<Error> {
        if let Some((held, share)) = caller
            && held.get() >= share
        {
            self.metrics.record_rpc_shed(SHED_CALLER);
            return Some(share_spent(share));
        }
        if self.process.get() >= self.max_in_flight {
            self.metrics.record_rpc_shed(SHED_PROCESS);
            return Some(Error::Overloaded("request bytes in flight"));
        }
        None
    }

    /// `body` of a call to an RPC of `size`, charged to `caller`'s share
    /// (`None`: the open caller, bound by the process's budget alone).
    pub(super) fn charge<B>(
        &self,
        body: B,
        size: MessageSize,
        caller: Option<(Arc<Tally>, usize)>,
    ) -> HookedBody<B, Charging> {
        let charging = Charging {
            charge: Charge {
                process: Arc::clone(&self.process),
                max_in_flight: self.max_in_flight,
                caller,
                held: 0,
            },
            framing: Framing::new(self.limit_of(size)),
            metrics: self.metrics.clone(),
        };
        HookedBody::new(body, charging)
    }

    /// Bytes all calls hold now, for tests.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.process.get()
    }
}

/// The refusal of a caller at its share: it names the share, never the
/// process's budget, so that one caller's load never explains another's
/// refusals.
fn share_spent(share: usize) -> Error {
    Error::CallerShareSpent {
        what: "request bytes in flight",
        key: "max_body_bytes",
        share,
    }
}

/// What one call has charged; given back when dropped with its body.
#[derive(Debug)]
struct Charge {
    process: Arc<Tally>,
    max_in_flight: usize,
    caller: Option<(Arc<Tally>, usize)>,
    held: usize,
}

impl Charge {
    /// Gives back `n` of the bytes charged.
    fn give_back(&mut self, n: usize) {
        let n = n.min(self.held);
        self.process.sub(n);
        if let Some((held, _)) = &self.caller {
            held.sub(n);
        }
        self.held -= n;
    }

    /// Charges `n` bytes to the caller's share, then to the process's
    /// budget; on a refusal nothing stays charged.
    fn take(&mut self, n: usize) -> Result<(), (Error, &'static str)> {
        if let Some((held, share)) = &self.caller
            && !held.try_add(n, *share)
        {
            return Err((share_spent(*share), SHED_CALLER));
        }
        if !self.process.try_add(n, self.max_in_flight) {
            if let Some((held, _)) = &self.caller {
                held.sub(n);
            }
            return Err((Error::Overloaded("request bytes in flight"), SHED_PROCESS));
        }
        self.held += n;
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.process.sub(self.held);
        if let Some((held, _)) = &self.caller {
            held.sub(self.held);
        }
    }
}

/// Where a request body stands in its gRPC framing (a flag byte and a
/// 4-byte big-endian length before each message), however its data
/// frames cut it.
#[derive(Debug)]
struct Framing {
    limit: usize,
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the current message still to pass.
    message_left: u64,
    /// Bytes followed since the last message ended.
    open: usize,
    /// Bytes of messages that ended, not yet given back: the decoder has
    /// them whole, and takes each out before it asks for more.
    ended: usize,
}

impl Framing {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            prefix: [0; 5],
            prefix_len: 0,
            message_left: 0,
            open: 0,
            ended: 0,
        }
    }

    /// Follows `data`; `Err` when a length prefix in it is over the limit.
    fn follow(&mut self, mut data: &[u8]) -> Result<(), ()> {
        while !data.is_empty() {
            if self.message_left > 0 {
                let skip = usize::try_from(self.message_left)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.message_left -= skip as u64;
                data = &data[skip..];
                self.open += skip;
                if self.message_left == 0 {
                    self.end_message();
                }
                continue;
            }
            let take = (self.prefix.len() - self.prefix_len).min(data.len());
            self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&data[..take]);
            self.prefix_len += take;
            self.open += take;
            data = &data[take..];
            if self.prefix_len == self.prefix.len() {
                self.prefix_len = 0;
                let [_, a, b, c, d] = self.prefix;
                let length = u32::from_be_bytes([a, b, c, d]);
                if usize::try_from(length).map_or(true, |n| n > self.limit) {
                    return Err(());
                }
                self.message_left = u64::from(length);
                if length == 0 {
                    self.end_message();
                }
            }
        }
        Ok(())
    }

    fn end_message(&mut self) {
        self.ended += std::mem::take(&mut self.open);
    }
}

/// What holds a request body's messages to their RPC's limit and charges
/// its bytes while it lives (the hook of [`RequestBytes::charge`]).
pub(super) struct Charging {
    charge: Charge,
    framing: Framing,
    metrics: Metrics,
}

impl FrameHook for Charging {
    fn asked(&mut self, _cx: &mut Context<'_>) -> Option<LastFrame> {
        // Asked for more: the messages that ended before are decoded and
        // handed on (a stream's request body lives on; its bytes do not).
        let ended = std::mem::take(&mut self.framing.ended);
        if ended > 0 {
            self.charge.give_back(ended);
        }
        None
    }

    fn passing(&mut self, frame: &Frame<Bytes>) -> Result<(), BoxError> {
        let Some(data) = frame.data_ref() else {
            return Ok(());
        };
        let refused = if self.framing.follow(data).is_err() {
            Some((Error::MessageTooLarge(self.framing.limit), SHED_MESSAGE))
        } else {
            self.charge.take(data.len()).err()
        };
        match refused {
            Some((error, label)) => {
                self.metrics.record_rpc_shed(label);
                let status: tonic::Status = error.into();
                Err(status.into())
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body;
    use http_body_util::BodyExt as _;

    use super::*;

    /// A body of `chunks`, cut as given.
    fn body(chunks: Vec<Vec<u8>>) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = chunks
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::from(c))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    /// One gRPC message of `len` bytes, framed.
    fn message(len: usize) -> Vec<u8> {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
        framed.resize(5 + len, 7);
        framed
    }

    fn bytes(limit: usize) -> RequestBytes {
        RequestBytes::new(limit, 64, 1000, Metrics::default())
    }

    fn code_of(error: tonic::codegen::StdError) -> (tonic::Code, String) {
        let status = error.downcast::<tonic::Status>().unwrap();
        (status.code(), status.message().to_owned())
    }

    #[tokio::test]
    async fn bytes_are_charged_while_the_body_lives_and_given_back_when_it_is_dropped() {
        let budget = bytes(10_000);
        let share = Arc::new(Tally::default());
        let mut read = budget.charge(
            body(vec![message(40)]),
            MessageSize::Small,
            Some((share.clone(), 1000)),
        );
        let frame = read.frame().await.unwrap().unwrap();
        assert_eq!(frame.data_ref().map(Bytes::len), Some(45));
        assert_eq!((budget.in_flight(), share.get()), (45, 45));
        drop(read);
        assert_eq!(
            (budget.in_flight(), share.get()),
            (0, 0),
            "decoded: given back"
        );
    }

    #[tokio::test]
    async fn a_stream_of_messages_holds_only_the_bytes_of_the_message_being_received() {
        let budget = bytes(10_000);
        let share = Arc::new(Tally::default());
        let mut second = message(30);
        let rest = second.split_off(10);
        let mut read = budget.charge(
            body(vec![message(20), second, rest]),
            MessageSize::Small,
            Some((share.clone(), 1000)),
        );
        read.frame().await.unwrap().unwrap();
        assert_eq!(
            (budget.in_flight(), share.get()),
            (25, 25),
            "the first, whole"
        );
        read.frame().await.unwrap().unwrap();
        assert_eq!(
            budget.in_flight(),
            10,
            "the first given back, the second begun"
        );
        read.frame().await.unwrap().unwrap();
        assert_eq!(budget.in_flight(), 35, "the second, whole");
        assert!(read.frame().await.is_none());
        assert_eq!((budget.in_flight(), share.get()), (0, 0), "all given back");
    }

    #[tokio::test]
    async fn a_length_prefix_over_the_rpc_s_limit_is_refused_before_its_message_arrives() {
        let budget = bytes(10_000);
        // The prefix alone, in a first frame of its own: refused on it.
        let mut framed = message(65);
        let rest = framed.split_off(5);
        let mut read = budget.charge(body(vec![framed, rest]), MessageSize::Small, None);
        let (code, text) = code_of(read.frame().await.unwrap().unwrap_err());
        assert_eq!(code, tonic::Code::ResourceExhausted);
        assert!(text.contains("64 bytes"), "{text}");
        assert!(read.frame().await.is_none(), "nothing more is read");
        assert_eq!(budget.in_flight(), 0);

        // The same message fits a document RPC, and a prefix cut across
        // frames is read whole.
        let mut framed = message(65);
        let rest = framed.split_off(3);
        let read = budget.charge(body(vec![framed, rest]), MessageSize::Document, None);
        assert_eq!(read.collect().await.unwrap().to_bytes().len(), 70);
    }

    #[tokio::test]
    async fn a_second_message_over_the_limit_in_one_body_is_refused_too() {
        let budget = bytes(10_000);
        let mut two = message(10);
        two.extend(message(100));
        let err = budget
            .charge(body(vec![two]), MessageSize::Small, None)
            .collect()
            .await
            .unwrap_err();
        assert_eq!(code_of(err).0, tonic::Code::ResourceExhausted);
    }

    #[tokio::test]
    async fn a_caller_past_its_share_is_refused_naming_its_share_and_others_still_fit() {
        let budget = bytes(1000);
        let mallory = Arc::new(Tally::default());
        let held = budget.charge(
            body(vec![message(300)]),
            MessageSize::Document,
            Some((mallory.clone(), 400)),
        );
        let mut held = Box::pin(held);
        held.frame().await.unwrap().unwrap();
        let err = budget
            .charge(
                body(vec![message(300)]),
                MessageSize::Document,
                Some((mallory.clone(), 400)),
            )
            .collect()
            .await
            .unwrap_err();
        let (code, text) = code_of(err);
        assert_eq!(code, tonic::Code::ResourceExhausted);
        assert!(
            text.contains("400") && text.contains("max_body_bytes"),
            "{text}"
        );
        assert!(
            !text.contains("1000"),
            "the process's budget is not named: {text}"
        );
        assert_eq!(mallory.get(), 305, "the refused frame is not charged");
        assert!(
            budget
                .spent(Some((&mallory, 305)))
                .is_some_and(|e| matches!(e, Error::CallerShareSpent { .. }))
        );

        let alice = Arc::new(Tally::default());
        assert!(budget.spent(Some((&alice, 400))).is_none());
        let read = budget.charge(
            body(vec![message(300)]),
            MessageSize::Document,
            Some((alice.clone(), 400)),
        );
        assert!(
            read.collect().await.is_ok(),
            "alice's call fits beside mallory's"
        );
        drop(held);
        assert_eq!(budget.in_flight(), 0);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            /// Whatever calls charge, neither the process nor a caller
            /// ever holds more than its limit, and nothing stays charged
            /// once every call ended.
            #[test]
            fn charges_never_exceed_their_limits_and_return_to_zero(
                limit in 1usize..10_000,
                share in 1usize..10_000,
                charges in proptest::collection::vec((0usize..8, 0usize..4_000), 0..64),
            ) {
                let process = Arc::new(Tally::default());
                let caller = Arc::new(Tally::default());
                let mut calls: Vec<Charge> = (0..8)
                    .map(|i| Charge {
                        process: process.clone(),
                        max_in_flight: limit,
                        caller: (i % 2 == 0).then(|| (caller.clone(), share)),
                        held: 0,
                    })
                    .collect();
                for (call, n) in charges {
                    let _ = calls[call].take(n);
                    prop_assert!(process.get() <= limit);
                    prop_assert!(caller.get() <= share);
                }
                drop(calls);
                prop_assert_eq!(process.get(), 0);
                prop_assert_eq!(caller.get(), 0);
            }

            /// However a framed body is cut into frames, its messages are
            /// followed exactly: a body of messages within the limit
            /// passes, one over it does not.
            #[test]
            fn framing_is_followed_whatever_the_cuts(
                lengths in proptest::collection::vec(0usize..200, 1..5),
                cuts in proptest::collection::vec(1usize..50, 1..40),
            ) {
                let mut stream = Vec::new();
                for len in &lengths {
                    stream.extend(message(*len));
                }
                let mut framing = Framing::new(150);
                let mut rest = stream.as_slice();
                let mut verdict = Ok(());
                for cut in cuts.iter().cycle() {
                    if rest.is_empty() || verdict.is_err() {
                        break;
                    }
                    let (head, tail) = rest.split_at((*cut).min(rest.len()));
                    verdict = framing.follow(head);
                    rest = tail;
                }
                prop_assert_eq!(verdict.is_ok(), lengths.iter().all(|l| *l <= 150));
            }
        }
    }
}
