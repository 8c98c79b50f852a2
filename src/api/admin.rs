//! `ChannelAdminService`: run-time control of the 3D channels, behind a
//! bearer token.
//!
//! Served on the admin listener only. The token check is an interceptor so
//! that no handler can forget it; the comparison is constant-time over
//! SHA-256 digests, so neither the content nor the length of the expected
//! token leaks through timing.

use std::{path::PathBuf, sync::Arc};

use serde::Deserialize;
use tonic::{Request, Response, Status, service::Interceptor};

use crate::{
    Error,
    api::figures::{figures_to_proto, seconds, window_minutes},
    channels::{
        ChannelRouter, ChannelSnapshot, CircuitState, RoutingMode, SplitError, WeightedSplit,
        figures::LATENCY_BOUNDS_MS,
        probe::{ProbeVerdicts, Prober},
        rollout::{RolloutConfig, Rollouts},
        valid_name,
    },
    cluster::MemoryRollout,
    config_source::{ConfigError, read_secret},
    domain::{AdminToken, authorization_credentials, secrets_match},
    proto::{
        services::{ChannelAdminService, ChannelAdminServiceServer},
        v1 as pb,
    },
};

/// `[admin]`: where the bearer token of `ChannelAdminService` comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Environment variable holding the token (used when no file is set).
    pub token_env: String,
    /// File holding the token (trailing newline ignored); wins over the
    /// variable.
    pub token_file: Option<PathBuf>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token_env: "IDGATE_ADMIN_TOKEN".to_owned(),
            token_file: None,
        }
    }
}

/// Shortest admin token accepted: 32 characters (e.g. 24 random bytes in
/// Base64), so that guessing one over the network is hopeless.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

impl AdminConfig {
    /// Reads the admin token. A missing or empty one is
    /// [`ConfigError::MissingSecret`] (the admin listener stays off); one
    /// shorter than [`MIN_ADMIN_TOKEN_CHARS`] is [`ConfigError::Invalid`]
    /// (the gateway refuses to start rather than guard its vendor switch
    /// with a guessable secret).
    pub fn resolve_token(&self) -> Result<AdminToken, ConfigError> {
        let secret = match &self.token_file {
            Some(file) => read_secret("admin.token", None, Some(file))?,
            None => read_secret("admin.token", Some(&self.token_env), None)?,
        };
        // Trimmed here, and stored trimmed (`AdminToken::new`): the
        // length checked is the length compared.
        let secret = zeroize::Zeroizing::new(secret);
        let secret = secret.trim();
        if !secret.is_empty() && secret.chars().count() < MIN_ADMIN_TOKEN_CHARS {
            return Err(ConfigError::Invalid(format!(
                "admin.token: the admin token must be at least {MIN_ADMIN_TOKEN_CHARS} characters"
            )));
        }
        AdminToken::new(secret).ok_or_else(|| ConfigError::MissingSecret {
            what: "admin.token".to_owned(),
            why: "the token is empty".to_owned(),
        })
    }
}

/// The interceptor that admits only `authorization: Bearer <token>`.
#[derive(Clone)]
pub struct AdminAuth {
    token: AdminToken,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth(<redacted>)")
    }
}

/// An interceptor checking the admin bearer token in constant time and
/// refusing with `UNAUTHENTICATED` (`ADMIN_TOKEN_INVALID`).
pub fn admin_auth_interceptor(token: &AdminToken) -> AdminAuth {
    AdminAuth {
        token: token.clone(),
    }
}

impl Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let ok = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| authorization_credentials(v, "bearer"))
            .is_some_and(|t| secrets_match(t, self.token.expose()));
        if ok {
            Ok(request)
        } else {
            tracing::warn!("admin call refused: missing or invalid bearer token");
            Err(Error::AdminUnauthenticated.into())
        }
    }
}

/// The admin service type the lead serves on the admin listener.
pub type AdminServer = tonic::service::interceptor::InterceptedService<
    ChannelAdminServiceServer<ChannelAdmin>,
    AdminAuth,
>;

/// `ChannelAdminService` with the handlers of `admin`, behind the
/// bearer-token interceptor.
pub fn admin_service(admin: ChannelAdmin, token: &AdminToken) -> AdminServer {
    ChannelAdminServiceServer::with_interceptor(admin, admin_auth_interceptor(token))
}

