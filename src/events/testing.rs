//! Test doubles for the events module.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt as _;

use super::{ResultSource, WatchSettings, WatchStream};
use crate::{
    Error,
    domain::Appkey,
    domain::Operation,
    proto::v1::{JourneyResult, JourneyStatus, WatchJourneyResponse},
    upstream::UpstreamError,
};

/// One answer of the double.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// A result with this status.
    Status(JourneyStatus),
    /// HTTP 503: transient.
    Unavailable,
    /// HTTP 401: permanent.
    Unauthorized,
    /// HTTP 404: no liveness proof yet, or an appkey the service never
    /// issued.
    NotFound,
    /// The REST client panics.
    Panic,
}

/// A `ResultSource` that answers from a script per appkey (the last step
/// repeats; unscripted appkeys read COMPLETE) and counts its reads.
#[derive(Default)]
pub(crate) struct ScriptedSource {
    scripts: Mutex<HashMap<String, VecDeque<Step>>>,
    reads: Mutex<HashMap<String, usize>>,
    total: AtomicUsize,
}

impl ScriptedSource {
    pub(crate) fn script(&self, appkey: &str, steps: &[Step]) {
        self.scripts
            .lock()
            .unwrap()
            .insert(appkey.to_owned(), steps.iter().copied().collect());
    }

    pub(crate) fn reads(&self, appkey: &str) -> usize {
        self.reads.lock().unwrap().get(appkey).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

pub(crate) fn raw(status: JourneyStatus) -> &'static str {
    match status {
        JourneyStatus::Complete => "Completo",
        JourneyStatus::Processing => "Em processamento",
        JourneyStatus::NotProcessed => "Não processado",
        JourneyStatus::Error => "Erro",
        JourneyStatus::Unspecified => "?",
    }
}

pub(crate) fn result(status: JourneyStatus) -> JourneyResult {
    JourneyResult {
        status: status as i32,
        raw_status: raw(status).to_owned(),
        customer_reference: "proposal-1".to_owned(),
        ..Default::default()
    }
}

impl ResultSource for ScriptedSource {
    async fn fetch(&self, appkey: &Appkey) -> Result<JourneyResult, Error> {
        let key = appkey.expose().to_owned();
        *self.reads.lock().unwrap().entry(key.clone()).or_default() += 1;
        self.total.fetch_add(1, Ordering::SeqCst);
        let step = {
            let mut scripts = self.scripts.lock().unwrap();
            match scripts.get_mut(&key) {
                Some(steps) if steps.len() > 1 => steps.pop_front(),
                Some(steps) => steps.front().copied(),
                None => None,
            }
        };
        match step.unwrap_or(Step::Status(JourneyStatus::Complete)) {
            Step::Status(s) => Ok(result(s)),
            Step::Unavailable => Err(UpstreamError::Status {
                op: Operation::Result,
                status: 503,
            }
            .into()),
            Step::Unauthorized => Err(UpstreamError::Status {
                op: Operation::Result,
                status: 401,
            }
            .into()),
            Step::NotFound => Err(UpstreamError::Status {
                op: Operation::Result,
                status: 404,
            }
            .into()),
            Step::Panic => panic!("result source failure injected by the test"),
        }
    }
}

/// Fast settings: no fallback for an hour, millisecond backoff.
pub(crate) fn settings() -> WatchSettings {
    WatchSettings {
        webhook_grace: Duration::from_secs(3600),
        poll_initial: Duration::from_millis(1),
        poll_max: Duration::from_millis(5),
        settle_limit: Duration::from_secs(10),
        ..WatchSettings::default()
    }
}

/// Everything a stream yields until it closes, with a safety bound so a
/// bug fails the test instead of hanging it.
pub(crate) async fn collect(
    stream: WatchStream,
) -> Vec<Result<WatchJourneyResponse, tonic::Status>> {
    tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .expect("the watch stream did not close")
}

/// The statuses of a collected stream, and whether the last item carries
/// the result.
pub(crate) fn statuses(
    items: &[Result<WatchJourneyResponse, tonic::Status>],
) -> Vec<JourneyStatus> {
    items
        .iter()
        .filter_map(|i| i.as_ref().ok())
        .map(|r| r.status())
        .collect()
}
