//! Where an upstream call finds its HTTP connection pool: the seam between
//! the REST client and whoever runs it.
//!
//! A pooled connection is served by a task on the runtime that opened it,
//! so which pool a call should use depends on the thread it runs on. That
//! is the serving runtime's business (it keeps one pool per serving
//! thread, Envoy's connection pools per worker), not this
//! module's: the client asks an [`HttpPools`] for the pool of the call at
//! hand, and builds pools with an [`HttpClientFactory`] when asked. Code
//! that is not on serving threads (the CLI, the sandbox tools, tests)
//! uses [`SharedPool`], one pool for every caller.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use rustls_platform_verifier::BuilderVerifierExt as _;

use super::{config::UpstreamConfig, error::ClientSetupError};

/// The pooled HTTP client of every upstream call: HTTP/1.1 keep-alive,
/// and HTTP/2 where a TLS upstream offers it (ALPN).
///
/// hyper's own client rather than reqwest's wrapper of it: the wrapper
/// turns each request's URI back into a `Url` (twice: once for its
/// redirect policy, even with redirects off, once for the response) and
/// adds its own futures around the call; profiles of the hop showed that
/// work on every call. The requests here are built from URIs parsed once.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Where an upstream call finds its connection pool.
pub trait HttpPools: Send + Sync + 'static {
    /// The pool for a call made now, from the calling thread.
    fn current(&self) -> &HttpClient;
}

/// Builds connection pools on one TLS setup, with the configured connect
/// timeout and idle limits. Cheap to clone.
#[derive(Clone)]
pub struct HttpClientFactory {
    connector: HttpsConnector<HttpConnector>,
    /// Idle connections kept per host, per pool.
    max_idle_per_host: usize,
    /// How long an idle connection is kept.
    idle_timeout: Duration,
}

impl std::fmt::Debug for HttpClientFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClientFactory")
            .field("max_idle_per_host", &self.max_idle_per_host)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl HttpClientFactory {
    /// The TLS setup of `config`, built once: rustls with the platform's
    /// verifier (the system's trust store), `TCP_NODELAY`, TCP keepalive,
    /// no redirects (hyper's client never follows them: a redirected POST
    /// would be replayed as a GET).
    pub fn new(config: &UpstreamConfig) -> Result<Self, ClientSetupError> {
        // Selects ring as the process's rustls provider if none is yet.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(config.connect_timeout()));
        tcp.set_nodelay(true);
        tcp.set_keepalive(Some(Duration::from_secs(60)));
        // `https://` URLs pass through to the TLS wrapper.
        tcp.enforce_http(false);
        let tls = rustls::ClientConfig::builder()
            .with_platform_verifier()
            .map_err(ClientSetupError::Tls)?
            .with_no_client_auth();
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(tcp);
        Ok(Self {
            connector,
            max_idle_per_host: config.pool_max_idle_per_host,
            idle_timeout: Duration::from_secs(60),
        })
    }

    /// A new, empty pool: at most `pool_max_idle_per_host` idle
    /// connections per host, each kept a minute.
    pub fn client(&self) -> HttpClient {
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(self.idle_timeout)
            .pool_max_idle_per_host(self.max_idle_per_host)
            .pool_timer(TokioTimer::new())
            .build(self.connector.clone())
    }
}

/// One pool for every caller, whatever its thread.
pub struct SharedPool(HttpClient);

impl SharedPool {
    /// A pool made by `factory`.
    pub fn new(factory: &HttpClientFactory) -> Self {
        Self(factory.client())
    }
}

impl HttpPools for SharedPool {
    fn current(&self) -> &HttpClient {
        &self.0
    }
}
