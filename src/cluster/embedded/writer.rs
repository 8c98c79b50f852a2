//! Group commit: one thread owns the store's write transactions. Writes
//! queue for it; it takes every write waiting (up to [`MAX_BATCH`]) into
//! one transaction, commits it durably (one fsync for all of them), then
//! answers each caller. A write is answered only once it is on disk, and
//! writes that arrive together share the cost of getting there.
//!
//! The queue is bounded: past it a write is refused at once
//! ([`StoreError::Busy`], RESOURCE_EXHAUSTED to a client) rather than
//! wait behind a disk that cannot keep up.
//!
//! A thread, not a task: a commit blocks on the disk, and must not hold
//! one of the runtime's workers while it does.

use std::{sync::Arc, thread::JoinHandle};

use tokio::sync::{mpsc, oneshot};

use super::{
    StoreError,
    context::Context,
    ops::Txn,
    record::{EXPIRIES, META, RECORDS, USED_BYTES, now_ms},
};

/// Most writes one transaction carries: a commit of this many is still
/// a few milliseconds, so the first of them waits little for the last.
pub(super) const MAX_BATCH: usize = 256;

/// Writes that may wait for the writer: about ten full batches.
pub(super) const QUEUE_BOUND: usize = 10 * MAX_BATCH;

/// One queued write: applied within a batch's transaction, answered once
/// the batch committed (or failed).
trait Queued: Send {
    /// Applies the write; `Err` when the batch must be abandoned.
    fn apply(&mut self, txn: &mut Txn<'_>) -> Result<(), StoreError>;
    /// Answers the caller: its write's outcome, or the batch's failure.
    fn answer(self: Box<Self>, batch: Result<(), &StoreError>);
}

/// A write `work` whose outcome `T` its caller awaits.
struct Job<T, F> {
    work: Option<F>,
    outcome: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Queued for Job<T, F>
where
    T: Send,
    F: FnOnce(&mut Txn<'_>) -> Result<T, StoreError> + Send,
{
    fn apply(&mut self, txn: &mut Txn<'_>) -> Result<(), StoreError> {
        let Some(work) = self.work.take() else {
            return Ok(());
        };
        let outcome = work(txn);
        let abandon = match &outcome {
            Err(e) if !e.leaves_the_batch_intact() => Err(e.clone()),
            _ => Ok(()),
        };
        self.outcome = Some(outcome);
        abandon
    }

    fn answer(self: Box<Self>, batch: Result<(), &StoreError>) {
        let answer = match (batch, self.outcome) {
            (Err(e), _) => Err(e.clone()),
            (Ok(()), Some(outcome)) => outcome,
            // Applied in a batch that committed: always has an outcome.
            (Ok(()), None) => return,
        };
        // A caller that stopped waiting no longer needs the answer; its
        // write is durable all the same.
        let _ = self.reply.send(answer);
    }
}

/// The queue into the writer thread, and the thread.
#[derive(Debug)]
pub(super) struct Writer {
    queue: Option<mpsc::Sender<Box<dyn Queued>>>,
    thread: Option<JoinHandle<()>>,
    ctx: Arc<Context>,
    bound: usize,
}

impl Writer {
    /// Starts the writer of `db`, whose live records count `used` bytes,
    /// with a queue of `bound` writes.
    pub fn start(
        db: Arc<redb::Database>,
        ctx: Arc<Context>,
        used: u64,
        bound: usize,
    ) -> Result<Self, StoreError> {
        let (queue, rx) = mpsc::channel(bound);
        let thread_ctx = ctx.clone();
        let thread = std::thread::Builder::new()
            .name("idgate-store-writer".to_owned())
            .spawn(move || run(&db, &thread_ctx, used, rx))
            .map_err(|e| StoreError::Io {
                path: ctx.path.clone(),
                cause: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Self {
            queue: Some(queue),
            thread: Some(thread),
            ctx,
            bound,
        })
    }

    /// Queues `work` and waits until it is durable (or refused, or failed).
    pub async fn submit<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Txn<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let closed = || StoreError::Closed {
            path: self.ctx.path.clone(),
        };
        let queue = self.queue.as_ref().ok_or_else(closed)?;
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Job {
            work: Some(work),
            outcome: None,
            reply,
        });
        queue.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => StoreError::Busy {
                path: self.ctx.path.clone(),
                queued: self.bound,
            },
            mpsc::error::TrySendError::Closed(_) => closed(),
        })?;
        answer.await.map_err(|_| closed())?
    }
}

impl Drop for Writer {
    /// Lets the writer finish what is queued, then waits for it: the file
    /// is closed (and its lock released) when the store is dropped.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer thread: batches until the queue closes.
fn run(db: &redb::Database, ctx: &Context, mut used: u64, mut rx: mpsc::Receiver<Box<dyn Queued>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let outcome = commit(db, ctx, used, &mut batch);
        if let Ok(now_used) = &outcome {
            used = *now_used;
            ctx.set_used(used);
        }
        for job in batch.drain(..) {
            job.answer(outcome.as_ref().map(|_| ()));
        }
    }
}

/// Applies `batch` in one durable transaction; the bytes the live records
/// count after it.
fn commit(
    db: &redb::Database,
    ctx: &Context,
    used: u64,
    batch: &mut [Box<dyn Queued>],
) -> Result<u64, StoreError> {
    let txn = db.begin_write().map_err(|e| ctx.failed(e))?;
    let applied = apply_all(&txn, ctx, used, batch);
    match applied {
        Ok(used) => {
            txn.commit().map_err(|e| ctx.failed(e))?;
            Ok(used)
        }
        Err(e) => {
            // Nothing of the batch is kept; the abort's own failure says
            // no more than `e`.
            let _ = txn.abort();
            Err(e)
        }
    }
}

/// Applies each write of `batch` to `txn` and records the bytes counted.
fn apply_all(
    txn: &redb::WriteTransaction,
    ctx: &Context,
    used: u64,
    batch: &mut [Box<dyn Queued>],
) -> Result<u64, StoreError> {
    let mut tables = Txn {
        records: txn.open_table(RECORDS).map_err(|e| ctx.failed(e))?,
        expiries: txn.open_table(EXPIRIES).map_err(|e| ctx.failed(e))?,
        ctx,
        now: now_ms(),
        used,
    };
    for job in batch.iter_mut() {
        job.apply(&mut tables)?;
    }
    let used = tables.used;
    drop(tables);
    let mut meta = txn.open_table(META).map_err(|e| ctx.failed(e))?;
    meta.insert(USED_BYTES, used.to_be_bytes().as_slice())
        .map_err(|e| ctx.failed(e))?;
    Ok(used)
}
