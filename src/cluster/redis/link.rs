//! Connection establishment: how a replica reaches the fleet's Redis,
//! whichever way it is deployed ([`RedisTarget`]), and reaches it again.
//!
//! - One server: a `ConnectionManager`, which reconnects by itself.
//! - Sentinel: the master is asked of the sentinels (the redis crate's
//!   `SentinelClient`, which checks the answer with `ROLE`), then reached
//!   through a `ConnectionManager` (`sentinel.rs`). A manager reconnects
//!   to the address it was given, which after a failover is a dead or
//!   demoted server, so the master is asked again on every loss of
//!   connection, timeout or `READONLY` answer ([`Link::failed`]) and on
//!   every (re)connection of the event stream's reader
//!   ([`Link::open_reader`]).
//! - Redis Cluster: one `ClusterConnection` (the redis crate's
//!   `cluster-async`), which follows the slot map and `MOVED`/`ASK` by
//!   itself.
//!
//! Commands see one [`Conn`] type whatever the deployment. A serving
//! thread gets a command connection of its own ([`Link::install_thread`]),
//! made on its first command on that thread, so that the connection's
//! task runs on the thread's own event loop: one shared connection would
//! run on the process runtime, and every command of every call would wake
//! a thread there and wake the caller's back (the hop's profile measured
//! that as a fifth of a call's CPU with `[cluster]` on). Other threads
//! share one connection. With Sentinel a serving thread's connection is
//! made again for each master the sentinels name. The event stream's
//! `XREAD BLOCK` never shares it (a blocking read would stall
//! every store's command behind it): [`Link::open_reader`] opens a
//! [`Reader`] of its own, to the server, to the master the sentinels name
//! at that moment, or a `ClusterConnection` of its own that routes the
//! read to the node owning the stream's slot (and follows `MOVED`).
//!
//! TLS: `[cluster] ca_file` (the CAs trusted for `rediss://`) and the
//! client certificate of `cert_file` and `key_file` apply to one server,
//! to every node of a cluster, and to the sentinels and the master they
//! name when the sentinels are `rediss://` (`tls.rs`).

use std::{sync::Arc, time::Duration};

use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionInfo, IntoConnectionInfo as _, Pipeline,
    RedisError, RedisFuture, RedisResult, Value,
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection},
    cluster::{ClusterClientBuilder, ClusterConfig as ClusterConnectConfig},
    cluster_async::ClusterConnection,
};
use secrecy::ExposeSecret as _;
use thread_local::ThreadLocal;

use super::sentinel::SentinelLink;

use crate::cluster::config::{ClusterSettings, RedisTarget, RedisTls};

/// A connection to one server (`N`) or to a Redis Cluster: what commands
/// and the event stream's reader go through, whatever the deployment.
#[derive(Clone)]
pub(in crate::cluster) enum Routed<N> {
    /// One server, or the master the sentinels named.
    Node(N),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

/// A connection for commands: a server's (single or Sentinel-found
/// master) or a cluster's. Cheap to clone; each clone shares the socket.
pub(in crate::cluster) type Conn = Routed<ConnectionManager>;

/// The event stream's own connection: never the commands' one.
pub(in crate::cluster) type Reader = Routed<MultiplexedConnection>;

impl<N: ConnectionLike + Send> ConnectionLike for Routed<N> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Routed::Node(c) => c.req_packed_command(cmd),
            Routed::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Routed::Node(c) => c.req_packed_commands(cmd, offset, count),
            Routed::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Routed::Node(c) => c.get_db(),
            Routed::Cluster(c) => c.get_db(),
        }
    }
}

/// How this replica reaches Redis.
pub(in crate::cluster) enum Link {
    /// One server, by URL.
    Server {
        /// For the event stream's connection (boxed: a client is large,
        /// the other variants small).
        client: Box<Client>,
        conn: ConnectionManager,
        /// How each serving thread's own connection is made.
        config: ConnectionManagerConfig,
        /// Each serving thread's own connection.
        own: ThreadLocal<Conn>,
    },
    /// The master the sentinels name.
    Sentinel(Arc<SentinelLink>),
    /// A Redis Cluster.
    Cluster {
        /// Seed nodes, with credentials: for the event stream's own
        /// cluster connection.
        seeds: Vec<ConnectionInfo>,
        /// The CAs and client certificate of `[cluster]`, for that
        /// connection too.
        tls: RedisTls,
        conn: ClusterConnection,
        /// Makes each serving thread's own connection.
        client: Box<redis::cluster::ClusterClient>,
        /// Connect and response timeouts of those connections.
        timeouts: (Duration, Duration),
        /// Each serving thread's own connection.
        own: ThreadLocal<Conn>,
    },
}

