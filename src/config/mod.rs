//! The whole configuration: each module's section, composed.
//!
//! Every section type lives with the module it configures (`[upstream]` in
//! `upstream`, `[[channels]]` in `channels`, ...) and is re-exported here;
//! loading (a TOML file, then `IDGATE_*` overrides) is `config_source`'s.
//! The gateway's secrets are never read from the TOML itself: a section
//! names the environment variable or file that holds each one. Load
//! errors name keys, lines and columns, never the text or the value.
//! Reference: `docs/configuration.md`.

use std::net::SocketAddr;

use serde::Deserialize;

mod duration_keys;
mod plaintext_hops;
mod serving;

pub use plaintext_hops::{HOP_KINDS, PlaintextHop, is_plaintext_off_loopback};
pub use serving::ServingConfig;

pub use crate::{
    api::{AdminConfig, LimitsConfig},
    auth::{AuthConfig, AuthMode, CallerConfig},
    channels::{ChannelSpec, EmbeddedChannelsConfig, RoutingConfig},
    cluster::{
        ClusterConfig, JourneysConfig,
        embedded::{Backend as StoreBackend, StoreConfig},
    },
    config_source::{ConfigError, ENV_PREFIX, read_secret},
    events::{WatchConfig, WebhookConfig},
    journey::{OperatorConfig, OperatorProfile},
    sandbox::SandboxConfig,
    spend::{BilledOperation, BudgetConfig, IdempotencyConfig},
    telemetry::{TelemetryConfig, audit::AuditConfig},
    tls::{ListenerTls, TlsConfig},
    upstream::{FieldsConfig, PathsConfig, UpstreamConfig},
    usage::UsageConfig,
};

/// The operator profile of the embedded sandbox (no `[upstream]`).
pub const EMBEDDED_PROFILE: &str = "sandbox";

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Listen addresses.
    pub listen: ListenConfig,
    /// What the listeners accept, for how long, and how they drain
    /// (`[serving]`).
    pub serving: ServingConfig,
    /// TLS per listener (`[tls.grpc]`, `[tls.http]`, `[tls.admin]`).
    pub tls: TlsConfig,
    /// The upstream REST service; absent: the sandbox is started in process.
    pub upstream: Option<UpstreamConfig>,
    /// Operator profiles whose credentials create appkeys.
    pub operators: Vec<OperatorConfig>,
    /// Limits on what callers send.
    pub limits: LimitsConfig,
    /// Traces, logs and metrics.
    pub telemetry: TelemetryConfig,
    /// Where audit records go besides stdout (`[audit]`).
    pub audit: AuditConfig,
    /// 3D liveness vendor channels (`[[channels]]`).
    pub channels: Vec<ChannelSpec>,
    /// How new 3D sessions are routed (`[routing]`).
    pub routing: RoutingConfig,
    /// Timeout and breaker of the embedded sandbox's channels, used when
    /// no `[upstream]` and no `[[channels]]` are configured
    /// (`[embedded_channels]`).
    pub embedded_channels: EmbeddedChannelsConfig,
    /// Where the admin bearer token comes from (`[admin]`).
    pub admin: AdminConfig,
    /// The guarded rollout's rounds, lease and shortest step (`[rollout]`).
    pub rollout: crate::channels::rollout::RolloutConfig,
    /// The persons the conformance probe creates appkeys for (`[probe]`).
    pub probe: crate::channels::probe::ProbeConfig,
    /// The completion-notice receiver.
    pub webhook: WebhookConfig,
    /// `WatchJourney` streams and their result reads.
    pub watch: WatchConfig,
    /// The sandbox: started in process when no `[upstream]` is configured,
    /// and by `idgate sandbox`.
    pub sandbox: SandboxConfig,
    /// The fleet's shared state (`[cluster]`); absent: one process.
    pub cluster: ClusterConfig,
    /// Where a gateway of one process keeps its state across restarts
    /// (`[store]`): an embedded durable file by default; not read in a
    /// fleet.
    pub store: StoreConfig,
    /// The retired `[guard]` section, read for one release: its one key
    /// now lives in `[journeys]` ([`RetiredGuardConfig`]).
    pub guard: RetiredGuardConfig,
    /// The replay window of `CreateJourney.request_id` (`[idempotency]`).
    pub idempotency: IdempotencyConfig,
    /// How long the gateway keeps the record of each journey it created
    /// (`[journeys]`).
    pub journeys: JourneysConfig,
    /// Spending limits per operator profile and billed operation
    /// (`[[budgets]]`).
    pub budgets: Vec<BudgetConfig>,
    /// How the public listener authenticates callers (`[auth]`); absent:
    /// open on the embedded sandbox, and a refusal to start in front of a
    /// real `[upstream]`.
    pub auth: Option<AuthConfig>,
    /// Who may call the public API and what each may do (`[[callers]]`).
    pub callers: Vec<CallerConfig>,
    /// How long the charge-back report's counts are kept (`[usage]`).
    pub usage: UsageConfig,
}

