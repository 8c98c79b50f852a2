//! Appkeys and journey records sealed with AES-256-GCM before they go to
//! Redis.
//!
//! A sealed value is Base64 of `nonce (12 bytes) || ciphertext || tag`,
//! under a random nonce per value. The associated data is a [`SealContext`]:
//! the record's purpose (journey directory or idempotency record), its
//! Redis key, and what else the record claims (the journey reference;
//! for an idempotency record, the request digest). A Redis writer who
//! copies a sealed value into another record, or from a directory entry
//! into an idempotency record, gets a value that does not open: the AEAD
//! guidance is to bind every piece of context the plaintext is used in.
//! During a key rotation the previous key still opens what it sealed; new
//! values are sealed under the current key only.
//!
//! Key material lives in `Zeroizing` buffers and in ciphers built with
//! `aes-gcm`'s `zeroize` feature: dropped keys are wiped, not left in
//! freed memory.
//!
//! [`Digester`]: keyed digests (HMAC-SHA-256) of what must be compared
//! but never stored in clear, such as an idempotent request with its CPF
//! and name: without the key, a digest of low-entropy data cannot be
//! reversed by guessing. Its key is derived from the sealing key (domain
//! separated); during a rotation digests under the previous key still
//! match.

use std::sync::Arc;

use aes_gcm::{
    Aes256Gcm, Nonce,
    aead::{Aead, Generate as _, KeyInit, Payload},
};
use base64::Engine as _;

use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::domain::{Appkey, JourneyRef};

const NONCE_LEN: usize = 12;

/// A sealing key: 32 bytes wiped on drop.
pub type SealKey = Zeroizing<[u8; 32]>;

/// What a sealed value is for; part of its associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// `{p}journey:<ref>`: the fleet's journey directory.
    Directory,
    /// `{p}idem:<digest>`: a completed idempotency record.
    Idempotency,
    /// A record of the embedded store of one process.
    Embedded,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Self::Directory => b"journey-directory",
            Self::Idempotency => b"idempotency-record",
            Self::Embedded => b"embedded-record",
        }
    }
}

/// The context a sealed value is bound to (its associated data): the
/// record it is for, its key and what it claims. It opens only under the
/// same context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealContext {
    aad: Vec<u8>,
}