/// The handlers of `ChannelAdminService`.
#[derive(Debug, Clone)]
pub struct ChannelAdmin {
    router: Arc<ChannelRouter>,
    rollouts: Arc<Rollouts>,
    prober: Option<Arc<Prober>>,
}

impl ChannelAdmin {
    /// Handlers over `router` alone: a rollout of this process only (in
    /// memory, default `[rollout]`), no probe (without the interceptor:
    /// use [`admin_service`] to serve).
    pub fn new(router: Arc<ChannelRouter>) -> Self {
        let store = Arc::new(MemoryRollout::default());
        let rollouts = Rollouts::new(
            router.clone(),
            store.clone(),
            RolloutConfig::default(),
            Arc::new(ProbeVerdicts::new(store)),
        );
        Self::with_rollouts(Arc::new(rollouts), None)
    }

    /// Handlers over the router of `rollouts`, probing with `prober`.
    pub fn with_rollouts(rollouts: Arc<Rollouts>, prober: Option<Arc<Prober>>) -> Self {
        Self {
            router: rollouts.router().clone(),
            rollouts,
            prober,
        }
    }
}

/// The proto form of a mode: `(mode, mode_channel)`; the weights of a
/// weighted mode are [`mode_weights`].
pub fn mode_to_proto(mode: &RoutingMode) -> (pb::RoutingMode, String) {
    match mode {
        RoutingMode::Auto => (pb::RoutingMode::Auto, String::new()),
        RoutingMode::ForcePrimary => (pb::RoutingMode::ForcePrimary, String::new()),
        RoutingMode::ForceAlternative => (pb::RoutingMode::ForceAlternative, String::new()),
        RoutingMode::Channel(n) => (pb::RoutingMode::NamedChannel, n.clone()),
        RoutingMode::Weighted(_) => (pb::RoutingMode::Weighted, String::new()),
    }
}

