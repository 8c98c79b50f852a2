//! Label values built without allocating on the call path.
//!
//! Every upstream call records its channel and HTTP status. Building an
//! owned `String` for each, only to look up a series that already exists,
//! was a measurable share of a call's cost (see `docs/performance.md`), so
//! a channel's name is a [`ChannelLabel`], a shared string cloned by a
//! reference count: made once per channel endpoint from its configured
//! name, or found by name in the [`LabelInterner`] its [`super::Metrics`]
//! owns (freed with it, never leaked). Status codes come from a table.

use std::{
    borrow::{Borrow, Cow},
    collections::HashSet,
    fmt,
    hash::{Hash, Hasher},
    ops::Deref,
    sync::{Arc, RwLock},
};

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::sync::{read, write};

/// Most distinct channel names one registry interns. Channel names come
/// from the configuration (validated, at most 64 per set); reloads that
/// rename channels add a few more. Past the cap a name is labelled
/// [`OVERFLOW`] rather than growing the set further.
const MAX_CHANNEL_LABELS: usize = 1024;

/// The label of a channel name past [`MAX_CHANNEL_LABELS`].
pub const OVERFLOW: &str = "_OTHER";

/// A channel's name as a metric label value: cloning it counts a
/// reference, allocating nothing. Compared and hashed by its text.
#[derive(Clone)]
pub struct ChannelLabel(Arc<str>);

impl ChannelLabel {
    /// `name` as a label (allocates: once per channel, not per call).
    pub fn new(name: &str) -> Self {
        Self(Arc::from(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string, for OpenTelemetry attributes.
    pub fn shared(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl Deref for ChannelLabel {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ChannelLabel {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq for ChannelLabel {
    fn eq(&self, other: &Self) -> bool {
        *self.0 == *other.0
    }
}

impl Eq for ChannelLabel {}

impl Hash for ChannelLabel {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes: `Borrow<str>` lookups must find it.
        (*self.0).hash(state);
    }
}

impl fmt::Debug for ChannelLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ChannelLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl EncodeLabelValue for ChannelLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        fmt::Write::write_str(encoder, &self.0)
    }
}

/// The channel labels of one metrics registry, by name: each name
/// allocated the first time it is seen, at most [`MAX_CHANNEL_LABELS`].
/// Read on every 3D call: a fast hasher (names come from configuration).
#[derive(Default)]
pub(super) struct LabelInterner {
    channels: RwLock<HashSet<ChannelLabel, foldhash::fast::RandomState>>,
}

impl LabelInterner {
    /// The label of `name`: found, or made once.
    pub(super) fn channel(&self, name: &str) -> ChannelLabel {
        if let Some(known) = read(&self.channels).get(name) {
            return known.clone();
        }
        let mut set = write(&self.channels);
        if let Some(known) = set.get(name) {
            return known.clone();
        }
        if set.len() >= MAX_CHANNEL_LABELS {
            return ChannelLabel::new(OVERFLOW);
        }
        let label = ChannelLabel::new(name);
        set.insert(label.clone());
        label
    }
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
    fn a_channel_name_is_interned_once_per_registry() {
        let labels = LabelInterner::default();
        let a = labels.channel("labels-test-primary");
        let b = labels.channel(&String::from("labels-test-primary"));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a.as_str(), "labels-test-primary");
        let other = LabelInterner::default().channel("labels-test-primary");
        assert!(!Arc::ptr_eq(&a.0, &other.0), "each registry its own");
        assert_eq!(a, other, "equal by text");
    }

    #[test]
    fn past_the_cap_a_name_is_labelled_overflow() {
        let labels = LabelInterner::default();
        for i in 0..MAX_CHANNEL_LABELS {
            labels.channel(&format!("c{i}"));
        }
        assert_eq!(labels.channel("one-more").as_str(), OVERFLOW);
        assert_eq!(labels.channel("c0").as_str(), "c0");
    }

    #[test]
    fn every_status_label_is_its_number() {
        for status in 100..600u16 {
            assert_eq!(http_status_label(status), status.to_string());
        }
    }
}
