//! The state machine of spec section 3, in memory, shared by every
//! listener.
//!
//! Every method takes `now` from the injected clock and validates before it
//! mutates, under one lock, so a refused call leaves no trace. Expiry is
//! evaluated lazily against `now`; [`Store::purge`] drops what can no
//! longer be used or read, so memory stays bounded.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use time::{Date, OffsetDateTime};

use super::documents::{LicenceFormat, Recognised};
use super::error::Reject;
use super::faults::lock;
use super::journey::{self, JourneyStatus};
use super::liveness::LivenessOutcome;

/// Durations and bounds the store enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) credential_ttl: time::Duration,
    pub(crate) appkey_ttl: time::Duration,
    pub(crate) challenge_window: time::Duration,
    pub(crate) retention: time::Duration,
    pub(crate) processing_delay: time::Duration,
    pub(crate) max_entries: usize,
}

/// The end user an appkey was created for.
#[derive(Clone)]
pub(crate) struct EndUser {
    pub(crate) cpf: String,
    pub(crate) name: String,
    pub(crate) birth: Date,
}

/// How the liveness proof was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LivenessMode {
    TwoD,
    ThreeD,
}

/// An image kept for the result's `fotos`, held as the Base64 text it is
/// returned in: encoded once, when stored, not on every result read.
#[derive(Clone)]
pub(crate) struct Base64Image(Arc<str>);

impl Base64Image {
    pub(crate) fn encode(bytes: &[u8]) -> Self {
        Self(STANDARD.encode(bytes).into())
    }

    /// The standard Base64 text of the image.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The one liveness proof an appkey can hold.
#[derive(Clone)]
pub(crate) struct LivenessProof {
    pub(crate) mode: LivenessMode,
    pub(crate) outcome: LivenessOutcome,
    pub(crate) protocol: u64,
    pub(crate) bureau_protocol: u64,
    /// The frontal photo returned in `fotos`.
    pub(crate) frontal: Base64Image,
}

/// One recognised document image.
#[derive(Clone)]
pub(crate) struct DocumentImage {
    pub(crate) recognised: Recognised,
    pub(crate) image: Base64Image,
}

/// What a document submission carried.
#[derive(Clone)]
pub(crate) enum SubmissionContent {
    Images(Vec<DocumentImage>),
    Licence {
        format: LicenceFormat,
        image: Base64Image,
    },
}

/// The latest accepted document submission of an appkey; a new one
/// replaces it and restarts processing.
#[derive(Clone)]
pub(crate) struct Submission {
    pub(crate) seq: u64,
    pub(crate) at: OffsetDateTime,
    pub(crate) ticket: String,
    pub(crate) analysis_id: u64,
    pub(crate) codigo_documento: u64,
    pub(crate) biometry_protocol: u64,
    pub(crate) content: SubmissionContent,
}

/// Everything known about one appkey. Deliberately not `Debug`: it holds
/// personal data and images.
#[derive(Clone)]
pub(crate) struct AppkeyRecord {
    pub(crate) user: EndUser,
    pub(crate) external_id: String,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) expires_at: OffsetDateTime,
    pub(crate) liveness: Option<LivenessProof>,
    pub(crate) submission: Option<Submission>,
    /// Submission whose completion notice was already queued.
    pub(crate) notified_seq: Option<u64>,
    /// Keys of this appkey's 2D challenges (some may already be purged from
    /// the table); emptied when the proof is made.
    challenge_keys: Vec<String>,
    /// Tokens of this appkey's 3D sessions, likewise.
    session_keys: Vec<String>,
}

impl AppkeyRecord {
    fn expired(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }
}

struct TokenRecord {
    operator: String,
    expires_at: OffsetDateTime,
}

struct ChallengeRecord {
    appkey: String,
    created_at: OffsetDateTime,
}

struct SessionRecord {
    appkey: String,
    channel: usize,
    outcome: LivenessOutcome,
}