/// `[guard]`, retired: `accept_foreign_appkeys` is an access rule of the
/// journeys, not of spend, and lives in `[journeys]`. Still read (and
/// folded into `[journeys]`) for one release, with a WARN at start.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetiredGuardConfig {
    /// Now `[journeys] accept_foreign_appkeys`.
    pub accept_foreign_appkeys: Option<bool>,
}

/// Where the gateway listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// Public gRPC API, health and reflection.
    pub grpc: SocketAddr,
    /// Webhook receiver, `GET /metrics`, `GET /healthz`.
    pub http: SocketAddr,
    /// `ChannelAdminService`, behind a bearer token.
    pub admin: SocketAddr,
    /// Take the admin token without `[tls.admin]` on an `admin` address
    /// other machines reach: for a mesh sidecar that terminates TLS in the
    /// pod. Whoever reads the token in clear drives every channel and
    /// sends the probe persons to any vendor, so it must be asked for, and
    /// it is a WARN and a plaintext hop (`admin_token`). An address on
    /// loopback needs no switch (`Config::takes_admin_token_in_clear`).
    pub allow_plaintext_admin: bool,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            grpc: ([127, 0, 0, 1], 50051).into(),
            http: ([127, 0, 0, 1], 8080).into(),
            admin: ([127, 0, 0, 1], 50052).into(),
            allow_plaintext_admin: false,
        }
    }
}

impl Config {
    /// Loads the file (if any), then applies `IDGATE_*` overrides from the
    /// process environment.
    pub fn load(path: Option<&std::path::Path>) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.to_owned(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_toml_and_env(&text, std::env::vars())
    }

    /// Parses `text`, then applies the overrides found in `env`.
    pub fn from_toml_and_env(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut config: Config = crate::config_source::from_toml_and_env(text, env)?;
        config.fold_retired_keys();
        config.validate()?;
        Ok(config)
    }

    /// Moves what retired keys say to where they live now; the start
    /// warns about each ([`Config::retired_keys`]).
    fn fold_retired_keys(&mut self) {
        if let Some(accept) = self.guard.accept_foreign_appkeys {
            self.journeys.accept_foreign_appkeys |= accept;
        }
    }

    /// The retired keys this configuration still sets, each with where it
    /// lives now: said as a WARN at start and by `idgate check`.
    pub fn retired_keys(&self) -> Vec<(&'static str, &'static str)> {
        let mut retired = Vec::new();
        if self.guard.accept_foreign_appkeys.is_some() {
            retired.push((
                "guard.accept_foreign_appkeys",
                "journeys.accept_foreign_appkeys",
            ));
        }
        retired
    }

