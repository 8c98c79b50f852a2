//! Audit records as OTLP logs (`[audit] otlp = true`), through the spans'
//! export path: the same collector, protocol, TLS, headers, compression
//! and timeout (`otlp::log_target`, `otlp::transport`), on a thread of
//! its own like spans, so a slow collector never holds a call.
//!
//! The records stay on stdout as well: stdout is the trail of record
//! (written through, `log_lines`); the export is a copy for a log
//! backend. Each `idgate::audit` event becomes one `LogRecord` (severity
//! INFO, body `personal data access`, the record's fields as attributes,
//! its trace id) in an `ExportLogsServiceRequest` under the spans'
//! resource and the scope `idgate.audit`.
//!
//! Bounded like spans: at most [`MAX_QUEUED`] records wait; past it a
//! record is not exported and counted `dropped`. A batch leaves once it
//! holds [`MAX_BATCH`] records, after [`SCHEDULE_DELAY`] otherwise, and on
//! a flush. What became of each record is counted
//! (`idgate_audit_export_records_total{outcome}`: `exported`, `failed`,
//! `dropped`).

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber},
    resource::v1::Resource,
};
use prost::Message as _;
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{Layer, layer::Context};

use super::{audit::AUDIT_TARGET, otlp::transport::Transport};

/// Records waiting for export at most.
pub const MAX_QUEUED: usize = 8_192;
/// Records per export at most.
pub const MAX_BATCH: usize = 512;
/// The longest a record waits for its batch to leave.
pub const SCHEDULE_DELAY: Duration = Duration::from_secs(1);

/// What became of the audit records handed to the export, process-wide
/// (one subscriber exports them).
#[derive(Debug, Default)]
pub struct AuditExportStats {
    exported: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
}

static STATS: AuditExportStats = AuditExportStats {
    exported: AtomicU64::new(0),
    failed: AtomicU64::new(0),
    dropped: AtomicU64::new(0),
};

/// (outcome, records) since start: `exported`, `failed`, `dropped`.
pub fn totals() -> [(&'static str, u64); 3] {
    [
        ("exported", STATS.exported.load(Ordering::Relaxed)),
        ("failed", STATS.failed.load(Ordering::Relaxed)),
        ("dropped", STATS.dropped.load(Ordering::Relaxed)),
    ]
}

enum Message {
    Record(Box<LogRecord>),
    /// Send what waits, then say so.
    Flush(SyncSender<()>),
}

/// The export of audit records: the layer that takes them from the
/// subscriber, and the handle that flushes. Cheap to clone.
#[derive(Clone)]
pub struct AuditExport {
    queue: SyncSender<Message>,
}

impl std::fmt::Debug for AuditExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditExport").finish_non_exhaustive()
    }
}

impl AuditExport {
    /// Starts the export thread, sending through `transport` under
    /// `resource`.
    pub fn start<T: Transport>(transport: T, resource: Resource) -> std::io::Result<Self> {
        let (queue, records) = mpsc::sync_channel(MAX_QUEUED);
        std::thread::Builder::new()
            .name("idgate-audit-export".to_owned())
            .spawn(move || run(records, transport, resource, &STATS))?;
        Ok(Self { queue })
    }

    /// Sends what waits, waiting at most `within`; false when it did not
    /// finish in time.
    pub fn flush(&self, within: Duration) -> bool {
        let (done, finished) = mpsc::sync_channel(1);
        if self.queue.send(Message::Flush(done)).is_err() {
            return false;
        }
        finished.recv_timeout(within).is_ok()
    }

    /// The subscriber layer that hands each audit record to the export.
    pub fn layer(&self) -> AuditExportLayer {
        AuditExportLayer(self.clone())
    }
}

/// See [`AuditExport::layer`].
pub struct AuditExportLayer(AuditExport);

impl<S: Subscriber> Layer<S> for AuditExportLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != AUDIT_TARGET {
            return;
        }
        let record = log_record(event);
        match self.0.queue.try_send(Message::Record(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                STATS.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The fields of an audit event, as OTLP attributes (the message is the
/// body).
#[derive(Default)]
struct Fields {
    body: String,
    attributes: Vec<KeyValue>,
    trace_id: Vec<u8>,
}

fn string(value: String) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(value)),
    })
}

fn attribute(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: string(value),
        ..KeyValue::default()
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "trace" {
            self.trace_id = hex_bytes(value);
        }
        self.attributes
            .push(attribute(field.name(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.body = text;
            return;
        }
        self.attributes.push(attribute(field.name(), text));
    }
}

/// The 16 bytes of a trace id written in hex; empty when it is not one.
fn hex_bytes(hex: &str) -> Vec<u8> {
    if hex.len() != 32 {
        return Vec::new();
    }
    (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .unwrap_or_default()
}

fn log_record(event: &Event<'_>) -> LogRecord {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    LogRecord {
        time_unix_nano: now,
        observed_time_unix_nano: now,
        severity_number: SeverityNumber::Info as i32,
        severity_text: "INFO".to_owned(),
        body: string(fields.body),
        attributes: fields.attributes,
        trace_id: fields.trace_id,
        event_name: AUDIT_TARGET.to_owned(),
        ..LogRecord::default()
    }
}

/// The export thread: batches records and sends each batch, on a
/// runtime of its own.
fn run<T: Transport>(
    records: Receiver<Message>,
    mut transport: T,
    resource: Resource,
    stats: &AuditExportStats,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("idgate: the audit export thread could not start its runtime");
        return;
    };
    let mut batch: Vec<LogRecord> = Vec::new();
    let mut send = |batch: &mut Vec<LogRecord>| {
        if batch.is_empty() {
            return;
        }
        let count = batch.len() as u64;
        let request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "idgate.audit".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    log_records: std::mem::take(batch),
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        match runtime.block_on(transport.send(request.encode_to_vec())) {
            Ok(accepted) => {
                let rejected = accepted.rejected.min(count);
                stats
                    .exported
                    .fetch_add(count - rejected, Ordering::Relaxed);
                stats.failed.fetch_add(rejected, Ordering::Relaxed);
            }
            Err(failure) => {
                stats.failed.fetch_add(count, Ordering::Relaxed);
                tracing::warn!(error = %failure, records = count, "audit records not exported (they are on stdout)");
            }
        }
    };
    loop {
        match records.recv_timeout(SCHEDULE_DELAY) {
            Ok(Message::Record(record)) => {
                batch.push(*record);
                if batch.len() >= MAX_BATCH {
                    send(&mut batch);
                }
            }
            Ok(Message::Flush(done)) => {
                send(&mut batch);
                let _ = done.try_send(());
            }
            Err(RecvTimeoutError::Timeout) => send(&mut batch),
            Err(RecvTimeoutError::Disconnected) => {
                send(&mut batch);
                return;
            }
        }
    }
}

/// The spans' resource as OTLP's message.
pub fn resource_of(resource: &opentelemetry_sdk::Resource) -> Resource {
    Resource {
        attributes: resource
            .iter()
            .map(|(key, value)| attribute(key.as_str(), value.to_string()))
            .collect(),
        ..Resource::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_id_in_hex_becomes_its_sixteen_bytes_and_anything_else_none() {
        assert_eq!(
            hex_bytes("0102030405060708090a0b0c0d0e0f10"),
            (1..=16).collect::<Vec<u8>>()
        );
        assert!(hex_bytes("").is_empty());
        assert!(hex_bytes("zz02030405060708090a0b0c0d0e0f10").is_empty());
    }
}
