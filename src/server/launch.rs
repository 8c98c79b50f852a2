//! The launch: what the listeners start with (the stop and readiness
//! signals, the connection limits their gates enforce), each listener
//! started with what it serves (the public API's services in their one
//! context, the HTTP app, the admin service), and what the gateway keeps
//! of them to drain and stop.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    sync::{Semaphore, watch},
    task::JoinHandle,
};
use tonic_health::server::HealthReporter;

use super::{
    Sockets, StartError,
    connections::{ConnectionGate, ConnectionLimits, KillSwitch},
    gateway::{Addresses, Lifecycle, Services},
    listeners::{self, Accept, Bound, PublicApi, Scrape},
    max_age, notices, replica,
    setup::{ListenerTlsSet, connection_budget},
};
use crate::{
    api::{ApiContext, ChannelAdmin, DocumentApi, JourneyApi, LivenessApi},
    config::{Config, ConfigError, ServingConfig},
    domain::AdminToken,
    events::WebhookSettings,
    server::runtime::ServingRuntime,
    telemetry::{GrpcServerLayer, Metrics},
    tls::ServerTls,
};

/// What the listeners start with: the stop and readiness signals, the
/// connection limits their gates enforce, and where their tasks and kill
/// switches are kept for the stop.
pub(super) struct Launch {
    stop: watch::Sender<bool>,
    ready: watch::Sender<bool>,
    limits: ConnectionLimits,
    budget: Option<Arc<Semaphore>>,
    metrics: Metrics,
    tasks: Vec<JoinHandle<()>>,
    kill_switches: Vec<Arc<KillSwitch>>,
}

impl Launch {
    pub(super) fn new(
        config: &Config,
        services: &Services,
        upstream: &crate::config::UpstreamConfig,
    ) -> Self {
        let serving = &config.serving;
        let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        Self {
            stop: watch::channel(false).0,
            ready: watch::channel(true).0,
            limits: ConnectionLimits {
                max_connections: serving.max_connections,
                idle_timeout: secs(serving.idle_timeout_secs),
                tcp_keepalive: secs(serving.tcp_keepalive_secs),
                max_age: max_age::MaxAge::from_secs(
                    serving.max_connection_age_secs,
                    serving.max_connection_age_grace_secs,
                ),
            },
            budget: connection_budget(config, &services.router, upstream),
            metrics: services.metrics.clone(),
            tasks: Vec::new(),
            kill_switches: Vec::new(),
        }
    }

