//! What a built [`Telemetry`] is for: installing it (for the thread or the
//! process), and flushing and stopping its exporters
//! ([`TelemetryExporters`]).

use opentelemetry::global;
use opentelemetry_sdk::{metrics::SdkMeterProvider, trace::SdkTracerProvider};
use tracing::{Dispatch, dispatcher::DefaultGuard};

use super::TelemetryError;
use crate::telemetry::span_queue::SpanExportStats;

/// A built subscriber and the provider behind its span export.
pub struct Telemetry {
    pub(super) dispatch: Dispatch,
    pub(super) exporters: TelemetryExporters,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("exporters", &self.exporters)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The subscriber, e.g. for `tracing::dispatcher::with_default`.
    pub fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }

    /// Installs the subscriber for the current thread until the returned
    /// guard drops.
    pub fn set_default(&self) -> DefaultGuard {
        tracing::dispatcher::set_default(&self.dispatch)
    }

    /// Its exporters (flush, shutdown).
    pub fn exporters(&self) -> &TelemetryExporters {
        &self.exporters
    }

    /// Installs the meter provider of OTLP metrics export, if any, for the
    /// whole process: metrics created afterwards ([`crate::telemetry::Metrics::new`])
    /// export through it. [`Telemetry::install_global`] does it too.
    pub fn install_meter_provider(&self) {
        if let Some(meters) = &self.exporters.meter_provider {
            global::set_meter_provider(meters.clone());
        }
    }

    /// Installs the subscriber, the tracer provider and the meter provider
    /// for the whole process.
    pub fn install_global(self) -> Result<TelemetryExporters, TelemetryError> {
        tracing::dispatcher::set_global_default(self.dispatch)
            .map_err(|_| TelemetryError::AlreadyInstalled)?;
        if let Some(provider) = &self.exporters.provider {
            global::set_tracer_provider(provider.clone());
        }
        if let Some(meters) = &self.exporters.meter_provider {
            global::set_meter_provider(meters.clone());
        }
        Ok(self.exporters)
    }

    /// Exports every ended span, then stops the exporter.
    pub async fn shutdown(self) -> Result<(), TelemetryError> {
        self.exporters.shutdown().await
    }
}

/// The exporters of a [`Telemetry`]: the tracer provider, with OTLP
/// metrics export the meter provider, and with `[audit] otlp` the audit
/// records' export. Dropping it flushes and stops them.
///
/// The exporters' connections run on the Tokio runtime while a flush
/// blocks a thread, so prefer [`TelemetryExporters::shutdown`] from async
/// code; `Drop` does its best (blocking in place on a multi-threaded
/// runtime, on a helper thread otherwise).
#[derive(Debug)]
pub struct TelemetryExporters {
    pub(super) provider: Option<SdkTracerProvider>,
    pub(super) meter_provider: Option<SdkMeterProvider>,
    /// What became of the exported spans; `None` when nothing is exported.
    pub(super) span_stats: Option<SpanExportStats>,
    /// Audit records as OTLP logs (`[audit] otlp`), if on.
    pub(super) audit: Option<crate::telemetry::audit_export::AuditExport>,
}

impl TelemetryExporters {
    /// The counters of span export (exported, failed, dropped), for
    /// `/metrics` ([`crate::server::StartOptions::span_export`]); `None`
    /// when no span is exported.
    pub fn span_export_stats(&self) -> Option<SpanExportStats> {
        self.span_stats.clone()
    }

    /// Exports every span ended and every metric recorded so far; returns
    /// when the collector has answered.
    pub async fn force_flush(&self) -> Result<(), TelemetryError> {
        if let Some(audit) = self.audit.clone() {
            run_blocking(move || {
                audit.flush(AUDIT_FLUSH_WAIT);
                Ok(())
            })
            .await?;
        }
        if let Some(provider) = self.provider.clone() {
            run_blocking(move || provider.force_flush()).await?;
        }
        if let Some(meters) = self.meter_provider.clone() {
            run_blocking(move || meters.force_flush()).await?;
        }
        Ok(())
    }

    /// Exports what is pending, then stops the exporters.
    pub async fn shutdown(mut self) -> Result<(), TelemetryError> {
        if let Some(audit) = self.audit.take() {
            run_blocking(move || {
                audit.flush(AUDIT_FLUSH_WAIT);
                Ok(())
            })
            .await?;
        }
        if let Some(provider) = self.provider.take() {
            run_blocking(move || provider.shutdown()).await?;
        }
        if let Some(meters) = self.meter_provider.take() {
            run_blocking(move || meters.shutdown()).await?;
        }
        Ok(())
    }
}

/// The longest a flush waits for the audit export (its transport's own
/// timeout bounds each send).
const AUDIT_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

impl Drop for TelemetryExporters {
    fn drop(&mut self) {
        if let Some(audit) = self.audit.take() {
            audit.flush(AUDIT_FLUSH_WAIT);
        }
        let provider = self.provider.take();
        let meters = self.meter_provider.take();
        if provider.is_none() && meters.is_none() {
            return;
        }
        let stop = move || {
            if let Some(p) = provider {
                let _ = p.shutdown();
            }
            if let Some(m) = meters {
                let _ = m.shutdown();
            }
        };
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(stop),
            // Blocking this thread would stop the very runtime the export
            // needs: let a helper thread wait instead.
            Ok(_) => {
                std::thread::spawn(stop);
            }
            Err(_) => stop(),
        }
    }
}

async fn run_blocking(
    f: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) -> Result<(), TelemetryError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TelemetryError::Export(e.to_string()))?
        .map_err(|e| TelemetryError::Export(e.to_string()))
}
