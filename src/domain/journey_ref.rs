//! The journey reference: what observability uses instead of the appkey.

use std::fmt;

use sha2::{Digest, Sha256};

use super::Appkey;

/// A short, stable, non-reversible reference to a journey, derived from its
/// appkey. Safe to log, to put on spans and to show to people; it grants
/// nothing. Appkeys are random, so the truncated hash cannot be inverted by
/// guessing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct JourneyRef(String);

impl JourneyRef {
    /// Derives the reference of the journey of `appkey`.
    pub fn from_appkey(appkey: &Appkey) -> Self {
        appkey.journey_ref(|| Self::derive(appkey)).clone()
    }

    /// The SHA-256 behind [`JourneyRef::from_appkey`].
    fn derive(appkey: &Appkey) -> Self {
        let digest = Sha256::new()
            .chain_update(b"idgate.journey_ref.v1\0")
            .chain_update(appkey.expose().as_bytes())
            .finalize();
        let mut hex = [0; 16];
        // Sixteen hex digits for eight bytes: encoding cannot fail.
        let hex = base16ct::lower::encode_str(&digest[..8], &mut hex).unwrap_or_default();
        JourneyRef(format!("j-{hex}"))
    }

    /// Parses a reference given back by a caller.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("j-")?;
        (hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| JourneyRef(s.to_ascii_lowercase()))
    }

    /// The reference as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JourneyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JourneyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_is_stable_short_and_free_of_the_appkey() {
        let key = Appkey::new("5f1c2a7e-appkey");
        let a = JourneyRef::from_appkey(&key);
        let b = JourneyRef::from_appkey(&key);
        assert_eq!(a, b);
        assert_eq!(a.as_str().len(), 18);
        // Replicas of two versions share references (Redis keys, logs):
        // the derivation never changes. Python's hashlib gives the same.
        assert_eq!(a.as_str(), "j-ba5508c9b00baad3");
        assert!(!a.as_str().contains("appkey"));
        assert_ne!(a, JourneyRef::from_appkey(&Appkey::new("other")));
        assert_eq!(JourneyRef::parse(a.as_str()), Some(a));
        assert_eq!(JourneyRef::parse("j-xyz"), None);
    }
}
