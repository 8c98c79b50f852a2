//! What the log layer records: the `RUST_LOG` directives (or the
//! builder's), and idgate's own spans at INFO whatever those say, and the
//! audit records (target `idgate::audit`) whatever those say: the record
//! of processing of personal data (LGPD art. 37) is not a verbosity an
//! operator turns down with the log level.
//!
//! idgate's spans exist whatever the log level: a server span keeps the
//! caller's context, which outgoing calls pass on when nothing else records
//! a span (`propagation::caller_of`).
//!
//! Two costs of the obvious `EnvFilter.or(filter_fn(..))` are avoided here,
//! both paid on every span operation of every call (a call enters and
//! exits its spans, two or more, on every poll):
//!
//! - `EnvFilter` keeps a map of live spans, under a lock shared by every
//!   thread, for its span-scoped directives (`target[span{field=value}]`):
//!   it takes that lock and hashes the span's id when a span opens, is
//!   entered, exited, recorded or closed. Without such directives the map
//!   stays empty and every one of those look-ups finds nothing, so
//!   [`LogFilter`] skips them: the same answers, without a lock that two
//!   serving threads take turns to own.
//! - As a per-layer filter it makes the registry look the span up again on
//!   every operation, to ask whether this layer cares. Where the log layer
//!   is the only layer, [`LogFilter`] serves as a global filter instead
//!   (it is a [`Layer`] too), which asks nothing per operation.

use tracing::{
    Level, Metadata, Subscriber,
    span::{Attributes, Id, Record},
    subscriber::Interest,
};
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::LevelFilter,
    layer::{Context, Filter},
    registry::LookupSpan,
};

/// The `tracing` target prefix of this crate's spans.
const OWN_TARGET: &str = "idgate";

use super::audit::AUDIT_TARGET;

/// The log layer's filter: `directives`, and idgate's own spans at INFO.
pub(super) struct LogFilter {
    directives: EnvFilter,
    /// Whether `directives` has span-scoped directives, which need to see
    /// every span's life to know which spans they match.
    span_scoped: bool,
}

impl LogFilter {
    pub(super) fn new(directives: EnvFilter) -> Self {
        // Span-scoped directives, and only they, are written with brackets
        // (`target[span{field}]=level`); `EnvFilter` prints each directive
        // as it parsed it.
        let span_scoped = directives.to_string().contains('[');
        Self {
            directives,
            span_scoped,
        }
    }

    fn interest<S: Subscriber>(&self, meta: &'static Metadata<'static>) -> Interest {
        // Asked first whatever the answer: this is where `EnvFilter` learns
        // which callsites its span-scoped directives match.
        let directed = <EnvFilter as Layer<S>>::register_callsite(&self.directives, meta);
        if always(meta) {
            Interest::always()
        } else {
            directed
        }
    }

    fn level_hint(&self) -> Option<LevelFilter> {
        // `None` is "anything": it stays `None`.
        self.directives
            .max_level_hint()
            .map(|hint| hint.max(LevelFilter::INFO))
    }
}

/// What is recorded whatever the directives say: idgate's own spans and
/// audit records.
fn always(meta: &Metadata<'_>) -> bool {
    own_span(meta) || (meta.is_event() && meta.target() == AUDIT_TARGET)
}

/// Whether `meta` is one of idgate's spans at INFO or more severe.
fn own_span(meta: &Metadata<'_>) -> bool {
    meta.is_span()
        && *meta.level() <= Level::INFO
        && meta.target().split("::").next() == Some(OWN_TARGET)
}

/// The span hooks of [`Filter`] and [`Layer`], alike: `EnvFilter`'s, when
/// it has span-scoped directives; nothing otherwise.
macro_rules! span_hooks {
    () => {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, cx: Context<'_, S>) {
            if self.span_scoped {
                self.directives.on_new_span(attrs, id, cx);
            }
        }

        fn on_record(&self, id: &Id, values: &Record<'_>, cx: Context<'_, S>) {
            if self.span_scoped {
                self.directives.on_record(id, values, cx);
            }
        }

        fn on_enter(&self, id: &Id, cx: Context<'_, S>) {
            if self.span_scoped {
                self.directives.on_enter(id, cx);
            }
        }

        fn on_exit(&self, id: &Id, cx: Context<'_, S>) {
            if self.span_scoped {
                self.directives.on_exit(id, cx);
            }
        }

        fn on_close(&self, id: Id, cx: Context<'_, S>) {
            if self.span_scoped {
                self.directives.on_close(id, cx);
            }
        }
    };
}

impl<S> Filter<S> for LogFilter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        always(meta) || self.directives.enabled(meta, cx.clone())
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest::<S>(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.level_hint()
    }

    span_hooks!();
}

impl<S> Layer<S> for LogFilter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest::<S>(meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, cx: Context<'_, S>) -> bool {
        always(meta) || self.directives.enabled(meta, cx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.level_hint()
    }

    span_hooks!();
}
