//! `[limits]`: what callers may send.
//!
//! The gRPC message limit follows the image limits unless set: the largest
//! valid request (`max_images` images of `max_image_bytes`) plus room for
//! its other fields and framing, so that the two never disagree (a flat
//! limit either refuses valid requests or lets a caller send far more than
//! any valid one). That limit is the document RPCs' alone: every other RPC
//! carries a few hundred bytes of fields and takes at most
//! `max_small_message_bytes` (64 KiB), so that a request padded with an
//! unknown field cannot hold document-sized memory on a watch.

use serde::Deserialize;

use super::rpc::MessageSize;

/// Room in a message for everything but its images: the other fields and
/// the protobuf framing of each image.
pub const MESSAGE_OVERHEAD_BYTES: usize = 1024 * 1024;

/// Limits on what callers send.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest image or PDF accepted, in bytes.
    pub max_image_bytes: usize,
    /// Most images in one request.
    pub max_images: usize,
    /// Largest gRPC message accepted, in bytes; unset: derived from the
    /// image limits ([`LimitsConfig::grpc_message_bytes`]).
    pub max_grpc_message_bytes: Option<usize>,
    /// Largest request message of every RPC that carries no image, in
    /// bytes.
    pub max_small_message_bytes: usize,
}

/// Default of `max_small_message_bytes`: a hundred times the largest
/// valid request of the journey and liveness services.
pub const DEFAULT_SMALL_MESSAGE_BYTES: usize = 64 * 1024;

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_image_bytes: 8 * 1024 * 1024,
            max_images: 16,
            max_grpc_message_bytes: None,
            max_small_message_bytes: DEFAULT_SMALL_MESSAGE_BYTES,
        }
    }
}

impl LimitsConfig {
    /// The largest gRPC message accepted: `max_grpc_message_bytes` when
    /// set, else `max_images × max_image_bytes` plus
    /// [`MESSAGE_OVERHEAD_BYTES`] (129 MiB with the defaults).
    pub fn grpc_message_bytes(&self) -> usize {
        self.max_grpc_message_bytes.unwrap_or_else(|| {
            self.max_images
                .saturating_mul(self.max_image_bytes)
                .saturating_add(MESSAGE_OVERHEAD_BYTES)
        })
    }

    /// The largest request message of an RPC whose row says `size`.
    pub fn message_bytes(&self, size: MessageSize) -> usize {
        match size {
            MessageSize::Small => self.max_small_message_bytes,
            MessageSize::Document => self.grpc_message_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_limit_follows_the_image_limits_unless_set() {
        let limits = LimitsConfig::default();
        assert_eq!(limits.grpc_message_bytes(), 129 * 1024 * 1024);
        let fewer = LimitsConfig {
            max_images: 2,
            ..LimitsConfig::default()
        };
        assert_eq!(fewer.grpc_message_bytes(), 17 * 1024 * 1024);
        let set = LimitsConfig {
            max_grpc_message_bytes: Some(4096),
            ..LimitsConfig::default()
        };
        assert_eq!(set.grpc_message_bytes(), 4096);
    }
}
