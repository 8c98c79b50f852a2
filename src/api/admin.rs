//! `ChannelAdminService`: run-time control of the 3D channels, behind a
//! bearer token.
//!
//! Served on the admin listener only. The token check is an interceptor so
//! that no handler can forget it; the comparison is constant-time over
//! SHA-256 digests, so neither the content nor the length of the expected
//! token leaks through timing.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use serde::Deserialize;
use tonic::{Code, Request, Response, Status, service::Interceptor};
use tonic_types::{ErrorDetails, StatusExt};

use crate::{
    Error,
    api::figures::{figures_to_proto, seconds, window_minutes},
    channels::{
        ChannelRouter, ChannelSnapshot, CircuitState, RoutingMode, SplitError, WeightedSplit,
        figures::LATENCY_BOUNDS_MS, valid_name,
    },
    config_source::{ConfigError, read_secret},
    domain::{AdminToken, authorization_credentials, secrets_match},
    error::ERROR_DOMAIN,
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
        if !secret.trim().is_empty() && secret.trim().chars().count() < MIN_ADMIN_TOKEN_CHARS {
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

/// `ChannelAdminService` over `router`, behind the bearer-token interceptor.
pub fn admin_service(router: Arc<ChannelRouter>, token: &AdminToken) -> AdminServer {
    ChannelAdminServiceServer::with_interceptor(
        ChannelAdmin { router },
        admin_auth_interceptor(token),
    )
}

/// The handlers of `ChannelAdminService`.
#[derive(Debug, Clone)]
pub struct ChannelAdmin {
    router: Arc<ChannelRouter>,
}

impl ChannelAdmin {
    /// Handlers over `router` (without the interceptor: use
    /// [`admin_service`] to serve).
    pub fn new(router: Arc<ChannelRouter>) -> Self {
        Self { router }
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

/// `INVALID_ARGUMENT` with `ErrorInfo.reason = CHANNEL_UNKNOWN` and a
/// `BadRequest` naming `field`. The name is echoed only when it is a
/// well-formed channel name.
fn channel_unknown(field: &str, name: &str) -> Status {
    let shown = if valid_name(name) {
        name
    } else {
        "<invalid name>"
    };
    let mut details = ErrorDetails::new();
    details.add_bad_request_violation(field, format!("channel `{shown}` is not configured"));
    details.set_error_info(
        "CHANNEL_UNKNOWN",
        ERROR_DOMAIN,
        HashMap::from([("channel".to_owned(), shown.to_owned())]),
    );
    Status::with_error_details(
        Code::InvalidArgument,
        format!("channel `{shown}` is not configured"),
        details,
    )
}

fn to_status(field: &str, err: Error) -> Status {
    match err {
        Error::ChannelUnknown(name) => channel_unknown(field, &name),
        other => other.into(),
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
        let mode = match self.router.change_mode(mode.clone()).await {
            Ok(mode) => mode,
            Err(Error::ChannelUnknown(name)) => {
                return Err(channel_unknown(&mode_field(&mode, &name), &name));
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
        let mut tallies = figures.window(minutes);
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
        }))
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
mod tests {
    use super::*;

    fn call(auth: &mut AdminAuth, header: Option<&str>) -> Result<(), Status> {
        let mut req = Request::new(());
        if let Some(h) = header {
            req.metadata_mut()
                .insert("authorization", h.parse().unwrap());
        }
        auth.call(req).map(|_| ())
    }

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let mut auth = admin_auth_interceptor(&AdminToken::new("s3cret").unwrap());
        assert!(call(&mut auth, Some("Bearer s3cret")).is_ok());
        assert!(call(&mut auth, Some("bearer s3cret")).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Basic s3cret"),
            Some("s3cret"),
            Some("Bearer "),
        ] {
            let err = call(&mut auth, bad).unwrap_err();
            assert_eq!(err.code(), Code::Unauthenticated, "{bad:?}");
            assert!(!err.message().contains("s3cret"));
        }
    }

    #[test]
    fn blank_tokens_are_refused_and_debug_is_redacted() {
        assert!(AdminToken::new("  ").is_none());
        let t = AdminToken::new("s3cret").unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn a_short_admin_token_is_refused_and_a_missing_one_only_disables_the_listener() {
        let dir = std::env::temp_dir();
        let file = |name: &str, token: &str| {
            let path = dir.join(format!("idgate-admin-{name}-{}", uuid::Uuid::new_v4()));
            std::fs::write(&path, token).unwrap();
            AdminConfig {
                token_file: Some(path),
                ..AdminConfig::default()
            }
        };
        let short = file("short", "x").resolve_token().unwrap_err();
        assert!(matches!(short, ConfigError::Invalid(_)), "{short}");
        assert!(short.to_string().contains("32 characters"), "{short}");
        let thirty_one = "a".repeat(MIN_ADMIN_TOKEN_CHARS - 1);
        assert!(file("31", &thirty_one).resolve_token().is_err());
        let ok = "a".repeat(MIN_ADMIN_TOKEN_CHARS);
        assert!(file("32", &ok).resolve_token().is_ok());
        let empty = file("empty", "\n").resolve_token().unwrap_err();
        assert!(
            matches!(empty, ConfigError::MissingSecret { .. }),
            "{empty}"
        );
        let unset = AdminConfig {
            token_env: "IDGATE_TEST_SURELY_UNSET_ADMIN_TOKEN".into(),
            token_file: None,
        }
        .resolve_token()
        .unwrap_err();
        assert!(
            matches!(unset, ConfigError::MissingSecret { .. }),
            "{unset}"
        );
    }

    #[test]
    fn unspecified_and_stray_channel_modes_are_invalid() {
        assert_eq!(
            mode_from_proto(0, "", &[]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            mode_from_proto(99, "", &[]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            mode_from_proto(4, "", &[]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            mode_from_proto(1, "x", &[]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            mode_from_proto(4, "x", &[]).unwrap(),
            RoutingMode::Channel("x".into())
        );
    }

    fn weight(channel: &str, weight: u32) -> pb::ChannelWeight {
        pb::ChannelWeight {
            channel: channel.into(),
            weight,
        }
    }

    fn violation(status: &Status) -> String {
        let details = status.get_error_details();
        let bad = details.bad_request().expect("BadRequest");
        bad.field_violations[0].field.clone()
    }

    #[test]
    fn bad_weighted_modes_are_invalid_and_name_the_field() {
        let w = pb::RoutingMode::Weighted as i32;
        let ok = mode_from_proto(w, "", &[weight("primary", 90), weight("alternative", 10)]);
        assert_eq!(
            ok.unwrap().to_string(),
            "weighted:primary=90,alternative=10"
        );
        let cases: [(Vec<pb::ChannelWeight>, &str); 6] = [
            (vec![], "weights"),
            (vec![weight("a", 0), weight("b", 0)], "weights"),
            (vec![weight("a", 1), weight("a b", 1)], "weights[1].channel"),
            (
                vec![weight("a", 1), weight("b", 1), weight("a", 2)],
                "weights[2].channel",
            ),
            (
                vec![weight("a", 1), weight("b", u32::MAX)],
                "weights[1].weight",
            ),
            (vec![weight("", 1)], "weights[0].channel"),
        ];
        for (weights, field) in cases {
            let err = mode_from_proto(w, "", &weights).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{weights:?}");
            assert_eq!(violation(&err), field, "{weights:?}");
        }
        let stray = mode_from_proto(1, "", &[weight("a", 1)]).unwrap_err();
        assert_eq!(violation(&stray), "weights");
    }
}
