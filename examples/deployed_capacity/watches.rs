//! Phase 2: what open `WatchJourney` streams cost the gateway's memory.
//! It creates `watches` journeys that stay open (no liveness proof, no
//! document: they never complete), opens one stream by reference on each,
//! `per_connection` streams on each of their own connections (the
//! gateway's `[serving] max_streams_per_connection`), and reads the
//! gateway's `VmRSS` before the journeys, after them, and with every
//! stream open; the gateway's own gauges say how many watches it holds.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use idgate::proto::v1::{self, journey_service_client::JourneyServiceClient};
use tonic::{metadata::AsciiMetadataValue, transport::Channel};

use crate::{
    child::Hop,
    journey::{call, create_request},
    load::failure_key,
};

/// Calls in flight at once while creating journeys and opening streams.
const IN_FLIGHT: usize = 64;
/// A pause before the last reading, so the gateway's last registrations
/// and the allocator settle.
const SETTLE: Duration = Duration::from_secs(2);

/// `VmRSS` of a `/proc/<pid>/status` text, in KiB.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The resident set of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    vm_rss_kib(&status).context("no VmRSS in /proc/<pid>/status")
}

/// The value of a series without labels in an OpenMetrics text.
pub fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (series, value) = line.split_once(' ')?;
        (series == name).then(|| value.trim().parse().ok())?
    })
}

/// What phase 2 saw.
pub struct WatchFigures {
    pub wanted: usize,
    pub opened: usize,
    pub failed: BTreeMap<String, u64>,
    pub connections: usize,
    /// Streams opened on each connection, at most.
    pub per_connection: usize,
    /// The gateway's RSS in KiB: before the journeys, after creating them,
    /// with every stream open.
    pub rss_kib: [u64; 3],
    pub create_seconds: f64,
    pub open_seconds: f64,
    /// From the first stream opened to the last reading.
    pub oldest_watch_seconds: f64,
    /// `idgate_watch_watchers` and `idgate_watch_journeys` with every
    /// stream open.
    pub gauges: (Option<f64>, Option<f64>),
}

impl WatchFigures {
    /// KiB of RSS per 10,000 open streams (the journeys' own records left
    /// out: they are read before the streams open).
    pub fn kib_per_10k(&self) -> f64 {
        let [_, journeys, watches] = self.rss_kib;
        (watches as f64 - journeys as f64) * 10_000.0 / self.opened.max(1) as f64
    }
}

/// Opens `count` connections to `url`.
async fn connect(url: &str, count: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::with_capacity(count);
    for _ in 0..count {
        channels.push(Channel::from_shared(url.to_owned())?.connect().await?);
    }
    Ok(channels)
}

/// Runs phase 2 on `hop` as the caller `bearer`; journeys are created over
/// `channels` (phase 1's).
pub async fn measure(
    hop: &Hop,
    bearer: &AsciiMetadataValue,
    channels: &[Channel],
    count: usize,
    per_connection: usize,
) -> anyhow::Result<WatchFigures> {
    let pid = hop.pid();
    let mut failed = BTreeMap::new();
    let before = rss_kib(pid)?;

    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut creating = tokio::task::JoinSet::new();
    for i in 0..count {
        let permit = limit.clone().acquire_owned().await?;
        let mut client = JourneyServiceClient::new(channels[i % channels.len()].clone());
        let request = call(Some(bearer), create_request("WATCHED1"));
        creating.spawn(async move {
            let answer = client.create_journey(request).await;
            drop(permit);
            answer.map(|r| r.into_inner().journey_ref)
        });
    }
    let refs = gather(creating, "CreateJourney", &mut failed).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let created = rss_kib(pid)?;

    let url = format!("http://{}", hop.grpc);
    let watch_channels = connect(&url, refs.len().div_ceil(per_connection.max(1))).await?;
    let started = Instant::now();
    let mut opening = tokio::task::JoinSet::new();
    for (i, journey_ref) in refs.into_iter().enumerate() {
        let permit = limit.clone().acquire_owned().await?;
        let mut client = JourneyServiceClient::new(watch_channels[i / per_connection].clone());
        let request = call(
            Some(bearer),
            v1::WatchJourneyRequest {
                journey: Some(v1::watch_journey_request::Journey::JourneyRef(journey_ref)),
            },
        );
        opening.spawn(async move {
            let answer = client.watch_journey(request).await;
            drop(permit);
            answer.map(tonic::Response::into_inner)
        });
    }
    // The streams stay open (held here) until the readings are done.
    let streams = gather(opening, "WatchJourney", &mut failed).await?;
    let open_seconds = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let metrics = hop.metrics().await?;
    let open = rss_kib(pid)?;
    let figures = WatchFigures {
        wanted: count,
        opened: streams.len(),
        failed,
        connections: watch_channels.len(),
        per_connection,
        rss_kib: [before, created, open],
        create_seconds,
        open_seconds,
        oldest_watch_seconds: started.elapsed().as_secs_f64(),
        gauges: (
            gauge(&metrics, "idgate_watch_watchers"),
            gauge(&metrics, "idgate_watch_journeys"),
        ),
    };
    drop(streams);
    drop(watch_channels);
    Ok(figures)
}

/// Waits for every call in `calls`: the answers, and each failure counted
/// in `failed` under `rpc` and its code.
async fn gather<T: 'static>(
    mut calls: tokio::task::JoinSet<Result<T, tonic::Status>>,
    rpc: &str,
    failed: &mut BTreeMap<String, u64>,
) -> anyhow::Result<Vec<T>> {
    let mut answers = Vec::with_capacity(calls.len());
    while let Some(done) = calls.join_next().await {
        match done? {
            Ok(answer) => answers.push(answer),
            Err(status) => {
                *failed
                    .entry(format!("{rpc} {}", failure_key(&status)))
                    .or_default() += 1
            }
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_kib() {
        let status = "Name:\tidgate\nVmPeak:\t  900000 kB\nVmHWM:\t   70000 kB\nVmRSS:\t   65536 kB\nThreads:\t9\n";
        assert_eq!(vm_rss_kib(status), Some(65_536));
        assert_eq!(vm_rss_kib("Name:\tkthreadd\n"), None);
        // This process has a resident set.
        assert!(rss_kib(std::process::id()).expect("own status") > 0);
    }

    #[test]
    fn a_gauge_is_the_series_of_that_exact_name() {
        let metrics = "# TYPE idgate_watch_watchers gauge\n\
                       idgate_watch_watchers 10000\n\
                       idgate_watch_watchers_total 3\n\
                       idgate_watch_journeys 9999\n# EOF\n";
        assert_eq!(gauge(metrics, "idgate_watch_watchers"), Some(10_000.0));
        assert_eq!(gauge(metrics, "idgate_watch_journeys"), Some(9_999.0));
        assert_eq!(gauge(metrics, "idgate_watch_result_reads_total"), None);
    }

    #[test]
    fn memory_per_ten_thousand_watches_leaves_the_journeys_out() {
        let figures = WatchFigures {
            wanted: 2_000,
            opened: 2_000,
            failed: BTreeMap::new(),
            connections: 20,
            per_connection: 100,
            rss_kib: [60_000, 61_000, 65_000],
            create_seconds: 1.0,
            open_seconds: 1.0,
            oldest_watch_seconds: 3.0,
            gauges: (Some(2_000.0), Some(2_000.0)),
        };
        assert_eq!(figures.kib_per_10k(), 20_000.0);
    }
}
