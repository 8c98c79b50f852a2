//! Spend's state on Redis: idempotency records and budget
//! windows, each operation one script (atomic across replicas).
//!
//! Keys (`{p}` is `key_prefix`):
//! - `{p}idem:<digest>`: `p:<request digest>` while the first call is in
//!   flight (expires after `pending_ttl_secs`), then
//!   `d:<request digest>:<journey ref>:<expiry>` for `ttl_secs`; the
//!   appkey is the journey record's (`cluster::journeys`), read on
//!   replay and checked against the caller (a trailing sealed appkey of
//!   the previous release is ignored). `<digest>` is SHA-256 of the
//!   caller, the operator profile and the `request_id`; the request
//!   digest is keyed (HMAC under a key derived from the sealing key): no
//!   CPF, name or birth date in clear.
//! - `{p}budget:<operator>:<operation>:<window>`: the window's counter,
//!   expiring when the window closes (`{p}{budget:<operator>}:...` on a
//!   Redis Cluster: one script counts an operator's windows together).

use std::time::Duration;

use super::{BudgetTake, BudgetWindow, IdemRecord, IdemState, MemorySpend, SpendStore, WindowUse};
use crate::{
    cluster::{
        encryption::Digester,
        error::ClusterError,
        future::BoxFuture,
        redis::{RedisConn, millis},
    },
    domain::JourneyRef,
};

/// Claims a key if absent; else returns what it holds ('' when claimed).
const CLAIM_SCRIPT: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end \
     return redis.call('GET', KEYS[1]) or ''";

/// Completes a claim still pending for this request (or vanished).
const COMPLETE_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
     if v == false or v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end \
     return 0";

/// Checks every window, then counts the call in all of them, or in none.
/// ARGV: limit and length (ms) of each window, in KEYS order. Answers
/// `{1, used1, ttl1, used2, ttl2, ...}` or `{0, spent window index, ttl}`.
const BUDGET_SCRIPT: &str = "for i = 1, #KEYS do \
       local n = tonumber(redis.call('GET', KEYS[i]) or '0') \
       if n >= tonumber(ARGV[2*i-1]) then \
         local ttl = redis.call('PTTL', KEYS[i]) \
         if ttl < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[2*i]) ttl = tonumber(ARGV[2*i]) end \
         return {0, i, ttl} end end \
     local out = {1} \
     for i = 1, #KEYS do \
       local n = redis.call('INCR', KEYS[i]) \
       local ttl = redis.call('PTTL', KEYS[i]) \
       if ttl < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[2*i]) ttl = tonumber(ARGV[2*i]) end \
       out[#out+1] = n out[#out+1] = ttl end \
     return out";

/// Polls of a pending record start this often and back off to the max.
const POLL_FIRST: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(200);

fn pending(request: &str) -> String {
    format!("p:{request}")
}

/// Spend's records on Redis. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisSpend {
    conn: RedisConn,
    /// Budgets counted while Redis is unreachable.
    local: std::sync::Arc<MemorySpend>,
}

impl RedisSpend {
    /// The records on `conn`; `local` counts budgets while Redis is
    /// unreachable.
    pub(in crate::cluster) fn new(conn: RedisConn, local: MemorySpend) -> Self {
        Self {
            conn,
            local: std::sync::Arc::new(local),
        }
    }

    fn idem_key(&self, key: &str) -> String {
        self.conn.key(&format!("idem:{key}"))
    }

    /// `{p}{budget:<operator>}:<rest>`. One take counts the windows of one
    /// operator (its own and its callers') in one script, so the operator
    /// is the hash tag (one Redis Cluster slot).
    fn budget_key(&self, name: &str) -> String {
        match name.split_once(':') {
            Some((operator, rest)) => self.conn.tagged_key(&format!("budget:{operator}"), rest),
            None => self.conn.tagged_key("budget", name),
        }
    }

    fn done_value(record: &IdemRecord) -> String {
        format!(
            "d:{}:{}:{}",
            record.request, record.journey, record.expires_unix,
        )
    }

    /// Reads a stored value. A record that does not parse reads as
    /// absent: the next call claims anew.
    fn parse_idem(value: &str) -> IdemState {
        if let Some(request) = value.strip_prefix("p:") {
            return IdemState::Pending {
                request: request.to_owned(),
            };
        }
        let mut parts = value.splitn(5, ':');
        let (Some("d"), Some(request), Some(journey), Some(expires)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return IdemState::Absent;
        };
        let (Some(journey), Ok(expires_unix)) =
            (JourneyRef::parse(journey), expires.parse::<i64>())
        else {
            return IdemState::Absent;
        };
        IdemState::Done(IdemRecord {
            request: request.to_owned(),
            journey,
            expires_unix,
        })
    }

