//! Encoded spans waiting for export, in chunks of one export each.
//!
//! A serving thread appends the span it just ended to the newest chunk
//! (a new one once that holds a batch); the export thread takes the oldest.
//! Spans are grouped by instrumentation scope inside a chunk, as OTLP
//! groups them inside a request.

use std::collections::VecDeque;

use opentelemetry::InstrumentationScope;

use crate::telemetry::otlp::wire::{self, EncodedResource, EncodedScope};

/// One export's worth of encoded spans.
#[derive(Debug, Default)]
pub(super) struct Chunk {
    scopes: Vec<ScopeSpans>,
    spans: usize,
}

#[derive(Debug)]
struct ScopeSpans {
    scope: InstrumentationScope,
    encoded: EncodedScope,
    spans: Vec<u8>,
}

impl Chunk {
    /// Spans in the chunk.
    pub(super) fn spans(&self) -> usize {
        self.spans
    }

    /// The chunk as an `ExportTraceServiceRequest` of `resource`.
    pub(super) fn request(&self, resource: &EncodedResource) -> Vec<u8> {
        wire::request(
            resource,
            self.scopes.iter().map(|s| (&s.encoded, s.spans.as_slice())),
        )
    }

    fn push(&mut self, scope: &InstrumentationScope, span: &[u8], capacity: usize) {
        let group = match self.scopes.iter().position(|s| s.scope == *scope) {
            Some(i) => &mut self.scopes[i],
            None => {
                // The first scope of a chunk (in practice the only one)
                // gets room for the whole chunk at once.
                let capacity = if self.scopes.is_empty() { capacity } else { 0 };
                self.scopes.push(ScopeSpans {
                    scope: scope.clone(),
                    encoded: EncodedScope::new(scope),
                    spans: Vec::with_capacity(capacity),
                });
                self.scopes.last_mut().expect("just pushed")
            }
        };
        group.spans.extend_from_slice(span);
        self.spans += 1;
    }

    fn bytes(&self) -> usize {
        self.scopes.iter().map(|s| s.spans.len()).sum()
    }
}

/// The chunks waiting, oldest first.
#[derive(Debug)]
pub(super) struct Pending {
    chunks: VecDeque<Chunk>,
    waiting: usize,
    batch: usize,
    /// The size of the last full chunk, to allocate the next one at once.
    chunk_bytes: usize,
}

impl Pending {
    /// An empty queue whose chunks hold `batch` spans at most.
    pub(super) fn new(batch: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            waiting: 0,
            batch: batch.max(1),
            chunk_bytes: 0,
        }
    }

    /// Spans waiting.
    pub(super) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Appends one span written by [`wire::put_span`]. True when this span
    /// filled its chunk, which is then ready for export.
    pub(super) fn push(&mut self, scope: &InstrumentationScope, span: &[u8]) -> bool {
        if self.chunks.back().is_none_or(|c| c.spans >= self.batch) {
            self.chunks.push_back(Chunk::default());
        }
        let capacity = self.chunk_bytes;
        let chunk = self.chunks.back_mut().expect("a chunk with room");
        chunk.push(scope, span, capacity);
        self.waiting += 1;
        let full = chunk.spans >= self.batch;
        if full {
            self.chunk_bytes = chunk.bytes();
        }
        full
    }

    /// Chunks waiting, the last perhaps not full.
    pub(super) fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The oldest chunk if it is full, or if `partial` whatever it holds.
    pub(super) fn take(&mut self, partial: bool) -> Option<Chunk> {
        let front = self.chunks.front()?;
        if front.spans < self.batch && !partial {
            return None;
        }
        let chunk = self.chunks.pop_front()?;
        self.waiting -= chunk.spans;
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &'static str) -> InstrumentationScope {
        InstrumentationScope::builder(name).build()
    }

    #[test]
    fn a_chunk_is_ready_when_it_holds_a_batch_and_not_before() {
        let mut pending = Pending::new(3);
        assert!(!pending.push(&scope("a"), b"1"));
        assert!(!pending.push(&scope("b"), b"2"));
        assert!(pending.take(false).is_none(), "not yet a batch");
        assert!(pending.push(&scope("a"), b"3"), "the third fills it");
        assert!(
            !pending.push(&scope("a"), b"4"),
            "the fourth starts a chunk"
        );
        assert_eq!((pending.waiting(), pending.chunks()), (4, 2));

        let chunk = pending.take(false).expect("the full chunk");
        assert_eq!(chunk.spans(), 3);
        assert_eq!(chunk.scopes.len(), 2, "grouped by scope");
        assert_eq!(chunk.scopes[0].spans, b"13");
        assert!(pending.take(false).is_none(), "the rest is not a batch");
        assert_eq!(pending.take(true).expect("partial").spans(), 1);
        assert_eq!((pending.waiting(), pending.chunks()), (0, 0));
        assert!(pending.take(true).is_none());
    }
}
