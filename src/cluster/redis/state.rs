//! [`SharedState`] on Redis: each operation one command (or one script),
//! under the command timeout and in its client span.

use super::*;
use crate::cluster::{BudgetTake, BudgetWindow, IdemRecord, IdemState};

impl SharedState for RedisState {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn is_fleet(&self) -> bool {
        true
    }

    fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Acquire)
    }

    fn remember_journey(
        &self,
        journey: &JourneyRef,
        appkey: &Appkey,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.journey(journey);
        let sealed = inner.sealer.seal(journey, appkey);
        let ttl = millis(inner.ttls.journey);
        Box::pin(async move {
            inner.check_up()?;
            inner.set_px(key, sealed, ttl).await
        })
    }

    fn find_journey(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<Appkey>, ClusterError>> {
        let inner = self.inner.clone();
        let journey = journey.clone();
        Box::pin(async move {
            inner.check_up()?;
            let key = inner.keys.journey(&journey);
            let sealed = inner.get(key).await?;
            Ok(sealed.and_then(|s| {
                let opened = inner.sealer.open(&journey, &s);
                if opened.is_none() {
                    tracing::warn!(journey = %journey, "a sealed appkey in Redis did not open (another secret_key?)");
                }
                opened
            }))
        })
    }

    fn bind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.binding(journey);
        let channel = channel.to_owned();
        let ttl = millis(inner.ttls.binding);
        Box::pin(async move {
            inner.check_up()?;
            inner.set_px(key, channel, ttl).await
        })
    }

    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.binding(journey);
        Box::pin(async move {
            inner.check_up()?;
            inner.get(key).await
        })
    }

    fn unbind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.binding(journey);
        let channel = channel.to_owned();
        Box::pin(async move {
            inner.check_up()?;
            inner
                .exec("EVAL", move |mut c| async move {
                    redis::cmd("EVAL")
                        .arg(UNBIND_SCRIPT)
                        .arg(1)
                        .arg(&key)
                        .arg(&channel)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await
                .map(|_| ())
        })
    }

    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool> {
        let inner = self.inner.clone();
        let key = key.clone();
        Box::pin(async move {
            // Remembered here too, so an outage does not reopen the door to
            // duplicates on this replica.
            let locally_first = inner.local.first_delivery_now(&key);
            if inner.check_up().is_err() {
                return locally_first;
            }
            let redis_key = inner.keys.dedupe(&key.digest());
            let ttl = millis(inner.ttls.dedupe);
            let set: Result<Option<String>, _> = inner
                .exec("SET", move |mut c| async move {
                    redis::cmd("SET")
                        .arg(&redis_key)
                        .arg("1")
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async(&mut c)
                        .await
                })
                .await;
            match set {
                // Seen here before (perhaps while Redis was down): a duplicate
                // whatever Redis says.
                Ok(answer) => answer.is_some() && locally_first,
                Err(_) => locally_first,
            }
        })
    }

    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            inner.check_up()?;
            inner.read_control().await.map(Some)
        })
    }

    fn change_control(&self, change: ControlChange) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            inner.check_up()?;
            let message = inner.message(Body::Control);
            let events = inner.keys.events();
            let mut pipe = redis::pipe();
            pipe.atomic();
            let command = match &change {
                ControlChange::Mode(mode) => {
                    pipe.set(inner.keys.control("mode"), mode).ignore();
                    "MULTI SET PUBLISH"
                }
                ControlChange::Drain(name) => {
                    pipe.sadd(inner.keys.control("drained"), name).ignore();
                    "MULTI SADD PUBLISH"
                }
                ControlChange::Undrain(name) => {
                    pipe.srem(inner.keys.control("drained"), name).ignore();
                    "MULTI SREM PUBLISH"
                }
                ControlChange::Hold(d) => {
                    pipe.cmd("SET")
                        .arg(inner.keys.control("hold"))
                        .arg("1")
                        .arg("PX")
                        .arg(millis(*d))
                        .ignore();
                    "MULTI SET PUBLISH"
                }
            };
            pipe.cmd("SET")
                .arg(inner.keys.control("seeded"))
                .arg("1")
                .ignore();
            pipe.publish(events, message).ignore();
            inner
                .exec(command, move |mut c| async move {
                    pipe.query_async::<()>(&mut c).await
                })
                .await
        })
    }

    fn publish_notice(&self, notice: FleetNotice) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            inner.check_up()?;
            let message = inner.message(Body::Notice {
                journey_ref: notice.journey.to_string(),
                status: notice.status,
                delivery: notice.delivery,
            });
            let channel = inner.keys.events();
            inner
                .exec("PUBLISH", move |mut c| async move {
                    redis::cmd("PUBLISH")
                        .arg(&channel)
                        .arg(&message)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await
                .map(|_| ())
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<FleetEvent> {
        self.inner.events.subscribe()
    }

    fn digester(&self) -> Digester {
        self.inner.digester.clone()
    }

    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>> {
        let inner = self.inner.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { inner.idem_claim(&key, &request, pending_ttl).await })
    }

    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let key = key.to_owned();
        Box::pin(async move { inner.idem_complete(&key, &record, ttl).await })
    }

    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { inner.idem_release(&key, &request).await })
    }

    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>> {
        let inner = self.inner.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { inner.idem_wait(&key, &request, max).await })
    }

    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake> {
        let inner = self.inner.clone();
        Box::pin(async move {
            // Unreachable: this replica counts alone (each replica then
            // enforces the whole limit; docs/operations.md).
            match inner.budget_take(&windows).await {
                Ok(take) => take,
                Err(_) => inner.local.take_budget_now(&windows),
            }
        })
    }

    fn remember_profile(
        &self,
        journey: &JourneyRef,
        profile: &str,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.profile(journey);
        let profile = profile.to_owned();
        let ttl = millis(inner.ttls.journey);
        Box::pin(async move {
            inner.check_up()?;
            inner.set_px(key, profile, ttl).await
        })
    }

    fn journey_profile(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>> {
        let inner = self.inner.clone();
        let key = inner.keys.profile(journey);
        Box::pin(async move {
            inner.check_up()?;
            inner.get(key).await
        })
    }
}
