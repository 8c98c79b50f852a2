//! The supervisor task: the pub/sub connection on `{prefix}events`, the
//! control state on every (re)connection, and the up flag.
//!
//! It relays what other replicas publish (completion notices, control
//! changes) to this replica's subscribers as [`FleetEvent`]s, and skips
//! its own messages.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt as _;

use super::{Body, Message, RedisConn, now_ms};
use crate::{
    cluster::{ControlState, FleetEvent, FleetNotice, control::RedisControl},
    domain::JourneyRef,
};

/// The current control state of this replica, used to seed an empty Redis.
pub type SeedFn = Arc<dyn Fn() -> ControlState + Send + Sync>;

/// Connects the pub/sub channel, loads the control state, relays
/// messages; on a drop, marks the cluster down and starts over.
pub(in crate::cluster) async fn supervise(conn: RedisConn, control: RedisControl, seed: SeedFn) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match connect(&conn, &control, &seed).await {
            Ok(mut stream) => {
                backoff = Duration::from_millis(50);
                let mut check = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tokio::select! {
                        message = stream.next() => match message {
                            Some(m) => on_message(&conn, &control, m.get_payload_bytes()).await,
                            None => break,
                        },
                        _ = check.tick() => {
                            // A command failure marked the cluster down while
                            // pub/sub stayed up: re-read and mark it up again.
                            if !conn.is_up() {
                                if let Ok(state) = control.read().await {
                                    conn.tell(FleetEvent::Control(state));
                                    conn.set_up(true, "recovered");
                                }
                            }
                        }
                    }
                }
                conn.set_up(false, "pub/sub connection lost");
            }
            Err(why) => conn.set_up(false, why),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(conn.max_backoff());
    }
}

async fn connect(
    conn: &RedisConn,
    control: &RedisControl,
    seed: &SeedFn,
) -> Result<redis::aio::PubSubStream, &'static str> {
    let mut pubsub = conn.link().open_pubsub(conn.connect_timeout()).await?;
    tokio::time::timeout(conn.command_timeout(), pubsub.subscribe(conn.events_key()))
        .await
        .map_err(|_| "subscribe timeout")?
        .map_err(|_| "subscribe failed")?;
    control.seed(seed()).await.map_err(|_| "seed failed")?;
    let state = control.read().await.map_err(|_| "control read failed")?;
    conn.tell(FleetEvent::Control(state));
    conn.set_up(true, "connected");
    Ok(pubsub.into_on_message())
}

async fn on_message(conn: &RedisConn, control: &RedisControl, payload: &[u8]) {
    let Ok(message) = serde_json::from_slice::<Message>(payload) else {
        tracing::debug!("unreadable fleet message ignored");
        return;
    };
    if message.origin == conn.origin() {
        return;
    }
    let lag = now_ms().saturating_sub(message.sent_ms);
    conn.metrics()
        .record_cluster_lag(Duration::from_millis(lag));
    match message.body {
        Body::Notice {
            journey_ref,
            status,
            delivery,
        } => {
            let Some(journey) = JourneyRef::parse(&journey_ref) else {
                return;
            };
            conn.tell(FleetEvent::Notice(FleetNotice {
                journey,
                status,
                delivery,
            }));
        }
        Body::Control => match control.read().await {
            Ok(state) => conn.tell(FleetEvent::Control(state)),
            Err(_) => tracing::warn!("fleet control change announced but not readable"),
        },
    }
}
