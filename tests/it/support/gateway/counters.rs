//! What a test reads back to prove a call happened or not: the embedded
//! sandbox's call and webhook counters, and the `/metrics` exposition.

use idgate::domain::Operation;

use super::TestGateway;
use crate::support::{net::http_client, wait::EVENT_WAIT};

impl TestGateway {
    /// Calls of `op` on the embedded sandbox (not on a 3D channel).
    pub fn calls(&self, op: Operation) -> u64 {
        self.sandbox().calls(op, None)
    }

    /// Every call the embedded sandbox received, on any channel.
    pub fn total_calls(&self) -> u64 {
        self.sandbox().all_calls().iter().map(|c| c.count).sum()
    }

    /// Calls the embedded sandbox received for `op` on `channel`.
    pub fn sandbox_calls(&self, op: Operation, channel: &str) -> u64 {
        self.sandbox().calls(op, Some(channel))
    }

    /// `/document/result` calls the sandbox has received.
    pub fn result_reads(&self) -> u64 {
        self.sandbox()
            .calls(idgate::domain::Operation::Result, None)
    }

    /// Waits until the sandbox's webhook counters satisfy `check`.
    pub async fn webhook_stats_until(
        &self,
        check: impl FnMut(&idgate::sandbox::WebhookStats) -> bool,
    ) -> idgate::sandbox::WebhookStats {
        let mut rx = self.sandbox().watch_webhook_stats();
        let stats = tokio::time::timeout(EVENT_WAIT, rx.wait_for(check))
            .await
            .expect("sandbox webhook counters in time")
            .expect("sandbox running");
        *stats
    }

    /// The text of `GET /metrics`.
    pub async fn metrics_text(&self) -> String {
        http_client()
            .get(format!("{}/metrics", self.http_url()))
            .send()
            .await
            .expect("scrape /metrics")
            .text()
            .await
            .expect("metrics body")
    }

    /// The value of `idgate_webhooks_total{outcome=...}` on `/metrics`.
    /// 0 for an outcome never counted; a panic if the metric is not
    /// declared at all.
    pub async fn webhook_metric(&self, outcome: &str) -> u64 {
        let text = self.metrics_text().await;
        crate::support::metrics::counted(
            &text,
            &format!("idgate_webhooks_total{{outcome=\"{outcome}\"}}"),
        ) as u64
    }
}
