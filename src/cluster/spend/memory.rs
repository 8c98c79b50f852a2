//! Spend's state of one process: idempotency records in a
//! bounded, expiring map, with a [`Notify`] per pending claim for the
//! calls that wait on it, and budget windows counted in memory.
//!
//! [`RedisSpend`](super::RedisSpend) keeps one of these too, and counts
//! budgets here while Redis is unreachable.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

use super::{BudgetTake, BudgetWindow, IdemRecord, IdemState, SpendStore, WindowUse};
use crate::{
    cluster::{
        encryption::Digester,
        error::ClusterError,
        future::{BoxFuture, ready},
        ttls::Ttls,
    },
    ttl::TtlMap,
};

/// Most budget windows counted at once. Their names come from the
/// configuration, so this bound is never reached in practice; past it,
/// expired windows are swept first.
const MAX_WINDOWS: usize = 10_000;

/// What one process keeps under an idempotency key: the pending claim of
/// a request (until when, and who waits on it), or its done record.
enum IdemEntry {
    Pending {
        request: String,
        until: Instant,
        notify: Arc<Notify>,
    },
    Done(IdemRecord),
}

impl IdemEntry {
    /// Where the key stands, `None` for a pending claim that expired.
    fn state(&self, now: Instant) -> Option<IdemState> {
        match self {
            IdemEntry::Pending { until, .. } if *until <= now => None,
            IdemEntry::Pending { request, .. } => Some(IdemState::Pending {
                request: request.clone(),
            }),
            IdemEntry::Done(record) => Some(IdemState::Done(record.clone())),
        }
    }
}

struct Window {
    used: u64,
    reopens: Instant,
}

/// Idempotency records and budget windows of one process.
pub struct MemorySpend {
    idem: Arc<Mutex<TtlMap<String, IdemEntry>>>,
    windows: Mutex<HashMap<String, Window>>,
    digester: Digester,
}

impl std::fmt::Debug for MemorySpend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySpend").finish_non_exhaustive()
    }
}

impl Default for MemorySpend {
    /// The default bounds of [`Ttls`].
    fn default() -> Self {
        let ttls = Ttls::default();
        Self::new(ttls.idempotency, ttls.idempotency_max_entries)
    }
}

impl MemorySpend {
    /// Completed records live `ttl`; at most `max_entries` are held (the
    /// oldest is forgotten first). Request digests are keyed at random
    /// (no other process compares them).
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            idem: Arc::new(Mutex::new(TtlMap::new(ttl, max_entries))),
            windows: Mutex::new(HashMap::new()),
            digester: Digester::random(),
        }
    }

    pub fn claim(&self, key: &str, request: &str, pending_ttl: Duration) -> Option<IdemState> {
        let now = Instant::now();
        let mut idem = crate::sync::lock(&self.idem);
        if let Some(state) = idem.get(&key.to_owned(), now).and_then(|s| s.state(now)) {
            return Some(state);
        }
        idem.insert(
            key.to_owned(),
            IdemEntry::Pending {
                request: request.to_owned(),
                until: now + pending_ttl,
                notify: Arc::new(Notify::new()),
            },
            now,
        );
        None
    }

    /// Replaces the pending claim (or an expired or absent one) with
    /// `record`, and wakes its waiters.
    pub fn complete(&self, key: &str, record: IdemRecord) {
        let now = Instant::now();
        let mut idem = crate::sync::lock(&self.idem);
        let key = key.to_owned();
        let waiters = match idem.get(&key, now) {
            Some(IdemEntry::Pending {
                request, notify, ..
            }) if *request == record.request => Some(notify.clone()),
            Some(IdemEntry::Pending { until, .. }) if *until > now => return,
            Some(IdemEntry::Done(_)) => return,
            _ => None,
        };
        idem.insert(key, IdemEntry::Done(record), now);
        drop(idem);
        if let Some(n) = waiters {
            n.notify_waiters();
        }
    }

    /// Holds `record`, read back from a durable tier at start, as if it
    /// had been completed `age` ago: it expires here when it does there.
    pub(super) fn restore(&self, key: &str, record: IdemRecord, age: Duration) {
        let now = Instant::now();
        let completed = now.checked_sub(age).unwrap_or(now);
        crate::sync::lock(&self.idem).insert(key.to_owned(), IdemEntry::Done(record), completed);
    }

    /// Forgets the claim if it is still pending for `request`, and wakes
    /// its waiters.
    pub fn release(&self, key: &str, request: &str) {
        let mut idem = crate::sync::lock(&self.idem);
        let key = key.to_owned();
        let mut waiters = None;
        idem.remove_if(&key, |entry| match entry {
            IdemEntry::Pending {
                request: r, notify, ..
            } if r == request => {
                waiters = Some(notify.clone());
                true
            }
            _ => false,
        });
        drop(idem);
        if let Some(n) = waiters {
            n.notify_waiters();
        }
    }

    /// Waits while `key` is pending for `request`, at most `max`.
    pub fn wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> impl Future<Output = IdemState> + Send + 'static {
        let idem = self.idem.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        async move { wait(&idem, &key, &request, max).await }
    }

    /// Counts one call in every window unless one is spent.
    pub fn take(&self, windows: &[BudgetWindow]) -> BudgetTake {
        let now = Instant::now();
        let mut counted = crate::sync::lock(&self.windows);
        if counted.len() >= MAX_WINDOWS {
            counted.retain(|_, w| w.reopens > now);
        }
        for (i, w) in windows.iter().enumerate() {
            if let Some(c) = counted.get(&w.name).filter(|c| c.reopens > now)
                && c.used >= w.limit
            {
                return BudgetTake::Refused {
                    window: i,
                    retry_after: c.reopens - now,
                };
            }
        }
        let uses = windows
            .iter()
            .map(|w| {
                let c = counted.entry(w.name.clone()).or_insert(Window {
                    used: 0,
                    reopens: now + w.length,
                });
                if c.reopens <= now {
                    *c = Window {
                        used: 0,
                        reopens: now + w.length,
                    };
                }
                c.used += 1;
                WindowUse {
                    used: c.used,
                    resets_in: c.reopens - now,
                }
            })
            .collect();
        BudgetTake::Granted(uses)
    }
}