    /// Turns true when the listeners must stop.
    fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Where `listener` accepts: `socket` behind a gate of its own (whose
    /// kill switch the stop keeps), with `tls`.
    fn accept(
        &mut self,
        listener: &'static str,
        socket: Bound,
        tls: &Option<Arc<ServerTls>>,
    ) -> Accept {
        let mut limits = self.limits.clone();
        if listener == "http" {
            // HTTP/1 has no GOAWAY, and webhook notices and scrapes are
            // short: the age is for gRPC callers that stay connected.
            limits.max_age = None;
        }
        let gate = ConnectionGate::new(listener, limits, self.budget.clone(), self.metrics.clone());
        self.kill_switches.push(gate.kill_switch());
        Accept {
            listener: socket.listener,
            gate,
            tls: tls.clone(),
        }
    }

    /// Starts the usage book's flushes into its store and, in a fleet,
    /// relays what the other replicas send; the fleet's control state
    /// applies before any 3D call is served. One process has no fleet to
    /// join.
    pub(super) async fn join_fleet(&mut self, config: &Config, services: &Services) {
        self.tasks
            .push(tokio::spawn(services.book.clone().run(self.stopped())));
        let Some(fleet) = &services.shared.fleet else {
            return;
        };
        let relay = replica::join(
            fleet,
            config,
            &services.router,
            &services.watches,
            self.stopped(),
        );
        self.tasks.push(relay.await);
    }

    /// Runs the rollout loop of this replica until the gateway stops.
    pub(super) fn run_rollouts(&mut self, services: &Services) {
        let stopped = self.stopped();
        self.tasks
            .push(tokio::spawn(services.rollouts.clone().run(stopped)));
    }

    /// Starts the public gRPC and the HTTP listeners; returns where they
    /// listen (the admin listener is [`Launch::spawn_admin`]'s), and the
    /// public listener's health reporter (what the drain flips).
    pub(super) async fn spawn(
        &mut self,
        config: &Config,
        sockets: Sockets,
        tls: &ListenerTlsSet,
        webhook: WebhookSettings,
        services: &Services,
        runtime: &ServingRuntime,
    ) -> Result<(Addresses, HealthReporter), StartError> {
        let addrs = (sockets.grpc.addr, sockets.http.addr);
        let accept = self.accept("grpc", sockets.grpc, &tls.grpc);
        let api = public_api(config, services);
        let admission = api.admission.clone();
        let (public, health) = listeners::serve_public(
            accept,
            api,
            &config.serving,
            runtime,
            grpc_layer(config, services),
            services.metrics.clone(),
            self.stopped(),
        )
        .await?;
        self.tasks.push(public);

        let receiver = notices::webhook_receiver(webhook, services)?;
        let app = listeners::http_app(
            self.ready.subscribe(),
            receiver.as_ref(),
            Scrape {
                metrics: services.metrics.clone(),
                router: services.router.clone(),
                receiver: receiver.clone(),
                watches: services.watches.clone(),
                auth: services.auth.clone(),
                admission,
            },
            services.metrics.clone(),
            config.serving.http_max_in_flight,
        );
        let accept = self.accept("http", sockets.http, &tls.http);
        let http = listeners::serve_http(accept, app, &config.serving, self.stopped());
        self.tasks.push(http);

        let addrs = Addresses {
            grpc: addrs.0,
            http: addrs.1,
            admin: None,
        };
        Ok((addrs, health))
    }

    /// The admin listener, only with a token (judged by the preflight):
    /// bound, started, its address.
    pub(super) async fn spawn_admin(
        &mut self,
        config: &Config,
        tls: &ListenerTlsSet,
        admin_token: Result<AdminToken, ConfigError>,
        services: &Services,
    ) -> Result<Option<SocketAddr>, StartError> {
        let token = match admin_token {
            Ok(token) => token,
            Err(e) => {
                tracing::warn!(reason = %e, "admin listener disabled: no admin token");
                return Ok(None);
            }
        };
        if config.takes_admin_token_in_clear() {
            tracing::warn!(
                key = "listen.allow_plaintext_admin",
                "the admin token is taken without TLS on an admin listener other machines can reach: only behind a sidecar that terminates TLS"
            );
        }
        let socket = listeners::bind("admin", config.listen.admin).await?;
        let addr = socket.addr;
        let accept = self.accept("admin", socket, &tls.admin);
        self.tasks.push(listeners::serve_admin(
            accept,
            ChannelAdmin::with_rollouts(services.rollouts.clone(), services.prober.clone())
                .with_usage(services.book.clone()),
            &token,
            &config.serving,
            grpc_layer(config, services),
            services.metrics.clone(),
            self.stopped(),
        )?);
        Ok(Some(addr))
    }

    /// What the gateway keeps of the launch, to drain and stop.
    pub(super) fn finish(self, health: HealthReporter, serving: &ServingConfig) -> Lifecycle {
        Lifecycle {
            stop: self.stop,
            ready: self.ready,
            health,
            tasks: self.tasks,
            kill_switches: self.kill_switches,
            drain_delay: Duration::from_secs(serving.drain_delay_secs),
            shutdown_grace: Duration::from_secs(serving.shutdown_grace_secs),
        }
    }
}

/// Server spans, RPC metrics and the access log of both gRPC listeners.
fn grpc_layer(config: &Config, services: &Services) -> GrpcServerLayer {
    GrpcServerLayer::new(services.metrics.clone()).with_access_log(config.telemetry.access_log)
}

/// The public API's services, sharing one context: the journey room,
/// the request limits, the span settings.
fn public_api(config: &Config, services: &Services) -> PublicApi {
    let api = Arc::new(ApiContext::new(
        services.journeys.clone(),
        config.limits.clone(),
        config.telemetry.clone(),
    ));
    let mut journeys = JourneyApi::new(api.clone(), services.watches.clone());
    if services.auth.enabled() {
        journeys = journeys.with_caller_updates(services.auth.caller_updates());
    }
    PublicApi {
        journeys,
        liveness: LivenessApi::new(
            api.clone(),
            services.router.clone(),
            services.watches.progress().clone(),
        ),
        documents: DocumentApi::new(api),
        auth: crate::auth::AuthLayer::new(services.auth.clone(), crate::api::rpc::audit_operation),
        admission: crate::api::AdmissionLayer::new(crate::api::RequestBytes::new(
            config.serving.max_body_bytes_in_flight,
            config.limits.max_small_message_bytes,
            config.limits.grpc_message_bytes(),
            services.metrics.clone(),
        ))
        .with_usage(services.usage.clone()),
        max_message_bytes: config.limits.grpc_message_bytes(),
        max_small_message_bytes: config.limits.max_small_message_bytes,
    }
}
