//! `[limits]`: what callers may send.

use serde::Deserialize;

/// Limits on what callers send.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest image or PDF accepted, in bytes.
    pub max_image_bytes: usize,
    /// Most images in one request.
    pub max_images: usize,
    /// Largest gRPC message accepted, in bytes.
    pub max_grpc_message_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_image_bytes: 8 * 1024 * 1024,
            max_images: 16,
            max_grpc_message_bytes: 64 * 1024 * 1024,
        }
    }
}
