//! Property tests: every parser of outside input takes arbitrary input
//! without panicking and answers a documented error that quotes no value.
//!
//! Covered here through the public API, one concern a module: the
//! upstream wire parsers and the wire -> proto conversion (`upstream`:
//! arbitrary bytes, and JSON built from the spec's shapes), the Base64
//! image decoder against its lenient reference (`images`), the webhook
//! verifier (`webhook`: Basic and Standard Webhooks), the `grpc-timeout`
//! parser (`grpc_timeout`), the configuration loader with `IDGATE_*`
//! overrides (`configuration`: and every duration key loads, or fails
//! naming the key and quoting no value), and request validation
//! (`validation`). The webhook body parser is crate-private: its property
//! is in `src/events/webhook.rs`. This file holds what they share: the
//! case budget, the text strategies and the marker an error must not
//! quote.
//!
//! Each test sets its own case count for CI's budget (about 15 s of CPU
//! for the whole suite in a debug build); `PROPTEST_CASES=N` runs N cases
//! of every test instead (see `docs/development.md`). The seed of a failure
//! is saved beside its source file's path, in
//! `tests/proptest-regressions/properties/<module>.txt` (proptest's
//! default, `SourceParallel`), and replayed first by every test of that
//! module.

use proptest::prelude::*;

mod configuration;
mod grpc_timeout;
mod images;
mod upstream;
mod validation;
mod webhook;

/// `cases` cases, unless `PROPTEST_CASES` asks for another number.
fn cases(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

/// Text of any Unicode scalar values, control characters included.
fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=max).prop_map(String::from_iter)
}

fn any_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

/// A value distinctive enough that finding it in an error means the error
/// quotes the input. Not a valid channel name: errors may name a channel
/// (an identifier), never quote other text.
fn marker() -> impl Strategy<Value = String> {
    "MARK\\+[A-Za-z0-9]{10}"
}

/// Where strategies put the marker: replaced by a fresh [`marker`] in each
/// case (strategies are built once, not once per marker).
const PLACEHOLDER: &str = "@MARKER@";

/// True when `input` is long enough to be told apart and `text` holds it.
fn quotes(text: &str, input: &str) -> bool {
    [input, input.trim()]
        .iter()
        .any(|s| s.chars().count() >= 8 && text.contains(*s))
}
