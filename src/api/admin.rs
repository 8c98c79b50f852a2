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
    telemetry::audit::{AuditRecord, trace_id},
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

/// The audit record's `operation` of `ProbeChannel`.
const PROBE_CHANNEL: &str = "probe_channel";

impl ChannelAdmin {
    /// `ProbeChannel`'s work: the error with the request field it is
    /// reported against, if any.
    async fn inner_probe_channel(
        &self,
        req: &pb::ProbeChannelRequest,
    ) -> Result<pb::ProbeChannelResponse, (Option<&'static str>, Error)> {
        if req.name.is_empty() {
            return Err((None, Error::invalid("name", "required")));
        }
        let name = req.name.as_str();
        let Some(prober) = &self.prober else {
            return Err((None, Error::ProbeNotConfigured));
        };
        let report = prober
            .probe(name, req.consume)
            .await
            .map_err(|e| (Some("name"), e))?;
        self.rollouts
            .probes()
            .record(name, report.conforming())
            .await
            .map_err(|e| (None, e))?;
        Ok(probe_to_proto(name, &report))
    }
}

#[tonic::async_trait]
impl ChannelAdminService for ChannelAdmin {
    async fn list_channels(
        &self,
        _request: Request<pb::ListChannelsRequest>,
    ) -> Result<Response<pb::ListChannelsResponse>, Status> {
        let snap = self.router.snapshot();
        let (mode, mode_channel) = mode_to_proto(&snap.mode);
        Ok(Response::new(pb::ListChannelsResponse {
            mode: mode as i32,
            mode_channel,
            weights: mode_weights(&snap.mode),
            channels: snap.channels.iter().map(channel_status).collect(),
            fleet_control: snap.fleet_control,
        }))
    }

    async fn set_routing_mode(
        &self,
        request: Request<pb::SetRoutingModeRequest>,
    ) -> Result<Response<pb::SetRoutingModeResponse>, Status> {
        let req = request.into_inner();
        let mode = mode_from_proto(req.mode, &req.channel, &req.weights)?;
        if !req.force {
            let probes = self.rollouts.probes();
            for name in probe::weighted_channels(&mode, &self.router) {
                if !probes.may_take_weight(&name).await.map_err(Status::from)? {
                    let field = mode_field(&mode, &name);
                    return Err(Error::ChannelNotConforming(name).into_status_at(&field));
                }
            }
        }
        let mode = match self.router.change_mode(mode.clone()).await {
            Ok(mode) => mode,
            Err(Error::ChannelUnknown(name)) => {
                let field = mode_field(&mode, &name);
                return Err(to_status(&field, Error::ChannelUnknown(name)));
            }
            Err(e) => return Err(to_status("channel", e)),
        };
        let (pb_mode, mode_channel) = mode_to_proto(&mode);
        Ok(Response::new(pb::SetRoutingModeResponse {
            mode: pb_mode as i32,
            mode_channel,
            weights: mode_weights(&mode),
        }))
    }

    async fn get_channel_figures(
        &self,
        request: Request<pb::GetChannelFiguresRequest>,
    ) -> Result<Response<pb::GetChannelFiguresResponse>, Status> {
        let req = request.into_inner();
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
        Ok(Response::new(pb::GetChannelFiguresResponse {
            window: Some(seconds(minutes * 60)),
            latency_bounds_ms: LATENCY_BOUNDS_MS.to_vec(),
            channels: by_channel
                .iter()
                .map(|(name, t)| figures_to_proto(name, t))
                .collect(),
            scope: scope as i32,
        }))
    }

    async fn start_rollout(
        &self,
        request: Request<pb::StartRolloutRequest>,
    ) -> Result<Response<pb::StartRolloutResponse>, Status> {
        let req = request.into_inner();
        let plan = rollout::plan_from_proto(&req, &self.router)?;
        let record = self
            .rollouts
            .start(plan, req.force)
            .await
            .map_err(|e| e.into_status_at("to"))?;
        Ok(Response::new(pb::StartRolloutResponse {
            rollout: Some(rollout_to_proto(&record)),
        }))
    }

    async fn get_rollout(
        &self,
        _request: Request<pb::GetRolloutRequest>,
    ) -> Result<Response<pb::GetRolloutResponse>, Status> {
        let record = self.rollouts.get().await.map_err(Status::from)?;
        Ok(Response::new(pb::GetRolloutResponse {
            rollout: record.as_ref().map(rollout_to_proto),
        }))
    }

    async fn abort_rollout(
        &self,
        _request: Request<pb::AbortRolloutRequest>,
    ) -> Result<Response<pb::AbortRolloutResponse>, Status> {
        let record = self.rollouts.abort().await.map_err(Status::from)?;
        Ok(Response::new(pb::AbortRolloutResponse {
            rollout: Some(rollout_to_proto(&record)),
        }))
    }

    /// Sends the probe persons (CPF, name, birth date) to the channel's
    /// vendor, so each call is one audit record (`probe_channel`, by the
    /// admin token's holder, naming the channel when it is a configured
    /// one, never a person's value), written however the call ends.
    async fn probe_channel(
        &self,
        request: Request<pb::ProbeChannelRequest>,
    ) -> Result<Response<pb::ProbeChannelResponse>, Status> {
        let trace = trace_id(request.extensions());
        let req = request.into_inner();
        // A configured channel's name, never whatever else was sent.
        let configured = self
            .router
            .snapshot()
            .channels
            .iter()
            .any(|c| c.name == req.name);
        let channel = if configured { req.name.as_str() } else { "" };
        let audit = AuditRecord::admin(PROBE_CHANNEL, channel, trace);
        match self.inner_probe_channel(&req).await {
            Ok(response) => {
                audit.finish("ok");
                Ok(Response::new(response))
            }
            Err((field, error)) => {
                audit.finish(error.reason().as_str());
                Err(match field {
                    Some(field) => to_status(field, error),
                    None => error.into(),
                })
            }
        }
    }

    async fn get_usage(
        &self,
        request: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        let req = request.into_inner();
        Ok(Response::new(usage::get_usage(&self.usage, &req).await?))
    }

    async fn drain_channel(
        &self,
        request: Request<pb::DrainChannelRequest>,
    ) -> Result<Response<pb::DrainChannelResponse>, Status> {
        let req = request.into_inner();
        let snap = self
            .router
            .change_drain(name_arg(&req.name)?, true)
            .await
            .map_err(|e| to_status("name", e))?;
        Ok(Response::new(pb::DrainChannelResponse {
            channel: Some(channel_status(&snap)),
        }))
    }

    async fn undrain_channel(
        &self,
        request: Request<pb::UndrainChannelRequest>,
    ) -> Result<Response<pb::UndrainChannelResponse>, Status> {
        let req = request.into_inner();
        let snap = self
            .router
            .change_drain(name_arg(&req.name)?, false)
            .await
            .map_err(|e| to_status("name", e))?;
        Ok(Response::new(pb::UndrainChannelResponse {
            channel: Some(channel_status(&snap)),
        }))
    }
}

mod config;
mod convert;
mod probe;
mod rollout;
#[cfg(test)]
mod tests;
mod token;
mod usage;

pub use config::{AdminConfig, MIN_ADMIN_TOKEN_CHARS};
pub use convert::{channel_status, mode_to_proto, mode_weights};
use convert::{mode_field, mode_from_proto, name_arg, to_status};
pub use probe::probe_to_proto;
pub use rollout::rollout_to_proto;
pub use token::{AdminAuth, AdminServer, admin_auth_interceptor, admin_service};
pub use usage::report_to_proto;
