//! The fleet's event stream as its writers see it: its key, and how an
//! event is appended. Completion notices (`dedupe`, `progress`) and
//! control changes (`control`) are appended here; `stream` reads them,
//! and hands control changes to `control`, so the writers' side is a leaf
//! that neither imports.

use super::{Body, RedisConn};

/// The hash-tag group of every key written together with the stream
/// ([`RedisConn::tagged_key`]).
pub(in crate::cluster) const FLEET_GROUP: &str = "fleet";

/// The entry field holding the message (JSON of [`super::Message`]).
pub(in crate::cluster) const FIELD: &str = "m";

/// `{p}{fleet}:events`.
pub(in crate::cluster) fn stream_key(conn: &RedisConn) -> String {
    conn.tagged_key(FLEET_GROUP, "events")
}

/// `XADD {p}{fleet}:events MAXLEN ~ N * m <message>`: `body` told to the
/// fleet, the stream kept to about `stream_max_len` entries.
pub(in crate::cluster) fn append(conn: &RedisConn, body: Body) -> redis::Cmd {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream_key(conn))
        .arg("MAXLEN")
        .arg("~")
        .arg(conn.stream_max_len())
        .arg("*")
        .arg(FIELD)
        .arg(conn.message(body));
    cmd
}
