//! Document processing over time, evaluated lazily against the clock.
//!
//! A submission is "awaiting" for the first half of the processing delay,
//! "in processing" for the second half, then processed (or failed, when a
//! document was marked `+unreadable`). Nothing runs in the background: any
//! reader computes the stage from the submission time and `now`.

use time::OffsetDateTime;

use super::store::records::{AppkeyRecord, Submission, SubmissionContent};

/// Where a submission's processing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Awaiting,
    InProcessing,
    Processed,
    Failed,
}

impl Stage {
    /// `statusProcessamento`.
    pub(crate) fn status_processamento(self) -> u32 {
        match self {
            Stage::Awaiting => 2,
            Stage::InProcessing => 3,
            Stage::Processed => 4,
            Stage::Failed => 6,
        }
    }

    /// `documentos[].statusArquivo`.
    pub(crate) fn status_arquivo(self) -> u32 {
        match self {
            Stage::Awaiting => 7,
            Stage::InProcessing => 9,
            Stage::Processed => 22,
            Stage::Failed => 8,
        }
    }

    /// `arquivosProcessado.statusArquivoProcessado`.
    pub(crate) fn status_arquivo_processado(self) -> u32 {
        match self {
            Stage::Awaiting => 10,
            Stage::InProcessing => 12,
            Stage::Processed => 19,
            Stage::Failed => 11,
        }
    }

    /// Processing has ended, well or badly.
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Stage::Processed | Stage::Failed)
    }
}

/// The journey's top-level `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JourneyStatus {
    /// No document submitted yet.
    NotProcessed,
    /// Documents are being processed.
    InProcessing,
    /// Everything processed.
    Complete,
    /// Document processing failed.
    Error,
}

impl JourneyStatus {
    /// The wire value (`Completo`, `Em processamento`, ...).
    pub fn as_wire(self) -> &'static str {
        match self {
            JourneyStatus::NotProcessed => "Não processado",
            JourneyStatus::InProcessing => "Em processamento",
            JourneyStatus::Complete => "Completo",
            JourneyStatus::Error => "Erro",
        }
    }

    /// The journey is finished: a completion notice is due.
    pub fn is_final(self) -> bool {
        matches!(self, JourneyStatus::Complete | JourneyStatus::Error)
    }
}

/// When the submission's processing ends.
pub(crate) fn finishes_at(sub: &Submission, delay: time::Duration) -> OffsetDateTime {
    sub.at.saturating_add(delay)
}

/// The stage of `sub` at `now`.
pub(crate) fn stage(sub: &Submission, now: OffsetDateTime, delay: time::Duration) -> Stage {
    if now >= finishes_at(sub, delay) {
        let unreadable = match &sub.content {
            SubmissionContent::Images(images) => {
                images.iter().any(|i| i.recognised.flags.unreadable)
            }
            SubmissionContent::Licence { .. } => false,
        };
        if unreadable {
            Stage::Failed
        } else {
            Stage::Processed
        }
    } else if now >= sub.at.saturating_add(delay / 2) {
        Stage::InProcessing
    } else {
        Stage::Awaiting
    }
}

/// The journey status of an appkey at `now`.
pub(crate) fn status(
    rec: &AppkeyRecord,
    now: OffsetDateTime,
    delay: time::Duration,
) -> JourneyStatus {
    match &rec.submission {
        None => JourneyStatus::NotProcessed,
        Some(sub) => match stage(sub, now, delay) {
            Stage::Awaiting | Stage::InProcessing => JourneyStatus::InProcessing,
            Stage::Processed => JourneyStatus::Complete,
            Stage::Failed => JourneyStatus::Error,
        },
    }
}
