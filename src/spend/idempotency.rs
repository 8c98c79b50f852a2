//! Idempotent `CreateJourney` (AIP-155): one appkey per `request_id`.
//!
//! ```text
//! claim(key, digest) --won------> create --ok---> complete (record, ttl_secs)   -> caller
//!                    |                    `-err--> release (a retry may try again) -> caller
//!                    |--done------> same digest? replay : REQUEST_ID_REUSED
//!                    `--pending---> same digest? wait : REQUEST_ID_REUSED
//!                                      |--done----> replay
//!                                      `--absent--> CONCURRENT_CALL_FAILED (released or expired)
//! ```
//!
//! The key is SHA-256 of the caller, the operator profile and the
//! `request_id` (stable across secret rotations): like Stripe's
//! idempotency keys, scoped to who sent it, so another caller's
//! `request_id` is another key and never returns this caller's journey.
//! The request digest is keyed ([`Digester`]) over the profile, the
//! `request_id` and every field of the end user, so the store never holds
//! a CPF, a name or a birth date.
//!
//! A completed record names the journey, not its appkey: a replay reads
//! the appkey from the journey's record (`cluster::journeys`), and only
//! when that record's owner and request key are this call's
//! (`journey::Journeys::create`). The journey is recorded
//! before the claim completes, so no waiter sees a journey without its
//! owner.
//!
//! A call waiting on another never calls `/appkey` itself: if the first
//! call fails, it answers `CONCURRENT_CALL_FAILED` (ABORTED, retry-safe),
//! so two concurrent identical calls cost one `/appkey` at most, and a
//! failure is retried only when a caller decides to. A caller that goes
//! away mid-call releases its claim too.

use std::{sync::Arc, time::Duration};

use super::config::IdempotencyConfig;
use crate::{
    cluster::{ClusterError, IdemRecord, IdemState, SpendStore, encryption::Digester},
    context::CallContext,
    domain::{CallerName, EndUser, JourneyRef, RequestId, RequestKey},
    error::Error,
    telemetry::Metrics,
};
use sha2::{Digest as _, Sha256};

/// Outcomes counted in `idgate_idempotent_requests`.
mod outcome {
    pub const CLAIMED: &str = "claimed";
    pub const REPLAYED: &str = "replayed";
    pub const JOINED: &str = "joined_in_flight";
    pub const REUSED: &str = "refused_reused";
    pub const FAILED: &str = "first_call_failed";
    pub const UNAVAILABLE: &str = "unavailable";
}

/// What a `request_id` names, hashed.
struct Fingerprint {
    /// The store key: hex SHA-256 of caller, profile and `request_id`.
    key: RequestKey,
    /// The canonical request, as the parts the digest covers.
    parts: Vec<Vec<u8>>,
}

impl Fingerprint {
    fn new(owner: Option<&CallerName>, profile: &str, id: &RequestId, user: &EndUser) -> Self {
        // Length-prefixed, so no two (caller, profile) pairs share bytes;
        // the open caller (no owner) is its own empty name.
        let owner = owner.map_or("", CallerName::as_str);
        let hash = Sha256::new()
            .chain_update(b"idgate.request-id.v2\0")
            .chain_update((owner.len() as u64).to_be_bytes())
            .chain_update(owner.as_bytes())
            .chain_update((profile.len() as u64).to_be_bytes())
            .chain_update(profile.as_bytes())
            .chain_update(id.as_str().as_bytes())
            .finalize();
        let key = RequestKey::new(
            hash[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        );
        let parts = vec![
            profile.as_bytes().to_vec(),
            id.as_str().as_bytes().to_vec(),
            user.cpf.digits().as_bytes().to_vec(),
            user.name.as_str().as_bytes().to_vec(),
            user.birth_date.to_wire().into_bytes(),
            user.customer_reference.as_str().as_bytes().to_vec(),
        ];
        Self { key, parts }
    }

    fn slices(&self) -> Vec<&[u8]> {
        self.parts.iter().map(Vec::as_slice).collect()
    }
}

/// What [`Idempotency::begin`] decided.
pub enum Begin {
    /// This call holds the `request_id`: create, then complete or drop.
    Claimed(Claim),
    /// A call of this caller with the same `request_id` and request
    /// completed: the journey it made, to replay from its record without
    /// calling upstream.
    Replay(Replayed),
}

/// A completed request, as its idempotency record names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The request's key: the journey's record must carry the same.
    pub key: RequestKey,
    /// The journey the request made.
    pub journey: JourneyRef,
    /// The expiry returned the first time, Unix seconds.
    pub expires_unix: i64,
}

