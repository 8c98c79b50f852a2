//! [`EncodedBatch`]: the span processor that encodes each span as it ends
//! and the thread that sends the batches.

use std::{
    cell::RefCell,
    sync::{Arc, Mutex, MutexGuard, RwLock, mpsc},
    thread::JoinHandle,
    time::Duration,
};

use opentelemetry::{Context, InstrumentationScope};
use opentelemetry_sdk::{
    Resource,
    error::{OTelSdkError, OTelSdkResult},
    trace::{Span, SpanData, SpanProcessor},
};
use tokio::sync::{Notify, mpsc as async_mpsc};

use super::{SpanExportStats, SpanQueueConfig, pending::Pending};
use crate::telemetry::otlp::{
    transport::{Accepted, Transport},
    wire::{self, EncodedResource},
};

/// How long `force_flush` waits for the export thread when the caller
/// gives no bound (the SDK's provider-wide flush).
const FLUSH_WAIT: Duration = Duration::from_secs(30);

/// What the serving threads and the export thread share.
#[derive(Debug)]
struct Shared {
    pending: Mutex<Pending>,
    /// A chunk became full.
    ready: Notify,
    resource: RwLock<Arc<EncodedResource>>,
    max_queue_size: usize,
    stats: SpanExportStats,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves the queue consistent
        // (every change is one push or one pop), so a poisoned lock is
        // still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Asks of the export thread, answered on the enclosed channel.
enum Command {
    Flush(mpsc::Sender<()>),
    Shutdown(mpsc::Sender<()>),
}

/// The span processor of OTLP export. See the module's doc.
#[derive(Debug)]
pub struct EncodedBatch {
    shared: Arc<Shared>,
    commands: async_mpsc::UnboundedSender<Command>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

thread_local! {
    /// Where a serving thread encodes a span before it takes the queue's
    /// lock: the lock is held for a copy, not for the encoding.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl EncodedBatch {
    /// A processor exporting through `transport` within `config`, counting
    /// into `stats`; starts the export thread.
    pub fn new<T: Transport>(
        transport: T,
        config: SpanQueueConfig,
        stats: SpanExportStats,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::new(config.max_export_batch_size)),
            ready: Notify::new(),
            resource: RwLock::new(Arc::new(EncodedResource::default())),
            max_queue_size: config.max_queue_size,
            stats,
        });
        let (commands, received) = async_mpsc::unbounded_channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("idgate-span-export".to_owned())
            .spawn({
                let shared = shared.clone();
                let delay = config.schedule_delay;
                move || runtime.block_on(run(shared, transport, received, delay))
            })?;
        Ok(Self {
            shared,
            commands,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Sends `command` and waits up to `wait` for its answer.
    fn ask(
        &self,
        command: impl FnOnce(mpsc::Sender<()>) -> Command,
        wait: Duration,
    ) -> OTelSdkResult {
        let (done, answered) = mpsc::channel();
        self.commands
            .send(command(done))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        answered.recv_timeout(wait).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => OTelSdkError::Timeout(wait),
            mpsc::RecvTimeoutError::Disconnected => {
                OTelSdkError::InternalFailure("the span export thread ended".to_owned())
            }
        })
    }
}

/// Where the gateway's span layer puts the spans it ends
/// (`telemetry::spans`): the queue of an [`EncodedBatch`], without the
/// SDK's span records.
#[derive(Debug, Clone)]
pub struct SpanQueue {
    shared: Arc<Shared>,
}

impl SpanQueue {
    /// Queues one span of `scope`, which `encode` writes as an entry of
    /// `ScopeSpans.spans` (`wire::put_span_parts`), or counts it dropped
    /// when the queue is full.
    pub fn push(&self, scope: &InstrumentationScope, encode: impl FnOnce(&mut Vec<u8>)) {
        push(&self.shared, scope, encode);
    }
}

