//! Bounded memory: every table is capped at `max_entries`, and what can no
//! longer be used or read is purged, lazily and at most once per clock
//! second, or at once when a full table could make room.

use std::sync::MutexGuard;

use time::OffsetDateTime;

use super::{FULL, Inner, Store};
use crate::sandbox::{error::Reject, faults::lock};

impl Store {
    pub(super) fn locked(&self, now: OffsetDateTime) -> MutexGuard<'_, Inner> {
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
    pub(super) fn room(
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
    pub(super) fn purge_inner(&self, inner: &mut Inner, now: OffsetDateTime) {
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
}
