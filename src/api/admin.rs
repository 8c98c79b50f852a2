//! `ChannelAdminService`: run-time control of the 3D channels, behind a
//! bearer token.
//!
//! Served on the admin listener only. One room per idea:
//!
//! - [`config`]: `[admin]`, where the token comes from;
//! - [`token`]: the interceptor that checks it, so that no handler can
//!   forget it (constant-time over SHA-256 digests, so neither the
//!   content nor the length of the expected token leaks through timing);
//! - [`convert`]: routing modes, channel states and refusals between the
//!   router's types and the proto;
//! - this file: the handlers; [`rollout`], [`probe`] and [`usage`]
//!   answer theirs.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::{
    Error,
    api::figures::{figures_to_proto, seconds, window_minutes},
    channels::{
        ChannelRouter,
        figures::LATENCY_BOUNDS_MS,
        probe::{ProbeVerdicts, Prober},
        rollout::{RolloutConfig, Rollouts},
    },
    cluster::{MemoryProbes, MemoryRollout, MemoryUsage},
    proto::{services::ChannelAdminService, v1 as pb},
    telemetry::usage::Usage,
    usage::{UsageBook, UsageConfig},
};

/// The handlers of `ChannelAdminService`.
#[derive(Debug, Clone)]
pub struct ChannelAdmin {
    router: Arc<ChannelRouter>,
    rollouts: Arc<Rollouts>,
    prober: Option<Arc<Prober>>,
    usage: Arc<UsageBook>,
}

impl ChannelAdmin {
    /// Handlers over `router` alone: a rollout of this process only (in
    /// memory, default `[rollout]`), no probe (without the interceptor:
    /// use [`admin_service`] to serve).
    pub fn new(router: Arc<ChannelRouter>) -> Self {
        let rollouts = Rollouts::new(
            router.clone(),
            Arc::new(MemoryRollout::default()),
            RolloutConfig::default(),
            Arc::new(ProbeVerdicts::new(Arc::new(MemoryProbes::default()))),
        );
        Self::with_rollouts(Arc::new(rollouts), None)
    }

    /// Handlers over the router of `rollouts`, probing with `prober`.
    pub fn with_rollouts(rollouts: Arc<Rollouts>, prober: Option<Arc<Prober>>) -> Self {
        let config = UsageConfig::default();
        Self {
            router: rollouts.router().clone(),
            rollouts,
            prober,
            // Until `with_usage`: a book nothing counts in (empty reports).
            usage: Arc::new(UsageBook::new(
                Usage::default(),
                Arc::new(MemoryUsage::new(config.retention())),
                &config,
            )),
        }
    }

    /// `GetUsage` answers from `book`.
    #[must_use]
    pub fn with_usage(mut self, book: Arc<UsageBook>) -> Self {
        self.usage = book;
        self
    }
}

impl ChannelAdmin {
    /// Opens the audit record of `operation` on `request`, naming
    /// `channel` only when it is a configured channel's name (never
    /// whatever else was sent).
    fn open<T>(&self, request: &Request<T>, operation: &'static str, channel: &str) -> AdminCall {
        let configured = !channel.is_empty()
            && self
                .router
                .snapshot()
                .channels
                .iter()
                .any(|c| c.name == channel);
        let channel = if configured { channel } else { "" };
        AdminCall::open(request.extensions(), operation, channel)
    }

    fn inner_list_channels(&self) -> pb::ListChannelsResponse {
        let snap = self.router.snapshot();
        let (mode, mode_channel) = mode_to_proto(&snap.mode);
        pb::ListChannelsResponse {
            mode: mode as i32,
            mode_channel,
            weights: mode_weights(&snap.mode),
            channels: snap.channels.iter().map(channel_status).collect(),
            fleet_control: snap.fleet_control,
        }
    }

    async fn inner_set_routing_mode(
        &self,
        req: pb::SetRoutingModeRequest,
    ) -> Result<pb::SetRoutingModeResponse, Refusal> {
        let mode = mode_from_proto(req.mode, &req.channel, &req.weights)?;
        if !req.force {
            let probes = self.rollouts.probes();
            for name in probe::weighted_channels(&mode, &self.router) {
                if !probes.may_take_weight(&name).await? {
                    let field = mode_field(&mode, &name);
                    return Err(Error::ChannelNotConforming(name)).at(&field);
                }
            }
        }
        let mode = match self.router.change_mode(mode.clone()).await {
            Ok(mode) => mode,
            Err(Error::ChannelUnknown(name)) => {
                let field = mode_field(&mode, &name);
                return Err(Error::ChannelUnknown(name)).at(&field);
            }
            Err(e) => return Err(e).at("channel"),
        };
        let (pb_mode, mode_channel) = mode_to_proto(&mode);
        Ok(pb::SetRoutingModeResponse {
            mode: pb_mode as i32,
            mode_channel,
            weights: mode_weights(&mode),
        })
    }