/// [`MemorySpend::wait`] on its records.
async fn wait(
    idem: &Mutex<TtlMap<String, IdemEntry>>,
    key: &str,
    request: &str,
    max: Duration,
) -> IdemState {
    let give_up = Instant::now() + max;
    loop {
        let now = Instant::now();
        let (notified, until) = {
            let mut idem = crate::sync::lock(idem);
            match idem.get(&key.to_owned(), now) {
                Some(IdemEntry::Pending {
                    request: r,
                    until,
                    notify,
                }) if r == request && *until > now => {
                    // Created under the lock: a completion after the
                    // lock is released still wakes it.
                    (notify.clone().notified_owned(), *until)
                }
                Some(entry) => return entry.state(now).unwrap_or(IdemState::Absent),
                None => return IdemState::Absent,
            }
        };
        let wake = until.min(give_up);
        if tokio::time::timeout_at(wake, notified).await.is_err() && wake == give_up {
            return IdemState::Pending {
                request: request.to_owned(),
            };
        }
    }
}

/// The guard's records of one process.
impl SpendStore for MemorySpend {
    fn digester(&self) -> Digester {
        self.digester.clone()
    }

    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>> {
        ready(Ok(self.claim(key, request, pending_ttl)))
    }

    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        _ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        self.complete(key, record);
        ready(Ok(()))
    }

    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>> {
        self.release(key, request);
        ready(Ok(()))
    }

    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>> {
        let waiting = self.wait(key, request, max);
        Box::pin(async move { Ok(waiting.await) })
    }

    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake> {
        ready(self.take(&windows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Appkey, JourneyRef};

    fn record(request: &str) -> IdemRecord {
        IdemRecord {
            request: request.into(),
            journey: JourneyRef::from_appkey(&Appkey::new("k-1")),
            expires_unix: 1,
        }
    }

    #[tokio::test]
    async fn a_waiter_wakes_on_completion_and_sees_the_record() {
        let guard = Arc::new(MemorySpend::new(Duration::from_secs(60), 10));
        assert_eq!(guard.claim("k", "r1", Duration::from_secs(30)), None);
        assert_eq!(
            guard.claim("k", "r1", Duration::from_secs(30)),
            Some(IdemState::Pending {
                request: "r1".into()
            })
        );
        let waiter = {
            let guard = guard.clone();
            tokio::spawn(async move { guard.wait("k", "r1", Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        guard.complete("k", record("r1"));
        assert_eq!(waiter.await.unwrap(), IdemState::Done(record("r1")));
    }

    #[tokio::test]
    async fn a_released_claim_is_absent_to_its_waiters_and_claimable_again() {
        let guard = Arc::new(MemorySpend::new(Duration::from_secs(60), 10));
        assert_eq!(guard.claim("k", "r1", Duration::from_secs(30)), None);
        let waiter = {
            let guard = guard.clone();
            tokio::spawn(async move { guard.wait("k", "r1", Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        guard.release("k", "other");
        guard.release("k", "r1");
        assert_eq!(waiter.await.unwrap(), IdemState::Absent);
        assert_eq!(guard.claim("k", "r1", Duration::from_secs(30)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_claim_is_absent() {
        let guard = MemorySpend::new(Duration::from_secs(60), 10);
        assert_eq!(guard.claim("k", "r1", Duration::from_secs(5)), None);
        assert_eq!(
            guard.wait("k", "r1", Duration::from_secs(60)).await,
            IdemState::Absent
        );
        assert_eq!(guard.claim("k", "r2", Duration::from_secs(5)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_lets_its_limit_through_then_refuses_until_it_reopens() {
        let guard = MemorySpend::new(Duration::from_secs(60), 10);
        let windows = vec![
            BudgetWindow {
                name: "op:create_journey:minute".into(),
                limit: 2,
                length: Duration::from_secs(60),
            },
            BudgetWindow {
                name: "op:create_journey:day".into(),
                limit: 3,
                length: Duration::from_secs(86_400),
            },
        ];
        for used in 1..=2 {
            let BudgetTake::Granted(uses) = guard.take(&windows) else {
                panic!("granted")
            };
            assert_eq!(uses[0].used, used);
        }
        let BudgetTake::Refused {
            window,
            retry_after,
        } = guard.take(&windows)
        else {
            panic!("refused")
        };
        assert_eq!(window, 0);
        assert!(retry_after <= Duration::from_secs(60));
        tokio::time::advance(Duration::from_secs(61)).await;
        // The refusal counted nothing: the day has one call left.
        assert!(matches!(guard.take(&windows), BudgetTake::Granted(_)));
        assert!(matches!(
            guard.take(&windows),
            BudgetTake::Refused { window: 1, .. }
        ));
    }
}
