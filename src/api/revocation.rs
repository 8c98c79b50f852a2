//! Open `WatchJourney` streams under a configuration reload: a stream
//! outlives the call that opened it (up to `[watch] max_stream_secs`), so
//! the caller it was admitted as is checked again whenever a reload
//! replaces the `[[callers]]` table.
//!
//! The stream re-resolves the identity it was opened with in the new
//! table (an identity moved to another entry is not the same caller) and
//! then, by what it still may:
//!
//! | the reload ...                                  | the stream                                   |
//! |-------------------------------------------------|----------------------------------------------|
//! | removes the entry (or moves the identity)       | ends `PERMISSION_DENIED` / `CALLER_REVOKED`, `cause` `removed` |
//! | drops `watch` from its operations               | ends, `cause` `operation`                    |
//! | narrows its journeys to `own`, not this one's   | ends, `cause` `journeys`                     |
//! | narrows its `result_view`                       | goes on; the next result is in the narrower view |
//! | widens or keeps what it may                     | goes on as it was (a wider view applies to the next watch) |
//!
//! The end comes as soon as the reload is committed: the stream wakes on
//! the table's update ([`CallerUpdates`]), not on its next message.
//! Between reloads a message costs one poll of a pending notification;
//! the table is looked up only when a reload happened.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::{Stream, StreamExt as _, stream};

use super::view;
use crate::{
    Error,
    auth::{CallerTable, CallerUpdates, Identity, Refusals},
    domain::{Caller, CallerName, JourneyScope, Permission, ResultView, Revocation},
    events::WatchStream,
    journey::Issued,
    proto::v1::WatchJourneyResponse,
};

/// The caller tables a [`super::JourneyApi`] re-checks its open streams
/// against; none on an open gateway (nothing to revoke). Cheap to clone.
#[derive(Clone, Default)]
pub(super) struct Revocations {
    updates: Option<CallerUpdates>,
}

impl Revocations {
    /// Streams re-checked on every table `updates` brings.
    pub(super) fn new(updates: CallerUpdates) -> Self {
        Self {
            updates: Some(updates),
        }
    }

    /// What a stream of the request with `extensions` is re-checked by:
    /// the identity the auth layer resolved, and the refusal counter it
    /// left. `None` without a table or an identity (the open caller).
    pub(super) fn of(&self, extensions: &http::Extensions) -> Option<Revocable> {
        Some(Revocable {
            identity: extensions.get::<Identity>()?.clone(),
            updates: self.updates.clone()?,
            refusals: extensions.get::<Refusals>().cloned(),
        })
    }
}

/// Whose journey a stream watches, as the access check found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Watched {
    /// Issued here, owned by this caller (`None`: created while the
    /// gateway ran open).
    Here(Option<CallerName>),
    /// A foreign appkey `[journeys] accept_foreign_appkeys` lets through.
    Foreign,
    /// Not found while the fleet's records were out of reach (served to
    /// `any` callers only).
    Unverified,
}

impl From<&Issued> for Watched {
    fn from(issued: &Issued) -> Self {
        match issued {
            Issued::Here(record) => Watched::Here(record.owner.clone()),
            Issued::Foreign => Watched::Foreign,
            Issued::Unverified => Watched::Unverified,
        }
    }
}

/// A stream about to open, and what re-checks it.
pub(super) struct Revocable {
    identity: Identity,
    updates: CallerUpdates,
    refusals: Option<Refusals>,
}

/// What a stream was opened as.
struct Opened {
    identity: Identity,
    name: CallerName,
    view: ResultView,
    watched: Watched,
}

/// What a caller table leaves of an open stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// It goes on, with this view (never wider than the one it opened
    /// with).
    Kept(ResultView),
    /// It ends.
    Revoked(Revocation),
}

impl Opened {
    fn standing(&self, table: &CallerTable) -> Standing {
        let Some(now) = table.still(&self.identity, &self.name) else {
            return Standing::Revoked(Revocation::Removed);
        };
        standing_of(&now, &self.watched, self.view)
    }
}