impl SealContext {
    fn new(purpose: Purpose, parts: &[&[u8]]) -> Self {
        let mut aad = b"idgate.seal.v2\0".to_vec();
        // Length-prefixed: no two contexts share a byte string.
        for part in std::iter::once(purpose.tag()).chain(parts.iter().copied()) {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part);
        }
        Self { aad }
    }

    /// A journey-directory entry stored under `redis_key` for `journey`.
    pub fn directory(redis_key: &str, journey: &JourneyRef) -> Self {
        Self::new(
            Purpose::Directory,
            &[redis_key.as_bytes(), journey.as_str().as_bytes()],
        )
    }

    /// The owner (a caller name) beside a journey-directory entry: the
    /// entry's context with one more part, so the owner's sealed value
    /// opens neither as the appkey nor under another journey's key.
    pub fn directory_owner(redis_key: &str, journey: &JourneyRef) -> Self {
        Self::new(
            Purpose::Directory,
            &[redis_key.as_bytes(), journey.as_str().as_bytes(), b"owner"],
        )
    }

    /// A whole journey record stored under `redis_key` for `journey`: the
    /// directory's context with one more part, so neither an appkey nor an
    /// owner sealed by the previous release opens as a record.
    pub fn journey_record(redis_key: &str, journey: &JourneyRef) -> Self {
        Self::new(
            Purpose::Directory,
            &[redis_key.as_bytes(), journey.as_str().as_bytes(), b"record"],
        )
    }

    /// A record of the embedded store (`cluster::embedded`), filed under
    /// `key` in `table`: a value copied into another record, or another
    /// table, does not open.
    pub fn embedded_record(table: &str, key: &[u8]) -> Self {
        Self::new(Purpose::Embedded, &[table.as_bytes(), key])
    }

    /// An idempotency record stored under `redis_key`, for the request
    /// whose digest is `request`, that created `journey`.
    pub fn idempotency(redis_key: &str, request: &str, journey: &JourneyRef) -> Self {
        Self::new(
            Purpose::Idempotency,
            &[
                redis_key.as_bytes(),
                request.as_bytes(),
                journey.as_str().as_bytes(),
            ],
        )
    }
}

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
        // From the slice: no copy of the key left on the stack.
        let cipher = |k: &[u8; 32]| {
            Arc::new(Aes256Gcm::new_from_slice(k).expect("a 32-byte key is an AES-256 key"))
        };
        Self {
            current: cipher(current),
            previous: previous.map(cipher),
        }
    }

    /// The sealed form of `appkey`, bound to `context`.
    pub fn seal(&self, context: &SealContext, appkey: &Appkey) -> String {
        self.seal_bytes(context, appkey.expose().as_bytes())
    }

    /// The appkey sealed in `text` under `context`; `None` when it does
    /// not open under either key (tampered, sealed for another record or
    /// purpose, an old key).
    pub fn open(&self, context: &SealContext, text: &str) -> Option<Appkey> {
        let plain = self.open_bytes(context, text)?;
        Appkey::parse(std::str::from_utf8(&plain).ok()?).ok()
    }

    /// The sealed form of `secret` (a record holding an appkey), bound to
    /// `context`.
    pub fn seal_bytes(&self, context: &SealContext, secret: &[u8]) -> String {
        let nonce = Nonce::generate();
        let sealed = self
            .current
            .encrypt(
                &nonce,
                Payload {
                    msg: secret,
                    aad: &context.aad,
                },
            )
            .expect("AES-GCM encryption of a short message cannot fail");
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(nonce.as_slice());
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(out)
    }

    /// The bytes sealed in `text` under `context`, wiped on drop; `None`
    /// when they do not open under either key.
    pub fn open_bytes(&self, context: &SealContext, text: &str) -> Option<Zeroizing<Vec<u8>>> {
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
            aad: &context.aad,
        };
        let plain = self
            .current
            .decrypt(&nonce, payload())
            .or_else(|e| match &self.previous {
                Some(previous) => previous.decrypt(&nonce, payload()),
                None => Err(e),
            })
            .ok()?;
        Some(Zeroizing::new(plain))
    }
}

/// What seals a store's values and digests its requests, both from one
/// secret (and the previous one during a rotation): the `[cluster]`
/// secret key, or the embedded store's key file. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Keys {
    /// Seals and opens values.
    pub sealer: Sealer,
    /// Keyed digests of what is compared but never stored in clear.
    pub digester: Digester,
}

impl Keys {
    /// Both under `current`; what `previous` sealed or digested still
    /// opens and matches.
    pub fn new(current: &[u8; 32], previous: Option<&[u8; 32]>) -> Self {
        Self {
            sealer: Sealer::new(current, previous),
            digester: Digester::new(current, previous),
        }
    }
}

/// Keyed digests for comparison without storage in clear. Cheap to clone.
#[derive(Clone)]
pub struct Digester {
    current: SealKey,
    previous: Option<SealKey>,
}

impl std::fmt::Debug for Digester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Digester(<redacted>)")
    }
}

/// A digest key derived from a sealing key, so one secret never serves
/// two primitives directly.
fn derive(key: &[u8; 32]) -> SealKey {
    let mut digest = Sha256::new()
        .chain_update(b"idgate.request-digest.v1\0")
        .chain_update(key)
        .finalize();
    let derived = Zeroizing::new(digest.into());
    zeroize::Zeroize::zeroize(digest.as_mut_slice());
    derived
}

impl Digester {
    /// Digests under a key derived from the sealing key `current`; a digest
    /// made under `previous` still matches.
    pub fn new(current: &[u8; 32], previous: Option<&[u8; 32]>) -> Self {
        Self {
            current: derive(current),
            previous: previous.map(derive),
        }
    }

    /// A digester with a random key, for one process (nothing it digests
    /// outlives the process).
    pub fn random() -> Self {
        let mut key = Zeroizing::new([0u8; 32]);
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self::new(&key, None)
    }