#[derive(Default)]
struct Inner {
    tokens: HashMap<String, TokenRecord>,
    appkeys: HashMap<String, AppkeyRecord>,
    challenges: HashMap<String, ChallengeRecord>,
    sessions: HashMap<String, SessionRecord>,
    /// Completion notices not yet due, keyed by `(finishes_at, seq)` of
    /// the submission: holds the current submission of each appkey that
    /// has a liveness proof and was not announced yet. An entry may be
    /// stale (appkey purged); [`Store::take_finished`] skips those.
    pending: BTreeMap<(OffsetDateTime, u64), String>,
    serial: u64,
    last_purge: Option<OffsetDateTime>,
    /// The earliest instant a purge can drop anything (`None`: nothing
    /// held will ever expire). Set by the purge, lowered by inserts, so a
    /// full table is not purged again and again for nothing.
    next_release: Option<OffsetDateTime>,
    /// Purges run, for tests.
    #[cfg(test)]
    purges: u64,
}

/// Sizes of the store's tables, for tests and the admin endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StoreSizes {
    /// Credential tokens held.
    pub tokens: usize,
    /// Appkeys held (expired ones until their retention ends).
    pub appkeys: usize,
    /// Open 2D challenges.
    pub challenges: usize,
    /// Open 3D sessions.
    pub sessions: usize,
}

/// What a test can see of one appkey, without its personal data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppkeyState {
    /// The appkey's validity has passed.
    pub expired: bool,
    /// The liveness verdict, once a proof was made.
    pub liveness: Option<LivenessOutcome>,
    /// Open 2D challenges of this appkey.
    pub open_challenges: usize,
    /// Open 3D sessions of this appkey.
    pub open_sessions: usize,
    /// Images of the latest accepted document submission (1 for a licence).
    pub documents: usize,
    /// The journey status the result would show (`None`: result is 404).
    pub status: Option<&'static str>,
}

const BAD_TOKEN: Reject =
    Reject::unauthorized("credential token unknown, expired or not issued to this user");
const BAD_APPKEY: Reject = Reject::unauthorized("appkey unknown or expired");
const APPKEY_USED: Reject = Reject::unauthorized("appkey already holds a liveness proof");
const BAD_CHALLENGE: Reject = Reject::unauthorized("challenge unknown or void");
const BAD_SESSION: Reject =
    Reject::unauthorized("session token unknown or not issued for this appkey and channel");
const FULL: Reject = Reject::internal("sandbox at capacity");

/// The shared state store. No `Debug`: it holds secrets and personal data.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    limits: Limits,
}

fn secret() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Inner {
    /// A fresh serial number (protocols, ids, document codes).
    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    fn live_appkey(
        &mut self,
        appkey: &str,
        now: OffsetDateTime,
    ) -> Result<&mut AppkeyRecord, Reject> {
        match self.appkeys.get_mut(appkey) {
            Some(rec) if !rec.expired(now) => Ok(rec),
            _ => Err(BAD_APPKEY),
        }
    }

    /// An appkey that may still make its liveness proof.
    fn unbound_appkey(
        &mut self,
        appkey: &str,
        now: OffsetDateTime,
    ) -> Result<&mut AppkeyRecord, Reject> {
        let rec = self.live_appkey(appkey, now)?;
        if rec.liveness.is_some() {
            return Err(APPKEY_USED);
        }
        Ok(rec)
    }

    /// Queues the completion notice of `appkey`'s current submission, if
    /// the journey has a liveness proof and was not announced yet.
    fn schedule_notice(&mut self, appkey: &str, delay: time::Duration) {
        let Some(rec) = self.appkeys.get(appkey) else {
            return;
        };
        let (Some(_), Some(sub)) = (&rec.liveness, &rec.submission) else {
            return;
        };
        if rec.notified_seq != Some(sub.seq) {
            let key = (journey::finishes_at(sub, delay), sub.seq);
            self.pending.insert(key, appkey.to_owned());
        }
    }

    /// Drops the challenges and sessions of `appkey` once it holds a proof:
    /// only its own, through the keys its record keeps.
    /// Notes an entry that a purge may drop from `at` on.
    fn releases_at(&mut self, at: OffsetDateTime) {
        self.next_release = Some(self.next_release.map_or(at, |n| n.min(at)));
    }

    fn drop_liveness_leftovers(&mut self, appkey: &str) {
        let Some(rec) = self.appkeys.get_mut(appkey) else {
            return;
        };
        for key in std::mem::take(&mut rec.challenge_keys) {
            self.challenges.remove(&key);
        }
        for key in std::mem::take(&mut rec.session_keys) {
            self.sessions.remove(&key);
        }
    }
}