/// What `now` (the caller's entry after a reload) leaves of a stream on
/// `watched` opened with `view`.
fn standing_of(now: &Caller, watched: &Watched, view: ResultView) -> Standing {
    if !now.may(Permission::Watch) {
        return Standing::Revoked(Revocation::Operation);
    }
    let touches = match watched {
        Watched::Here(owner) => now.may_touch(owner.as_ref()),
        Watched::Foreign => true,
        Watched::Unverified => now.journeys == JourneyScope::Any,
    };
    if !touches {
        return Standing::Revoked(Revocation::Journeys);
    }
    Standing::Kept(now.result_view.min(view))
}

impl Revocable {
    /// `stream`, opened by `caller` on `watched`, ended or narrowed by
    /// the reloads from now on. A reload already in force since the
    /// caller was resolved is checked at once: `CALLER_REVOKED` then,
    /// instead of a stream.
    pub(super) fn ending_on_revocation(
        self,
        stream: WatchStream,
        caller: &Caller,
        watched: Watched,
    ) -> Result<WatchStream, Error> {
        let Self {
            identity,
            mut updates,
            refusals,
        } = self;
        let opened = Opened {
            identity,
            name: caller.name.clone(),
            view: caller.result_view,
            watched,
        };
        let view = match opened.standing(&updates.borrow_and_update()) {
            Standing::Kept(view) => view,
            Standing::Revoked(why) => return Err(Error::CallerRevoked(why)),
        };
        let opened_view = opened.view;
        let name = opened.name.clone();
        let standings = stream::unfold((updates, opened), |(mut updates, opened)| async move {
            // An error: the table's sender is gone with the gateway.
            updates.changed().await.ok()?;
            let standing = opened.standing(&updates.borrow_and_update());
            Some((standing, (updates, opened)))
        });
        Ok(Box::pin(Guarded {
            inner: stream,
            standings: standings.boxed(),
            view,
            opened_view,
            name,
            refusals,
            done: false,
        }))
    }
}

/// A watch stream that a reload can end or narrow.
struct Guarded {
    inner: WatchStream,
    /// One item per reload: what it left of the stream.
    standings: Pin<Box<dyn Stream<Item = Standing> + Send>>,
    /// The view results are given in now.
    view: ResultView,
    /// The view `inner` builds results in.
    opened_view: ResultView,
    name: CallerName,
    refusals: Option<Refusals>,
    done: bool,
}

impl Guarded {
    fn revoked(&mut self, why: Revocation) -> tonic::Status {
        self.done = true;
        let error = Error::CallerRevoked(why);
        if let Some(refusals) = &self.refusals {
            refusals.0.refused(error.reason().as_str(), why.as_str());
        }
        tracing::info!(
            caller = %self.name,
            cause = why.as_str(),
            "a WatchJourney stream ended: a configuration reload revoked its caller"
        );
        error.into()
    }

    /// `response` in the view in force, when a reload narrowed it.
    fn viewed(&self, mut response: WatchJourneyResponse) -> WatchJourneyResponse {
        if self.view < self.opened_view {
            response.result = response.result.map(|r| view::apply(self.view, r));
        }
        response
    }
}

impl Stream for Guarded {
    type Item = Result<WatchJourneyResponse, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        // Reloads first: a revoked caller is sent nothing more.
        while let Poll::Ready(standing) = this.standings.as_mut().poll_next(cx) {
            match standing {
                Some(Standing::Kept(view)) => this.view = view,
                Some(Standing::Revoked(why)) => {
                    return Poll::Ready(Some(Err(this.revoked(why))));
                }
                None => {
                    // No more tables will come: nothing left to watch for.
                    this.standings = stream::pending().boxed();
                    break;
                }
            }
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(response))) => Poll::Ready(Some(Ok(this.viewed(response)))),
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

#[cfg(test)]
#[path = "revocation_tests.rs"]
mod tests;
