//! Assembles listeners and services into a running gateway.
//!
//! Three listeners: the public gRPC API (with health and reflection), the
//! HTTP listener (webhook receiver, `/metrics`, `/healthz`) and the admin
//! gRPC listener (`ChannelAdminService`, behind a bearer token). With no
//! `[upstream]` configured, the sandbox is started in process on loopback
//! and the gateway is pointed at it.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use base64::Engine as _;

use axum::{Router, extract::State, response::Response, routing::get, serve::ListenerExt as _};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};
use tonic::transport::Server;

use crate::net::{incoming, no_delay};

use crate::{
    api::{DocumentApi, JourneyApi, LivenessApi},
    channels::{self, ChannelRouter, ChannelSpec, HttpTransport},
    config::{Config, ConfigError, OperatorProfile, UpstreamConfig},
    domain::{Appkey, Password},
    events::{self, JourneyHub, ResultSource, WatchSettings, WebhookReceiver},
    journey::JourneyCore,
    proto::{
        FILE_DESCRIPTOR_SET,
        v1::{
            document_service_server::{DocumentService, DocumentServiceServer},
            journey_service_server::{JourneyService, JourneyServiceServer},
            liveness_service_server::{LivenessService, LivenessServiceServer},
        },
    },
    sandbox::{self, Clock, Sandbox, SandboxHandle, SystemClock},
    telemetry::{
        self, GrpcServerLayer, HttpServerLayer, Metrics,
        metrics::{ChannelSessionCounts, WatchCounts},
    },
    upstream::{CallContext, CredentialPolicy, Credentials, UpstreamClient},
};

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
    /// Reflection could not load the descriptors.
    #[error("server reflection: {0}")]
    Reflection(String),
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
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Gateway {
    /// The public gRPC API's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// `http://` URL of the public gRPC API, for tonic clients.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc_addr)
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

    /// Re-reads the configuration file and applies what can change at run
    /// time: the channel set. Bindings and calls in flight are kept.
    pub async fn reload(&self) -> Result<(), StartError> {
        let config = Config::load(self.config_path.as_deref())?;
        self.reload_from(&config)
    }

    /// Applies `config`'s channels, as [`Gateway::reload`] does. With no
    /// `[[channels]]`, the channels the gateway started with come back
    /// (on the embedded sandbox, with `config`'s `[embedded_channels]`).
    pub fn reload_from(&self, config: &Config) -> Result<(), StartError> {
        let specs = match (&self.sandbox, config.channels.is_empty()) {
            (_, false) => config.channels.clone(),
            (Some(sandbox), true) => sandbox_channels(sandbox, config),
            (None, true) => self.embedded_channels.clone(),
        };
        let summary = self.router.reload(specs)?;
        tracing::info!(?summary, "channels reloaded");
        Ok(())
    }

    /// Stops accepting calls, ends open `WatchJourney` streams with
    /// `UNAVAILABLE` / `SHUTTING_DOWN`, lets other calls in flight finish,
    /// and stops the embedded sandbox.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        // Open WatchJourney streams would hold up the graceful shutdown.
        self.hub.close();
        for task in self.tasks {
            let _ = task.await;
        }
        self.hub.tasks_finished().await;
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

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

fn local(what: &'static str, l: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, StartError> {
    l.local_addr()
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// The upstream side: where the REST service is and who logs in to it.
struct Upstream {
    config: UpstreamConfig,
    operators: Vec<OperatorProfile>,
    channels: Vec<ChannelSpec>,
    embedded_channels: Vec<ChannelSpec>,
    sandbox: Option<SandboxHandle>,
}

/// A random secret for the embedded sandbox's webhook credentials.
fn random_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

async fn upstream_side(
    config: &Config,
    webhook: &mut events::WebhookSettings,
    webhook_url: String,
    clock: Option<Arc<dyn Clock>>,
) -> Result<Upstream, StartError> {
    if let Some(up) = &config.upstream {
        let operators = config
            .operators
            .iter()
            .map(|o| o.resolve())
            .collect::<Result<Vec<_>, _>>()?;
        if operators.is_empty() {
            return Err(ConfigError::Invalid(
                "[upstream] is configured but no [[operators]] profile is".to_owned(),
            )
            .into());
        }
        let channels = if config.channels.is_empty() {
            vec![ChannelSpec {
                session_token_path: up.paths.session_token_3d.clone(),
                liveness_path: up.paths.liveness_3d.clone(),
                timeout_ms: up.timeout_ms,
                ..ChannelSpec::new("primary", up.base_url.clone(), 0)
            }]
        } else {
            config.channels.clone()
        };
        return Ok(Upstream {
            config: up.clone(),
            operators,
            channels: channels.clone(),
            embedded_channels: channels,
            sandbox: None,
        });
    }

    // No upstream: the sandbox, in process, with the gateway as its
    // webhook receiver.
    let mut sb = config.sandbox.clone();
    sb.webhook.url = Some(webhook_url);
    if webhook.basic.is_none() && webhook.hmac.is_none() {
        let password = random_secret();
        webhook.basic = Some(events::config::BasicCredentials {
            user: "sandbox".to_owned(),
            password: Password::new(password.clone()),
        });
        sb.webhook.basic_user = Some("sandbox".to_owned());
        sb.webhook.basic_password = Some(password);
    } else {
        // The embedded sandbox is the sender: unless its own section says
        // otherwise, it presents what the receiver was configured to expect
        // (otherwise every notice is refused and watchers wait for the
        // fallback).
        if let Some(basic) = webhook
            .basic
            .as_ref()
            .filter(|_| sb.webhook.basic_user.is_none())
        {
            sb.webhook.basic_user = Some(basic.user.clone());
            sb.webhook.basic_password = Some(basic.password.expose().to_owned());
        }
        if let Some(hmac) = webhook
            .hmac
            .as_ref()
            .filter(|_| sb.webhook.signing_secret.is_none())
        {
            sb.webhook.signing_secret = Some(format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(hmac.key())
            ));
        }
    }
    let operator =
        sb.operators.first().cloned().ok_or_else(|| {
            ConfigError::Invalid("[sandbox] needs at least one operator".to_owned())
        })?;
    let clock = clock.unwrap_or_else(|| Arc::new(SystemClock));
    tracing::info!(
        "no [upstream] configured: starting the embedded sandbox (a reference implementation of the REST service, not the real one)"
    );
    let handle = Sandbox::start(sb, clock).await?;
    let upstream = UpstreamConfig {
        base_url: handle.base_url(),
        result_base_url: handle.result_base_url(),
        ..UpstreamConfig::default()
    };
    let embedded = sandbox_channels(&handle, config);
    let channels = if config.channels.is_empty() {
        embedded.clone()
    } else {
        config.channels.clone()
    };
    tracing::info!(
        base_url = %handle.base_url(),
        result_base_url = %handle.result_base_url(),
        channels = channels.len(),
        "gateway upstream is the embedded sandbox"
    );
    Ok(Upstream {
        config: upstream,
        operators: vec![OperatorProfile {
            name: "sandbox".to_owned(),
            login: operator.login,
            password: Password::new(operator.password),
        }],
        channels,
        embedded_channels: embedded,
        sandbox: Some(handle),
    })
}

/// The embedded sandbox's channels, in its order, with the call settings
/// of `[embedded_channels]`.
fn sandbox_channels(handle: &SandboxHandle, config: &Config) -> Vec<ChannelSpec> {
    handle
        .channels()
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            config
                .embedded_channels
                .spec(c.name, c.base_url, i32::try_from(i).unwrap_or(i32::MAX))
        })
        .collect()
}

