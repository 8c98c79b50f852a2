//! The fleet's supervisor: the task that reads the event stream, and what
//! it tells the replica ([`FleetEvent`]).
//!
//! Completion notices and control changes are appended to the Redis
//! stream `{p}{fleet}:events` (`XADD ... MAXLEN ~ stream_max_len`, so it
//! stays bounded; `event_log`). Each replica reads it on a connection of
//! its own (`XREAD BLOCK`, never on the shared command connection, which
//! a blocking read would stall; `Link::open_reader`: the server, the
//! master the sentinels name, or a cluster connection of its own routed
//! to the stream's slot) from the last entry it processed. A replica that
//! loses Redis for a while therefore reads, once back, every event
//! appended meanwhile (as long as the stream still holds them) and ends
//! those watches at once, instead of leaving them to polling as pub/sub
//! did. An event read twice is harmless: the watches end a journey's
//! watchers once, and a control change makes the replica re-read the
//! whole control state.
//!
//! A replica reads from the moment it started (less [`START_MARGIN`], for
//! clocks a little apart): one that starts while Redis is unreachable
//! still ends, once connected, the watches whose notices came meanwhile.
//!
//! The supervisor also keeps the up flag: on every (re)connection it
//! seeds the control state if Redis lost it, reads it, hands it to the
//! replica ([`FleetEvent::Control`]) and marks the cluster up; when the
//! reading connection fails it marks it down and reconnects with backoff,
//! keeping its position.
//!
//! Hash tag: a control change writes its keys and the stream in one
//! `MULTI`, so the stream and the control keys share the hash tag
//! `FLEET_GROUP` (`{p}{fleet}:...`: one Redis Cluster slot).

use std::{sync::Arc, time::Duration};

use redis::{Value, streams::StreamReadReply};

use tokio::sync::broadcast;

use super::{
    control::{ControlState, FleetControl},
    event_log::{Body, FIELD, Message, stream_key},
    notices::FleetNotice,
};
use crate::{
    cluster::redis::{RedisConn, link::Reader, now_ms},
    domain::JourneyRef,
};

/// The current control state of this replica, used to seed an empty Redis.
pub type SeedFn = Arc<dyn Fn() -> ControlState + Send + Sync>;

/// What other replicas did, as this replica learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetEvent {
    /// Another replica accepted a completion notice.
    Notice(FleetNotice),
    /// The control state, after another replica changed it, or after this
    /// replica (re)connected: apply it whole.
    Control(ControlState),
}

/// Where the supervisor tells this replica's subscribers what it learns.
type Tell = broadcast::Sender<FleetEvent>;

/// How long one `XREAD` waits for new entries. Also how often the
/// supervisor looks at the up flag while the stream is quiet.
const BLOCK: Duration = Duration::from_secs(1);

/// Most entries one `XREAD` returns (a catch-up reads in batches).
const READ_COUNT: usize = 256;

/// How far before its own start a replica reads the stream (entry ids
/// are Redis' clock in milliseconds; the replica's may be a little
/// ahead). Events read from before the start are harmless.
const START_MARGIN: Duration = Duration::from_secs(1);

/// Connects the reading connection, loads the control state, relays the
/// stream's entries to `tell`; on a failure, marks the cluster down and
/// starts over from the last entry processed.
pub(super) async fn supervise(conn: RedisConn, control: FleetControl, seed: SeedFn, tell: Tell) {
    let mut backoff = Duration::from_millis(50);
    let margin = u64::try_from(START_MARGIN.as_millis()).unwrap_or(0);
    let mut position = format!("{}-0", now_ms().saturating_sub(margin));
    let mut first = true;
    loop {
        match connect(
            &conn,
            &control,
            &seed,
            &tell,
            (!first).then_some(position.as_str()),
        )
        .await
        {
            Ok(mut reader) => {
                backoff = Duration::from_millis(50);
                first = false;
                while read(&conn, &control, &tell, &mut reader, &mut position)
                    .await
                    .is_ok()
                {
                    // A command failure marked the cluster down while the
                    // stream stayed readable: re-read and mark it up again.
                    if !conn.is_up() {
                        if let Ok(state) = control.read().await {
                            let _ = tell.send(FleetEvent::Control(state));
                            conn.set_up(true, "recovered");
                        }
                    }
                }
                conn.set_up(false, "event stream connection lost");
            }
            Err(why) => conn.set_up(false, why),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(conn.max_backoff());
    }
}

/// Opens the reading connection; on a reconnection from `position`, says
/// whether events it missed were trimmed; seeds and reads the control
/// state, and marks the cluster up.
async fn connect(
    conn: &RedisConn,
    control: &FleetControl,
    seed: &SeedFn,
    tell: &Tell,
    reconnecting_from: Option<&str>,
) -> Result<Reader, &'static str> {
    let mut reader = conn
        .link()
        .open_reader(conn.connect_timeout(), BLOCK + conn.command_timeout())
        .await?;
    if let Some(at) = reconnecting_from {
        warn_if_trimmed(conn, &mut reader, at).await;
    }
    control.seed(seed()).await.map_err(|_| "seed failed")?;
    let state = control.read().await.map_err(|_| "control read failed")?;
    let _ = tell.send(FleetEvent::Control(state));
    conn.set_up(true, "connected");
    Ok(reader)
}

