//! The gateway as a replica of a fleet: what it learns from the other
//! replicas applied to its router and watches, and its vendor figures
//! added to the fleet's.
//!
//! ```text
//! Fleet::subscribe --FleetEvent::Notice--> JourneyWatches::notify_from_fleet (watchers here read the result, once)
//!                  --FleetEvent::Control-> ChannelRouter::apply_control (mode, drains, hold)
//! FleetShare::flush --every FLUSH_INTERVAL--> FleetFigures::add (vendor figures, off the call path)
//! ```
//!
//! One process has no fleet and joins none: nothing here runs for it.

use std::{sync::Arc, time::Duration};

use tokio::{
    sync::{broadcast::error::RecvError, watch},
    task::JoinHandle,
};

use crate::{
    channels::{ChannelRouter, figures::fleet_share::FLUSH_INTERVAL},
    cluster::{Fleet, FleetEvent},
    config::Config,
    events::{JourneyWatches, NoticeStatus},
};

/// Joins `fleet` before serving: relays the other replicas' events to
/// `router` and `watches`, connects, and loads the fleet's control state
/// (waiting at most the connect and command timeouts; a replica that
/// cannot reach Redis starts on its configured state and catches up on
/// reconnection).
pub(super) async fn join(
    fleet: &Fleet,
    config: &Config,
    router: &Arc<ChannelRouter>,
    watches: &JourneyWatches,
    stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let events = fleet.subscribe();
    tokio::spawn(flush_figures(router.clone(), stopped.clone()));
    let relay = tokio::spawn(relay(events, router.clone(), watches.clone(), stopped));
    let seed_router = router.clone();
    fleet.start(Arc::new(move || seed_router.control_state()));
    let wait = Duration::from_millis(
        config.cluster.connect_timeout_ms + 4 * config.cluster.command_timeout_ms,
    );
    if fleet.wait_up(wait).await {
        match fleet.control().read().await {
            Ok(state) => router.apply_control(&state),
            Err(_) => tracing::warn!("the fleet's control state could not be read at start"),
        }
    } else {
        tracing::warn!(
            "Redis unreachable at start: serving on the configured routing state until it answers"
        );
    }
    relay
}

/// Adds the router's vendor figures to the fleet's every
/// [`FLUSH_INTERVAL`], and once more when the gateway stops (the router of
/// a replica shares them: [`ChannelRouter::with_fleet`]). A failed flush
/// keeps its counts for the next.
async fn flush_figures(router: Arc<ChannelRouter>, mut stopped: watch::Receiver<bool>) {
    let Some(share) = router.figures().fleet() else {
        return;
    };
    let mut tick = tokio::time::interval(FLUSH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = tick.tick() => false,
            _ = stopped.wait_for(|s| *s) => true,
        };
        if let Err(e) = share.flush().await {
            tracing::debug!(error = %e, "vendor figures kept for the next flush");
        }
        if stopping {
            return;
        }
    }
}

/// Applies what the fleet tells, until the gateway stops.
async fn relay(
    mut events: tokio::sync::broadcast::Receiver<FleetEvent>,
    router: Arc<ChannelRouter>,
    watches: JourneyWatches,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = stopped.wait_for(|s| *s) => return,
        };
        match event {
            Ok(FleetEvent::Notice(notice)) => {
                if let Some(status) = NoticeStatus::from_label(&notice.status) {
                    let final_read = notice.announces_result();
                    let watched =
                        watches.notify_from_fleet(notice.journey.clone(), status, final_read);
                    tracing::debug!(journey = %notice.journey, watched, "completion notice from the fleet");
                }
            }
            Ok(FleetEvent::Control(state)) => router.apply_control(&state),
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "fleet events missed; watchers fall back to polling"
                );
            }
            Err(RecvError::Closed) => return,
        }
    }
}
