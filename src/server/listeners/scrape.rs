//! `GET /metrics`: the counters the router, the webhook receiver and the
//! journey hub keep themselves, brought into the registry at scrape time,
//! then the registry encoded.

use std::sync::Arc;

use axum::{extract::State, response::Response, routing::MethodRouter};

use crate::{
    channels::ChannelRouter,
    events::{JourneyHub, RejectReason, WebhookReceiver},
    telemetry::{
        self, Metrics,
        metrics::{ChannelSessionCounts, WatchCounts},
    },
};

/// What `/metrics` reads at scrape time.
#[derive(Clone)]
pub(in crate::server) struct Scrape {
    pub(in crate::server) metrics: Metrics,
    pub(in crate::server) router: Arc<ChannelRouter>,
    pub(in crate::server) receiver: Option<WebhookReceiver>,
    pub(in crate::server) hub: JourneyHub,
}

impl Scrape {
    /// The `/metrics` route.
    pub(super) fn route(self) -> MethodRouter {
        axum::routing::get(scrape_metrics).with_state(self)
    }
}

/// Brings the counters kept by the router, the webhook receiver and the
/// journey hub into the registry, then encodes it.
async fn scrape_metrics(State(s): State<Scrape>) -> Response {
    for ch in s.router.snapshot().channels {
        s.metrics.sync_channel_failovers(&ch.name, ch.failovers);
        s.metrics
            .set_channel_circuit_state(&ch.name, ch.circuit.gauge_value());
        s.metrics.sync_channel_sessions(
            &ch.name,
            ChannelSessionCounts {
                started: ch.sessions_started,
                failed: ch.session_failures,
                contingency: ch.contingency_answers,
            },
        );
    }
    let hub = s.hub.stats();
    s.metrics.sync_watch(WatchCounts {
        journeys: hub.journeys,
        watchers: hub.watchers,
        result_reads: hub.result_reads,
        notice_timeouts: hub.notice_timeouts,
    });
    if let Some(r) = &s.receiver {
        let stats = r.stats();
        s.metrics.sync_webhooks("received", stats.received);
        s.metrics.sync_webhooks("accepted", stats.accepted);
        s.metrics.sync_webhooks("duplicate", stats.duplicates);
        for reason in RejectReason::ALL {
            s.metrics
                .sync_webhooks(reason.metric_label(), stats.rejected(reason));
        }
    }
    telemetry::metrics_handler(State(s.metrics)).await
}
