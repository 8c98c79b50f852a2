//! The router's state that outlives a call: session bindings in its
//! [`BindingStore`](crate::cluster::BindingStore), and, in a fleet, the
//! control state the replicas share through
//! [`FleetControl`](crate::cluster::FleetControl).
//!
//! - A granted session is bound with its channel generation; in a fleet
//!   the store also shares the channel's name, so any replica can route
//!   the verification without the caller's hint.
//! - `SetRoutingMode`, `DrainChannel` and `UndrainChannel` are written to
//!   the fleet first and applied here only once written: a change the
//!   fleet could not take is refused (`CLUSTER_UNAVAILABLE`) and applied
//!   on no replica. Other replicas apply it from
//!   [`ChannelRouter::apply_control`] when the fleet tells them.
//! - A contingency hold started here is told to the fleet, so every
//!   replica prefers the alternative for the rest of it.
//!
//! Circuit breakers stay per replica. One process has no fleet control
//! state: a change applies here at once, and there is no one to tell.

use std::{sync::Arc, sync::atomic::Ordering};

use tokio::time::Instant;

use super::ChannelRouter;
use crate::{
    Error,
    channels::{
        channel::{Channel, ChannelSnapshot},
        config::RoutingMode,
    },
    cluster::{Bound, ControlChange, ControlState},
    domain::{Appkey, JourneyRef},
    sync::lock,
};

impl ChannelRouter {
    /// Binds the session of `appkey` to `channel` and, when `held`, tells
    /// the fleet that a contingency hold started. Waits for the binding
    /// (in a fleet, at most the cluster's command timeout), so a
    /// verification sent to another replica right after finds it.
    pub(super) async fn record_grant(&self, channel: &Arc<Channel>, appkey: &Appkey, held: bool) {
        let journey = JourneyRef::from_appkey(appkey);
        if self
            .bindings
            .bind_session(journey.clone(), Arc::clone(channel))
            .await
            .is_err()
        {
            tracing::warn!(journey = %journey, "3D session binding not shared: verify on this replica or pass the channel");
        }
        if let (true, Some(fleet)) = (held, self.fleet_control.clone()) {
            let hold = self.contingency_hold;
            tokio::spawn(async move {
                if fleet.change(ControlChange::Hold(hold)).await.is_err() {
                    tracing::warn!("contingency hold not shared with the fleet");
                }
            });
        }
    }

    /// The channel generation that issued the session of `journey`: this
    /// replica's own binding, or the channel of that name here when
    /// another replica bound it. A store that cannot answer counts as
    /// unbound (the caller may still name the channel).
    pub(super) async fn bound_channel(&self, journey: &JourneyRef) -> Option<Arc<Channel>> {
        match self.bindings.bound_channel(journey).await.ok().flatten()? {
            Bound::Here(channel) => Some(channel),
            Bound::Elsewhere(name) => {
                let channel = self.current().get(&name).cloned();
                if channel.is_none() {
                    tracing::warn!(channel = %name, journey = %journey, "the fleet bound a session to a channel not configured here");
                }
                channel
            }
        }
    }

    /// `SetRoutingMode` for the fleet: checked here, written to the fleet,
    /// then applied here. `CLUSTER_UNAVAILABLE` when the fleet cannot take
    /// it (then no replica applies it). One process applies it at once.
    pub async fn change_mode(&self, mode: RoutingMode) -> Result<RoutingMode, Error> {
        self.check_mode(&mode)?;
        self.tell_fleet(ControlChange::Mode(mode.to_string()))
            .await?;
        self.set_mode(mode)
    }

    /// `DrainChannel` / `UndrainChannel` for the fleet, as
    /// [`ChannelRouter::change_mode`] does.
    pub async fn change_drain(&self, name: &str, drained: bool) -> Result<ChannelSnapshot, Error> {
        if self.current().get(name).is_none() {
            return Err(Error::ChannelUnknown(name.to_owned()));
        }
        let change = if drained {
            ControlChange::Drain(name.to_owned())
        } else {
            ControlChange::Undrain(name.to_owned())
        };
        self.tell_fleet(change).await?;
        self.set_drained(name, drained)
    }

    /// Writes `change` to the fleet, in a fleet, before it applies here:
    /// `CLUSTER_UNAVAILABLE` when the fleet cannot take it. Nothing to
    /// write for one process.
    async fn tell_fleet(&self, change: ControlChange) -> Result<(), Error> {
        match &self.fleet_control {
            Some(fleet) => fleet
                .change(change)
                .await
                .map_err(|_| Error::ClusterUnavailable),
            None => Ok(()),
        }
    }

    /// Applies the fleet's control state whole: its mode (when set and
    /// valid for the channels configured here), drains (names not
    /// configured here are ignored) and the rest of a contingency hold.
    pub fn apply_control(&self, state: &ControlState) {
        if let Some(text) = &state.mode {
            match text.parse::<RoutingMode>() {
                Ok(mode) if mode != self.mode() => {
                    if let Err(e) = self.set_mode(mode) {
                        tracing::warn!(mode = %text, error = %e, "the fleet's routing mode cannot apply to this replica's channels; kept the current one");
                    }
                }
                Ok(_) => {}
                Err(_) => tracing::warn!("the fleet's routing mode is not readable; ignored"),
            }
        }
        for channel in self.current().iter() {
            let drained = state.drained.contains(channel.name());
            if channel.is_drained() != drained {
                channel.set_drained(drained);
                tracing::info!(
                    channel = channel.name(),
                    drained,
                    "3D channel drain changed by the fleet"
                );
            }
        }
        if let Some(rest) = state.hold {
            let until = Instant::now() + rest;
            let mut hold = lock(&self.hold_until);
            if hold.is_none_or(|h| h < until) {
                *hold = Some(until);
            }
        }
        self.control_from_fleet.store(true, Ordering::Release);
    }

    /// This replica's control state, to seed a fleet whose Redis holds none.
    pub fn control_state(&self) -> ControlState {
        ControlState {
            mode: Some(self.mode().to_string()),
            drained: self
                .current()
                .iter()
                .filter(|c| c.is_drained())
                .map(|c| c.name().to_owned())
                .collect(),
            hold: None,
        }
    }
}