/// The idempotency of `CreateJourney`, over the shared state.
#[derive(Clone)]
pub struct Idempotency {
    state: Arc<dyn SpendStore>,
    digester: Digester,
    ttl: Duration,
    pending_ttl: Duration,
    metrics: Metrics,
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Idempotency {
    /// Idempotency with the windows of `config`, over `state`.
    pub fn new(config: &IdempotencyConfig, state: Arc<dyn SpendStore>, metrics: Metrics) -> Self {
        Self {
            digester: state.digester(),
            state,
            ttl: Duration::from_secs(config.ttl_secs.max(1)),
            pending_ttl: Duration::from_secs(config.pending_ttl_secs.max(1)),
            metrics,
        }
    }

    fn unavailable(&self, _: ClusterError) -> Error {
        self.metrics.record_idempotency(outcome::UNAVAILABLE);
        Error::IdempotencyUnavailable
    }

    /// Claims `id` of `owner` for this call, or answers what an earlier
    /// call of `owner` with it decided (waiting, within the caller's
    /// deadline, while it is in flight).
    pub async fn begin(
        &self,
        ctx: &CallContext,
        owner: Option<&CallerName>,
        profile: &str,
        id: &RequestId,
        user: &EndUser,
    ) -> Result<Begin, Error> {
        let print = Fingerprint::new(owner, profile, id, user);
        let store_key = print.key.as_str();
        let request = self.digester.digest(&print.slices());
        let held = self
            .state
            .idempotency_claim(store_key, &request, self.pending_ttl)
            .await
            .map_err(|e| self.unavailable(e))?;
        let state = match held {
            None => {
                self.metrics.record_idempotency(outcome::CLAIMED);
                return Ok(Begin::Claimed(Claim {
                    state: self.state.clone(),
                    key: print.key.clone(),
                    request,
                    ttl: self.ttl,
                    armed: true,
                }));
            }
            Some(IdemState::Pending { request: theirs })
                if self.digester.matches(&print.slices(), &theirs) =>
            {
                self.metrics.record_idempotency(outcome::JOINED);
                // At most until the claim would expire, and the caller's
                // deadline; a little past the expiry so it is seen.
                let mut max = self.pending_ttl + Duration::from_millis(100);
                if let Some(left) = ctx.remaining() {
                    max = max.min(left);
                }
                let state = self
                    .state
                    .idempotency_wait(store_key, &theirs, max)
                    .await
                    .map_err(|e| self.unavailable(e))?;
                if matches!(&state, IdemState::Pending { request } if *request == theirs) {
                    return Err(Error::DeadlineExceeded(
                        "the first call with this request_id",
                    ));
                }
                state
            }
            Some(state) => state,
        };
        match state {
            IdemState::Done(record) if self.digester.matches(&print.slices(), &record.request) => {
                self.metrics.record_idempotency(outcome::REPLAYED);
                Ok(Begin::Replay(Replayed {
                    key: print.key.clone(),
                    journey: record.journey,
                    expires_unix: record.expires_unix,
                }))
            }
            IdemState::Absent => {
                self.metrics.record_idempotency(outcome::FAILED);
                Err(Error::ConcurrentCallFailed)
            }
            IdemState::Done(_) | IdemState::Pending { .. } => {
                self.metrics.record_idempotency(outcome::REUSED);
                Err(Error::RequestIdReused)
            }
        }
    }
}

/// A held `request_id`. [`Claim::complete`] records the journey; dropped
/// otherwise (the call failed, or its caller went away), it releases the
/// `request_id` so that a retry may try again.
pub struct Claim {
    state: Arc<dyn SpendStore>,
    key: RequestKey,
    request: String,
    ttl: Duration,
    armed: bool,
}

impl Claim {
    /// The request's key, which the journey's record carries.
    pub fn key(&self) -> &RequestKey {
        &self.key
    }

    /// Records that the request made `journey` (already recorded with
    /// this claim's key), expiring at `expires_unix`, for replays. A
    /// record that cannot be written (the store became unreachable) is
    /// logged, and the journey still returned: its appkey exists and the
    /// caller should have it.
    pub async fn complete(mut self, journey: &JourneyRef, expires_unix: i64) {
        self.armed = false;
        let record = IdemRecord {
            request: self.request.clone(),
            journey: journey.clone(),
            expires_unix,
        };
        if self
            .state
            .idempotency_complete(self.key.as_str(), record, self.ttl)
            .await
            .is_err()
        {
            tracing::warn!(
                journey = %journey,
                "the idempotency record could not be written; a retry with this request_id after the pending claim expires creates another journey"
            );
        }
    }
}

impl Claim {
    /// Releases the `request_id` now (the call failed): a retry with it
    /// makes its own attempt, and calls waiting on this one answer
    /// `CONCURRENT_CALL_FAILED`.
    pub async fn release(mut self) {
        self.armed = false;
        if self
            .state
            .idempotency_release(self.key.as_str(), &self.request)
            .await
            .is_err()
        {
            tracing::debug!("an idempotency claim could not be released; it expires instead");
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let release = self
            .state
            .idempotency_release(self.key.as_str(), &self.request);
        // Dropped outside a runtime (never in the gateway): the claim
        // expires after pending_ttl_secs instead.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if release.await.is_err() {
                    tracing::debug!(
                        "an idempotency claim could not be released; it expires instead"
                    );
                }
            });
        }
    }
}