impl EncodedBatch {
    /// The queue's handle for the span layer.
    pub fn queue(&self) -> SpanQueue {
        SpanQueue {
            shared: self.shared.clone(),
        }
    }
}

/// Encodes a span with `encode` on the calling thread and queues its
/// bytes under `scope`.
fn push(shared: &Shared, scope: &InstrumentationScope, encode: impl FnOnce(&mut Vec<u8>)) {
    // A queue seen full (the gauge follows it without the lock) is not
    // worth the encoding: while the collector is away every span would
    // be encoded only to be dropped. The check under the lock below stays
    // the one that bounds the queue.
    if usize::try_from(shared.stats.queued.get())
        .is_ok_and(|queued| queued >= shared.max_queue_size)
    {
        shared.stats.count("dropped", 1);
        return;
    }
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        encode(scratch);
        let full = {
            let mut pending = shared.pending();
            if pending.waiting() >= shared.max_queue_size {
                drop(pending);
                shared.stats.count("dropped", 1);
                return;
            }
            pending.push(scope, scratch)
        };
        shared.stats.queued.inc();
        if full {
            shared.ready.notify_one();
        }
    });
}

impl SpanProcessor for EncodedBatch {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        push(&self.shared, &span.instrumentation_scope, |out| {
            wire::put_span(out, &span);
        });
        // `span` is freed here, on the thread that allocated it.
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Command::Flush, FLUSH_WAIT)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let answered = self.ask(Command::Shutdown, timeout);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if answered.is_ok()
            && let Some(thread) = thread
        {
            let _ = thread.join();
        }
        answered
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self
            .shared
            .resource
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(EncodedResource::new(resource));
    }
}

/// The export thread: sends a chunk as soon as it is full, whatever is
/// waiting every `delay`, and everything on a flush or at shutdown.
async fn run<T: Transport>(
    shared: Arc<Shared>,
    mut transport: T,
    mut commands: async_mpsc::UnboundedReceiver<Command>,
    delay: Duration,
) {
    // What the transport does must not make spans of its own.
    let _suppressed = Context::enter_telemetry_suppressed_scope();
    let mut failing = false;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + delay, delay);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shared.ready.notified() => {
                export(&shared, &mut transport, false, &mut failing).await;
            }
            _ = tick.tick() => export(&shared, &mut transport, true, &mut failing).await,
            command = commands.recv() => {
                export(&shared, &mut transport, true, &mut failing).await;
                match command {
                    Some(Command::Flush(done)) => { let _ = done.send(()); }
                    Some(Command::Shutdown(done)) => { let _ = done.send(()); return; }
                    None => return,
                }
            }
        }
    }
}

/// Sends the full chunks, or with `partial` every chunk waiting when it
/// starts (so that a flush under load ends).
async fn export<T: Transport>(
    shared: &Shared,
    transport: &mut T,
    partial: bool,
    failing: &mut bool,
) {
    let mut rounds = shared.pending().chunks();
    while rounds > 0 {
        rounds -= 1;
        let Some(chunk) = shared.pending().take(partial) else {
            return;
        };
        let spans = chunk.spans();
        shared
            .stats
            .queued
            .dec_by(i64::try_from(spans).unwrap_or(i64::MAX));
        let resource = shared
            .resource
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let request = chunk.request(&resource);
        drop(chunk);
        match transport.send(request).await {
            Ok(Accepted { rejected }) => {
                let rejected = usize::try_from(rejected).unwrap_or(usize::MAX).min(spans);
                shared.stats.count("exported", spans - rejected);
                shared.stats.count("failed", rejected);
                if *failing {
                    tracing::info!("span export to the collector works again");
                    *failing = false;
                }
            }
            Err(error) => {
                shared.stats.count("failed", spans);
                // Once per outage, not once per batch; the count is in
                // `idgate_trace_spans_total{outcome="failed"}`.
                if !*failing {
                    tracing::warn!(%error, spans, "span export failed; spans are counted as failed until it works again");
                    *failing = true;
                }
            }
        }
    }
}
