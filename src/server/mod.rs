//! Assembles listeners and services into a running gateway.
//!
//! - `listeners`: the public gRPC API (with health and reflection), the
//!   HTTP listener (webhook receiver, `/metrics`, `/healthz`) and the
//!   admin gRPC listener (`ChannelAdminService`, behind a bearer token).
//! - `upstream`: the configured REST service and its operators, or
//! - `embedded`: with no `[upstream]` configured, the sandbox started in
//!   process on loopback, the gateway pointed at it.
//! - `connections`: every accepted connection, bounded (caps, descriptor
//!   budget, idle timeout, kill switch); `admission`: the public gRPC
//!   edge (in-flight caps, request-body timeout, caller-fault statuses).
//!
//! Stopping ([`Gateway::shutdown`]) drains: health says NOT_SERVING at
//! once while calls are still served for `drain_delay_secs`, then the
//! listeners stop accepting and send GOAWAY, calls in flight get
//! `shutdown_grace_secs` to finish, and whatever is left is closed.

mod admission;
mod connections;
mod embedded;
mod fleet;
mod idle_poll;
mod listeners;
mod reflection;
mod setup;
mod upstream;
mod workers;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle};

use crate::{
    api::{DocumentApi, JourneyApi, LivenessApi},
    channels::{self, ChannelRouter, ChannelSpec, HttpTransport},
    cluster::Shared,
    config::{Config, ConfigError},
    context::CallContext,
    domain::Appkey,
    events::{JourneyHub, ResultSource, WatchSettings, WebhookReceiver},
    guard::Guard,
    journey::{CredentialPolicy, Credentials, JourneyCore},
    sandbox::{self, Clock, SandboxHandle},
    telemetry::{self, GrpcServerLayer, Metrics},
    tls::TlsError,
    upstream::UpstreamClient,
};
use setup::{ListenerTlsSet, connection_budget};

