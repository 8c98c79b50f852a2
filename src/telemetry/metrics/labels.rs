//! Label values built without allocating on the call path.
//!
//! Every upstream call records its channel and HTTP status. Building an
//! owned `String` for each, only to look up a series that already exists,
//! was a measurable share of a call's cost (see `docs/performance.md`), so
//! the values are `&'static str`: channel names are interned the first
//! time they are seen, status codes come from a table.

use std::{
    borrow::Cow,
    collections::HashSet,
    sync::{LazyLock, RwLock},
};

use crate::sync::{read, write};

/// Most distinct channel names interned in one process. Channel names come
/// from the configuration (validated, at most 64 per set); reloads that
/// rename channels add a few more. Past the cap a name is labelled
/// [`OVERFLOW`] rather than growing the set further.
const MAX_CHANNEL_LABELS: usize = 1024;

/// The label of a channel name past [`MAX_CHANNEL_LABELS`].
pub const OVERFLOW: &str = "_OTHER";

/// Read on every 3D call: a fast hasher (names come from configuration).
static CHANNELS: LazyLock<RwLock<HashSet<&'static str, foldhash::fast::RandomState>>> =
    LazyLock::new(|| RwLock::new(HashSet::default()));

/// `name` as a `'static` label value: interned (leaked once) on first use.
/// The memory is bounded by [`MAX_CHANNEL_LABELS`] short names.
pub fn channel_label(name: &str) -> &'static str {
    if let Some(known) = read(&CHANNELS).get(name) {
        return known;
    }
    let mut set = write(&CHANNELS);
    if let Some(known) = set.get(name) {
        return known;
    }
    if set.len() >= MAX_CHANNEL_LABELS {
        return OVERFLOW;
    }
    let interned: &'static str = Box::leak(name.to_owned().into_boxed_str());
    set.insert(interned);
    interned
}

/// The `status` label of an HTTP status: a static string for the codes an
/// upstream answers with, an owned one for anything else.
pub fn http_status_label(status: u16) -> Cow<'static, str> {
    Cow::Borrowed(match status {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        408 => "408",
        409 => "409",
        413 => "413",
        422 => "422",
        429 => "429",
        500 => "500",
        501 => "501",
        502 => "502",
        503 => "503",
        504 => "504",
        other => return Cow::Owned(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_name_is_interned_once() {
        let a = channel_label("labels-test-primary");
        let b = channel_label(&String::from("labels-test-primary"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "labels-test-primary");
    }

    #[test]
    fn every_status_label_is_its_number() {
        for status in 100..600u16 {
            assert_eq!(http_status_label(status), status.to_string());
        }
    }
}