    async fn inner_get_channel_figures(
        &self,
        req: pb::GetChannelFiguresRequest,
    ) -> Result<pb::GetChannelFiguresResponse, Refusal> {
        let figures = self.router.figures();
        let minutes = window_minutes(req.window.as_ref(), figures.retention_minutes())?;
        // The fleet's, from Redis; this replica's own when Redis does not
        // answer (or for one process).
        let (mut by_channel, scope) = match figures.fleet_window(minutes).await {
            Some(fleet) => (fleet, pb::FiguresScope::Fleet),
            None => (figures.window(minutes), pb::FiguresScope::Replica),
        };
        // Configured channels show up even before their first call.
        for c in self.router.snapshot().channels {
            by_channel.entry(c.name).or_default();
        }
        Ok(pb::GetChannelFiguresResponse {
            window: Some(seconds(minutes * 60)),
            latency_bounds_ms: LATENCY_BOUNDS_MS.to_vec(),
            channels: by_channel
                .iter()
                .map(|(name, t)| figures_to_proto(name, t))
                .collect(),
            scope: scope as i32,
        })
    }

    async fn inner_start_rollout(
        &self,
        req: pb::StartRolloutRequest,
    ) -> Result<pb::StartRolloutResponse, Refusal> {
        let plan = rollout::plan_from_proto(&req, &self.router)?;
        let record = self.rollouts.start(plan, req.force).await.at("to")?;
        Ok(pb::StartRolloutResponse {
            rollout: Some(rollout_to_proto(&record)),
        })
    }

    async fn inner_get_rollout(&self) -> Result<pb::GetRolloutResponse, Refusal> {
        let record = self.rollouts.get().await?;
        Ok(pb::GetRolloutResponse {
            rollout: record.as_ref().map(rollout_to_proto),
        })
    }

    async fn inner_abort_rollout(&self) -> Result<pb::AbortRolloutResponse, Refusal> {
        let record = self.rollouts.abort().await?;
        Ok(pb::AbortRolloutResponse {
            rollout: Some(rollout_to_proto(&record)),
        })
    }

    async fn inner_probe_channel(
        &self,
        req: pb::ProbeChannelRequest,
    ) -> Result<pb::ProbeChannelResponse, Refusal> {
        if req.name.is_empty() {
            return Err(Error::invalid("name", "required").into());
        }
        let name = req.name.as_str();
        let Some(prober) = &self.prober else {
            return Err(Error::ProbeNotConfigured.into());
        };
        let report = prober.probe(name, req.consume).await.at("name")?;
        self.rollouts
            .probes()
            .record(name, report.conforming())
            .await?;
        Ok(probe_to_proto(name, &report))
    }

    async fn inner_change_drain(
        &self,
        name: &str,
        drained: bool,
    ) -> Result<pb::ChannelStatus, Refusal> {
        let snap = self
            .router
            .change_drain(name_arg(name)?, drained)
            .await
            .at("name")?;
        Ok(channel_status(&snap))
    }
}

/// Each admin call's audit record `operation`: the RPC's name.
mod operation {
    pub const LIST_CHANNELS: &str = "list_channels";
    pub const SET_ROUTING_MODE: &str = "set_routing_mode";
    pub const GET_CHANNEL_FIGURES: &str = "get_channel_figures";
    pub const START_ROLLOUT: &str = "start_rollout";
    pub const GET_ROLLOUT: &str = "get_rollout";
    pub const ABORT_ROLLOUT: &str = "abort_rollout";
    pub const PROBE_CHANNEL: &str = "probe_channel";
    pub const GET_USAGE: &str = "get_usage";
    pub const DRAIN_CHANNEL: &str = "drain_channel";
    pub const UNDRAIN_CHANNEL: &str = "undrain_channel";
}