    async fn idem_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> Result<Option<IdemState>, ClusterError> {
        self.conn.check_up()?;
        let key = self.idem_key(key);
        let value = pending(request);
        let ttl = millis(pending_ttl);
        // Twice at most: a record that does not read (another sealing
        // key, a foreign value) is deleted, then the key claimed anew.
        for _ in 0..2 {
            let (k, v) = (key.clone(), value.clone());
            let held: String = self
                .conn
                .exec("EVAL", move |mut c| async move {
                    redis::cmd("EVAL")
                        .arg(CLAIM_SCRIPT)
                        .arg(1)
                        .arg(&k)
                        .arg(&v)
                        .arg(ttl)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            if held.is_empty() {
                return Ok(None);
            }
            match Self::parse_idem(&held) {
                IdemState::Absent => {
                    self.conn.delete_if(key.clone(), held).await?;
                }
                state => return Ok(Some(state)),
            }
        }
        Err(ClusterError::Unavailable)
    }

    async fn idem_complete(
        &self,
        key: &str,
        record: &IdemRecord,
        ttl: Duration,
    ) -> Result<(), ClusterError> {
        self.conn.check_up()?;
        let key = self.idem_key(key);
        let expected = pending(&record.request);
        let value = Self::done_value(record);
        let ttl = millis(ttl);
        self.conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(COMPLETE_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(&expected)
                    .arg(&value)
                    .arg(ttl)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|_| ())
    }

    async fn idem_release(&self, key: &str, request: &str) -> Result<(), ClusterError> {
        self.conn.check_up()?;
        let key = self.idem_key(key);
        let expected = pending(request);
        self.conn.delete_if(key, expected).await
    }

    /// Polls (20 ms, backing off to 200 ms) while the key is pending for
    /// `request`, at most `max`: a waiter costs a few GETs a second.
    async fn idem_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> Result<IdemState, ClusterError> {
        let give_up = tokio::time::Instant::now() + max;
        let redis_key = self.idem_key(key);
        let mut pause = POLL_FIRST;
        loop {
            self.conn.check_up()?;
            let value = self.conn.get(redis_key.clone()).await?;
            let state = value.map_or(IdemState::Absent, |v| Self::parse_idem(&v));
            let still_pending = matches!(&state, IdemState::Pending { request: r } if r == request);
            let now = tokio::time::Instant::now();
            if !still_pending || now >= give_up {
                return Ok(state);
            }
            tokio::time::sleep_until((now + pause).min(give_up)).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    async fn budget_take(&self, windows: &[BudgetWindow]) -> Result<BudgetTake, ClusterError> {
        self.conn.check_up()?;
        let keys: Vec<String> = windows.iter().map(|w| self.budget_key(&w.name)).collect();
        let args: Vec<u64> = windows
            .iter()
            .flat_map(|w| [w.limit, millis(w.length)])
            .collect();
        let n = keys.len();
        let answer: Vec<i64> = self
            .conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(BUDGET_SCRIPT)
                    .arg(n)
                    .arg(&keys[..])
                    .arg(&args[..])
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let ms = |v: i64| Duration::from_millis(u64::try_from(v).unwrap_or(0));
        match answer.as_slice() {
            [0, i, ttl] => Ok(BudgetTake::Refused {
                window: usize::try_from(*i - 1).unwrap_or(0),
                retry_after: ms(*ttl),
            }),
            [1, rest @ ..] if rest.len() == 2 * windows.len() => Ok(BudgetTake::Granted(
                rest.chunks(2)
                    .map(|p| WindowUse {
                        used: u64::try_from(p[0]).unwrap_or(0),
                        resets_in: ms(p[1]),
                    })
                    .collect(),
            )),
            _ => Err(ClusterError::Unavailable),
        }
    }
}

impl SpendStore for RedisSpend {
    fn digester(&self) -> Digester {
        self.conn.digester().clone()
    }

    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>> {
        let this = self.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { this.idem_claim(&key, &request, pending_ttl).await })
    }

    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let key = key.to_owned();
        Box::pin(async move { this.idem_complete(&key, &record, ttl).await })
    }

    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { this.idem_release(&key, &request).await })
    }

    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>> {
        let this = self.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { this.idem_wait(&key, &request, max).await })
    }

    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake> {
        let this = self.clone();
        Box::pin(async move {
            // Unreachable: this replica counts alone (each replica then
            // enforces the whole limit; docs/operations.md).
            match this.budget_take(&windows).await {
                Ok(take) => take,
                Err(_) => this.local.take(&windows),
            }
        })
    }
}
