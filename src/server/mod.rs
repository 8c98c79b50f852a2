//! Assembles listeners and services into a running gateway.
//!
//! [`start_with`] reads as the order things happen in: the preflight
//! (what a start refuses before its first socket, the same function
//! `idgate check` runs), bind the sockets, resolve the upstream (the
//! configured one, or the embedded sandbox), build the serving runtime
//! and the shared state, build the services, then start the listeners on
//! them.
//!
//! | Module        | Job                                                                 |
//! |---------------|---------------------------------------------------------------------|
//! | `runtime`     | the serving runtime, Envoy's worker model: the public listener's threads, their heartbeat, their idle poller, their upstream pools; nothing outside it knows threads exist |
//! | `listeners`   | binding the sockets; serving the public and admin gRPC listeners; the HTTP listener's accept loop (webhook receiver, `/healthz`); `/metrics` synced at scrape time |
//! | `auth`        | who may call the public listener (`[auth]`, `[[callers]]`); refuses to start open in front of a real upstream |
//! | `edge`        | the public gRPC edge: in-flight caps, request-body timeout, caller-fault statuses; tells the runtime's hook of each call |
//! | `connections` | every accepted connection, bounded: caps, descriptor budget, idle timeout, maximum age, kill switch |
//! | `stream_age`  | `WatchJourney` streams end `CONNECTION_AGED` when their connection ages |
//! | `setup`       | each listener's TLS, and the process-wide connection budget          |
//! | `preflight`   | what a start reads and refuses before its first socket: one function for `serve` and `idgate check` |
//! | `check`       | `idgate check`: the preflight, and the JWKS file and caller table without a fetch |
//! | `upstream`    | the configured REST service and its operators, or                   |
//! | `embedded`    | with no `[upstream]`, the sandbox started in process on loopback    |
//! | `shared_state` | the stores beyond a call: on Redis with `[cluster]`, else on the embedded store (`[store]`) or in memory |
//! | `replica`     | joining the fleet: what the other replicas send, figures added to the fleet's |
//! | `reflection`  | gRPC server reflection of what each listener serves                 |
//! | `gateway`     | [`Gateway`]: what the listeners need, grouped; drain, stop          |
//! | `reload`      | SIGHUP, all or nothing: every part checked, then every part swapped in |
//!
//! Stopping ([`Gateway::shutdown`]) drains: health says NOT_SERVING at
//! once while calls are still served for `drain_delay_secs`, then the
//! listeners stop accepting and send GOAWAY, calls in flight get
//! `shutdown_grace_secs` to finish, and whatever is left is closed.

mod callers;
mod check;
mod connections;
mod edge;
pub(crate) mod gateway;
mod launch;
mod listeners;
mod max_age;
mod notices;
mod preflight;
mod reflection;
mod reload;
mod replica;
mod results;
mod rollout;
mod runtime;
mod setup;
mod shared_state;
mod stream_age;
mod upstream;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use crate::{
    channels::{self, ChannelRouter, HttpTransport},
    cluster::Shared,
    config::{Config, ConfigError},
    events::{JourneyWatches, WatchSettings, WebhookSettings},
    journey::{CredentialPolicy, Credentials, JourneyCore, Journeys},
    sandbox::{self, Clock},
    spend::Spend,
    telemetry::{self, Metrics, usage::Usage},
    tls::TlsError,
    upstream::{HttpClientFactory, UpstreamClient},
    usage::UsageBook,
};
use gateway::{Reloadable, Services};
use launch::Launch;
use listeners::Bound;
use preflight::Preflight;
use results::CoreResults;
use runtime::ServingRuntime;
use setup::ListenerTlsSet;

