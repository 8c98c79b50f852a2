//! What the listeners need before they start: each one's TLS, loaded, and
//! the process-wide connection budget; and the start's warning about
//! plaintext hops off loopback.

use std::sync::Arc;

use super::connections;
use crate::{
    channels::ChannelRouter,
    config::{Config, HOP_KINDS},
    telemetry::Metrics,
    tls::{ClientCerts, ListenerTls, ServerTls, TlsConfig, TlsError},
};

/// The loaded TLS configuration of each listener that has one.
#[derive(Default)]
pub(super) struct ListenerTlsSet {
    pub(super) grpc: Option<Arc<ServerTls>>,
    pub(super) http: Option<Arc<ServerTls>>,
    pub(super) admin: Option<Arc<ServerTls>>,
}

impl ListenerTlsSet {
    /// `h2` for the gRPC listeners, `http/1.1` for the HTTP listener. The
    /// public gRPC listener asks its clients for certificates as
    /// `grpc_client_certs` says (optional when a bearer token may stand in
    /// for one); the others require one whenever they name a client CA.
    pub(super) fn load(
        config: &TlsConfig,
        grpc_client_certs: ClientCerts,
    ) -> Result<Self, TlsError> {
        let load = |name, section: &Option<ListenerTls>, alpn: &[&[u8]], certs| {
            section
                .as_ref()
                .map(|t| ServerTls::load_with(name, t, alpn, certs))
                .transpose()
        };
        Ok(Self {
            grpc: load("grpc", &config.grpc, &[b"h2"], grpc_client_certs)?,
            http: load("http", &config.http, &[b"http/1.1"], ClientCerts::Required)?,
            admin: load("admin", &config.admin, &[b"h2"], ClientCerts::Required)?,
        })
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Arc<ServerTls>> {
        [&self.grpc, &self.http, &self.admin].into_iter().flatten()
    }

    /// Every listener's files read again (the paths the gateway started
    /// with) and built, none served yet: the first failure is the error.
    pub(super) fn prepare(&self) -> Result<PreparedTls, TlsError> {
        let configs = self
            .all()
            .map(|tls| Ok((Arc::clone(tls), tls.prepare()?)))
            .collect::<Result<_, TlsError>>()?;
        Ok(PreparedTls(configs))
    }
}

/// The listeners' configurations read again by
/// [`ListenerTlsSet::prepare`], waiting to be served.
pub(super) struct PreparedTls(Vec<(Arc<ServerTls>, Arc<rustls::ServerConfig>)>);

impl PreparedTls {
    /// Serves each listener's new configuration from its next connection.
    /// Returns how many listeners have TLS.
    pub(super) fn install(self) -> usize {
        let count = self.0.len();
        for (tls, config) in self.0 {
            tls.install(config);
        }
        count
    }
}

/// The process-wide connection budget: the descriptor limit less a reserve
/// for the sockets the bulkheads may open upstream. Logged once.
pub(super) fn connection_budget(
    config: &Config,
    router: &ChannelRouter,
    upstream: &crate::config::UpstreamConfig,
) -> Option<Arc<tokio::sync::Semaphore>> {
    let upstream_sockets = router
        .snapshot()
        .channels
        .iter()
        .map(|c| c.max_concurrent_requests)
        .sum::<usize>()
        .saturating_add(upstream.max_concurrent_requests);
    match connections::connection_budget(upstream_sockets) {
        Some((limit, budget)) => {
            tracing::info!(
                open_files_limit = limit,
                connection_budget = budget,
                reserved_for_upstream = upstream_sockets,
                max_connections_per_listener = config.serving.max_connections,
                "connection limits"
            );
            Some(Arc::new(tokio::sync::Semaphore::new(
                budget.min(tokio::sync::Semaphore::MAX_PERMITS),
            )))
        }
        None => {
            tracing::warn!(
                max_connections_per_listener = config.serving.max_connections,
                "cannot read the open-files limit: only the per-listener connection caps apply"
            );
            None
        }
    }
}

/// One WARN per hop the gateway sends over without TLS to another host
/// (named by key or variable, never by URL), and `idgate_plaintext_hops`
/// by kind. The OTLP endpoints are read where the exporters read them
/// (`[telemetry]`'s [`crate::telemetry::OtelEnv`]); `admin_served`: the
/// admin listener runs (an admin token is configured).
pub(super) fn report_plaintext_hops(config: &Config, metrics: &Metrics, admin_served: bool) {
    let hops = config.plaintext_hops(|var| config.telemetry.otel_env.var(var), admin_served);
    for hop in &hops {
        tracing::warn!(
            hop = hop.kind,
            key = %hop.key,
            "plaintext hop off loopback: sent without TLS to another host (use https://, rediss://, or a loopback address)"
        );
    }
    for kind in HOP_KINDS {
        metrics.set_plaintext_hops(kind, hops.iter().filter(|h| h.kind == kind).count());
    }
}