    fn mac(key: &[u8; 32], parts: &[&[u8]]) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
        for part in parts {
            // Length-prefixed: ("ab", "c") and ("a", "bc") differ.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The hex digest of `parts` under the current key.
    pub fn digest(&self, parts: &[&[u8]]) -> String {
        Self::mac(&self.current, parts)
    }

    /// True when `stored` is the digest of `parts` under the current or
    /// the previous key (compared in constant time).
    pub fn matches(&self, parts: &[&[u8]], stored: &str) -> bool {
        use subtle::ConstantTimeEq as _;
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .any(|k| bool::from(Self::mac(k, parts).as_bytes().ct_eq(stored.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_keyed_and_still_match_under_the_previous_key() {
        let parts: [&[u8]; 2] = [b"52998224725", b"Maria"];
        let old = Digester::new(&[1; 32], None);
        let d = old.digest(&parts);
        assert_eq!(d.len(), 64);
        assert!(!d.contains("52998224725"));
        assert_ne!(d, Digester::new(&[2; 32], None).digest(&parts));
        assert_ne!(d, old.digest(&[b"5299822472", b"5Maria"]));
        let rotated = Digester::new(&[2; 32], Some(&[1; 32]));
        assert!(rotated.matches(&parts, &d));
        assert!(!Digester::new(&[2; 32], None).matches(&parts, &d));
        assert!(!Digester::random().matches(&parts, &d));
    }

    fn journey(k: &Appkey) -> JourneyRef {
        JourneyRef::from_appkey(k)
    }

    fn dir(j: &JourneyRef) -> SealContext {
        SealContext::directory(&format!("idgate:journey:{j}"), j)
    }

    #[test]
    fn a_sealed_appkey_opens_only_for_its_journey_and_hides_the_appkey() {
        let sealer = Sealer::new(&[3; 32], None);
        let key = Appkey::new("appkey-canary-123");
        let j = journey(&key);
        let sealed = sealer.seal(&dir(&j), &key);
        assert!(!sealed.contains("canary"));
        assert_ne!(
            sealed,
            sealer.seal(&dir(&j), &key),
            "a fresh nonce per value"
        );
        assert_eq!(sealer.open(&dir(&j), &sealed), Some(key));
        let other = journey(&Appkey::new("other"));
        assert_eq!(sealer.open(&dir(&other), &sealed), None);
        assert_eq!(sealer.open(&dir(&j), "AAAA"), None);
    }

    #[test]
    fn a_value_sealed_for_one_record_does_not_open_as_another_or_for_another_purpose() {
        let sealer = Sealer::new(&[4; 32], None);
        let key = Appkey::new("appkey-of-journey-a");
        let j = journey(&key);
        let record_a = SealContext::idempotency("idgate:idem:aaaa", "digest-a", &j);
        let sealed = sealer.seal(&record_a, &key);
        assert_eq!(sealer.open(&record_a, &sealed), Some(key.clone()));
        // Record B: another key, another request digest, or both.
        for record_b in [
            SealContext::idempotency("idgate:idem:bbbb", "digest-a", &j),
            SealContext::idempotency("idgate:idem:aaaa", "digest-b", &j),
            SealContext::idempotency("idgate:idem:bbbb", "digest-b", &j),
            SealContext::idempotency("idgate:idem:aaaa", "digest-a", &journey(&Appkey::new("b"))),
        ] {
            assert_eq!(sealer.open(&record_b, &sealed), None, "{record_b:?}");
        }
        // The other purpose, even under the same Redis key and journey.
        assert_eq!(
            sealer.open(&SealContext::directory("idgate:idem:aaaa", &j), &sealed),
            None
        );
        let entry = sealer.seal(&dir(&j), &key);
        assert_eq!(sealer.open(&record_a, &entry), None);
        // Parts are length-prefixed: moving a byte between them differs.
        let shifted = SealContext::idempotency("idgate:idem:aaaad", "igest-a", &j);
        assert_eq!(sealer.open(&shifted, &sealed), None);
    }

    #[test]
    fn the_previous_key_still_opens_during_a_rotation() {
        let old = Sealer::new(&[1; 32], None);
        let key = Appkey::new("k1");
        let j = journey(&key);
        let sealed = old.seal(&dir(&j), &key);
        let rotated = Sealer::new(&[2; 32], Some(&[1; 32]));
        assert_eq!(rotated.open(&dir(&j), &sealed), Some(key.clone()));
        let after = Sealer::new(&[2; 32], None);
        assert_eq!(after.open(&dir(&j), &sealed), None);
    }
}
