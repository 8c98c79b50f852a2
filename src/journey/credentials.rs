//! Operator credentials: exchanged at `/credencial`, cached per operator
//! profile until shortly before they expire, refreshed by one caller at a
//! time, and refreshed once more when `/appkey` says they are stale.
//!
//! Single flight: a profile's refresh runs under an async mutex. Callers
//! that queued behind it re-check the cache when they get the lock, and
//! adopt the outcome of the refresh they waited on (token or error) rather
//! than starting their own, so N concurrent callers cost one exchange.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

use super::operators::{OperatorProfile, OperatorProfiles};
use crate::{
    context::CallContext,
    domain::{Appkey, CredentialToken, EndUser, Operation},
    error::Error,
    sync::lock,
    upstream::{CredentialGrant, UpstreamClient, UpstreamConfig, UpstreamError},
};

/// How the cache reads and ages credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialPolicy {
    /// Lifetime of a credential whose answer has no readable `expires`
    /// (the configured `credential_ttl_secs`, default 3 h).
    pub fallback_ttl: Duration,
    /// Refresh this long before the expiry (capped at half the lifetime).
    pub refresh_margin: Duration,
    /// The upstream's clock offset, for `expires` (UTC unless configured).
    pub upstream_offset: UtcOffset,
}

impl Default for CredentialPolicy {
    fn default() -> Self {
        CredentialPolicy {
            fallback_ttl: Duration::from_secs(3 * 3600),
            refresh_margin: Duration::from_secs(60),
            upstream_offset: UtcOffset::UTC,
        }
    }
}

impl CredentialPolicy {
    /// The policy of `config`: its `credential_ttl_secs` as the fallback
    /// lifetime, a one-minute margin, and `expires` read as UTC. Set
    /// `upstream_offset` when the upstream writes another local time.
    pub fn from_config(config: &UpstreamConfig) -> Self {
        CredentialPolicy {
            fallback_ttl: Duration::from_secs(config.credential_ttl_secs.max(1)),
            ..CredentialPolicy::default()
        }
    }

    /// The instant after which a credential granted at `now` is refreshed.
    /// An `expires` that is unreadable, or that leaves no more than the
    /// margin (a clock or time-zone mismatch, most likely), falls back to
    /// the TTL: a stale token is caught by the 401 retry of `/appkey`.
    pub fn refresh_at(
        &self,
        now: OffsetDateTime,
        expires: Option<PrimitiveDateTime>,
    ) -> OffsetDateTime {
        let lifetime = expires
            .map(|e| e.assume_offset(self.upstream_offset) - now)
            .filter(|left| *left > self.refresh_margin)
            .and_then(|left| Duration::try_from(left).ok())
            .unwrap_or(self.fallback_ttl);
        let margin = self.refresh_margin.min(lifetime / 2);
        now + (lifetime - margin)
    }
}

/// The credential cache of every configured operator profile.
#[derive(Clone)]
pub struct Credentials {
    inner: Arc<CredentialsInner>,
}

struct CredentialsInner {
    client: UpstreamClient,
    policy: CredentialPolicy,
    /// Profiles in configuration order; the first is the default.
    profiles: OperatorProfiles,
    caches: HashMap<String, ProfileCache>,
    exchanges: AtomicU64,
}