/// Every method is the same shim: its audit record opened, an `inner_*`
/// function that returns a [`Refusal`], [`AdminCall::finish`] (the record
/// written, the one conversion to a `Status`).
#[tonic::async_trait]
impl ChannelAdminService for ChannelAdmin {
    async fn list_channels(
        &self,
        request: Request<pb::ListChannelsRequest>,
    ) -> Result<Response<pb::ListChannelsResponse>, Status> {
        let call = self.open(&request, operation::LIST_CHANNELS, "");
        call.finish(Ok(self.inner_list_channels()))
    }

    async fn set_routing_mode(
        &self,
        request: Request<pb::SetRoutingModeRequest>,
    ) -> Result<Response<pb::SetRoutingModeResponse>, Status> {
        let channel = request.get_ref().channel.clone();
        let call = self.open(&request, operation::SET_ROUTING_MODE, &channel);
        call.finish(self.inner_set_routing_mode(request.into_inner()).await)
    }

    async fn get_channel_figures(
        &self,
        request: Request<pb::GetChannelFiguresRequest>,
    ) -> Result<Response<pb::GetChannelFiguresResponse>, Status> {
        let call = self.open(&request, operation::GET_CHANNEL_FIGURES, "");
        call.finish(self.inner_get_channel_figures(request.into_inner()).await)
    }

    async fn start_rollout(
        &self,
        request: Request<pb::StartRolloutRequest>,
    ) -> Result<Response<pb::StartRolloutResponse>, Status> {
        let to = request.get_ref().to.clone();
        let call = self.open(&request, operation::START_ROLLOUT, &to);
        call.finish(self.inner_start_rollout(request.into_inner()).await)
    }

    async fn get_rollout(
        &self,
        request: Request<pb::GetRolloutRequest>,
    ) -> Result<Response<pb::GetRolloutResponse>, Status> {
        let call = self.open(&request, operation::GET_ROLLOUT, "");
        call.finish(self.inner_get_rollout().await)
    }

    async fn abort_rollout(
        &self,
        request: Request<pb::AbortRolloutRequest>,
    ) -> Result<Response<pb::AbortRolloutResponse>, Status> {
        let call = self.open(&request, operation::ABORT_ROLLOUT, "");
        call.finish(self.inner_abort_rollout().await)
    }

    /// Sends the probe persons (CPF, name, birth date) to the channel's
    /// vendor: its record names the channel when it is a configured one,
    /// never a person's value.
    async fn probe_channel(
        &self,
        request: Request<pb::ProbeChannelRequest>,
    ) -> Result<Response<pb::ProbeChannelResponse>, Status> {
        let name = request.get_ref().name.clone();
        let call = self.open(&request, operation::PROBE_CHANNEL, &name);
        call.finish(self.inner_probe_channel(request.into_inner()).await)
    }

    async fn get_usage(
        &self,
        request: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        let call = self.open(&request, operation::GET_USAGE, "");
        call.finish(usage::get_usage(&self.usage, &request.into_inner()).await)
    }

    async fn drain_channel(
        &self,
        request: Request<pb::DrainChannelRequest>,
    ) -> Result<Response<pb::DrainChannelResponse>, Status> {
        let name = &request.get_ref().name;
        let call = self.open(&request, operation::DRAIN_CHANNEL, name);
        let result = self.inner_change_drain(name, true).await;
        call.finish(result.map(|channel| pb::DrainChannelResponse {
            channel: Some(channel),
        }))
    }

    async fn undrain_channel(
        &self,
        request: Request<pb::UndrainChannelRequest>,
    ) -> Result<Response<pb::UndrainChannelResponse>, Status> {
        let name = &request.get_ref().name;
        let call = self.open(&request, operation::UNDRAIN_CHANNEL, name);
        let result = self.inner_change_drain(name, false).await;
        call.finish(result.map(|channel| pb::UndrainChannelResponse {
            channel: Some(channel),
        }))
    }
}

mod call;
mod config;
mod convert;
mod probe;
mod rollout;
#[cfg(test)]
mod tests;
mod token;
mod usage;

use call::{AdminCall, At, Refusal};
pub use config::{AdminConfig, MIN_ADMIN_TOKEN_CHARS};
pub use convert::{channel_status, mode_to_proto, mode_weights};
use convert::{mode_field, mode_from_proto, name_arg};
pub use probe::probe_to_proto;
pub use rollout::rollout_to_proto;
pub use token::{AdminAuth, AdminServer, admin_auth_interceptor, admin_service};
pub use usage::report_to_proto;
