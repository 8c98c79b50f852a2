//! Log lines to stdout, written in batches on the serving threads.
//!
//! Each log line was one `write` to stdout: with the access log on, two a
//! call (the audit record and the access line), and a deployed gateway's
//! stdout is a pipe that every write wakes the container runtime's reader
//! on. Measured on the hop (`examples/hop`, its stdout drained through a
//! pipe): those two lines cost 4 to 5 µs of CPU a call more than on
//! `/dev/null` (docs/performance.md).
//!
//! A serving thread ([`batch_this_thread`]) appends its lines to a buffer
//! of its own and writes them in one `write` when its event loop is about
//! to sleep ([`flush_this_thread`], the runtime's park hook) or once the
//! buffer holds [`FLUSH_AT`] bytes: a line waits at most until its thread
//! next runs out of work. Any other thread writes each line at once. Lines
//! stay whole, and in order within a thread; the lines of different
//! threads interleave by batch (each line's timestamp tells when it
//! happened). What a thread holds is written when the thread ends.
//!
//! Audit records ([`crate::telemetry::audit`]) are out before the response
//! of their call: a serving thread's connections write what the thread
//! holds ([`flush_this_thread`]) before they write any byte to their
//! socket (`server::connections::Conn`), so a process killed right after
//! a client got its answer has that call's record on stdout, by design,
//! and the records of the calls answered in one socket write share one
//! `write` to stdout. On any other thread an audit record is written at
//! once. A failed write of audit records is counted
//! ([`audit_write_failures`], exported as
//! `idgate_audit_write_failures_total`) and said once on stderr.

use std::{
    cell::RefCell,
    io::{self, Write},
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
};

use tracing_subscriber::fmt::MakeWriter;

use super::audit::AUDIT_TARGET;

static AUDIT_WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);
static AUDIT_FAILURE_SAID: AtomicBool = AtomicBool::new(false);

/// Audit records that could not be written since start.
pub fn audit_write_failures() -> u64 {
    AUDIT_WRITE_FAILURES.load(Ordering::Relaxed)
}

fn audit_write_failed(error: &io::Error, records: u64) {
    if records == 0 {
        return;
    }
    AUDIT_WRITE_FAILURES.fetch_add(records, Ordering::Relaxed);
    if !AUDIT_FAILURE_SAID.swap(true, Ordering::Relaxed) {
        // Said once, on the one stream left: the audit trail is stdout.
        eprintln!(
            "idgate: an audit record could not be written to stdout ({}); counted in idgate_audit_write_failures_total",
            error.kind()
        );
    }
}

/// A batch is written once it holds this many bytes (about 40 JSON lines).
pub const FLUSH_AT: usize = 32 * 1024;

/// Where a batch goes: stdout, or a test's buffer.
type Sink = fn(&[u8]) -> io::Result<()>;

thread_local! {
    static BATCH: RefCell<Batch> = const {
        RefCell::new(Batch {
            on: false,
            lines: Vec::new(),
            audit: 0,
            sink: None,
        })
    };
}

/// The calling thread's lines not yet written.
struct Batch {
    /// This thread batches its lines ([`batch_this_thread`]).
    on: bool,
    lines: Vec<u8>,
    /// Audit records among `lines` (counted if their write fails).
    audit: u64,
    sink: Option<Sink>,
}

impl Batch {
    fn flush(&mut self) -> io::Result<()> {
        let mut written = Ok(());
        if let Some(sink) = self.sink
            && !self.lines.is_empty()
        {
            written = sink(&self.lines);
            self.lines.clear();
            if let Err(e) = &written {
                audit_write_failed(e, self.audit);
            }
            self.audit = 0;
        }
        written
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// From now on the calling thread (a serving thread starting) batches its
/// log lines until [`flush_this_thread`] or its end.
pub fn batch_this_thread() {
    let _ = BATCH.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            b.on = true;
        }
    });
}

/// Writes the calling thread's batched lines (a serving thread's runtime
/// calls it before it sleeps, and its connections before they write to
/// their socket). Cheap when the thread holds nothing.
pub fn flush_this_thread() {
    let _ = BATCH.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            let _ = b.flush();
        }
    });
}

/// Writes `line` to `sink` now, or adds it to the calling thread's batch;
/// `audit`: the line is an audit record (a failed write of it is counted).
fn write_line(sink: Sink, line: &[u8], audit: bool) {
    let batched = BATCH
        .try_with(|b| {
            let Ok(mut b) = b.try_borrow_mut() else {
                return false;
            };
            if !b.on {
                return false;
            }
            b.sink = Some(sink);
            b.lines.extend_from_slice(line);
            b.audit += u64::from(audit);
            if b.lines.len() >= FLUSH_AT {
                let _ = b.flush();
            }
            true
        })
        .unwrap_or(false);
    if !batched && let Err(e) = sink(line) {
        audit_write_failed(&e, u64::from(audit));
    }
}

fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    io::stdout().lock().write_all(bytes)
}

/// The log writer of `idgate serve`: stdout, batched on serving threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdoutLines;

/// One line on its way (see [`StdoutLines`]).
#[derive(Debug)]
pub struct LineWriter {
    sink: Sink,
    /// An audit record: written through, its failure counted.
    audit: bool,
}

impl Write for LineWriter {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        // A failed audit record is counted; nothing to tell another
        // line's failure to.
        write_line(self.sink, line, self.audit);
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for StdoutLines {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            sink: write_stdout,
            audit: false,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        LineWriter {
            sink: write_stdout,
            audit: meta.target() == AUDIT_TARGET,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::Mutex,
        thread::{self, ThreadId},
    };

    use super::*;

    /// Each write a sink received, by thread.
    static WRITES: Mutex<Vec<(ThreadId, Vec<u8>)>> = Mutex::new(Vec::new());

    fn sink(bytes: &[u8]) -> io::Result<()> {
        WRITES
            .lock()
            .unwrap()
            .push((thread::current().id(), bytes.to_vec()));
        Ok(())
    }

    fn broken(_: &[u8]) -> io::Result<()> {
        Err(io::ErrorKind::BrokenPipe.into())
    }

    fn writes_of(thread: ThreadId) -> Vec<Vec<u8>> {
        WRITES
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t == thread)
            .map(|(_, w)| w.clone())
            .collect()
    }

    fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> (ThreadId, T) {
        let handle = thread::spawn(move || (thread::current().id(), f()));
        handle.join().unwrap()
    }

    #[test]
    fn a_batching_thread_writes_its_lines_in_one_write_when_flushed() {
        let (id, before_flush) = on_a_thread(|| {
            batch_this_thread();
            write_line(sink, b"one\n", false);
            write_line(sink, b"two\n", false);
            let before = writes_of(thread::current().id());
            flush_this_thread();
            before
        });
        assert!(before_flush.is_empty(), "nothing written before the flush");
        assert_eq!(writes_of(id), [b"one\ntwo\n".to_vec()]);
    }

    #[test]
    fn other_threads_write_each_line_at_once() {
        let (id, seen) = on_a_thread(|| {
            write_line(sink, b"now\n", false);
            writes_of(thread::current().id())
        });
        assert_eq!(seen, [b"now\n".to_vec()]);
        assert_eq!(writes_of(id).len(), 1);
    }

    #[test]
    fn what_a_thread_holds_is_written_when_it_ends() {
        let (id, ()) = on_a_thread(|| {
            batch_this_thread();
            write_line(sink, b"last words\n", false);
        });
        assert_eq!(writes_of(id), [b"last words\n".to_vec()]);
    }

    #[test]
    fn a_full_batch_is_written_without_waiting_for_a_flush() {
        let line = [b'x'; 1023]
            .iter()
            .chain(b"\n")
            .copied()
            .collect::<Vec<u8>>();
        let (id, written) = on_a_thread(move || {
            batch_this_thread();
            for _ in 0..FLUSH_AT / line.len() {
                write_line(sink, &line, false);
            }
            writes_of(thread::current().id())
        });
        assert_eq!(written.len(), 1, "one write once the batch was full");
        assert_eq!(written[0].len(), FLUSH_AT);
        assert_eq!(writes_of(id).len(), 1, "nothing left at the end");
    }

    #[test]
    fn audit_records_wait_with_the_threads_lines_until_its_next_flush() {
        let (id, before) = on_a_thread(|| {
            batch_this_thread();
            write_line(sink, b"access\n", false);
            write_line(sink, b"audit\n", true);
            let before = writes_of(thread::current().id());
            flush_this_thread();
            before
        });
        assert!(before.is_empty());
        assert_eq!(
            writes_of(id),
            [b"access\naudit\n".to_vec()],
            "one write, in order"
        );
    }

    #[test]
    fn a_failed_audit_write_is_counted() {
        let before = audit_write_failures();
        let mut writer = LineWriter {
            sink: broken,
            audit: true,
        };
        writer.write_all(b"audit\n").unwrap();
        let mut plain = LineWriter {
            sink: broken,
            audit: false,
        };
        plain.write_all(b"info\n").unwrap();
        // Batched: two audit records and a line in one failed write.
        let (_, ()) = on_a_thread(move || {
            batch_this_thread();
            write_line(broken, b"a\n", true);
            write_line(broken, b"b\n", true);
            write_line(broken, b"c\n", false);
            flush_this_thread();
        });
        assert_eq!(audit_write_failures(), before + 3);
    }
}