/// The split of a weighted mode, in the order given; empty for the others.
pub fn mode_weights(mode: &RoutingMode) -> Vec<pb::ChannelWeight> {
    match mode {
        RoutingMode::Weighted(split) => split
            .entries()
            .iter()
            .map(|(channel, weight)| pb::ChannelWeight {
                channel: channel.clone(),
                weight: *weight,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn mode_from_proto(
    mode: i32,
    channel: &str,
    weights: &[pb::ChannelWeight],
) -> Result<RoutingMode, Status> {
    let mode = pb::RoutingMode::try_from(mode).unwrap_or(pb::RoutingMode::Unspecified);
    let named = matches!(mode, pb::RoutingMode::NamedChannel);
    if !named && !channel.is_empty() {
        return Err(
            Error::invalid("channel", "only allowed with ROUTING_MODE_NAMED_CHANNEL").into(),
        );
    }
    let weighted = matches!(mode, pb::RoutingMode::Weighted);
    if !weighted && !weights.is_empty() {
        return Err(Error::invalid("weights", "only allowed with ROUTING_MODE_WEIGHTED").into());
    }
    match mode {
        pb::RoutingMode::Unspecified => Err(Error::invalid(
            "mode",
            "must be AUTO, FORCE_PRIMARY, FORCE_ALTERNATIVE, NAMED_CHANNEL or WEIGHTED",
        )
        .into()),
        pb::RoutingMode::Auto => Ok(RoutingMode::Auto),
        pb::RoutingMode::ForcePrimary => Ok(RoutingMode::ForcePrimary),
        pb::RoutingMode::ForceAlternative => Ok(RoutingMode::ForceAlternative),
        pb::RoutingMode::NamedChannel if channel.is_empty() => {
            Err(Error::invalid("channel", "required with ROUTING_MODE_NAMED_CHANNEL").into())
        }
        pb::RoutingMode::NamedChannel => Ok(RoutingMode::Channel(channel.to_owned())),
        pb::RoutingMode::Weighted => weighted_from_proto(weights),
    }
}

/// A weighted split from its proto form. Refusals name the entry's field
/// (`weights[2].weight`) and quote a channel only when well formed.
fn weighted_from_proto(weights: &[pb::ChannelWeight]) -> Result<RoutingMode, Status> {
    let entries = weights
        .iter()
        .map(|w| (w.channel.clone(), w.weight))
        .collect();
    let at = |name: &str, leaf: &str| {
        weights
            .iter()
            .position(|w| w.channel == name)
            .map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].{leaf}"))
    };
    WeightedSplit::new(entries)
        .map(RoutingMode::Weighted)
        .map_err(|e| {
            let field = match &e {
                SplitError::Empty => "weights".to_owned(),
                SplitError::TooManyChannels | SplitError::ZeroTotal => "weights".to_owned(),
                SplitError::Malformed { index } | SplitError::BadName { index } => {
                    format!("weights[{index}].channel")
                }
                SplitError::Duplicate(name) => {
                    // The second occurrence is the offending one.
                    let first = weights.iter().position(|w| &w.channel == name);
                    let second = weights
                        .iter()
                        .enumerate()
                        .skip(first.map_or(0, |i| i + 1))
                        .find(|(_, w)| &w.channel == name)
                        .map(|(i, _)| i);
                    second.map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].channel"))
                }
                SplitError::BadWeight(name) => at(name, "weight"),
            };
            Error::invalid(field, e.to_string()).into()
        })
}

/// The field a mode's unknown channel is reported under.
fn mode_field(mode: &RoutingMode, channel: &str) -> String {
    match mode {
        RoutingMode::Weighted(split) => split
            .names()
            .position(|n| n == channel)
            .map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].channel")),
        _ => "channel".to_owned(),
    }
}

/// A refusal reported against the request field `field` (its details are
/// built with every other error's, in `error`). An unknown channel's name
/// is echoed only when it is a well-formed channel name.
fn to_status(field: &str, err: Error) -> Status {
    match err {
        Error::ChannelUnknown(name) if !valid_name(&name) => {
            Error::ChannelUnknown("<invalid name>".to_owned()).into_status_at(field)
        }
        other => other.into_status_at(field),
    }
}

/// The proto form of a channel snapshot.
pub fn channel_status(s: &ChannelSnapshot) -> pb::ChannelStatus {
    let circuit = match s.circuit {
        CircuitState::Closed => pb::CircuitState::Closed,
        CircuitState::Open => pb::CircuitState::Open,
        CircuitState::HalfOpen => pb::CircuitState::HalfOpen,
    };
    pb::ChannelStatus {
        name: s.name.clone(),
        base_url: s.base_url.clone(),
        priority: s.priority,
        drained: s.drained,
        circuit_state: circuit as i32,
        last_error_class: s.last_error_class.to_owned(),
        sessions_started: s.sessions_started,
        failovers: s.failovers,
        contingency_answers: s.contingency_answers,
        last_vendor: s.last_vendor.clone(),
        last_contingency: s.last_contingency,
        consecutive_failures: s.consecutive_failures,
    }
}

fn name_arg(name: &str) -> Result<&str, Status> {
    if name.is_empty() {
        return Err(Error::invalid("name", "required").into());
    }
    Ok(name)
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
        let (mut tallies, scope) = match figures.fleet_window(minutes).await {
            Some(fleet) => (fleet, pb::FiguresScope::Fleet),
            None => (figures.window(minutes), pb::FiguresScope::Replica),
        };
        // Configured channels show up even before their first call.
        for c in self.router.snapshot().channels {
            tallies.entry(c.name).or_default();
        }
        Ok(Response::new(pb::GetChannelFiguresResponse {
            window: Some(seconds(minutes * 60)),
            latency_bounds_ms: LATENCY_BOUNDS_MS.to_vec(),
            channels: tallies
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

    async fn probe_channel(
        &self,
        request: Request<pb::ProbeChannelRequest>,
    ) -> Result<Response<pb::ProbeChannelResponse>, Status> {
        let req = request.into_inner();
        let name = name_arg(&req.name)?;
        let Some(prober) = &self.prober else {
            return Err(Error::ProbeNotConfigured.into());
        };
        let report = prober
            .probe(name, req.consume)
            .await
            .map_err(|e| to_status("name", e))?;
        self.rollouts
            .probes()
            .record(name, report.conforming())
            .await
            .map_err(Status::from)?;
        Ok(Response::new(probe_to_proto(name, &report)))
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

#[cfg(test)]
mod tests;

mod probe;
mod rollout;
pub use probe::probe_to_proto;
pub use rollout::rollout_to_proto;
