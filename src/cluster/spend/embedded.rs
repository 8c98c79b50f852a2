//! Spend's state of a single replica on the embedded store, behind its
//! memory tier: an answered `CreateJourney`'s idempotency record and the
//! budget windows survive a restart.
//!
//! - Table `idempotency`: the idempotency key (a digest of caller,
//!   profile and `request_id`) -> `<request digest>:<journey reference>:<expiry>`,
//!   expiring with `[idempotency] ttl_secs`. Written before
//!   [`SpendStore::idempotency_complete`] answers, so the record of an
//!   answered request is durable before its answer. The request digest is
//!   keyed by the store's secret, so it matches after a restart. A pending
//!   claim stays in memory: a request in flight when the process dies was
//!   never answered, and its retry claims the key again.
//! - Table `budgets`: one counter per window (`<operator>:<operation>:<window>`,
//!   configuration names only), counted in the file all or none, expiring
//!   as the window closes.
//!
//! Replays and waits are answered from memory, where the records are
//! read back at start (as many as `[idempotency] max_entries`).

use std::{sync::Arc, time::Duration};

use super::{BudgetTake, BudgetWindow, IdemRecord, IdemState, MemorySpend, SpendStore, WindowUse};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table, Take, Window},
        embedded_tier::{read_failed, refusal, write_failed},
        encryption::Digester,
        error::ClusterError,
        future::{BoxFuture, ready},
    },
    domain::JourneyRef,
};

/// The idempotency records' table.
const IDEMPOTENCY: Table = Table::new("idempotency");

/// The budget windows' table.
const BUDGETS: Table = Table::new("budgets");

/// Separates a record's fields (hex, a reference and a number hold none).
const SEPARATOR: char = ':';

/// Spend's records of a single replica, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedSpend {
    memory: Arc<MemorySpend>,
    store: Embedded,
}

impl EmbeddedSpend {
    /// The records of `store`: completed ones live `ttl`, at most
    /// `max_entries` of them in memory, where the live ones are read back
    /// now.
    pub fn open(store: Embedded, ttl: Duration, max_entries: usize) -> Self {
        let memory = MemorySpend::new(ttl, max_entries);
        let now = Expiry::after(Duration::ZERO);
        let mut records: Vec<_> = match store.scan(IDEMPOTENCY, b"", usize::MAX) {
            Ok(found) => found
                .into_iter()
                .filter_map(|(key, stored)| {
                    let key = String::from_utf8(key).ok()?;
                    let record = decode(std::str::from_utf8(&stored.value).ok()?)?;
                    Some((stored.expires, key, record))
                })
                .collect(),
            Err(e) => {
                read_failed(&e);
                Vec::new()
            }
        };
        // Oldest first: the memory tier forgets in insertion order.
        records.sort_by_key(|(expires, _, _)| *expires);
        let skip = records.len().saturating_sub(max_entries);
        for (expires, key, record) in records.into_iter().skip(skip) {
            let left = Duration::from_millis(expires.unix_ms().saturating_sub(now.unix_ms()));
            memory.restore(&key, record, ttl.saturating_sub(left));
        }
        Self {
            memory: Arc::new(memory),
            store,
        }
    }
}

/// The stored form of `record`.
fn encode(record: &IdemRecord) -> String {
    format!(
        "{}{SEPARATOR}{}{SEPARATOR}{}",
        record.request, record.journey, record.expires_unix
    )
}

/// The record stored as `text`; `None` when it is not one.
fn decode(text: &str) -> Option<IdemRecord> {
    let mut parts = text.splitn(3, SEPARATOR);
    Some(IdemRecord {
        request: parts.next()?.to_owned(),
        journey: JourneyRef::parse(parts.next()?)?,
        expires_unix: parts.next()?.parse().ok()?,
    })
}