    /// Checks what types alone cannot: channel names unique and well
    /// formed, a routing mode that names a configured channel, every
    /// duration at most 30 days, a plain webhook path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_bounds()?;
        crate::channels::config::validate(&self.channels, &self.routing)
            .and_then(|()| self.embedded_channels.validate())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        self.serving.validate()?;
        self.watch.validate()?;
        self.validate_message_budget()?;
        self.idempotency.validate()?;
        self.journeys
            .validate(self.idempotency.ttl_secs, self.appkey_ttl_secs())?;
        self.usage.validate()?;
        let callers = self.callers.iter().map(|c| c.name.as_str());
        crate::spend::validate_budgets(&self.budgets, &self.operator_profiles(), callers)?;
        self.validate_auth()?;
        self.validate_tls()?;
        self.rollout.validate().map_err(ConfigError::Invalid)?;
        self.probe.validate().map_err(ConfigError::Invalid)?;
        self.store.validate()?;
        self.cluster.validate()
    }

    /// How long an appkey stays valid at the vendor, as configured.
    pub fn appkey_ttl_secs(&self) -> u64 {
        self.upstream.as_ref().map_or(
            crate::upstream::UpstreamConfig::default().appkey_ttl_secs,
            |u| u.appkey_ttl_secs,
        )
    }

    /// One largest message must fit in the bytes in flight, or it could
    /// never be served; and the message limit must be positive.
    fn validate_message_budget(&self) -> Result<(), ConfigError> {
        let message = self.limits.grpc_message_bytes();
        if message == 0 {
            return Err(ConfigError::Invalid(
                "limits.max_grpc_message_bytes must be at least 1".to_owned(),
            ));
        }
        if self.limits.max_small_message_bytes == 0 {
            return Err(ConfigError::Invalid(
                "limits.max_small_message_bytes must be at least 1".to_owned(),
            ));
        }
        if self.serving.max_body_bytes_in_flight < message {
            return Err(ConfigError::Invalid(format!(
                "serving.max_body_bytes_in_flight must be at least the gRPC message limit \
                 ({message} bytes: limits.max_grpc_message_bytes, or max_images × max_image_bytes \
                 plus 1 MiB when unset)"
            )));
        }
        Ok(())
    }

    /// `[auth]` consistent in itself, `[[callers]]` with the mode and the
    /// operator profiles. (A real `[upstream]` without `[auth]` is refused
    /// at start, not here: see `server`.)
    fn validate_auth(&self) -> Result<(), ConfigError> {
        let Some(auth) = &self.auth else {
            if self.callers.is_empty() {
                return Ok(());
            }
            return Err(ConfigError::Invalid(
                "[[callers]] is set but [auth] is not: set [auth] mode".to_owned(),
            ));
        };
        auth.validate()?;
        if auth.mode.accepts_mtls()
            && self
                .tls
                .grpc
                .as_ref()
                .is_none_or(|t| t.client_ca_file.is_none())
        {
            return Err(ConfigError::Invalid(format!(
                "[auth] mode = \"{}\" needs client certificates: set [tls.grpc] client_ca_file",
                auth.mode.as_str()
            )));
        }
        self.check_tokens_over_tls()?;
        crate::auth::validate_callers(&self.callers, auth.mode, &self.operator_profiles())
    }

    /// Each listener's client-certificate keys beside its client CA.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let TlsConfig { grpc, http, admin } = &self.tls;
        for (section, tls) in [("tls.grpc", grpc), ("tls.http", http), ("tls.admin", admin)] {
            if let Some(tls) = tls {
                tls.validate(section).map_err(ConfigError::Invalid)?;
            }
        }
        Ok(())
    }

    /// Bearer tokens arrive in clear: a mode that takes them, on a public
    /// listener without `[tls.grpc]` bound to an address other machines
    /// reach. A listener bound to loopback (a mesh sidecar's, a local
    /// benchmark's) takes them from this host only: they never cross a
    /// network, as an `http://` JWKS on loopback does not.
    pub fn takes_tokens_in_clear(&self) -> bool {
        self.auth.as_ref().is_some_and(|a| a.mode.accepts_jwt())
            && self.tls.grpc.is_none()
            && !self.listen.grpc.ip().is_loopback()
    }

    /// Bearer tokens only over TLS or on loopback: see
    /// [`Self::takes_tokens_in_clear`]; `[auth] allow_plaintext_tokens`
    /// accepts them in clear anyway (a sidecar on the pod's network
    /// namespace reaching a listener bound to all addresses). Checked at
    /// load and again at start (a configuration built in code skips the
    /// load).
    pub fn check_tokens_over_tls(&self) -> Result<(), ConfigError> {
        match &self.auth {
            Some(auth) if self.takes_tokens_in_clear() && !auth.allow_plaintext_tokens => {
                Err(ConfigError::Invalid(format!(
                    "[auth] mode = \"{}\" takes bearer tokens, which would cross the network in clear: configure [tls.grpc], bind [listen] grpc to loopback, or set [auth] allow_plaintext_tokens = true (a mesh sidecar terminating TLS)",
                    auth.mode.as_str()
                )))
            }
            _ => Ok(()),
        }
    }

    /// The admin token, when there is one, arrives in clear: the admin
    /// listener has no `[tls.admin]` and is bound to an address other
    /// machines reach (the token rule of [`Self::takes_tokens_in_clear`],
    /// for the admin listener).
    pub fn takes_admin_token_in_clear(&self) -> bool {
        self.tls.admin.is_none() && !self.listen.admin.ip().is_loopback()
    }

    /// An admin token only over TLS or on loopback: see
    /// [`Self::takes_admin_token_in_clear`]; `[listen]
    /// allow_plaintext_admin` accepts it in clear anyway. Judged only when
    /// a token is configured (no token, no admin listener), so at start and
    /// by `idgate check`, which read the token, not at load.
    pub fn check_admin_token_over_tls(&self) -> Result<(), ConfigError> {
        if self.takes_admin_token_in_clear() && !self.listen.allow_plaintext_admin {
            return Err(ConfigError::Invalid(format!(
                "[listen] admin = \"{}\" takes the admin bearer token, which would cross the network in clear: configure [tls.admin], bind [listen] admin to loopback, or set [listen] allow_plaintext_admin = true (a mesh sidecar terminating TLS)",
                self.listen.admin
            )));
        }
        Ok(())
    }

    /// The operator profile names the gateway will have: `[[operators]]`
    /// with an `[upstream]`, else the embedded sandbox's `sandbox`.
    pub fn operator_profiles(&self) -> Vec<&str> {
        if self.upstream.is_some() {
            self.operators.iter().map(|o| o.name.as_str()).collect()
        } else {
            vec![EMBEDDED_PROFILE]
        }
    }
}

#[cfg(test)]
mod tests;