/// A gateway that could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid or a secret is missing.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The embedded sandbox did not start.
    #[error("the embedded sandbox did not start: {0}")]
    Sandbox(#[from] sandbox::SandboxError),
    /// The REST client could not be built.
    #[error("the upstream client could not be built: {0}")]
    Client(#[from] crate::upstream::ClientSetupError),
    /// The channel configuration is invalid.
    #[error("invalid channel configuration: {0}")]
    Channels(#[from] channels::config::ChannelConfigError),
    /// A listener's certificate, key or client CA could not be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Reflection could not load the descriptors.
    #[error("server reflection: {0}")]
    Reflection(String),
    /// The `[cluster]` Redis client could not be built.
    #[error("the [cluster] Redis client could not be built: {0}")]
    Cluster(String),
}

/// What tests and embedders may set beyond the configuration.
#[derive(Default)]
pub struct StartOptions {
    /// The configuration file, re-read on [`Gateway::reload`].
    pub config_path: Option<PathBuf>,
    /// The embedded sandbox's clock (tests pass a `ManualClock`).
    pub sandbox_clock: Option<Arc<dyn Clock>>,
}

/// A running gateway. Dropping it does not stop it: call
/// [`Gateway::shutdown`].
pub struct Gateway {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    sandbox: Option<SandboxHandle>,
    router: Arc<ChannelRouter>,
    hub: JourneyHub,
    core: JourneyCore,
    metrics: Metrics,
    config_path: Option<PathBuf>,
    embedded_channels: Vec<ChannelSpec>,
    tls: ListenerTlsSet,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Flips `/healthz` and gRPC health to NOT_SERVING.
    ready: watch::Sender<bool>,
    health: tonic_health::server::HealthReporter,
    kill_switches: Vec<Arc<connections::KillSwitch>>,
    drain_delay: Duration,
    shutdown_grace: Duration,
    shared: Shared,
}

impl Gateway {
    /// The public gRPC API's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// `http://` (or, with `[tls.grpc]`, `https://`) URL of the public
    /// gRPC API, for tonic clients.
    pub fn grpc_url(&self) -> String {
        let scheme = if self.tls.grpc.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.grpc_addr)
    }

    /// The HTTP listener's address (webhook, metrics, health).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The admin listener's address, when an admin token is configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The embedded sandbox, when no upstream is configured.
    pub fn sandbox(&self) -> Option<&SandboxHandle> {
        self.sandbox.as_ref()
    }

    /// The embedded sandbox, mutably (to stop one of its channels).
    pub fn sandbox_mut(&mut self) -> Option<&mut SandboxHandle> {
        self.sandbox.as_mut()
    }

    /// The 3D channel router.
    pub fn router(&self) -> &Arc<ChannelRouter> {
        &self.router
    }

    /// The journey event hub (watchers, directory).
    pub fn hub(&self) -> &JourneyHub {
        &self.hub
    }

    /// The journey core (credentials, REST client).
    pub fn core(&self) -> &JourneyCore {
        &self.core
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Re-reads the listeners' certificates, then the configuration file,
    /// and applies what can change at run time: certificates (served from
    /// the next connection on) and the channel set. Connections, bindings
    /// and calls in flight are kept.
    pub async fn reload(&self) -> Result<(), StartError> {
        self.reload_tls()?;
        let config = Config::load(self.config_path.as_deref())?;
        self.reload_from(&config)
    }

    /// Re-reads every TLS listener's certificate, key and client CA files
    /// (the paths the gateway started with). A listener whose files do not
    /// load keeps its running certificate, and the error is returned.
    pub fn reload_tls(&self) -> Result<(), StartError> {
        let mut failed = None;
        for tls in self.tls.all() {
            if let Err(e) = tls.reload() {
                tracing::error!(error = %e, "TLS certificate reload failed; keeping the running one");
                failed = Some(e);
            }
        }
        match failed {
            Some(e) => Err(e.into()),
            None => {
                if self.tls.all().next().is_some() {
                    tracing::info!("TLS certificates reloaded");
                }
                Ok(())
            }
        }
    }

    /// Applies `config`'s channels, as [`Gateway::reload`] does. With no
    /// `[[channels]]`, the channels the gateway started with come back
    /// (on the embedded sandbox, with `config`'s `[embedded_channels]`).
    pub fn reload_from(&self, config: &Config) -> Result<(), StartError> {
        let specs = match (&self.sandbox, config.channels.is_empty()) {
            (_, false) => config.channels.clone(),
            (Some(sandbox), true) => embedded::channels(sandbox, config),
            (None, true) => self.embedded_channels.clone(),
        };
        let summary = self.router.reload(specs)?;
        tracing::info!(?summary, "channels reloaded");
        Ok(())
    }

    /// The shared state (in memory, or the fleet's on Redis).
    pub fn shared_state(&self) -> &Shared {
        &self.shared
    }

    /// Reports NOT_SERVING on gRPC health and `/healthz` while still
    /// serving: the first step of [`Gateway::shutdown`], for load balancers
    /// to move traffic away. Idempotent.
    pub async fn begin_drain(&self) {
        if !self.ready.send_replace(false) {
            return;
        }
        self.metrics.set_draining(true);
        for service in [
            "",
            "idgate.v1.JourneyService",
            "idgate.v1.LivenessService",
            "idgate.v1.DocumentService",
        ] {
            self.health
                .set_service_status(service, tonic_health::ServingStatus::NotServing)
                .await;
        }
        tracing::info!(
            drain_delay_secs = self.drain_delay.as_secs(),
            "draining: health reports NOT_SERVING"
        );
    }

    /// Drains and stops: NOT_SERVING at once, calls still served for the
    /// drain delay; then no new connections, GOAWAY on open ones, open
    /// `WatchJourney` streams ended with `UNAVAILABLE` / `SHUTTING_DOWN`;
    /// calls in flight get the shutdown grace to finish, then every
    /// connection left is closed. Returns within drain delay + grace (plus
    /// the embedded sandbox's own stop).
    pub async fn shutdown(self) {
        self.begin_drain().await;
        tokio::time::sleep(self.drain_delay).await;
        let _ = self.stop.send(true);
        // Open WatchJourney streams would hold up the graceful shutdown.
        self.hub.close();
        self.shared.stop();
        let listeners = futures_util::future::join_all(self.tasks);
        tokio::pin!(listeners);
        if tokio::time::timeout(self.shutdown_grace, &mut listeners)
            .await
            .is_err()
        {
            tracing::warn!(
                grace_secs = self.shutdown_grace.as_secs(),
                "shutdown grace over: closing the connections still open"
            );
            for kill in &self.kill_switches {
                kill.kill();
            }
            // Closed connections end their tasks at once; never hang on one.
            let _ = tokio::time::timeout(Duration::from_secs(1), listeners).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.hub.tasks_finished()).await;
        if let Some(sandbox) = self.sandbox {
            sandbox.shutdown().await;
        }
    }
}

/// Starts the gateway described by `config`.
pub async fn start(config: Config) -> Result<Gateway, StartError> {
    start_with(config, StartOptions::default()).await
}

/// Reads journey results for the watchers, through the core.
struct CoreResults {
    core: JourneyCore,
    timeout: Duration,
}

impl ResultSource for CoreResults {
    async fn fetch(
        &self,
        appkey: &Appkey,
    ) -> Result<crate::proto::v1::JourneyResult, crate::Error> {
        self.core
            .journey_result(&CallContext::with_timeout(self.timeout), appkey)
            .await
    }
}

/// Starts the gateway with `options`.
pub async fn start_with(config: Config, options: StartOptions) -> Result<Gateway, StartError> {
    telemetry::propagation::install_propagator();
    let grpc_listener = listeners::bind_shared("grpc", config.listen.grpc)?;
    let http_listener = listeners::bind("http", config.listen.http).await?;
    let grpc_addr = listeners::local("grpc", &grpc_listener, config.listen.grpc)?;
    let http_addr = listeners::local("http", &http_listener, config.listen.http)?;

    let tls = ListenerTlsSet::load(&config.tls)?;
    let mut webhook = config.webhook.resolve_unchecked()?;
    let scheme = if tls.http.is_some() { "https" } else { "http" };
    let webhook_url = format!("{scheme}://{http_addr}{}", webhook.path);
    let up = upstream::resolve(&config, &mut webhook, webhook_url, options.sandbox_clock).await?;

    let metrics = Metrics::new(up.channels.iter().map(|c| c.name.clone()));
    let profiles = up.operators.iter().map(|o| o.name.clone()).collect();
    let client = UpstreamClient::with_metrics(&up.config, metrics.clone())?;
    let credentials = Credentials::new(
        client.clone(),
        up.operators,
        CredentialPolicy::from_config(&up.config),
    );
    let core = JourneyCore::new(
        client.clone(),
        credentials,
        Duration::from_secs(up.config.appkey_ttl_secs),
    );
    let shared = fleet::shared_state(&config, &webhook, &metrics)?;
    let router = Arc::new(
        ChannelRouter::new(
            up.channels,
            &config.routing,
            Arc::new(HttpTransport::new(client)),
        )?
        .with_shared(shared.bindings.clone(), shared.control.clone())
        .with_metrics(metrics.clone()),
    );
    let hub = JourneyHub::with_shared(
        CoreResults {
            core: core.clone(),
            timeout: up.config.timeout(),
        },
        WatchSettings::from(&config.watch),
        shared.directory.clone(),
    );

    let (stop, stopped) = watch::channel(false);
    let (ready, readiness) = watch::channel(true);
    let mut tasks = Vec::new();
    let serving = &config.serving;
    let budget = connection_budget(&config, &router, &up.config);
    let gate = |listener: &'static str| {
        connections::ConnectionGate::new(
            listener,
            connections::ConnectionLimits {
                max_connections: serving.max_connections,
                idle_timeout: (serving.idle_timeout_secs > 0)
                    .then(|| Duration::from_secs(serving.idle_timeout_secs)),
                tcp_keepalive: (serving.tcp_keepalive_secs > 0)
                    .then(|| Duration::from_secs(serving.tcp_keepalive_secs)),
            },
            budget.clone(),
            metrics.clone(),
        )
    };
    let mut kill_switches = Vec::new();
    if shared.is_fleet() {
        // The fleet's control state applies before any 3D call is served.
        tasks.push(fleet::join(&shared, &config, &router, &hub, stopped.clone()).await);
    }

    let guard = Guard::new(
        &config.idempotency,
        &config.budgets,
        profiles,
        shared.guard.clone(),
        metrics.clone(),
    );
    let api = listeners::PublicApi {
        journeys: JourneyApi::new(core.clone(), hub.clone())
            .with_telemetry(config.telemetry.clone())
            .with_guard(guard.clone()),
        liveness: LivenessApi::new(core.clone(), router.clone(), config.limits.clone())
            .with_guard(guard.clone()),
        documents: DocumentApi::new(core.clone(), config.limits.clone()).with_guard(guard),
        max_message_bytes: config.limits.max_grpc_message_bytes,
    };
    // Server spans, RPC metrics and the access log of both gRPC listeners.
    let grpc_layer =
        GrpcServerLayer::new(metrics.clone()).with_access_log(config.telemetry.access_log);
    let grpc_gate = gate("grpc");
    kill_switches.push(grpc_gate.kill_switch());
    let (public, health) = listeners::serve_public(
        listeners::Accept {
            listener: grpc_listener,
            gate: grpc_gate,
            tls: tls.grpc.clone(),
        },
        api,
        serving,
        grpc_layer.clone(),
        metrics.clone(),
        stopped.clone(),
    )
    .await?;
    tasks.push(public);

    let receiver = if webhook.basic.is_some()
        || webhook.hmac.is_some()
        || webhook.allow_unauthenticated
    {
        Some(WebhookReceiver::with_shared(
            webhook,
            hub.clone(),
            shared.dedupe.clone(),
        )?)
    } else {
        tracing::warn!(
            "webhook receiver disabled: configure [webhook] basic_user/basic_password_env or hmac_secret_env; WatchJourney falls back to reading the result"
        );
        None
    };
    let http_gate = gate("http");
    kill_switches.push(http_gate.kill_switch());
    tasks.push(listeners::serve_http(
        listeners::Accept {
            listener: http_listener,
            gate: http_gate,
            tls: tls.http.clone(),
        },
        receiver,
        router.clone(),
        hub.clone(),
        serving,
        metrics.clone(),
        readiness,
        stopped.clone(),
    ));

    // Admin listener, only with a token.
    let admin_addr = match config.admin.resolve_token() {
        Ok(token) => {
            let listener = listeners::bind("admin", config.listen.admin).await?;
            let addr = listeners::local("admin", &listener, config.listen.admin)?;
            let admin_gate = gate("admin");
            kill_switches.push(admin_gate.kill_switch());
            tasks.push(listeners::serve_admin(
                listeners::Accept {
                    listener,
                    gate: admin_gate,
                    tls: tls.admin.clone(),
                },
                router.clone(),
                &token,
                serving,
                grpc_layer,
                stopped,
            )?);
            Some(addr)
        }
        Err(e @ ConfigError::MissingSecret { .. }) => {
            tracing::warn!(reason = %e, "admin listener disabled: no admin token");
            None
        }
        Err(e) => return Err(e.into()),
    };

    tracing::info!(
        grpc = %grpc_addr,
        http = %http_addr,
        admin = ?admin_addr,
        "idgate listening"
    );
    Ok(Gateway {
        grpc_addr,
        http_addr,
        admin_addr,
        sandbox: up.sandbox,
        router,
        hub,
        core,
        metrics,
        config_path: options.config_path,
        embedded_channels: up.embedded_channels,
        tls,
        stop,
        tasks,
        ready,
        health,
        kill_switches,
        drain_delay: Duration::from_secs(config.serving.drain_delay_secs),
        shutdown_grace: Duration::from_secs(config.serving.shutdown_grace_secs),
        shared,
    })
}