/// Starts the gateway with `options`.
pub async fn start_with(config: Config, options: StartOptions) -> Result<Gateway, StartError> {
    telemetry::propagation::install_propagator();
    let grpc_listener = bind("grpc", config.listen.grpc).await?;
    let http_listener = bind("http", config.listen.http).await?;
    let grpc_addr = local("grpc", &grpc_listener, config.listen.grpc)?;
    let http_addr = local("http", &http_listener, config.listen.http)?;

    let mut webhook = config.webhook.resolve_unchecked()?;
    let webhook_url = format!("http://{http_addr}{}", webhook.path);
    let up = upstream_side(&config, &mut webhook, webhook_url, options.sandbox_clock).await?;

    let metrics = Metrics::new(up.channels.iter().map(|c| c.name.clone()));
    let client = UpstreamClient::with_metrics(&up.config, metrics.clone())?;
    let credentials = Credentials::new(
        client.clone(),
        up.operators,
        CredentialPolicy::from_config(&up.config),
    );
    let core = JourneyCore::new(
        client.clone(),
        credentials,
        config.limits.clone(),
        Duration::from_secs(up.config.appkey_ttl_secs),
    );
    let router = Arc::new(ChannelRouter::new(
        up.channels,
        &config.routing,
        Arc::new(HttpTransport::new(client)),
    )?);
    let hub = JourneyHub::new(
        CoreResults {
            core: core.clone(),
            timeout: up.config.timeout(),
        },
        WatchSettings::from(&config.watch),
    );

    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();

    // Public gRPC API.
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<JourneyServiceServer<JourneyApi>>()
        .await;
    health_reporter
        .set_serving::<LivenessServiceServer<LivenessApi>>()
        .await;
    health_reporter
        .set_serving::<DocumentServiceServer<DocumentApi>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| StartError::Reflection(e.to_string()))?;
    let max = config.limits.max_grpc_message_bytes;
    let journeys = serve_limits(
        JourneyServiceServer::new(
            JourneyApi::new(core.clone(), hub.clone()).with_telemetry(config.telemetry.clone()),
        ),
        max,
    );
    let liveness = serve_limits(
        LivenessServiceServer::new(LivenessApi::new(core.clone(), router.clone())),
        max,
    );
    let documents = serve_limits(
        DocumentServiceServer::new(DocumentApi::new(core.clone())),
        max,
    );
    let grpc = Server::builder()
        .layer(GrpcServerLayer::new(metrics.clone()))
        .add_service(health)
        .add_service(reflection)
        .add_service(journeys)
        .add_service(liveness)
        .add_service(documents)
        .serve_with_incoming_shutdown(incoming(grpc_listener), wait(stopped.clone()));
    tasks.push(tokio::spawn(async move {
        if let Err(e) = grpc.await {
            tracing::error!(error = %e, "gRPC listener failed");
        }
    }));

    // HTTP listener: webhook, metrics, health.
    let mut http = Router::new().route("/healthz", get(|| async { "ok" }));
    let receiver = if webhook.basic.is_some()
        || webhook.hmac.is_some()
        || webhook.allow_unauthenticated
    {
        let receiver = WebhookReceiver::new(webhook, hub.clone())?;
        http = http.merge(receiver.router());
        Some(receiver)
    } else {
        tracing::warn!(
            "webhook receiver disabled: configure [webhook] basic_user/basic_password_env or hmac_secret_env; WatchJourney falls back to reading the result"
        );
        None
    };
    let scrape = Scrape {
        metrics: metrics.clone(),
        router: router.clone(),
        receiver,
        hub: hub.clone(),
    };
    http = http.route("/metrics", get(scrape_metrics).with_state(scrape));
    let http = http.layer(HttpServerLayer::with_metrics(metrics.clone()));
    let mut http_stop = stopped.clone();
    tasks.push(tokio::spawn(async move {
        let served = axum::serve(http_listener.tap_io(no_delay), http)
            .with_graceful_shutdown(async move {
                let _ = http_stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "HTTP listener failed");
        }
    }));

    // Admin listener, only with a token.
    let admin_addr = match config.admin.resolve_token() {
        Ok(token) => {
            let listener = bind("admin", config.listen.admin).await?;
            let addr = local("admin", &listener, config.listen.admin)?;
            let admin = Server::builder()
                .layer(GrpcServerLayer::new(metrics.clone()))
                .add_service(channels::admin_service(router.clone(), &token))
                .serve_with_incoming_shutdown(incoming(listener), wait(stopped));
            tasks.push(tokio::spawn(async move {
                if let Err(e) = admin.await {
                    tracing::error!(error = %e, "admin listener failed");
                }
            }));
            Some(addr)
        }
        Err(e) => {
            tracing::warn!(reason = %e, "admin listener disabled: no admin token");
            None
        }
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
        stop,
        tasks,
    })
}

