//! The weighted split of new 3D sessions (`weighted:primary=90,alternative=10`).
//!
//! A vendor migration moves a share of new sessions to another channel and
//! raises it step by step. The pick must be the same for one journey on
//! every call and on every replica (a repeated `StartSession3D` for an
//! appkey lands where the first did), so it is a pure function of the
//! journey reference and the weights: no per-process random state.
//!
//! Weights apply among the channels available at the time of the call;
//! the router says which are ([`WeightedSplit::pick`] takes a predicate),
//! so a drained or open-circuit channel drops out and its share is spread
//! over the rest in proportion to their weights.

use std::{collections::HashSet, fmt};

use sha2::{Digest, Sha256};

use super::names::valid_name;
use crate::domain::JourneyRef;

/// Largest weight of one channel. Keeps the total of a split far from
/// overflow and the text form short; 1,000,000 gives a resolution of one
/// session in a million, more than a migration needs.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Most channels one split names (a split naming more channels than a
/// gateway can be configured with is a typing error).
pub const MAX_SPLIT_CHANNELS: usize = 64;

/// Prefix of the text form.
pub const WEIGHTED_PREFIX: &str = "weighted:";

/// Why a weighted split is not usable. Messages name channels only when
/// the name is a well-formed channel name, never other input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// No `name=weight` entry.
    #[error("a weighted split needs at least one `name=weight` entry")]
    Empty,
    /// More entries than [`MAX_SPLIT_CHANNELS`].
    #[error("a weighted split names at most {MAX_SPLIT_CHANNELS} channels")]
    TooManyChannels,
    /// Entry `index` is not `name=weight`.
    #[error("entry {index} of the weighted split is not `name=weight`")]
    Malformed {
        /// 0-based position of the entry.
        index: usize,
    },
    /// Entry `index` does not name a well-formed channel.
    #[error(
        "entry {index} of the weighted split: the channel name must be 1 to 64 letters, digits, `-`, `_` or `.`"
    )]
    BadName {
        /// 0-based position of the entry.
        index: usize,
    },
    /// A channel is named twice.
    #[error("channel `{0}` appears twice in the weighted split")]
    Duplicate(String),
    /// A weight is not a whole number from 0 to [`MAX_WEIGHT`].
    #[error("the weight of channel `{0}` must be a whole number from 0 to {MAX_WEIGHT}")]
    BadWeight(String),
    /// Every weight is zero: no session could start.
    #[error("the weights of a split must not all be zero")]
    ZeroTotal,
}

/// Channel names with their weights, in the order the operator wrote them
/// (kept, so the text form round-trips). Valid by construction: names
/// well formed and unique, weights at most [`MAX_WEIGHT`], total positive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedSplit {
    entries: Vec<(String, u32)>,
}

impl WeightedSplit {
    /// A split of `entries` (channel name, weight), checked.
    pub fn new(entries: Vec<(String, u32)>) -> Result<Self, SplitError> {
        if entries.is_empty() {
            return Err(SplitError::Empty);
        }
        if entries.len() > MAX_SPLIT_CHANNELS {
            return Err(SplitError::TooManyChannels);
        }
        let mut seen = HashSet::new();
        for (index, (name, weight)) in entries.iter().enumerate() {
            if !valid_name(name) {
                return Err(SplitError::BadName { index });
            }
            if !seen.insert(name.as_str()) {
                return Err(SplitError::Duplicate(name.clone()));
            }
            if *weight > MAX_WEIGHT {
                return Err(SplitError::BadWeight(name.clone()));
            }
        }
        if entries.iter().all(|(_, w)| *w == 0) {
            return Err(SplitError::ZeroTotal);
        }
        Ok(Self { entries })
    }

    /// The entries, in the order written.
    pub fn entries(&self) -> &[(String, u32)] {
        &self.entries
    }

    /// The weight of `name` (0 when the split does not name it).
    pub fn weight(&self, name: &str) -> u32 {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, w)| *w)
    }

    /// The channel names the split names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The channel a new session of `journey` goes to: the journey's point
    /// in `[0, total)` of the weights of the channels `available` admits,
    /// walked in the order written. `None` when no channel with a positive
    /// weight is available.
    pub fn pick(&self, journey: &JourneyRef, available: impl Fn(&str) -> bool) -> Option<&str> {
        let live: Vec<(&str, u64)> = self
            .entries
            .iter()
            .filter(|(n, w)| *w > 0 && available(n))
            .map(|(n, w)| (n.as_str(), u64::from(*w)))
            .collect();
        let total: u64 = live.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return None;
        }
        let mut point = scale(journey_point(journey), total);
        for (name, weight) in live {
            if point < weight {
                return Some(name);
            }
            point -= weight;
        }
        None
    }
}

