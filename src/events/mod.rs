//! Journey events: the completion webhook receiver and `WatchJourney`.
//!
//! ```text
//! service --POST notice--> webhook (auth, dedupe, 202) --notify--> JourneyWatches
//!                                                                  |  one task per watched journey:
//!                                                                  |  the current state first, then the
//!                                                                  |  notice (or the grace period), read
//!                                                                  |  the result via ResultSource until
//!                                                                  |  it settles, publish on a watch channel
//! caller --WatchJourney--> JourneyWatches::watch --> stream per watcher <-'
//! ```
//!
//! - [`webhook`]: the axum router that receives the notice; [`delivery_proof`]:
//!   its Basic credentials or HMAC signature.
//! - [`watches`]: [`JourneyWatches`], the per-journey read loops shared by
//!   watchers, and the stream each watcher gets ([`WatchStream`]).
//!
//! Appkeys travel only inside [`Appkey`]; logs and errors name journeys by
//! their [`JourneyRef`](crate::domain::JourneyRef).

pub mod delivery_proof;
#[cfg(test)]
mod testing;
pub mod watches;
pub mod webhook;

use std::{future::Future, pin::Pin, sync::Arc};

pub use watches::config::{WatchConfig, WatchSettings};
pub use watches::{JourneyWatches, WatchStats, WatchTarget};
pub use watches::{ResultViewer, WatchStream};
pub use webhook::config::{BasicCredentials, HmacSecret, WebhookConfig, WebhookSettings};
pub use webhook::{RejectReason, WebhookReceiver, WebhookStats};

use crate::{domain::Appkey, proto::v1::JourneyResult};

/// Reads a journey's result (the gateway's REST client implements this;
/// tests use a double). Called only after a completion notice, or after
/// the webhook grace period passed without one.
pub trait ResultSource: Send + Sync + 'static {
    /// Reads the current result of the journey of `appkey`.
    fn fetch(
        &self,
        appkey: &Appkey,
    ) -> impl Future<Output = Result<JourneyResult, crate::Error>> + Send;
}

impl<T: ResultSource> ResultSource for Arc<T> {
    fn fetch(
        &self,
        appkey: &Appkey,
    ) -> impl Future<Output = Result<JourneyResult, crate::Error>> + Send {
        T::fetch(self, appkey)
    }
}

/// The object-safe form of [`ResultSource`], so the watches are not generic.
pub(crate) trait DynResultSource: Send + Sync {
    fn fetch<'a>(
        &'a self,
        appkey: &'a Appkey,
    ) -> Pin<Box<dyn Future<Output = Result<JourneyResult, crate::Error>> + Send + 'a>>;
}

impl<S: ResultSource> DynResultSource for S {
    fn fetch<'a>(
        &'a self,
        appkey: &'a Appkey,
    ) -> Pin<Box<dyn Future<Output = Result<JourneyResult, crate::Error>> + Send + 'a>> {
        Box::pin(ResultSource::fetch(self, appkey))
    }
}

/// The outcome a completion notice announces (`Status` of the webhook body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeStatus {
    /// `Completo`.
    Complete,
    /// `Erro` (the spec also writes `Error`).
    Error,
}

impl NoticeStatus {
    /// Parses the webhook's `Status`; `None` for any other value.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("Completo") {
            Some(NoticeStatus::Complete)
        } else if s.eq_ignore_ascii_case("Erro") || s.eq_ignore_ascii_case("Error") {
            Some(NoticeStatus::Error)
        } else {
            None
        }
    }

    /// A label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeStatus::Complete => "complete",
            NoticeStatus::Error => "error",
        }
    }

    /// The status of a label [`NoticeStatus::as_str`] gave (as notices
    /// cross the fleet).
    pub fn from_label(label: &str) -> Option<Self> {
        match label {
            "complete" => Some(NoticeStatus::Complete),
            "error" => Some(NoticeStatus::Error),
            _ => None,
        }
    }
}

/// An authenticated completion notice.
#[derive(Debug, Clone)]
pub struct Notice {
    /// The journey's appkey (redacted in `Debug`).
    pub appkey: Appkey,
    /// What the service announced.
    pub status: NoticeStatus,
}