impl Store {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            limits,
        }
    }

    fn locked(&self, now: OffsetDateTime) -> std::sync::MutexGuard<'_, Inner> {
        let mut inner = lock(&self.inner);
        // Purging at most once per clock second keeps the cost amortised.
        if inner
            .last_purge
            .is_none_or(|at| now - at >= time::Duration::SECOND || now < at)
        {
            self.purge_inner(&mut inner, now);
        }
        inner
    }

    /// Ok when a table of `len` entries may grow; when full, purges first
    /// unless no entry can have expired since the last purge.
    fn room(
        &self,
        inner: &mut Inner,
        now: OffsetDateTime,
        len: fn(&Inner) -> usize,
    ) -> Result<(), Reject> {
        if len(inner) >= self.limits.max_entries && inner.next_release.is_some_and(|at| now >= at) {
            self.purge_inner(inner, now);
        }
        if len(inner) >= self.limits.max_entries {
            return Err(FULL);
        }
        Ok(())
    }

    /// Drops expired tokens, void challenges, sessions of unusable appkeys
    /// and appkeys past their retention.
    fn purge_inner(&self, inner: &mut Inner, now: OffsetDateTime) {
        let l = self.limits;
        inner.last_purge = Some(now);
        #[cfg(test)]
        {
            inner.purges += 1;
        }
        // The earliest instant something kept here can be dropped.
        let mut next: Option<OffsetDateTime> = None;
        let mut note = |at: OffsetDateTime| next = Some(next.map_or(at, |n| n.min(at)));
        inner.tokens.retain(|_, t| {
            let keep = now < t.expires_at;
            if keep {
                note(t.expires_at);
            }
            keep
        });
        let held = inner.appkeys.len();
        inner.appkeys.retain(|_, a| {
            let gone = a.expires_at.saturating_add(l.retention);
            if now < a.expires_at {
                // Expiry voids its challenges and sessions.
                note(a.expires_at);
            } else if now < gone {
                note(gone);
            }
            now < gone
        });
        let Inner {
            appkeys,
            challenges,
            sessions,
            pending,
            ..
        } = inner;
        if appkeys.len() != held {
            pending.retain(|_, key| appkeys.contains_key(key));
        }
        let usable = |key: &str| {
            appkeys
                .get(key)
                .is_some_and(|a| !a.expired(now) && a.liveness.is_none())
        };
        challenges.retain(|_, c| {
            let closes = c.created_at.saturating_add(l.challenge_window);
            let keep = now < closes && usable(&c.appkey);
            if keep {
                note(closes);
            }
            keep
        });
        // A session lasts as long as its appkey (noted above).
        sessions.retain(|_, s| usable(&s.appkey));
        // Keeps each appkey's key lists as short as its open entries.
        for rec in appkeys.values_mut() {
            if !rec.challenge_keys.is_empty() {
                rec.challenge_keys.retain(|k| challenges.contains_key(k));
            }
            if !rec.session_keys.is_empty() {
                rec.session_keys.retain(|k| sessions.contains_key(k));
            }
        }
        inner.next_release = next;
    }

    /// `/credencial`: a token for `operator`, and when it expires.
    pub(crate) fn issue_token(
        &self,
        operator: &str,
        now: OffsetDateTime,
    ) -> Result<(String, OffsetDateTime), Reject> {
        let mut inner = self.locked(now);
        self.room(&mut inner, now, |i| i.tokens.len())?;
        let token = secret();
        let expires_at = now.saturating_add(self.limits.credential_ttl);
        inner.releases_at(expires_at);
        inner.tokens.insert(
            token.clone(),
            TokenRecord {
                operator: operator.to_owned(),
                expires_at,
            },
        );
        Ok((token, expires_at))
    }

    /// `/appkey`: a new appkey for `user`, if `token` is valid and was
    /// issued to `login`.
    pub(crate) fn create_appkey(
        &self,
        token: &str,
        login: &str,
        user: EndUser,
        external_id: String,
        now: OffsetDateTime,
    ) -> Result<String, Reject> {
        let mut inner = self.locked(now);
        match inner.tokens.get(token) {
            Some(t) if now < t.expires_at && t.operator == login => {}
            _ => return Err(BAD_TOKEN),
        }
        self.room(&mut inner, now, |i| i.appkeys.len())?;
        let appkey = secret();
        let expires_at = now.saturating_add(self.limits.appkey_ttl);
        inner.releases_at(expires_at);
        inner.appkeys.insert(
            appkey.clone(),
            AppkeyRecord {
                user,
                external_id,
                created_at: now,
                expires_at,
                liveness: None,
                submission: None,
                notified_seq: None,
                challenge_keys: Vec::new(),
                session_keys: Vec::new(),
            },
        );
        Ok(appkey)
    }

    /// `/challenge`: a new challenge key for an appkey without a proof.
    pub(crate) fn new_challenge(
        &self,
        appkey: &str,
        now: OffsetDateTime,
    ) -> Result<String, Reject> {
        let mut inner = self.locked(now);
        inner.unbound_appkey(appkey, now)?;
        self.room(&mut inner, now, |i| i.challenges.len())?;
        let chkey = secret();
        inner
            .unbound_appkey(appkey, now)?
            .challenge_keys
            .push(chkey.clone());
        inner.releases_at(now.saturating_add(self.limits.challenge_window));
        inner.challenges.insert(
            chkey.clone(),
            ChallengeRecord {
                appkey: appkey.to_owned(),
                created_at: now,
            },
        );
        Ok(chkey)
    }

    /// `/captcha`: binds the appkey to a 2D proof made for one of its
    /// challenges still inside its window. Returns the protocol.
    pub(crate) fn bind_2d(
        &self,
        appkey: &str,
        chkey: &str,
        outcome: LivenessOutcome,
        frontal: Base64Image,
        now: OffsetDateTime,
    ) -> Result<u64, Reject> {
        let mut inner = self.locked(now);
        inner.unbound_appkey(appkey, now)?;
        let window = self.limits.challenge_window;
        match inner.challenges.get(chkey) {
            Some(c) if c.appkey == appkey && now < c.created_at.saturating_add(window) => {}
            _ => return Err(BAD_CHALLENGE),
        }
        let proof = new_proof(&mut inner, LivenessMode::TwoD, outcome, frontal);
        let protocol = proof.protocol;
        inner.live_appkey(appkey, now)?.liveness = Some(proof);
        inner.drop_liveness_leftovers(appkey);
        inner.schedule_notice(appkey, self.limits.processing_delay);
        Ok(protocol)
    }

    /// `/3d/session-token`: a session on `channel` for an appkey without a
    /// proof. Several sessions may be open (a failed channel, a retry).
    pub(crate) fn new_session(
        &self,
        appkey: &str,
        channel: usize,
        outcome: LivenessOutcome,
        now: OffsetDateTime,
    ) -> Result<String, Reject> {
        let mut inner = self.locked(now);
        inner.unbound_appkey(appkey, now)?;
        self.room(&mut inner, now, |i| i.sessions.len())?;
        let token = secret();
        inner
            .unbound_appkey(appkey, now)?
            .session_keys
            .push(token.clone());
        inner.sessions.insert(
            token.clone(),
            SessionRecord {
                appkey: appkey.to_owned(),
                channel,
                outcome,
            },
        );
        Ok(token)
    }

    /// `/3d/liveness`: finishes the appkey and every session of it, if
    /// `session` was issued for this appkey on this channel.
    pub(crate) fn finish_3d(
        &self,
        appkey: &str,
        session: &str,
        channel: usize,
        frontal: Base64Image,
        now: OffsetDateTime,
    ) -> Result<(LivenessOutcome, u64), Reject> {
        let mut inner = self.locked(now);
        inner.unbound_appkey(appkey, now)?;
        let outcome = match inner.sessions.get(session) {
            Some(s) if s.appkey == appkey && s.channel == channel => s.outcome,
            _ => return Err(BAD_SESSION),
        };
        let proof = new_proof(&mut inner, LivenessMode::ThreeD, outcome, frontal);
        let protocol = proof.protocol;
        inner.live_appkey(appkey, now)?.liveness = Some(proof);
        inner.drop_liveness_leftovers(appkey);
        inner.schedule_notice(appkey, self.limits.processing_delay);
        Ok((outcome, protocol))
    }

    /// 401 unless the appkey exists and has not expired.
    pub(crate) fn require_live(&self, appkey: &str, now: OffsetDateTime) -> Result<(), Reject> {
        self.locked(now).live_appkey(appkey, now).map(|_| ())
    }

    /// `/document`: replaces the appkey's documents and restarts their
    /// processing. Returns `codigoDocumento`.
    pub(crate) fn submit(
        &self,
        appkey: &str,
        content: SubmissionContent,
        now: OffsetDateTime,
    ) -> Result<u64, Reject> {
        let mut inner = self.locked(now);
        inner.live_appkey(appkey, now)?;
        let seq = inner.next_serial();
        let submission = Submission {
            seq,
            at: now,
            ticket: uuid::Uuid::new_v4().to_string(),
            analysis_id: 500_000 + seq,
            codigo_documento: 800_000 + seq,
            biometry_protocol: 3_000_000_000 + seq,
            content,
        };
        let code = submission.codigo_documento;
        let delay = self.limits.processing_delay;
        let replaced = inner
            .live_appkey(appkey, now)?
            .submission
            .replace(submission);
        // The replaced submission will never finish: its notice, if still
        // queued, goes.
        if let Some(old) = replaced {
            inner
                .pending
                .remove(&(journey::finishes_at(&old, delay), old.seq));
        }
        inner.schedule_notice(appkey, delay);
        Ok(code)
    }

    /// A copy of an appkey's journey for the result: known (even expired,
    /// until purged) and with a liveness proof, else 404.
    pub(crate) fn journey(
        &self,
        appkey: &str,
        now: OffsetDateTime,
    ) -> Result<AppkeyRecord, Reject> {
        let inner = self.locked(now);
        match inner.appkeys.get(appkey) {
            Some(rec) if rec.liveness.is_some() => Ok(rec.clone()),
            _ => Err(Reject::not_found(
                "appkey not found or liveness proof not performed",
            )),
        }
    }

    /// Marks and returns the journeys that finished and were not yet
    /// announced, plus the next instant a pending journey finishes.
    ///
    /// Only the queue of pending notices is read, up to the first entry
    /// not yet due: the cost is that of the journeys announced.
    pub(crate) fn take_finished(
        &self,
        now: OffsetDateTime,
    ) -> (Vec<(String, JourneyStatus)>, Option<OffsetDateTime>) {
        let delay = self.limits.processing_delay;
        let mut inner = self.locked(now);
        let Inner {
            appkeys, pending, ..
        } = &mut *inner;
        let mut done = Vec::new();
        while let Some(entry) = pending.first_entry() {
            let (at, seq) = *entry.key();
            if at > now {
                return (done, Some(at));
            }
            let key = entry.remove();
            // Stale entries (appkey purged, submission replaced, already
            // announced) are skipped.
            let Some(rec) = appkeys.get_mut(&key) else {
                continue;
            };
            let current = rec.submission.as_ref().is_some_and(|s| s.seq == seq);
            if !current || rec.liveness.is_none() || rec.notified_seq == Some(seq) {
                continue;
            }
            let status = journey::status(rec, now, delay);
            if status.is_final() {
                rec.notified_seq = Some(seq);
                done.push((key, status));
            }
        }
        (done, None)
    }

    /// What a test may see of one appkey.
    pub(crate) fn appkey_state(&self, appkey: &str, now: OffsetDateTime) -> Option<AppkeyState> {
        let inner = self.locked(now);
        let rec = inner.appkeys.get(appkey)?;
        Some(AppkeyState {
            expired: rec.expired(now),
            liveness: rec.liveness.as_ref().map(|l| l.outcome),
            open_challenges: rec
                .challenge_keys
                .iter()
                .filter(|k| inner.challenges.contains_key(*k))
                .count(),
            open_sessions: rec
                .session_keys
                .iter()
                .filter(|k| inner.sessions.contains_key(*k))
                .count(),
            documents: rec.submission.as_ref().map_or(0, |s| match &s.content {
                SubmissionContent::Images(images) => images.len(),
                SubmissionContent::Licence { .. } => 1,
            }),
            status: rec
                .liveness
                .is_some()
                .then(|| journey::status(rec, now, self.limits.processing_delay).as_wire()),
        })
    }

    /// Table sizes (after a purge at `now`).
    pub(crate) fn sizes(&self, now: OffsetDateTime) -> StoreSizes {
        let mut inner = lock(&self.inner);
        self.purge_inner(&mut inner, now);
        StoreSizes {
            tokens: inner.tokens.len(),
            appkeys: inner.appkeys.len(),
            challenges: inner.challenges.len(),
            sessions: inner.sessions.len(),
        }
    }
}