/// Applies the message-size limits to a generated service server.
fn serve_limits<S>(server: S, max: usize) -> S
where
    S: MessageLimits,
{
    server.limits(max)
}

/// The generated servers' size setters, behind one name.
trait MessageLimits {
    fn limits(self, max: usize) -> Self;
}

macro_rules! message_limits {
    ($($server:ident<$svc:ident>),*) => {$(
        impl<T: $svc> MessageLimits for $server<T> {
            fn limits(self, max: usize) -> Self {
                self.max_decoding_message_size(max).max_encoding_message_size(max)
            }
        }
    )*};
}

message_limits!(
    JourneyServiceServer<JourneyService>,
    LivenessServiceServer<LivenessService>,
    DocumentServiceServer<DocumentService>
);

async fn wait(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// What `/metrics` reads at scrape time.
#[derive(Clone)]
struct Scrape {
    metrics: Metrics,
    router: Arc<ChannelRouter>,
    receiver: Option<WebhookReceiver>,
    hub: JourneyHub,
}

/// Brings the counters kept by the router, the webhook receiver and the
/// journey hub into the registry, then encodes it.
async fn scrape_metrics(State(s): State<Scrape>) -> Response {
    for ch in s.router.snapshot().channels {
        s.metrics.sync_channel_failovers(&ch.name, ch.failovers);
        s.metrics.set_channel_circuit_state(&ch.name, ch.circuit);
        s.metrics.sync_channel_sessions(
            &ch.name,
            ChannelSessionCounts {
                started: ch.sessions_started,
                failed: ch.session_failures,
                contingency: ch.contingency_answers,
            },
        );
    }
    let hub = s.hub.stats();
    s.metrics.sync_watch(WatchCounts {
        journeys: hub.journeys,
        watchers: hub.watchers,
        result_reads: hub.result_reads,
        notice_timeouts: hub.notice_timeouts,
    });
    if let Some(r) = &s.receiver {
        let stats = r.stats();
        s.metrics.sync_webhooks("received", stats.received);
        s.metrics.sync_webhooks("accepted", stats.accepted);
        s.metrics.sync_webhooks("duplicate", stats.duplicates);
        for reason in events::RejectReason::ALL {
            s.metrics
                .sync_webhooks(reason.metric_label(), stats.rejected(reason));
        }
    }
    telemetry::metrics_handler(State(s.metrics)).await
}
