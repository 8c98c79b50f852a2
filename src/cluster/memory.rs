//! One process: the shared state is this process's own.
//!
//! The journey directory and the session bindings already live in the
//! hub's and the router's own tables (the router's hold the issuing
//! channel generation, which a name cannot), so here they are no-ops: a
//! second copy would add nothing. Webhook dedupe is kept here, bounded and
//! expiring as it always was. The control state is the router's own
//! (`control` answers `None`), and there is no other replica to tell.
//! The spending guard's records and windows live in `guard`.

mod guard;

pub(crate) use guard::MemoryGuard;

use std::sync::Mutex;

use tokio::{sync::broadcast, time::Instant};

use super::{
    BoxFuture, BudgetTake, BudgetWindow, ClusterError, ControlChange, ControlState, DeliveryKey,
    FleetEvent, FleetNotice, IdemRecord, IdemState, SharedState, Ttls, seal::Digester,
};
use crate::{
    domain::{Appkey, JourneyRef},
    ttl::TtlMap,
};

/// The in-memory shared state of a single process.
pub struct MemoryState {
    dedupe: Mutex<TtlMap<DeliveryKey, ()>>,
    events: broadcast::Sender<FleetEvent>,
    guard: std::sync::Arc<MemoryGuard>,
    digester: Digester,
}

impl std::fmt::Debug for MemoryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryState").finish_non_exhaustive()
    }
}

impl MemoryState {
    /// An empty state with the dedupe bounds of `ttls`.
    pub fn new(ttls: Ttls) -> Self {
        Self {
            dedupe: Mutex::new(TtlMap::new(ttls.dedupe, ttls.dedupe_max_entries)),
            events: broadcast::channel(1).0,
            guard: std::sync::Arc::new(MemoryGuard::new(
                ttls.idempotency,
                ttls.idempotency_max_entries,
            )),
            digester: Digester::random(),
        }
    }

    /// [`SharedState::take_budget`], synchronously.
    pub(crate) fn take_budget_now(&self, windows: &[BudgetWindow]) -> BudgetTake {
        self.guard.take(windows)
    }

    /// [`SharedState::first_delivery`], synchronously.
    pub fn first_delivery_now(&self, key: &DeliveryKey) -> bool {
        crate::sync::lock(&self.dedupe).insert_if_absent(key.clone(), (), Instant::now())
    }
}

fn ready<T: Send + 'static>(value: T) -> BoxFuture<T> {
    Box::pin(std::future::ready(value))
}

impl SharedState for MemoryState {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn is_fleet(&self) -> bool {
        false
    }

    fn is_up(&self) -> bool {
        true
    }

    fn remember_journey(&self, _: &JourneyRef, _: &Appkey) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn find_journey(&self, _: &JourneyRef) -> BoxFuture<Result<Option<Appkey>, ClusterError>> {
        ready(Ok(None))
    }

    fn bind_session(&self, _: &JourneyRef, _: &str) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn bound_channel(&self, _: &JourneyRef) -> BoxFuture<Result<Option<String>, ClusterError>> {
        ready(Ok(None))
    }

    fn unbind_session(&self, _: &JourneyRef, _: &str) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool> {
        ready(self.first_delivery_now(key))
    }

    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>> {
        ready(Ok(None))
    }

    fn change_control(&self, _: ControlChange) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn publish_notice(&self, _: FleetNotice) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn subscribe(&self) -> broadcast::Receiver<FleetEvent> {
        self.events.subscribe()
    }

    fn digester(&self) -> Digester {
        self.digester.clone()
    }

    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: std::time::Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>> {
        ready(Ok(self.guard.claim(key, request, pending_ttl)))
    }

    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        _ttl: std::time::Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        self.guard.complete(key, record);
        ready(Ok(()))
    }

    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>> {
        self.guard.release(key, request);
        ready(Ok(()))
    }

    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: std::time::Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>> {
        let guard = self.guard.clone();
        let (key, request) = (key.to_owned(), request.to_owned());
        Box::pin(async move { Ok(guard.wait(&key, &request, max).await) })
    }

    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake> {
        ready(self.guard.take(&windows))
    }

    fn remember_profile(&self, _: &JourneyRef, _: &str) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn journey_profile(&self, _: &JourneyRef) -> BoxFuture<Result<Option<String>, ClusterError>> {
        ready(Ok(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_delivery_is_first_once_until_it_expires() {
        let state = MemoryState::new(Ttls {
            dedupe: std::time::Duration::from_secs(60),
            ..Ttls::default()
        });
        let key = DeliveryKey::Id("msg_1".into());
        assert!(state.first_delivery(&key).await);
        assert!(!state.first_delivery(&key).await);
        assert!(state.first_delivery(&DeliveryKey::Id("msg_2".into())).await);
        assert!(!state.is_fleet());
        assert_eq!(state.control().await, Ok(None));
    }
}