pub use check::{Checked, check};
pub use gateway::Gateway;

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
    /// The embedded store (`[store]`) could not be opened: the error
    /// names its path and the cause. Never a fallback to memory.
    #[error("[store]: {0}")]
    Store(#[from] crate::cluster::StoreError),
    /// Caller authentication could not be set up (`[auth]`).
    #[error("[auth]: {0}")]
    Auth(#[from] crate::auth::AuthSetupError),
}

/// What tests and embedders may set beyond the configuration.
#[derive(Default)]
pub struct StartOptions {
    /// The configuration file, re-read on [`Gateway::reload`].
    pub config_path: Option<PathBuf>,
    /// The embedded sandbox's clock (tests pass a `ManualClock`).
    pub sandbox_clock: Option<Arc<dyn Clock>>,
    /// The counters of span export, for `/metrics`
    /// ([`crate::telemetry::TelemetryExporters::span_export_stats`]).
    pub span_export: Option<crate::telemetry::SpanExportStats>,
}

/// Starts the gateway described by `config`.
pub async fn start(config: Config) -> Result<Gateway, StartError> {
    start_with(config, StartOptions::default()).await
}

/// Starts the gateway with `options`.
pub async fn start_with(config: Config, options: StartOptions) -> Result<Gateway, StartError> {
    telemetry::propagation::install_propagator();
    let Preflight {
        tls,
        webhook,
        upstream: configured,
        admin_token,
        state,
    } = preflight::preflight(&config)?;
    let sockets = bind_sockets(&config).await?;
    let (mut up, webhook) = resolve_upstream(
        &config,
        configured,
        webhook,
        &tls,
        sockets.http.addr,
        options.sandbox_clock,
    )
    .await?;
    let metrics = Metrics::with_span_export(
        up.channels.iter().map(|c| c.name.clone()),
        options.span_export.as_ref(),
    );
    setup::report_plaintext_hops(&config, &metrics, admin_token.is_ok());
    let mut runtime = ServingRuntime::new(
        &config.serving,
        &metrics,
        HttpClientFactory::new(&up.config)?,
    );
    let shared = shared_state::build(&config, state, &webhook, &metrics)?;
    if let Some(fleet) = &shared.fleet {
        runtime.on_thread_start(fleet.thread_setup());
    }
    let auth = callers::authentication(&config, &metrics).await?;
    let notices = notices::receives_notices(&webhook);
    let services = build_services(&config, &mut up, &runtime, shared, metrics, auth, notices)?;
    let mut launch = Launch::new(&config, &services, &up.config);
    launch.join_fleet(&config, &services).await;
    launch.run_rollouts(&services);
    let (mut addrs, health) = launch
        .spawn(&config, sockets, &tls, webhook, &services, &runtime)
        .await?;
    addrs.admin = launch
        .spawn_admin(&config, &tls, admin_token, &services)
        .await?;
    tracing::info!(
        grpc = %addrs.grpc,
        http = %addrs.http,
        admin = ?addrs.admin,
        "idgate listening"
    );
    services.metrics.set_config_applied_now();
    Ok(Gateway {
        addrs,
        services,
        reloadable: Reloadable {
            config_path: options.config_path,
            embedded_channels: up.embedded_channels,
            sandbox: up.sandbox,
            tls,
            reloading: std::sync::Mutex::new(()),
        },
        lifecycle: launch.finish(health, &config.serving),
    })
}

/// The public gRPC and HTTP sockets, bound before anything else starts.
pub(super) struct Sockets {
    grpc: Bound,
    http: Bound,
}

/// Binds the public gRPC listener (for the serving threads to share) and
/// the HTTP listener.
async fn bind_sockets(config: &Config) -> Result<Sockets, StartError> {
    Ok(Sockets {
        grpc: listeners::bind_shared("grpc", config.listen.grpc)?,
        http: listeners::bind("http", config.listen.http).await?,
    })
}

/// The upstream side (the `configured` REST service, or the embedded
/// sandbox told to send its notices to `http_addr`) and the `webhook`
/// settings it completed.
async fn resolve_upstream(
    config: &Config,
    configured: Option<upstream::Upstream>,
    mut webhook: WebhookSettings,
    tls: &ListenerTlsSet,
    http_addr: SocketAddr,
    clock: Option<Arc<dyn Clock>>,
) -> Result<(upstream::Upstream, WebhookSettings), StartError> {
    let scheme = if tls.http.is_some() { "https" } else { "http" };
    let webhook_url = format!("{scheme}://{http_addr}{}", webhook.path);
    let up = match configured {
        Some(up) => up,
        None => upstream::embedded::start(config, &mut webhook, webhook_url, clock).await?,
    };
    Ok((up, webhook))
}

/// The REST client on the runtime's pools, and what is built on it: the
/// journey core, the channel router, the journey watches.
fn build_services(
    config: &Config,
    up: &mut upstream::Upstream,
    runtime: &ServingRuntime,
    shared: Shared,
    metrics: Metrics,
    auth: Arc<crate::auth::Authenticator>,
    notices_expected: bool,
) -> Result<Services, StartError> {
    let client = UpstreamClient::with_pools(&up.config, metrics.clone(), runtime.http_pools())?;
    let usage = Usage::new(metrics.clone());
    preset_callers(config, &metrics);
    let spend = Spend::new(
        &config.idempotency,
        &config.budgets,
        shared.spend.clone(),
        usage.clone(),
    );
    let book = Arc::new(UsageBook::new(
        usage.clone(),
        shared.usage.clone(),
        &config.usage,
    ));
    let credentials = Credentials::new(
        client.clone(),
        std::mem::take(&mut up.operators),
        CredentialPolicy::from_config(&up.config),
    );
    let core = JourneyCore::new(
        client.clone(),
        credentials,
        Duration::from_secs(up.config.appkey_ttl_secs),
    );
    let journeys = Journeys::new(
        shared.journeys.clone(),
        config.journeys.accept_foreign_appkeys,
        spend,
        core.clone(),
        usage.clone(),
    );
    let mut router = ChannelRouter::new(
        std::mem::take(&mut up.channels),
        &config.routing,
        Arc::new(HttpTransport::new(client)),
    )?
    .with_bindings(shared.session_bindings())
    .with_metrics(metrics.clone());
    if let Some(fleet) = &shared.fleet {
        router = router.with_fleet(fleet);
    }
    let router = Arc::new(router);
    let watches = JourneyWatches::with_stores(
        CoreResults {
            core: core.clone(),
            timeout: up.config.timeout(),
        },
        WatchSettings {
            notices_expected,
            read_timeout: up.config.timeout(),
            ..WatchSettings::from(&config.watch)
        },
        shared.journeys.clone(),
        shared.progress.clone(),
        shared.fleet.as_ref().map(|f| f.read_turns().clone()),
    );
    let (rollouts, prober) = rollout::services(config, &router, &core, &shared, &metrics);
    Ok(Services {
        router,
        watches,
        core,
        journeys,
        usage,
        book,
        metrics,
        shared,
        auth,
        rollouts,
        prober,
    })
}

/// Every configured caller's series present at zero from the start (the
/// open caller's without `[auth]`), so dashboards list a caller before
/// its first call.
fn preset_callers(config: &Config, metrics: &Metrics) {
    match config.auth.is_some() {
        true => config.callers.iter().for_each(|c| {
            metrics.caller(&c.name);
        }),
        false => drop(metrics.caller(crate::domain::Caller::OPEN_NAME)),
    }
}
