//! A response body that holds what its call holds (an admission slot, the
//! connection's activity, a stream's place) until the response ends or is
//! dropped: a stream's slots must live as long as the stream, not as long
//! as the handler that opened it.

use super::body::{FrameHook, HookedBody};

/// Wraps `body` so that it holds `held` until it ends or is dropped.
pub fn holding<B, H>(body: B, held: H) -> HookedBody<B, Holding<H>> {
    HookedBody::new(body, Holding { _held: held })
}

/// The hook of [`holding`]: it adds nothing to the frames, and is
/// dropped with the body.
pub struct Holding<H> {
    _held: H,
}

impl<H> FrameHook for Holding<H> {}