fn new_proof(
    inner: &mut Inner,
    mode: LivenessMode,
    outcome: LivenessOutcome,
    frontal: Base64Image,
) -> LivenessProof {
    let n = inner.next_serial();
    LivenessProof {
        mode,
        outcome,
        protocol: 1_000_000_000 + n,
        bureau_protocol: 2_000_000_000 + n,
        frontal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::documents::LicenceFormat;

    const T0: OffsetDateTime = time::macros::datetime!(2025-01-06 12:00:00 UTC);

    fn limits(max_entries: usize) -> Limits {
        Limits {
            credential_ttl: time::Duration::hours(3),
            appkey_ttl: time::Duration::minutes(5),
            challenge_window: time::Duration::minutes(1),
            retention: time::Duration::hours(24),
            processing_delay: time::Duration::seconds(5),
            max_entries,
        }
    }

    fn at(secs: i64) -> OffsetDateTime {
        T0 + time::Duration::seconds(secs)
    }

    fn user() -> EndUser {
        EndUser {
            cpf: "00000000191".into(),
            name: "TEST".into(),
            birth: time::macros::date!(1990 - 01 - 01),
        }
    }

    fn licence() -> SubmissionContent {
        SubmissionContent::Licence {
            format: LicenceFormat::Pdf,
            image: Base64Image::encode(b"%PDF"),
        }
    }

    /// An appkey created at `now`, with a token of its own.
    fn appkey(store: &Store, now: OffsetDateTime) -> String {
        let (token, _) = store.issue_token("op", now).expect("token");
        store
            .create_appkey(&token, "op", user(), "EXT".into(), now)
            .expect("appkey")
    }

    /// An appkey with a 2D proof made at `now`.
    fn proven(store: &Store, now: OffsetDateTime) -> String {
        let key = appkey(store, now);
        let ch = store.new_challenge(&key, now).expect("challenge");
        store
            .bind_2d(
                &key,
                &ch,
                LivenessOutcome::Valid,
                Base64Image::encode(b""),
                now,
            )
            .expect("bound");
        key
    }

    fn announced(store: &Store, now: OffsetDateTime) -> Vec<String> {
        store
            .take_finished(now)
            .0
            .into_iter()
            .map(|(key, _)| key)
            .collect()
    }

    #[test]
    fn resubmission_while_processing_is_announced_once_when_it_finishes() {
        let store = Store::new(limits(100));
        let key = proven(&store, at(0));
        store.submit(&key, licence(), at(0)).expect("first");
        assert_eq!(store.take_finished(at(1)), (vec![], Some(at(5))));
        store.submit(&key, licence(), at(3)).expect("second");
        // The first submission's due time passes: nothing, the second is
        // the one pending.
        assert_eq!(store.take_finished(at(5)), (vec![], Some(at(8))));
        let (done, next) = store.take_finished(at(8));
        assert_eq!(done, vec![(key.clone(), JourneyStatus::Complete)]);
        assert_eq!(next, None);
        assert!(announced(&store, at(60)).is_empty());
        assert!(store.lock_pending_is_empty());
    }

    #[test]
    fn resubmission_after_the_notice_is_announced_again() {
        let store = Store::new(limits(100));
        let key = proven(&store, at(0));
        store.submit(&key, licence(), at(0)).expect("first");
        assert_eq!(announced(&store, at(5)), vec![key.clone()]);
        store.submit(&key, licence(), at(6)).expect("second");
        assert!(announced(&store, at(10)).is_empty());
        assert_eq!(announced(&store, at(11)), vec![key.clone()]);
        assert!(announced(&store, at(60)).is_empty());
    }

    #[test]
    fn submission_before_the_proof_is_announced_once_the_proof_is_made() {
        let store = Store::new(limits(100));
        let key = appkey(&store, at(0));
        store.submit(&key, licence(), at(0)).expect("submitted");
        // No proof: no notice is pending, even once processing ended.
        assert_eq!(store.take_finished(at(10)), (vec![], None));
        let ch = store.new_challenge(&key, at(10)).expect("challenge");
        store
            .bind_2d(
                &key,
                &ch,
                LivenessOutcome::Valid,
                Base64Image::encode(b""),
                at(10),
            )
            .expect("bound");
        assert_eq!(announced(&store, at(10)), vec![key]);
        assert!(announced(&store, at(60)).is_empty());
    }

    #[test]
    fn journeys_are_announced_in_due_order() {
        let store = Store::new(limits(100));
        let late = proven(&store, at(0));
        let early = proven(&store, at(0));
        store.submit(&late, licence(), at(2)).expect("late");
        store.submit(&early, licence(), at(1)).expect("early");
        assert_eq!(store.take_finished(at(0)), (vec![], Some(at(6))));
        assert_eq!(announced(&store, at(6)), vec![early]);
        assert_eq!(announced(&store, at(7)), vec![late]);
    }

    #[test]
    fn a_proof_drops_only_its_own_appkeys_challenges_and_sessions() {
        let store = Store::new(limits(100));
        let (a, b) = (appkey(&store, at(0)), appkey(&store, at(0)));
        let ch = store.new_challenge(&a, at(0)).expect("challenge");
        for key in [&a, &b] {
            store.new_challenge(key, at(0)).expect("challenge");
            store
                .new_session(key, 0, LivenessOutcome::Valid, at(0))
                .expect("session");
            store
                .new_session(key, 1, LivenessOutcome::Valid, at(0))
                .expect("session");
        }
        assert_eq!(store.sizes(at(0)).challenges, 3);
        assert_eq!(store.sizes(at(0)).sessions, 4);
        store
            .bind_2d(
                &a,
                &ch,
                LivenessOutcome::Valid,
                Base64Image::encode(b""),
                at(1),
            )
            .expect("bound");
        let sizes = store.sizes(at(1));
        assert_eq!((sizes.challenges, sizes.sessions), (1, 2));
        let state = store.appkey_state(&a, at(1)).expect("a");
        assert_eq!((state.open_challenges, state.open_sessions), (0, 0));
        let state = store.appkey_state(&b, at(1)).expect("b");
        assert_eq!((state.open_challenges, state.open_sessions), (1, 2));
        // A purged challenge leaves its appkey's key list too.
        assert_eq!(store.sizes(at(61)).challenges, 0);
        assert!(lock(&store.inner).appkeys[&b].challenge_keys.is_empty());
        assert_eq!(lock(&store.inner).appkeys[&b].session_keys.len(), 2);
    }

    fn purges(store: &Store) -> u64 {
        lock(&store.inner).purges
    }

    fn ms(ms: i64) -> OffsetDateTime {
        T0 + time::Duration::milliseconds(ms)
    }

    #[test]
    fn a_full_table_is_not_purged_again_before_anything_can_expire() {
        let store = Store::new(limits(2));
        store.issue_token("op", at(0)).expect("first");
        store.issue_token("op", at(0)).expect("second");
        let before = purges(&store);
        for i in 0..100 {
            let refused = store.issue_token("op", ms(i * 5)).expect_err("full");
            assert_eq!(refused, FULL);
        }
        assert_eq!(purges(&store), before);
        // Once the tokens expire, the insert purges and succeeds.
        store.issue_token("op", at(3 * 3600)).expect("room again");
    }

    #[test]
    fn a_full_table_is_purged_as_soon_as_an_entry_expires() {
        let store = Store::new(Limits {
            credential_ttl: time::Duration::milliseconds(500),
            ..limits(1)
        });
        store.issue_token("op", ms(0)).expect("first");
        let before = purges(&store);
        assert_eq!(store.issue_token("op", ms(200)).expect_err("full"), FULL);
        assert_eq!(purges(&store), before);
        // Less than a second after the last purge, but the token expired.
        store.issue_token("op", ms(600)).expect("room again");
        assert_eq!(purges(&store), before + 1);
    }

    impl Store {
        fn lock_pending_is_empty(&self) -> bool {
            lock(&self.inner).pending.is_empty()
        }
    }
}
