//! The master found through Sentinel, and how to find it again; the
//! serving threads' own connections to it.
//!
//! The sentinels are asked once per master: the answer (a [`Master`]) is
//! kept until a command fails in a way that says the master may be gone
//! or demoted (`Link::failed`), then asked again, one lookup at a time.
//!
//! Each serving thread, as with one server, gets a command connection of
//! its own, made on the thread's first command so that its task runs on
//! the thread's own event loop; sharing one connection made every command
//! of every call wake a thread of the process runtime and be woken back.
//! A thread's connection belongs to one master: each [`Master`] has a
//! generation, and a thread whose connection is of an older one makes a
//! new one to the current master on its next command. Other threads share
//! the master's own connection.

use std::{
    cell::RefCell,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::{
    Client, RedisError, RedisResult,
    aio::{ConnectionManager, ConnectionManagerConfig},
    sentinel::SentinelClient,
};
use thread_local::ThreadLocal;

/// A master as the sentinels named it.
#[derive(Clone)]
pub(in crate::cluster) struct Master {
    /// For connections of its own (the event stream's reader).
    pub(in crate::cluster) client: Client,
    /// Shared by the threads without a connection of their own.
    conn: ConnectionManager,
    /// Which answer of the sentinels this is, from 1.
    generation: u64,
}

/// A serving thread's connection, and the master it is to.
type OwnConn = RefCell<Option<(u64, ConnectionManager)>>;

/// The master found through Sentinel, and how to find it again.
pub(in crate::cluster) struct SentinelLink {
    /// Asks the sentinels (one question at a time).
    resolver: tokio::sync::Mutex<SentinelClient>,
    /// The master, until a command says it may be gone.
    current: Mutex<Option<Master>>,
    /// How many masters the sentinels have named.
    named: AtomicU64,
    config: ConnectionManagerConfig,
    /// Longest wait for the sentinels' answer and the master's `ROLE`.
    resolve_timeout: Duration,
    /// Each serving thread's own connection.
    own: ThreadLocal<OwnConn>,
}

impl SentinelLink {
    pub(in crate::cluster) fn new(
        resolver: SentinelClient,
        config: ConnectionManagerConfig,
        resolve_timeout: Duration,
    ) -> Self {
        Self {
            resolver: tokio::sync::Mutex::new(resolver),
            current: Mutex::new(None),
            named: AtomicU64::new(0),
            config,
            resolve_timeout,
            own: ThreadLocal::new(),
        }
    }

    /// Marks the calling thread, a serving thread starting, as one that
    /// keeps a connection of its own.
    pub(in crate::cluster) fn install_thread(&self) {
        self.own.get_or(|| RefCell::new(None));
    }

    /// The connection for a command: the thread's own to the current
    /// master (made now if it has none, or one to an older master), else
    /// the master's shared one.
    pub(in crate::cluster) async fn conn(self: &Arc<Self>) -> RedisResult<ConnectionManager> {
        // Every command comes here: with a master known, answer under the
        // lock, cloning one connection and not the master's client.
        if let Some(master) = crate::sync::lock(&self.current).as_ref() {
            match self.own.get().map(|own| own.borrow().clone()) {
                None => return Ok(master.conn.clone()),
                Some(Some((generation, conn))) if generation == master.generation => {
                    return Ok(conn);
                }
                Some(_) => {}
            }
        }
        let master = self.master().await?;
        // Looked up after the wait: a reference to this thread's slot must
        // not live across it (the future may be sent elsewhere).
        let Some(own) = self.own.get() else {
            return Ok(master.conn);
        };
        let conn = ConnectionManager::new_lazy_with_config(master.client, self.config.clone())?;
        *own.borrow_mut() = Some((master.generation, conn.clone()));
        Ok(conn)
    }

    /// The current master, asked of the sentinels if none is known.
    pub(in crate::cluster) async fn master(self: &Arc<Self>) -> RedisResult<Master> {
        if let Some(current) = crate::sync::lock(&self.current).clone() {
            return Ok(current);
        }
        let this = self.clone();
        tokio::spawn(async move { this.resolve().await })
            .await
            .map_err(|_| RedisError::from((redis::ErrorKind::Io, "master lookup stopped")))?
    }

    /// Asks the sentinels for the master, one lookup at a time, bounded by
    /// the resolve timeout; keeps the answer.
    async fn resolve(&self) -> RedisResult<Master> {
        let mut resolver = self.resolver.lock().await;
        // Another caller may have asked meanwhile.
        if let Some(current) = crate::sync::lock(&self.current).clone() {
            return Ok(current);
        }
        let client = tokio::time::timeout(self.resolve_timeout, resolver.async_get_client())
            .await
            .map_err(|_| {
                RedisError::from((
                    redis::ErrorKind::Io,
                    "the sentinels did not name a master in time",
                ))
            })??;
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), self.config.clone())?;
        tracing::info!(
            master = %client.get_connection_info().addr(),
            "fleet Redis master found through Sentinel"
        );
        let master = Master {
            client,
            conn,
            generation: self.named.fetch_add(1, Ordering::Relaxed) + 1,
        };
        *crate::sync::lock(&self.current) = Some(master.clone());
        Ok(master)
    }

    /// Forgets the master: the next command asks the sentinels again.
    pub(in crate::cluster) fn forget(&self) {
        crate::sync::lock(&self.current).take();
    }
}
