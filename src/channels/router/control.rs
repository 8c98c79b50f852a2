//! The operator's controls over the router: the routing mode, drains
//! and reloads of the channel set (`ChannelAdminService`, SIGHUP).

use std::sync::{Arc, MutexGuard};

use tokio::time::Instant;

use super::{ChannelRouter, ReloadSummary};
use crate::{
    Error,
    channels::{
        channel::{ChannelSet, ChannelSnapshot},
        config::{
            ChannelConfigError, ChannelSpec, ModeError, RoutingMode, validate_channels,
            validate_mode,
        },
    },
    sync::{lock, write},
};

impl ChannelRouter {
    /// Sets the routing mode for the next session, under the rules of
    /// [`validate_mode`]: a named channel must be configured,
    /// `force_primary` needs a channel and `force_alternative` two.
    pub fn set_mode(&self, mode: RoutingMode) -> Result<RoutingMode, Error> {
        let mut current = lock(&self.mode);
        self.check_mode(&mode)?;
        tracing::info!(from = %current, to = %mode, "3D routing mode changed");
        *current = mode.clone();
        Ok(mode)
    }

    /// Whether `mode` could apply to the channel set in force.
    pub(super) fn check_mode(&self, mode: &RoutingMode) -> Result<(), Error> {
        let set = self.current();
        validate_mode(mode, set.iter().map(|c| c.name())).map_err(|e| match e {
            ModeError::UnknownChannel(name) => Error::ChannelUnknown(name),
            other => Error::invalid("mode", other.to_string()),
        })
    }

    /// Stops routing new sessions to `name`; its verifications still go to it.
    pub fn drain(&self, name: &str) -> Result<ChannelSnapshot, Error> {
        self.set_drained(name, true)
    }

    /// Routes new sessions to `name` again.
    pub fn undrain(&self, name: &str) -> Result<ChannelSnapshot, Error> {
        self.set_drained(name, false)
    }

    pub(super) fn set_drained(&self, name: &str, drained: bool) -> Result<ChannelSnapshot, Error> {
        let set = self.current();
        let channel = set
            .get(name)
            .ok_or_else(|| Error::ChannelUnknown(name.to_owned()))?;
        channel.set_drained(drained);
        tracing::info!(channel = name, drained, "3D channel drain changed");
        Ok(channel.snapshot(Instant::now()))
    }

    /// Replaces the channel set atomically.
    ///
    /// Kept: session bindings (they hold their channel, so a verification
    /// bound to a removed or changed channel still goes to the generation
    /// that issued it), the drain flags and counters of surviving channels,
    /// the breaker of unchanged channels, and calls in flight (they hold
    /// their own `Arc<Channel>`). Refused, leaving everything as it was,
    /// when the specs are invalid or the routing mode could not apply to
    /// them (change the mode first). [`ChannelRouter::prepare_reload`] then
    /// [`ChannelReload::commit`].
    pub fn reload(&self, specs: Vec<ChannelSpec>) -> Result<ReloadSummary, ChannelConfigError> {
        Ok(self.prepare_reload(specs)?.commit())
    }

    /// The checking half of [`ChannelRouter::reload`]: `specs` valid, and
    /// the routing mode in force able to apply to them. Changes nothing.
    /// The reload holds the routing mode until it is committed or dropped,
    /// so no mode change can slip between the check and the swap (an admin
    /// `SetRoutingMode` waits for it): commit it at once, without awaiting
    /// anything in between.
    pub fn prepare_reload(
        &self,
        specs: Vec<ChannelSpec>,
    ) -> Result<ChannelReload<'_>, ChannelConfigError> {
        validate_channels(&specs)?;
        let mode = lock(&self.mode);
        validate_mode(&mode, specs.iter().map(|c| c.name.as_str()))?;
        Ok(ChannelReload {
            router: self,
            _mode: mode,
            specs,
        })
    }
}

/// A checked channel set, ready to replace the one in force
/// ([`ChannelRouter::prepare_reload`]); dropping it changes nothing.
pub struct ChannelReload<'a> {
    router: &'a ChannelRouter,
    /// Held so that the mode checked is the mode in force at the swap.
    _mode: MutexGuard<'a, RoutingMode>,
    specs: Vec<ChannelSpec>,
}

impl ChannelReload<'_> {
    /// Swaps the channel set in (cannot fail: everything was checked) and
    /// says what changed.
    pub fn commit(self) -> ReloadSummary {
        let Self { router, specs, .. } = self;
        let mut guard = write(&router.channels);
        let old = Arc::clone(&guard);
        let mut summary = ReloadSummary::default();
        for spec in &specs {
            match old.get(&spec.name) {
                None => summary.added.push(spec.name.clone()),
                Some(c) if c.spec() != spec => summary.changed.push(spec.name.clone()),
                Some(_) => {}
            }
        }
        summary.removed = old
            .iter()
            .filter(|c| !specs.iter().any(|s| s.name == c.name()))
            .map(|c| c.name().to_owned())
            .collect();
        *guard = Arc::new(ChannelSet::build(specs, Some(&old)));
        drop(guard);
        tracing::info!(
            added = ?summary.added,
            removed = ?summary.removed,
            changed = ?summary.changed,
            "3D channels reloaded"
        );
        summary
    }
}