/// Warns when the stream lost entries this replica had not read (an
/// outage longer than `stream_max_len` events): their watchers end by
/// polling. Redis 7 says so (`max-deleted-entry-id` of `XINFO STREAM`);
/// earlier releases do not, and nothing is said.
async fn warn_if_trimmed(conn: &RedisConn, reader: &mut Reader, position: &str) {
    let info: redis::RedisResult<std::collections::HashMap<String, Value>> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(stream_key(conn))
        .query_async(reader)
        .await;
    let deleted = info.ok().and_then(|i| match i.get("max-deleted-entry-id") {
        Some(Value::BulkString(id)) => String::from_utf8(id.clone()).ok(),
        Some(Value::SimpleString(id)) => Some(id.clone()),
        _ => None,
    });
    if deleted.is_some_and(|deleted| entry_id(&deleted) > entry_id(position)) {
        tracing::warn!(
            "fleet events were trimmed from the stream before this replica read them (an outage longer than [cluster] stream_max_len events): their watchers end by polling"
        );
    }
}

/// A stream entry id (`<ms>-<seq>`) as a comparable pair.
fn entry_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// One `XREAD BLOCK` from `position`: relays what it returns and moves
/// `position` past it. An error means the reading connection is gone.
async fn read(
    conn: &RedisConn,
    control: &FleetControl,
    tell: &Tell,
    reader: &mut Reader,
    position: &mut String,
) -> Result<(), ()> {
    let started = std::time::Instant::now();
    let reply: redis::RedisResult<Option<StreamReadReply>> = redis::cmd("XREAD")
        .arg("COUNT")
        .arg(READ_COUNT)
        .arg("BLOCK")
        .arg(u64::try_from(BLOCK.as_millis()).unwrap_or(1_000))
        .arg("STREAMS")
        .arg(stream_key(conn))
        .arg(position.as_str())
        .query_async(reader)
        .await;
    let outcome = if reply.is_ok() { "ok" } else { "unavailable" };
    conn.metrics()
        .record_cluster_op("XREAD", outcome, started.elapsed());
    let Some(reply) = reply.map_err(|_| ())? else {
        return Ok(());
    };
    for entry in reply.keys.into_iter().flat_map(|k| k.ids) {
        if let Some(Value::BulkString(payload)) = entry.map.get(FIELD) {
            on_message(conn, control, tell, payload).await;
        }
        *position = entry.id;
    }
    Ok(())
}

async fn on_message(conn: &RedisConn, control: &FleetControl, tell: &Tell, payload: &[u8]) {
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
            let _ = tell.send(FleetEvent::Notice(FleetNotice {
                journey,
                status,
                delivery,
            }));
        }
        Body::Control => match control.read().await {
            Ok(state) => {
                let _ = tell.send(FleetEvent::Control(state));
            }
            Err(_) => tracing::warn!("fleet control change announced but not readable"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::entry_id;

    #[test]
    fn entry_ids_compare_by_time_then_sequence() {
        assert!(entry_id("1700000000000-0") < entry_id("1700000000000-1"));
        assert!(entry_id("1700000000000-9") < entry_id("1700000000001-0"));
        assert!(
            entry_id("99-0") < entry_id("100-0"),
            "numerically, not as text"
        );
        assert_eq!(entry_id("0-0"), (0, 0));
    }
}