/// `info` with the ACL user and password of `settings`.
fn with_credentials(info: ConnectionInfo, settings: &ClusterSettings) -> ConnectionInfo {
    let mut redis = info.redis_settings().clone();
    if let Some(user) = &settings.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &settings.password {
        redis = redis.set_password(password.expose_secret());
    }
    info.set_redis_settings(redis)
}

impl Link {
    /// A link to the Redis of `settings`; connects nothing yet. Also
    /// returns the address spans name (`server.address`, `server.port`):
    /// the server, the first sentinel or the first seed node.
    pub(in crate::cluster) fn new(
        settings: &ClusterSettings,
    ) -> Result<(Self, (String, u16)), RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_number_of_retries(2)
            .set_max_delay(settings.max_backoff);
        match &settings.target {
            RedisTarget::Server(url) => {
                let info = url.as_str().into_connection_info()?;
                let server = address(&info);
                let client = super::tls::client(with_credentials(info, settings), &settings.tls)?;
                let conn = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
                Ok((
                    Link::Server {
                        client: Box::new(client),
                        conn,
                        config,
                        own: ThreadLocal::new(),
                    },
                    server,
                ))
            }
            RedisTarget::Sentinel {
                sentinels,
                master_name,
                tls,
            } => {
                let resolver = super::tls::sentinel_client(sentinels, master_name, *tls, settings)?;
                let server = sentinels.first().cloned().unwrap_or_default();
                // Each sentinel gets the connect and command timeouts; the
                // master's ROLE check one more command timeout.
                let per_sentinel = settings.connect_timeout + settings.command_timeout;
                let resolve_timeout = per_sentinel
                    * u32::try_from(sentinels.len()).unwrap_or(u32::MAX)
                    + settings.command_timeout;
                Ok((
                    Link::Sentinel(Arc::new(SentinelLink::new(
                        resolver,
                        config,
                        resolve_timeout,
                    ))),
                    server,
                ))
            }
            RedisTarget::Cluster(nodes) => {
                let seeds = nodes
                    .iter()
                    .map(|n| {
                        n.as_str()
                            .into_connection_info()
                            .map(|i| with_credentials(i, settings))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let server = seeds.first().map(address).unwrap_or_default();
                let client = cluster_builder(&seeds, &settings.tls)
                    .connection_timeout(settings.connect_timeout)
                    .response_timeout(settings.command_timeout)
                    .overall_response_timeout(Some(settings.command_timeout))
                    .retries(2)
                    .build()?;
                let timeouts = (settings.connect_timeout, settings.command_timeout);
                let conn = pending_cluster_conn(&client, timeouts);
                Ok((
                    Link::Cluster {
                        seeds,
                        tls: settings.tls.clone(),
                        conn,
                        client: Box::new(client),
                        timeouts,
                        own: ThreadLocal::new(),
                    },
                    server,
                ))
            }
        }
    }

    /// The connection for commands. At once, except with Sentinel after a
    /// failure, when the master is asked again: in a task of its own, so
    /// the answer is kept for the next command even when this caller
    /// stops waiting (its command timeout).
    pub(in crate::cluster) async fn conn(&self) -> RedisResult<Conn> {
        match self {
            Link::Server { conn, own, .. } => Ok(own
                .get()
                .cloned()
                .unwrap_or_else(|| Conn::Node(conn.clone()))),
            Link::Cluster { conn, own, .. } => Ok(own
                .get()
                .cloned()
                .unwrap_or_else(|| Conn::Cluster(conn.clone()))),
            Link::Sentinel(s) => s.conn().await.map(Conn::Node),
        }
    }

    /// Gives the calling thread, a serving thread starting, a command
    /// connection of its own. It connects on the thread's first command
    /// (from a task of the thread's runtime, where its own task then runs)
    /// and reconnects by itself like the shared one; with Sentinel, it is
    /// made again for each master the sentinels name.
    pub(in crate::cluster) fn install_thread(&self) {
        match self {
            Link::Server {
                client,
                config,
                own,
                ..
            } => {
                // Fails only on a configuration `new` already accepted:
                // the thread then shares the process's connection.
                let _ = own.get_or_try(|| {
                    ConnectionManager::new_lazy_with_config((**client).clone(), config.clone())
                        .map(Conn::Node)
                });
            }
            Link::Cluster {
                client,
                timeouts,
                own,
                ..
            } => {
                own.get_or(|| Conn::Cluster(pending_cluster_conn(client, *timeouts)));
            }
            Link::Sentinel(s) => s.install_thread(),
        }
    }

    /// A command failed with `error`: with Sentinel, forget the master
    /// when the error says it may be gone or demoted, so the next command
    /// asks the sentinels again.
    pub(in crate::cluster) fn failed(&self, error: &RedisError) {
        if let Link::Sentinel(s) = self {
            if error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.is_timeout()
                || is_readonly(error)
            {
                s.forget();
            }
        }
    }

    /// A command did not answer within the command timeout: the same as a
    /// timeout error.
    pub(in crate::cluster) fn timed_out(&self) {
        if let Link::Sentinel(s) = self {
            s.forget();
        }
    }

    /// A new connection for the event stream's reader, opened on each
    /// (re)connection of the supervisor: to the server, to the master as
    /// the sentinels name it now (commands follow it too), or a cluster
    /// connection of its own. `read_timeout` bounds each answer (a
    /// blocking read's wait and then some).
    pub(in crate::cluster) async fn open_reader(
        &self,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<Reader, &'static str> {
        let within = connect_timeout + read_timeout;
        let open = async |client: &Client| {
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                .set_response_timeout(Some(read_timeout));
            tokio::time::timeout(
                within,
                client.get_multiplexed_async_connection_with_config(&config),
            )
            .await
            .map_err(|_| "connect timeout")?
            .map(Reader::Node)
            .map_err(|_| "connect failed")
        };
        match self {
            Link::Server { client, .. } => open(client).await,
            Link::Sentinel(s) => {
                s.forget();
                let master = s.master().await.map_err(|_| "no master from sentinels")?;
                open(&master.client).await
            }
            Link::Cluster { seeds, tls, .. } => {
                let client = cluster_builder(seeds, tls)
                    .connection_timeout(connect_timeout)
                    .response_timeout(read_timeout)
                    .retries(2)
                    .build()
                    .map_err(|_| "cluster client refused")?;
                tokio::time::timeout(within, client.get_async_connection())
                    .await
                    .map_err(|_| "connect timeout")?
                    .map(Reader::Cluster)
                    .map_err(|_| "connect failed")
            }
        }
    }
}

/// A cluster connection that connects on its first command, with the
/// `(connect, response)` timeouts.
fn pending_cluster_conn(
    client: &redis::cluster::ClusterClient,
    (connect, response): (Duration, Duration),
) -> ClusterConnection {
    client.get_pending_async_connection_with_config(
        ClusterConnectConfig::new()
            .set_connection_timeout(connect)
            .set_response_timeout(response),
    )
}

/// A cluster client builder for `seeds`, with the roots and client
/// certificate of `tls`.
fn cluster_builder(seeds: &[ConnectionInfo], tls: &RedisTls) -> ClusterClientBuilder {
    let builder = ClusterClientBuilder::new(seeds.to_vec());
    match tls.certificates() {
        Some(certificates) => builder.certs(certificates),
        None => builder,
    }
}

/// A write refused by a replica: the master this link knew was demoted.
fn is_readonly(error: &RedisError) -> bool {
    error.code() == Some("READONLY") || error.to_string().contains("READONLY")
}

/// `(host, port)` of a TCP address, for spans.
fn address(info: &ConnectionInfo) -> (String, u16) {
    match info.addr() {
        redis::ConnectionAddr::Tcp(h, p)
        | redis::ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => (h.clone(), *p),
        _ => (String::new(), 0),
    }
}