impl SpendStore for EmbeddedSpend {
    /// Keyed by the store's secret: a digest made before a restart
    /// matches after it.
    fn digester(&self) -> Digester {
        self.store.digester()
    }

    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>> {
        ready(Ok(self.memory.claim(key, request, pending_ttl)))
    }

    /// In the file first, then in memory (where waiters see it); the
    /// memory tier holds it even when the file refused it, so that this
    /// process still replays it.
    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let key = key.to_owned();
        Box::pin(async move {
            let written = this
                .store
                .put(
                    IDEMPOTENCY,
                    key.as_bytes(),
                    encode(&record).as_bytes(),
                    Expiry::after(ttl),
                )
                .await;
            this.memory.complete(&key, record);
            written.map_err(refusal)
        })
    }

    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>> {
        self.memory.release(key, request);
        ready(Ok(()))
    }

    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>> {
        let waiting = self.memory.wait(key, request, max);
        Box::pin(async move { Ok(waiting.await) })
    }

    /// Counted in the file; should the file fail, in memory (a budget
    /// never fails a call for its store).
    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake> {
        let this = self.clone();
        Box::pin(async move {
            let counted = windows
                .iter()
                .map(|w| Window {
                    table: BUDGETS,
                    key: w.name.as_bytes().to_vec(),
                    limit: w.limit,
                    length: w.length,
                })
                .collect();
            match this.store.take(counted).await {
                Ok(Take::Granted(uses)) => BudgetTake::Granted(
                    uses.into_iter()
                        .map(|c| WindowUse {
                            used: c.used,
                            resets_in: c.resets_in,
                        })
                        .collect(),
                ),
                Ok(Take::Refused {
                    window,
                    retry_after,
                }) => BudgetTake::Refused {
                    window,
                    retry_after,
                },
                Err(e) => {
                    write_failed(&e);
                    this.memory.take(&windows)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cluster::embedded::StoreConfig, domain::Appkey};

    fn config(dir: &tempfile::TempDir) -> StoreConfig {
        StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        }
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[tokio::test]
    async fn an_answered_request_replays_after_a_restart_and_its_digest_still_matches() {
        let dir = tempfile::tempdir().unwrap();
        let journey = JourneyRef::from_appkey(&Appkey::new("k-1"));
        let parts: [&[u8]; 1] = [b"request"];
        let request = {
            let spend = EmbeddedSpend::open(Embedded::open(&config(&dir), None).unwrap(), DAY, 10);
            let request = spend.digester().digest(&parts);
            let pending = Duration::from_secs(30);
            assert_eq!(
                spend.idempotency_claim("key", &request, pending).await,
                Ok(None)
            );
            let record = IdemRecord {
                request: request.clone(),
                journey: journey.clone(),
                expires_unix: 42,
            };
            spend
                .idempotency_complete("key", record, DAY)
                .await
                .unwrap();
            request
        };
        let spend = EmbeddedSpend::open(Embedded::open(&config(&dir), None).unwrap(), DAY, 10);
        assert!(spend.digester().matches(&parts, &request));
        let held = spend
            .idempotency_claim("key", &request, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            held,
            Some(IdemState::Done(IdemRecord {
                request,
                journey,
                expires_unix: 42,
            }))
        );
    }

    #[tokio::test]
    async fn budget_windows_keep_their_counts_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let window = || {
            vec![BudgetWindow {
                name: "ops:create_journey:minute".into(),
                limit: 2,
                length: Duration::from_secs(60),
            }]
        };
        for _ in 0..2 {
            let spend = EmbeddedSpend::open(Embedded::open(&config(&dir), None).unwrap(), DAY, 10);
            assert!(matches!(
                spend.take_budget(window()).await,
                BudgetTake::Granted(_)
            ));
        }
        let spend = EmbeddedSpend::open(Embedded::open(&config(&dir), None).unwrap(), DAY, 10);
        assert!(matches!(
            spend.take_budget(window()).await,
            BudgetTake::Refused { window: 0, .. }
        ));
    }
}
