//! Which channels a new session may go to, and in which order: the
//! routing mode picks the candidates; drain and breaker are checked per
//! call by the session loop.

use std::sync::Arc;

use tokio::time::Instant;

use super::ChannelRouter;
use crate::{
    channels::{
        breaker::CircuitState,
        channel::{Channel, ChannelSet},
        config::RoutingMode,
        weighted::WeightedSplit,
    },
    domain::{Appkey, JourneyRef},
    sync::lock,
};

impl ChannelRouter {
    /// The channels `mode` allows for a new session of `appkey`, in the
    /// order to try them, and whether a failure may move to the next one
    /// (never for a forced mode).
    pub(super) fn candidates(
        &self,
        set: &ChannelSet,
        mode: &RoutingMode,
        appkey: &Appkey,
        now: Instant,
    ) -> (Vec<Arc<Channel>>, bool) {
        match mode {
            RoutingMode::Auto => (self.auto_order(set, now), true),
            RoutingMode::ForcePrimary => (set.primary().cloned().into_iter().collect(), false),
            RoutingMode::ForceAlternative => {
                (set.alternative().cloned().into_iter().collect(), false)
            }
            RoutingMode::Channel(name) => (set.get(name).cloned().into_iter().collect(), false),
            RoutingMode::Weighted(split) => (self.weighted_order(set, split, appkey, now), true),
        }
    }

    /// Auto mode: all channels by priority, the primary last while a
    /// contingency hold is active. Drain and breaker are checked per call.
    fn auto_order(&self, set: &ChannelSet, now: Instant) -> Vec<Arc<Channel>> {
        let mut order: Vec<Arc<Channel>> = set.iter().cloned().collect();
        let held = lock(&self.hold_until).is_some_and(|until| now < until);
        if held && order.len() > 1 {
            order.rotate_left(1);
        }
        order
    }

    /// Weighted mode: the journey's pick among the available channels
    /// first, then the rest as in `auto` (the failover order). A channel
    /// is available when it is not drained, its circuit is not open and,
    /// during a contingency hold, it is not the primary.
    fn weighted_order(
        &self,
        set: &ChannelSet,
        split: &WeightedSplit,
        appkey: &Appkey,
        now: Instant,
    ) -> Vec<Arc<Channel>> {
        let mut order = self.auto_order(set, now);
        let held = lock(&self.hold_until).is_some_and(|until| now < until);
        let primary = set.primary().map(|c| c.name());
        let available = |name: &str| {
            set.get(name).is_some_and(|c| {
                !c.is_drained()
                    && c.breaker().snapshot(now).state != CircuitState::Open
                    && !(held && set.len() > 1 && Some(name) == primary)
            })
        };
        let journey = JourneyRef::from_appkey(appkey);
        if let Some(pick) = split.pick(&journey, available) {
            if let Some(at) = order.iter().position(|c| c.name() == pick) {
                let chosen = order.remove(at);
                order.insert(0, chosen);
            }
        }
        order
    }
}
