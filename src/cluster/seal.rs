//! Appkeys sealed with AES-256-GCM before they go to Redis.
//!
//! A sealed value is Base64 of `nonce (12 bytes) || ciphertext || tag`,
//! under a random nonce per value, with the journey reference as
//! associated data: a value copied under another journey's key does not
//! open. During a key rotation the previous key still opens what it
//! sealed; new values are sealed under the current key only.

use std::sync::Arc;

use aes_gcm::{
    Aes256Gcm, Nonce,
    aead::{Aead, Generate as _, KeyInit, Payload},
};
use base64::Engine as _;

use crate::domain::{Appkey, JourneyRef};

const NONCE_LEN: usize = 12;

/// Seals and opens appkeys. Cheap to clone.
#[derive(Clone)]
pub struct Sealer {
    current: Arc<Aes256Gcm>,
    previous: Option<Arc<Aes256Gcm>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<redacted>)")
    }
}

impl Sealer {
    /// Seals under `current`; opens under `current`, then `previous`.
    pub fn new(current: &[u8; 32], previous: Option<&[u8; 32]>) -> Self {
        let cipher = |k: &[u8; 32]| Arc::new(Aes256Gcm::new(&(*k).into()));
        Self {
            current: cipher(current),
            previous: previous.map(cipher),
        }
    }

    /// The sealed form of `appkey`, bound to `journey`.
    pub fn seal(&self, journey: &JourneyRef, appkey: &Appkey) -> String {
        let nonce = Nonce::generate();
        let sealed = self
            .current
            .encrypt(
                &nonce,
                Payload {
                    msg: appkey.expose().as_bytes(),
                    aad: journey.as_str().as_bytes(),
                },
            )
            .expect("AES-GCM encryption of a short message cannot fail");
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(nonce.as_slice());
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(out)
    }

    /// The appkey sealed in `text` for `journey`; `None` when it does not
    /// open under either key (tampered, another journey's, an old key).
    pub fn open(&self, journey: &JourneyRef, text: &str) -> Option<Appkey> {
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text)
            .ok()?;
        if bytes.len() <= NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_from(nonce).ok()?;
        let payload = || Payload {
            msg: sealed,
            aad: journey.as_str().as_bytes(),
        };
        let plain = self
            .current
            .decrypt(&nonce, payload())
            .or_else(|e| match &self.previous {
                Some(previous) => previous.decrypt(&nonce, payload()),
                None => Err(e),
            })
            .ok()?;
        Appkey::parse(std::str::from_utf8(&plain).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journey(k: &Appkey) -> JourneyRef {
        JourneyRef::from_appkey(k)
    }

    #[test]
    fn a_sealed_appkey_opens_only_for_its_journey_and_hides_the_appkey() {
        let sealer = Sealer::new(&[3; 32], None);
        let key = Appkey::new("appkey-canary-123");
        let j = journey(&key);
        let sealed = sealer.seal(&j, &key);
        assert!(!sealed.contains("canary"));
        assert_ne!(sealed, sealer.seal(&j, &key), "a fresh nonce per value");
        assert_eq!(sealer.open(&j, &sealed), Some(key));
        let other = journey(&Appkey::new("other"));
        assert_eq!(sealer.open(&other, &sealed), None);
        assert_eq!(sealer.open(&j, "AAAA"), None);
    }

    #[test]
    fn the_previous_key_still_opens_during_a_rotation() {
        let old = Sealer::new(&[1; 32], None);
        let key = Appkey::new("k1");
        let sealed = old.seal(&journey(&key), &key);
        let rotated = Sealer::new(&[2; 32], Some(&[1; 32]));
        assert_eq!(rotated.open(&journey(&key), &sealed), Some(key.clone()));
        let after = Sealer::new(&[2; 32], None);
        assert_eq!(after.open(&journey(&key), &sealed), None);
    }
}