/// One profile's cache.
struct ProfileCache {
    profile: OperatorProfile,
    state: Mutex<CacheState>,
    /// Held while exchanging: the single flight.
    refresh: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct CacheState {
    cached: Option<Cached>,
    /// Completed refreshes, success or failure.
    epoch: u64,
    /// The failure of the refresh that completed at `epoch`, if it failed.
    last_failure: Option<UpstreamError>,
}

#[derive(Clone)]
struct Cached {
    token: CredentialToken,
    refresh_at: OffsetDateTime,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("profiles", &self.inner.profiles.names())
            .field("exchanges", &self.inner.exchanges.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// A cache over `profiles` (the first is the default), exchanging
    /// through `client`.
    pub fn new(
        client: UpstreamClient,
        profiles: impl IntoIterator<Item = OperatorProfile>,
        policy: CredentialPolicy,
    ) -> Self {
        let mut order = Vec::new();
        let mut caches = HashMap::new();
        for profile in profiles {
            if caches.contains_key(&profile.name) {
                continue;
            }
            order.push(profile.name.clone());
            caches.insert(
                profile.name.clone(),
                ProfileCache {
                    profile,
                    state: Mutex::new(CacheState::default()),
                    refresh: tokio::sync::Mutex::new(()),
                },
            );
        }
        Credentials {
            inner: Arc::new(CredentialsInner {
                client,
                policy,
                profiles: OperatorProfiles::new(order),
                caches,
                exchanges: AtomicU64::new(0),
            }),
        }
    }

    /// The profiles this cache holds, in configuration order.
    pub fn profiles(&self) -> &OperatorProfiles {
        &self.inner.profiles
    }

    fn cache(&self, profile: &str) -> Result<&ProfileCache, Error> {
        self.inner
            .profiles
            .meant(Some(profile))
            .and_then(|name| self.inner.caches.get(name))
            .ok_or_else(|| Error::OperatorProfileUnknown(profile.to_owned()))
    }

    /// A valid credential of `profile` (empty: the first profile),
    /// exchanging one if none is cached.
    pub async fn token(&self, ctx: &CallContext, profile: &str) -> Result<CredentialToken, Error> {
        let cache = self.cache(profile)?;
        self.token_of(ctx, cache).await.map_err(Error::from)
    }

    async fn token_of(
        &self,
        ctx: &CallContext,
        cache: &ProfileCache,
    ) -> Result<CredentialToken, UpstreamError> {
        let seen_epoch = {
            let state = lock(&cache.state);
            if let Some(c) = fresh(&state) {
                return Ok(c);
            }
            state.epoch
        };
        let op = Operation::Credential;
        let _guard = match ctx.deadline() {
            Some(deadline) => tokio::time::timeout_at(deadline, cache.refresh.lock())
                .await
                .map_err(|_| UpstreamError::DeadlineExceeded { op })?,
            None => cache.refresh.lock().await,
        };
        {
            let state = lock(&cache.state);
            if let Some(c) = fresh(&state) {
                return Ok(c);
            }
            // A refresh completed while we waited and failed: share its
            // outcome instead of hammering a failing upstream.
            if state.epoch != seen_epoch {
                if let Some(err) = &state.last_failure {
                    return Err(err.clone());
                }
            }
        }
        self.inner.exchanges.fetch_add(1, Ordering::Relaxed);
        let profile = &cache.profile;
        let outcome = self
            .inner
            .client
            .credential(ctx, &profile.login, &profile.password)
            .await;
        let mut state = lock(&cache.state);
        state.epoch += 1;
        match outcome {
            Ok(CredentialGrant { token, expires }) => {
                let refresh_at = self
                    .inner
                    .policy
                    .refresh_at(OffsetDateTime::now_utc(), expires);
                state.cached = Some(Cached {
                    token: token.clone(),
                    refresh_at,
                });
                state.last_failure = None;
                Ok(token)
            }
            Err(err) => {
                state.last_failure = Some(err.clone());
                Err(err)
            }
        }
    }

    /// Forgets `stale` if it is still the cached credential (a newer one,
    /// refreshed meanwhile by another caller, is kept).
    fn invalidate(&self, cache: &ProfileCache, stale: &CredentialToken) {
        let mut state = lock(&cache.state);
        if state.cached.as_ref().is_some_and(|c| &c.token == stale) {
            state.cached = None;
        }
    }

    /// Creates an appkey for `user` with the credentials of `profile`
    /// (empty: the first profile). A 401 from `/appkey` proves no appkey
    /// was created and the credential is stale: it is refreshed once and
    /// `/appkey` is sent once more.
    pub async fn create_appkey(
        &self,
        ctx: &CallContext,
        profile: &str,
        user: &EndUser,
    ) -> Result<Appkey, Error> {
        let cache = self.cache(profile)?;
        let client = &self.inner.client;
        let token = self.token_of(ctx, cache).await?;
        match client.appkey(ctx, &cache.profile.login, &token, user).await {
            Err(UpstreamError::Status { status: 401, .. }) => {
                tracing::info!(
                    operation = Operation::Appkey.as_str(),
                    "credential rejected; refreshing once"
                );
                self.invalidate(cache, &token);
                let token = self.token_of(ctx, cache).await?;
                Ok(client
                    .appkey(ctx, &cache.profile.login, &token, user)
                    .await?)
            }
            other => Ok(other?),
        }
    }
}

fn fresh(state: &CacheState) -> Option<CredentialToken> {
    state
        .cached
        .as_ref()
        .filter(|c| OffsetDateTime::now_utc() < c.refresh_at)
        .map(|c| c.token.clone())
}

/// What a test reads of, and does to, the credential cache; reached
/// through [`crate::testing`].
pub trait CredentialsParts {
    /// How many `/credencial` exchanges this cache has started (each
    /// counted once, whatever its transport retries).
    fn exchanges(&self) -> u64;
    /// Marks every cached credential as expired, so the next use refreshes.
    fn expire_now(&self);
}

impl CredentialsParts for Credentials {
    fn exchanges(&self) -> u64 {
        self.inner.exchanges.load(Ordering::Relaxed)
    }