/// A stable 64-bit point of a journey: the first 8 bytes of a SHA-256 of
/// its reference under a domain tag. The same on every replica and every
/// release (changing it would move journeys between channels mid-way).
pub fn journey_point(journey: &JourneyRef) -> u64 {
    let digest = Sha256::new()
        .chain_update(b"idgate.weighted_split.v1\0")
        .chain_update(journey.as_str().as_bytes())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// Maps a uniform 64-bit `point` into `[0, total)` without modulo bias
/// worth the name (multiply-shift).
fn scale(point: u64, total: u64) -> u64 {
    // Lossless: the product of two u64 fits in u128, and the result is
    // below `total`, which is a u64.
    ((u128::from(point) * u128::from(total)) >> 64) as u64
}

impl fmt::Display for WeightedSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(WEIGHTED_PREFIX)?;
        for (i, (name, weight)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={weight}")?;
        }
        Ok(())
    }
}

/// Parses the part after `weighted:`: `name=weight` entries separated by
/// commas, spaces around names and weights allowed. Weights are plain
/// decimal digits (no sign), so `-5` and `+5` are refused alike.
pub fn parse_entries(text: &str) -> Result<WeightedSplit, SplitError> {
    if text.trim().is_empty() {
        return Err(SplitError::Empty);
    }
    let mut entries = Vec::new();
    for (index, part) in text.split(',').enumerate() {
        if index >= MAX_SPLIT_CHANNELS {
            return Err(SplitError::TooManyChannels);
        }
        let (name, weight) = part
            .split_once('=')
            .ok_or(SplitError::Malformed { index })?;
        let (name, weight) = (name.trim(), weight.trim());
        if !valid_name(name) {
            return Err(SplitError::BadName { index });
        }
        let bad = || SplitError::BadWeight(name.to_owned());
        if weight.is_empty() || weight.len() > 7 || !weight.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let weight: u32 = weight.parse().map_err(|_| bad())?;
        entries.push((name.to_owned(), weight));
    }
    WeightedSplit::new(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Appkey;

    fn split(text: &str) -> Result<WeightedSplit, SplitError> {
        parse_entries(text)
    }

    fn journey(i: usize) -> JourneyRef {
        JourneyRef::from_appkey(&Appkey::new(format!("appkey-{i}")))
    }

    #[test]
    fn well_formed_splits_parse_and_print_back() {
        let s = split(" primary = 90 , alternative=10").unwrap();
        assert_eq!(s.to_string(), "weighted:primary=90,alternative=10");
        assert_eq!(s.weight("alternative"), 10);
        assert_eq!(s.weight("other"), 0);
        assert_eq!(split("a=0,b=1").unwrap().entries().len(), 2);
    }

    #[test]
    fn malformed_splits_are_refused_with_the_reason() {
        let cases: [(&str, SplitError); 10] = [
            ("", SplitError::Empty),
            ("primary", SplitError::Malformed { index: 0 }),
            ("primary=90,", SplitError::Malformed { index: 1 }),
            ("=5", SplitError::BadName { index: 0 }),
            ("a b=5", SplitError::BadName { index: 0 }),
            ("a=-5", SplitError::BadWeight("a".into())),
            ("a=+5", SplitError::BadWeight("a".into())),
            ("a=99999999999999999999", SplitError::BadWeight("a".into())),
            ("a=1,a=2", SplitError::Duplicate("a".into())),
            ("a=0,b=0", SplitError::ZeroTotal),
        ];
        for (text, want) in cases {
            assert_eq!(split(text), Err(want), "{text:?}");
        }
        assert_eq!(
            split(&format!("a={}", MAX_WEIGHT + 1)),
            Err(SplitError::BadWeight("a".into()))
        );
        assert!(split(&format!("a={MAX_WEIGHT}")).is_ok());
        let many: Vec<String> = (0..=MAX_SPLIT_CHANNELS)
            .map(|i| format!("c{i}=1"))
            .collect();
        assert_eq!(split(&many.join(",")), Err(SplitError::TooManyChannels));
    }

    #[test]
    fn refusals_quote_no_input_but_well_formed_channel_names() {
        let e = split("cpf 123.456.789-00=5").unwrap_err().to_string();
        assert!(!e.contains("123"), "{e}");
    }

    #[test]
    fn the_pick_is_stable_proportional_and_skips_unavailable_channels() {
        let s = split("primary=90,alternative=10").unwrap();
        let all = |_: &str| true;
        let mut primary = 0;
        for i in 0..10_000 {
            let j = journey(i);
            let first = s.pick(&j, all).unwrap();
            assert_eq!(s.pick(&j, all), Some(first), "stable per journey");
            primary += usize::from(first == "primary");
        }
        assert!((8_800..=9_200).contains(&primary), "{primary}");
        for i in 0..1_000 {
            assert_eq!(s.pick(&journey(i), |n| n != "primary"), Some("alternative"));
        }
        assert_eq!(s.pick(&journey(1), |_| false), None);
        let zero = split("primary=0,alternative=5").unwrap();
        assert_eq!(zero.pick(&journey(1), |n| n != "alternative"), None);
    }
}
