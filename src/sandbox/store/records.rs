//! The records the store keeps, and the views of them it hands out.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use time::{Date, OffsetDateTime};

use crate::sandbox::documents::{LicenceFormat, Recognised};
use crate::sandbox::liveness::LivenessOutcome;

/// Durations and bounds the store enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) credential_ttl: time::Duration,
    pub(crate) appkey_ttl: time::Duration,
    pub(crate) challenge_window: time::Duration,
    pub(crate) retention: time::Duration,
    pub(crate) processing_delay: time::Duration,
    pub(crate) max_entries: usize,
}

/// The end user an appkey was created for.
#[derive(Clone)]
pub(crate) struct EndUser {
    pub(crate) cpf: String,
    pub(crate) name: String,
    pub(crate) birth: Date,
}

/// How the liveness proof was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LivenessMode {
    TwoD,
    ThreeD,
}

/// An image kept for the result's `fotos`, held as the Base64 text it is
/// returned in: encoded once, when stored, not on every result read.
#[derive(Clone)]
pub(crate) struct Base64Image(Arc<str>);

impl Base64Image {
    pub(crate) fn encode(bytes: &[u8]) -> Self {
        Self(STANDARD.encode(bytes).into())
    }

    /// The standard Base64 text of the image.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The one liveness proof an appkey can hold.
#[derive(Clone)]
pub(crate) struct LivenessProof {
    pub(crate) mode: LivenessMode,
    pub(crate) outcome: LivenessOutcome,
    pub(crate) protocol: u64,
    pub(crate) bureau_protocol: u64,
    /// The frontal photo returned in `fotos`.
    pub(crate) frontal: Base64Image,
}

/// One recognised document image.
#[derive(Clone)]
pub(crate) struct DocumentImage {
    pub(crate) recognised: Recognised,
    pub(crate) image: Base64Image,
}

/// What a document submission carried.
#[derive(Clone)]
pub(crate) enum SubmissionContent {
    Images(Vec<DocumentImage>),
    Licence {
        format: LicenceFormat,
        image: Base64Image,
    },
}

/// The latest accepted document submission of an appkey; a new one
/// replaces it and restarts processing.
#[derive(Clone)]
pub(crate) struct Submission {
    pub(crate) seq: u64,
    pub(crate) at: OffsetDateTime,
    pub(crate) ticket: String,
    pub(crate) analysis_id: u64,
    pub(crate) codigo_documento: u64,
    pub(crate) biometry_protocol: u64,
    pub(crate) content: SubmissionContent,
}

/// Everything known about one appkey. Deliberately not `Debug`: it holds
/// personal data and images.
#[derive(Clone)]
pub(crate) struct AppkeyRecord {
    pub(crate) user: EndUser,
    pub(crate) external_id: String,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) expires_at: OffsetDateTime,
    pub(crate) liveness: Option<LivenessProof>,
    pub(crate) submission: Option<Submission>,
    /// Submission whose completion notice was already queued.
    pub(crate) notified_seq: Option<u64>,
    /// Keys of this appkey's 2D challenges (some may already be purged from
    /// the table); emptied when the proof is made.
    pub(super) challenge_keys: Vec<String>,
    /// Tokens of this appkey's 3D sessions, likewise.
    pub(super) session_keys: Vec<String>,
}

impl AppkeyRecord {
    pub(super) fn expired(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }
}

/// Sizes of the store's tables, for tests and the admin endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StoreSizes {
    /// Credential tokens held.
    pub tokens: usize,
    /// Appkeys held (expired ones until their retention ends).
    pub appkeys: usize,
    /// Open 2D challenges.
    pub challenges: usize,
    /// Open 3D sessions.
    pub sessions: usize,
}

/// What a test can see of one appkey, without its personal data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppkeyState {
    /// The appkey's validity has passed.
    pub expired: bool,
    /// The liveness verdict, once a proof was made.
    pub liveness: Option<LivenessOutcome>,
    /// Open 2D challenges of this appkey.
    pub open_challenges: usize,
    /// Open 3D sessions of this appkey.
    pub open_sessions: usize,
    /// Images of the latest accepted document submission (1 for a licence).
    pub documents: usize,
    /// The journey status the result would show (`None`: result is 404).
    pub status: Option<&'static str>,
}