    fn expire_now(&self) {
        for cache in self.inner.caches.values() {
            lock(&cache.state).cached = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn refresh_is_scheduled_a_margin_before_the_answer_expiry() {
        let p = CredentialPolicy::default();
        let now = datetime!(2026-11-21 12:00:00 UTC);
        let at = p.refresh_at(now, Some(datetime!(2026-11-21 15:00:00)));
        assert_eq!(at, datetime!(2026-11-21 14:59:00 UTC));
    }

    #[test]
    fn expires_is_read_in_the_configured_upstream_offset() {
        let p = CredentialPolicy {
            upstream_offset: UtcOffset::from_hms(-3, 0, 0).unwrap(),
            ..CredentialPolicy::default()
        };
        let now = datetime!(2026-11-21 15:00:00 UTC);
        // 15:00 at -03:00 is 18:00 UTC.
        let at = p.refresh_at(now, Some(datetime!(2026-11-21 15:00:00)));
        assert_eq!(at, datetime!(2026-11-21 17:59:00 UTC));
    }

    #[test]
    fn missing_or_already_past_expiry_falls_back_to_the_ttl() {
        let p = CredentialPolicy {
            fallback_ttl: Duration::from_secs(600),
            ..CredentialPolicy::default()
        };
        let now = datetime!(2026-11-21 12:00:00 UTC);
        assert_eq!(p.refresh_at(now, None), datetime!(2026-11-21 12:09:00 UTC));
        assert_eq!(
            p.refresh_at(now, Some(datetime!(2026-11-21 11:00:00))),
            datetime!(2026-11-21 12:09:00 UTC)
        );
    }

    #[test]
    fn policy_from_config_uses_the_configured_ttl() {
        let config = UpstreamConfig {
            credential_ttl_secs: 120,
            ..UpstreamConfig::default()
        };
        let p = CredentialPolicy::from_config(&config);
        assert_eq!(p.fallback_ttl, Duration::from_secs(120));
        assert_eq!(p.upstream_offset, UtcOffset::UTC);
    }

    #[test]
    fn a_short_lifetime_keeps_half_of_it() {
        let p = CredentialPolicy {
            fallback_ttl: Duration::from_secs(60),
            ..CredentialPolicy::default()
        };
        let now = datetime!(2026-11-21 12:00:00 UTC);
        assert_eq!(p.refresh_at(now, None), datetime!(2026-11-21 12:00:30 UTC));
    }
}
