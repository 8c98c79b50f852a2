//! [`Gateway`]: a running gateway, what its listeners need grouped by
//! concern, and how it drains and stops (how it reloads: `reload`).

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::watch, task::JoinHandle};

use super::{connections::KillSwitch, setup::ListenerTlsSet};
use crate::{
    auth::Authenticator,
    channels::{ChannelRouter, ChannelSpec, probe::Prober, rollout::Rollouts},
    cluster::Shared,
    events::JourneyWatches,
    journey::{JourneyCore, Journeys},
    sandbox::SandboxHandle,
    telemetry::{Metrics, usage::Usage},
    usage::UsageBook,
};

/// Where the listeners listen.
pub(super) struct Addresses {
    pub(super) grpc: SocketAddr,
    pub(super) http: SocketAddr,
    /// Only with an admin token.
    pub(super) admin: Option<SocketAddr>,
}

/// What the listeners serve from: one of each, shared by every listener
/// and serving thread.
pub(super) struct Services {
    pub(super) router: Arc<ChannelRouter>,
    pub(super) watches: JourneyWatches,
    pub(super) core: JourneyCore,
    /// The journey room: creation, replay, access and billing, which the
    /// public API's door calls.
    pub(super) journeys: Journeys,
    /// Usage by caller: the counting point of calls, billed calls and
    /// journeys.
    pub(super) usage: Usage,
    /// The charge-back report's counts, flushed from `usage`.
    pub(super) book: Arc<UsageBook>,
    pub(super) metrics: Metrics,
    /// The shared state (in memory, or the fleet's on Redis).
    pub(super) shared: Shared,
    /// Who may call the public listener.
    pub(super) auth: Arc<Authenticator>,
    /// The guarded rollout (its record in `shared`).
    pub(super) rollouts: Arc<Rollouts>,
    /// The conformance probe; `None` without `[probe] persons`.
    pub(super) prober: Option<Arc<Prober>>,
}

/// What a reload re-reads and falls back to.
pub(super) struct Reloadable {
    /// The configuration file, re-read on [`Gateway::reload`].
    pub(super) config_path: Option<PathBuf>,
    /// The channels a reload with no `[[channels]]` returns to.
    pub(super) embedded_channels: Vec<ChannelSpec>,
    /// The embedded sandbox, when no upstream is configured.
    pub(super) sandbox: Option<SandboxHandle>,
    /// The listeners' certificates.
    pub(super) tls: ListenerTlsSet,
    /// Held by a reload from its first check to its last swap.
    pub(super) reloading: Mutex<()>,
}

/// How the gateway drains and stops.
pub(super) struct Lifecycle {
    /// Ends every listener's accept loop.
    pub(super) stop: watch::Sender<bool>,
    /// Flips `/healthz` and gRPC health to NOT_SERVING.
    pub(super) ready: watch::Sender<bool>,
    pub(super) health: tonic_health::server::HealthReporter,
    /// The listeners (and the fleet relay), awaited on shutdown.
    pub(super) tasks: Vec<JoinHandle<()>>,
    /// Close what is still open once the grace is over.
    pub(super) kill_switches: Vec<Arc<KillSwitch>>,
    pub(super) drain_delay: Duration,
    pub(super) shutdown_grace: Duration,
}

/// A running gateway. Dropping it does not stop it: call
/// [`Gateway::shutdown`].
pub struct Gateway {
    pub(super) addrs: Addresses,
    pub(super) services: Services,
    pub(super) reloadable: Reloadable,
    pub(super) lifecycle: Lifecycle,
}

impl Gateway {
    /// The public gRPC API's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.addrs.grpc
    }

    /// `http://` (or, with `[tls.grpc]`, `https://`) URL of the public
    /// gRPC API, for tonic clients.
    pub fn grpc_url(&self) -> String {
        let scheme = if self.reloadable.tls.grpc.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addrs.grpc)
    }

    /// The HTTP listener's address (webhook, metrics, health).
    pub fn http_addr(&self) -> SocketAddr {
        self.addrs.http
    }

    /// The admin listener's address, when an admin token is configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.addrs.admin
    }

    /// The embedded sandbox, when no upstream is configured.
    pub fn sandbox(&self) -> Option<&SandboxHandle> {
        self.reloadable.sandbox.as_ref()
    }

    /// Reports NOT_SERVING on gRPC health and `/healthz` while still
    /// serving: the first step of [`Gateway::shutdown`], for load balancers
    /// to move traffic away. Idempotent.
    pub async fn begin_drain(&self) {
        let life = &self.lifecycle;
        if !life.ready.send_replace(false) {
            return;
        }
        self.services.metrics.set_draining(true);
        for service in [
            "",
            "idgate.v1.JourneyService",
            "idgate.v1.LivenessService",
            "idgate.v1.DocumentService",
        ] {
            life.health
                .set_service_status(service, tonic_health::ServingStatus::NotServing)
                .await;
        }
        tracing::info!(
            drain_delay_secs = life.drain_delay.as_secs(),
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
        let Self {
            services,
            reloadable,
            lifecycle: life,
            ..
        } = self;
        tokio::time::sleep(life.drain_delay).await;
        let _ = life.stop.send(true);
        // Open WatchJourney streams would hold up the graceful shutdown.
        services.watches.close();
        services.shared.stop();
        let listeners = futures_util::future::join_all(life.tasks);
        tokio::pin!(listeners);
        if tokio::time::timeout(life.shutdown_grace, &mut listeners)
            .await
            .is_err()
        {
            tracing::warn!(
                grace_secs = life.shutdown_grace.as_secs(),
                "shutdown grace over: closing the connections still open"
            );
            for kill in &life.kill_switches {
                kill.kill();
            }
            // Closed connections end their tasks at once; never hang on one.
            let _ = tokio::time::timeout(Duration::from_secs(1), listeners).await;
        }
        let _ =
            tokio::time::timeout(Duration::from_secs(1), services.watches.tasks_finished()).await;
        if let Some(sandbox) = reloadable.sandbox {
            sandbox.shutdown().await;
        }
    }
}

/// The parts of a running gateway a test or a measurement looks into, to
/// assert what a call did (the router's counters, the watches, the shared
/// state) or to break something on purpose. None is needed to run or embed
/// a gateway, so none sits on [`Gateway`] itself; reached through
/// [`crate::testing`].
pub trait GatewayParts {
    /// The embedded sandbox, mutably (to stop one of its channels).
    fn sandbox_mut(&mut self) -> Option<&mut SandboxHandle>;
    /// The 3D channel router.
    fn router(&self) -> &Arc<ChannelRouter>;
    /// The journey watches (watchers, their readers).
    fn watches(&self) -> &JourneyWatches;
    /// The journey core (credentials, REST client).
    fn core(&self) -> &JourneyCore;
    /// The metrics registry.
    fn metrics(&self) -> &Metrics;
    /// The shared state (in memory, or the fleet's on Redis).
    fn shared_state(&self) -> &Shared;
}

impl GatewayParts for Gateway {
    fn sandbox_mut(&mut self) -> Option<&mut SandboxHandle> {
        self.reloadable.sandbox.as_mut()
    }

    fn router(&self) -> &Arc<ChannelRouter> {
        &self.services.router
    }

    fn watches(&self) -> &JourneyWatches {
        &self.services.watches
    }

    fn core(&self) -> &JourneyCore {
        &self.services.core
    }

    fn metrics(&self) -> &Metrics {
        &self.services.metrics
    }

    fn shared_state(&self) -> &Shared {
        &self.services.shared
    }
}
