//! `GET /metrics`: the channels' circuit states (which change with time
//! alone) and the counters the webhook receiver and the journey watches keep
//! themselves, brought into the registry at scrape time, then the registry
//! encoded. The router counts its channel series as each call ends.

use std::sync::Arc;

use axum::{extract::State, response::Response, routing::MethodRouter};

use crate::{
    channels::ChannelRouter,
    events::{JourneyWatches, RejectReason, WebhookReceiver},
    telemetry::{self, Metrics, metrics::WatchCounts},
};

/// What `/metrics` reads at scrape time.
#[derive(Clone)]
pub(in crate::server) struct Scrape {
    pub(in crate::server) metrics: Metrics,
    pub(in crate::server) router: Arc<ChannelRouter>,
    pub(in crate::server) receiver: Option<WebhookReceiver>,
    pub(in crate::server) watches: JourneyWatches,
}

impl Scrape {
    /// The `/metrics` route.
    pub(super) fn route(self) -> MethodRouter {
        axum::routing::get(scrape_metrics).with_state(self)
    }
}

/// Sets the channels' circuit states and brings the counters kept by the
/// webhook receiver and the journey watches into the registry, then encodes
/// it.
async fn scrape_metrics(State(s): State<Scrape>) -> Response {
    for ch in s.router.snapshot().channels {
        s.metrics
            .set_channel_circuit_state(&ch.name, ch.circuit.gauge_value());
    }
    let watches = s.watches.stats();
    s.metrics.sync_watch(WatchCounts {
        journeys: watches.journeys,
        watchers: watches.watchers,
        result_reads: watches.result_reads,
        notice_timeouts: watches.notice_timeouts,
        fleet_results: watches.fleet_results,
    });
    s.metrics
        .sync_audit_write_failures(telemetry::log_lines::audit_write_failures());
    for (outcome, total) in telemetry::audit_export::totals() {
        s.metrics.sync_audit_export(outcome, total);
    }
    if let Some(r) = &s.receiver {
        let stats = r.stats();
        s.metrics.sync_webhooks("received", stats.received);
        s.metrics.sync_webhooks("accepted", stats.accepted);
        s.metrics.sync_webhooks("duplicate", stats.duplicates);
        s.metrics.sync_webhooks("body_read", stats.bodies_read);
        for reason in RejectReason::ALL {
            s.metrics
                .sync_webhooks(reason.metric_label(), stats.rejected(reason));
        }
    }
    telemetry::metrics_handler(State(s.metrics)).await
}
