//! The running sandbox: its addresses, fault control, counters, state
//! inspection and shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::app::App;
use super::deliveries::WebhookStats;
use super::error::SandboxError;
use super::faults::{self, ActiveFault, CallCount, FaultRule};
use super::store::{AppkeyState, StoreSizes};
use crate::domain::Operation;

/// One 3D channel as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxChannelInfo {
    /// Channel name.
    pub name: String,
    /// Vendor name returned in its session tokens.
    pub vendor: String,
    /// Root of the channel's own listener (`http://127.0.0.1:PORT`); the
    /// standard paths `/service/captcha/3d/...` live under it.
    pub base_url: String,
}

/// One serving listener.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) stop: watch::Sender<bool>,
    /// Taken once awaited (a finished `JoinHandle` must not be polled again).
    pub(crate) task: Option<JoinHandle<()>>,
}

impl Server {
    async fn stop_and_wait(&mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A running sandbox. Dropping it stops every listener; [`shutdown`]
/// does the same and waits for in-flight calls.
///
/// [`shutdown`]: SandboxHandle::shutdown
pub struct SandboxHandle {
    app: Arc<App>,
    /// Core, result, then one per channel in configuration order.
    servers: Vec<Server>,
    channels: Vec<SandboxChannelInfo>,
    driver: Option<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

impl SandboxHandle {
    pub(crate) fn new(
        app: Arc<App>,
        servers: Vec<Server>,
        channels: Vec<SandboxChannelInfo>,
        driver: Option<JoinHandle<()>>,
        shutdown: watch::Sender<bool>,
    ) -> Self {
        Self {
            app,
            servers,
            channels,
            driver,
            shutdown,
        }
    }

    fn url(&self, index: usize) -> String {
        self.servers
            .get(index)
            .map(|s| format!("http://{}", s.addr))
            .unwrap_or_default()
    }

    /// The service root (`{base_url}`): `http://127.0.0.1:PORT`; the
    /// operations are under `/service/captcha/`.
    pub fn base_url(&self) -> String {
        self.url(0)
    }

    /// The result port (`{result_base_url}`), same host, other port.
    pub fn result_base_url(&self) -> String {
        self.url(1)
    }

    /// The admin API root: `{base_url}/_sandbox`.
    pub fn admin_url(&self) -> String {
        format!("{}/_sandbox", self.base_url())
    }

    /// Every 3D channel with its own listener's URL.
    pub fn channels(&self) -> Vec<SandboxChannelInfo> {
        self.channels.clone()
    }

    /// The URL of `name`'s 3D paths on the core listener:
    /// `{base_url}/service/captcha/channels/{name}` + `/3d/...`.
    pub fn channel_path_url(&self, name: &str) -> String {
        format!("{}/service/captcha/channels/{name}", self.base_url())
    }

    /// Installs a fault rule; returns its id.
    pub fn add_fault(&self, rule: FaultRule) -> Result<u64, SandboxError> {
        faults::validate(&rule, &self.app.channel_names())?;
        Ok(self.app.faults.add(rule))
    }

    /// Removes one fault rule; false when it was not installed (a one-shot
    /// rule removes itself once spent).
    pub fn remove_fault(&self, id: u64) -> bool {
        self.app.faults.remove(id)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.app.faults.clear();
    }

    /// The installed fault rules.
    pub fn faults(&self) -> Vec<ActiveFault> {
        self.app.faults.list()
    }

    /// Calls received by `op` on `channel` (`None`: non-3D operations).
    /// 3D calls on the core listener's standard paths count for the first
    /// channel.
    pub fn calls(&self, op: Operation, channel: Option<&str>) -> u64 {
        self.app.faults.calls(op, channel)
    }

    /// Every non-zero call counter.
    pub fn all_calls(&self) -> Vec<CallCount> {
        self.app.faults.all_calls()
    }

    /// Sets every call counter to zero.
    pub fn reset_calls(&self) {
        self.app.faults.reset_calls();
    }

    /// Switches a channel's `isContingency`.
    pub fn set_contingency(&self, channel: &str, on: bool) -> Result<(), SandboxError> {
        let index = self
            .app
            .channel_index(channel)
            .ok_or(SandboxError::UnknownChannel)?;
        let state = self
            .app
            .channels
            .get(index)
            .ok_or(SandboxError::UnknownChannel)?;
        state.contingency.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Closes a channel's own listener, so connections to it are refused
    /// (its paths on the core listener keep working). Waits until closed.
    pub async fn stop_channel(&mut self, channel: &str) -> Result<(), SandboxError> {
        let index = self
            .app
            .channel_index(channel)
            .ok_or(SandboxError::UnknownChannel)?;
        if let Some(server) = self.servers.get_mut(2 + index) {
            server.stop_and_wait().await;
        }
        Ok(())
    }

    /// What the store holds for `appkey` (`None`: unknown or purged).
    pub fn appkey_state(&self, appkey: &str) -> Option<AppkeyState> {
        self.app.store.appkey_state(appkey, self.app.clock.now())
    }

    /// Sizes of the store's tables after purging what has expired.
    pub fn store_sizes(&self) -> StoreSizes {
        self.app.store.sizes(self.app.clock.now())
    }

    /// Webhook delivery counters now.
    pub fn webhook_stats(&self) -> WebhookStats {
        *self.app.webhook_stats.borrow()
    }

    /// A receiver of webhook delivery counters, to await a delivery or an
    /// abandonment without sleeping.
    pub fn watch_webhook_stats(&self) -> watch::Receiver<WebhookStats> {
        self.app.webhook_stats.subscribe()
    }

    /// Stops accepting calls, lets in-flight calls finish, stops the
    /// webhook driver (pending notices are dropped) and waits for all.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for server in &mut self.servers {
            server.stop_and_wait().await;
        }
        if let Some(driver) = self.driver.take() {
            let _ = driver.await;
        }
        tracing::info!("sandbox stopped");
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

impl std::fmt::Debug for SandboxHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxHandle")
            .field("base_url", &self.base_url())
            .field("result_base_url", &self.result_base_url())
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}
