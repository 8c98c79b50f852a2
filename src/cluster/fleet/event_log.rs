//! The fleet's event stream as its writers see it: its key, what an entry
//! holds, and how one is appended. Completion notices (`notices`,
//! `read_turns`) and control changes (`control`) are appended here; the
//! `supervisor` reads them. Both sides depend on this file, and it on
//! neither.

use serde::{Deserialize, Serialize};

use crate::cluster::redis::{RedisConn, now_ms};

/// The hash-tag group of every key written together with the stream
/// ([`RedisConn::tagged_key`]).
pub(super) const FLEET_GROUP: &str = "fleet";

/// The entry field holding the message (JSON of [`Message`]).
pub(super) const FIELD: &str = "m";

/// What crosses the event stream. No appkey, no result, no person.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Message {
    /// The replica that sent it (its own messages are skipped).
    pub(super) origin: String,
    /// Unix milliseconds at sending, for the lag metric.
    pub(super) sent_ms: u64,
    #[serde(flatten)]
    pub(super) body: Body,
}

/// What a fleet message tells.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Body {
    /// A completion notice another replica accepted.
    Notice {
        journey_ref: String,
        status: String,
        delivery: String,
    },
    /// The control state changed: read it again.
    Control,
}

/// `{p}{fleet}:events`.
pub(super) fn stream_key(conn: &RedisConn) -> String {
    conn.tagged_key(FLEET_GROUP, "events")
}

/// `XADD {p}{fleet}:events MAXLEN ~ N * m <message>`: `body` told to the
/// fleet by this replica, the stream kept to about `stream_max_len`
/// entries.
pub(super) fn append(conn: &RedisConn, body: Body) -> redis::Cmd {
    let message = serde_json::to_string(&Message {
        origin: conn.origin().to_owned(),
        sent_ms: now_ms(),
        body,
    })
    .unwrap_or_default();
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream_key(conn))
        .arg("MAXLEN")
        .arg("~")
        .arg(conn.stream_max_len())
        .arg("*")
        .arg(FIELD)
        .arg(message);
    cmd
}
