//! `GET /metrics`: the channels' circuit states (which change with time
//! alone) and the counters the webhook receiver and the journey watches keep
//! themselves, and each configured caller's use of its shares (request
//! bytes held now), brought into the registry at scrape time, then the
//! registry encoded. The router counts its channel series as each call
//! ends.

use std::sync::Arc;

use axum::{extract::State, response::Response, routing::MethodRouter};

use crate::{
    api::AdmissionLayer,
    auth::Authenticator,
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
    /// The caller table (each caller's shares).
    pub(in crate::server) auth: Arc<Authenticator>,
    /// The door, which holds each caller's request bytes.
    pub(in crate::server) admission: AdmissionLayer,
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
    sync_shares(&s);
    telemetry::metrics_handler(State(s.metrics)).await
}

/// Each configured caller's shares, the request bytes it holds now and
/// its live journeys as the journey store knows them here (in a fleet, as
/// of this replica's last `CreateJourney` of that caller).
fn sync_shares(s: &Scrape) {
    let journeys = s.watches.journeys();
    let held: std::collections::HashMap<_, _> = s.admission.bytes_held().into_iter().collect();
    for caller in s.auth.policy().current().callers() {
        let meter = s.metrics.caller(caller.name.as_str());
        let limits = caller.limits;
        let bytes = held.get(&caller.name).copied().unwrap_or(0);
        let share = |n: usize| (n != usize::MAX).then_some(n);
        meter.set_share("body_bytes", bytes, share(limits.max_body_bytes));
        match journeys.owned(&caller.name) {
            Some(owned) => meter.set_share("journeys", owned, share(limits.max_journeys)),
            None => meter.set_share_limit("journeys", share(limits.max_journeys)),
        }
    }
}
