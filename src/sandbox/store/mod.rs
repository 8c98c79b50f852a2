//! The state machine of the service
//! (`docs/upstream.md#timing-and-state-rules`), in memory, shared by every
//! listener.
//!
//! Every method takes `now` from the injected clock and validates before it
//! mutates, under one lock, so a refused call leaves no trace. Expiry is
//! evaluated lazily against `now`; [`Store::purge`] drops what can no
//! longer be used or read, so memory stays bounded.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use time::OffsetDateTime;

use super::error::Reject;
use super::faults::lock;
use super::journey::{self, JourneyStatus};
use super::liveness::LivenessOutcome;

mod capacity;
pub(in crate::sandbox) mod records;
#[cfg(test)]
mod tests;

pub(crate) use records::{
    AppkeyRecord, Base64Image, DocumentImage, EndUser, Limits, LivenessMode, LivenessProof,
    Submission, SubmissionContent,
};
pub use records::{AppkeyState, StoreSizes};

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
    /// The appkey issued last, for a vendor that repeats one
    /// ([`FaultAction::RepeatAppkey`](crate::sandbox::faults::FaultAction)).
    last_appkey: Option<String>,
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
        inner.last_appkey = Some(appkey.clone());
        Ok(appkey)
    }

    /// The appkey issued last, while it lives: what a vendor that
    /// deduplicates by person answers a second `/appkey` with.
    pub(crate) fn last_appkey(&self, now: OffsetDateTime) -> Option<String> {
        let mut inner = self.locked(now);
        let last = inner.last_appkey.clone()?;
        inner.live_appkey(&last, now).ok()?;
        Some(last)
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

    /// The CPF behind the appkey a call names (JSON or form field
    /// `appkey`), for share faults.
    pub(crate) fn person_of(&self, input: &super::input::Input) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Form {
            appkey: String,
        }
        let appkey = match input.json_object() {
            Some(o) => o.get("appkey")?.as_str()?.to_owned(),
            None => input.form::<Form>()?.appkey,
        };
        lock(&self.inner)
            .appkeys
            .get(&appkey)
            .map(|r| r.user.cpf.clone())
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
