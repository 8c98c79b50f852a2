//! A single replica's 3D session bindings on the embedded store, behind
//! its own: after a restart, a verification still goes to the channel
//! that issued its session, found by name.
//!
//! Table `bindings`: the journey reference -> the issuing channel's name,
//! expiring with `[routing] binding_ttl_secs`. A channel name only.

use std::time::Duration;

use super::{BindingStore, Bound, Issuer, MemoryBindings};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table},
        embedded_tier::{read_failed, refusal, write_failed},
        error::ClusterError,
        future::{BoxFuture, ready},
    },
    domain::JourneyRef,
};

/// The bindings' table.
const BINDINGS: Table = Table::new("bindings");

/// A single replica's bindings, durable, with its own in front (which
/// hold the issuer itself: the channel generation).
#[derive(Debug)]
pub struct EmbeddedBindings<I> {
    local: MemoryBindings<I>,
    store: Embedded,
    ttl: Duration,
}

impl<I: Issuer> EmbeddedBindings<I> {
    /// The bindings in `store`, each living `ttl`, with `local` as this
    /// process's own.
    pub(in crate::cluster) fn new(
        store: Embedded,
        ttl: Duration,
        local: MemoryBindings<I>,
    ) -> Self {
        Self { local, store, ttl }
    }
}

impl<I: Issuer> BindingStore<I> for EmbeddedBindings<I> {
    /// Bound here at once, and in the file before it answers (so the
    /// session token reaches the caller with its binding durable).
    fn bind_session(&self, journey: JourneyRef, issuer: I) -> BoxFuture<Result<(), ClusterError>> {
        let store = self.store.clone();
        let channel = issuer.name().to_owned();
        let expires = Expiry::after(self.ttl);
        let key = journey.as_str().to_owned();
        self.local.insert(journey, issuer);
        Box::pin(async move {
            store
                .put(BINDINGS, key.as_bytes(), channel.as_bytes(), expires)
                .await
                .map_err(refusal)
        })
    }

    /// This process's own binding, else the file's (bound before a
    /// restart): the channel of that name.
    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<Bound<I>>, ClusterError>> {
        if let Some(issuer) = self.local.get(journey) {
            return ready(Ok(Some(Bound::Here(issuer))));
        }
        ready(
            match self.store.get(BINDINGS, journey.as_str().as_bytes()) {
                Ok(found) => Ok(found
                    .and_then(|r| String::from_utf8(r.value.to_vec()).ok())
                    .map(Bound::Elsewhere)),
                Err(e) => {
                    read_failed(&e);
                    Err(ClusterError::Unavailable)
                }
            },
        )
    }

    /// Forgotten here at once; in the file in the background, only if it
    /// still names the issuer's channel.
    fn release_session(&self, journey: &JourneyRef, issuer: &I) {
        self.local.remove_if(journey, issuer);
        let store = self.store.clone();
        let key = journey.as_str().to_owned();
        let channel = issuer.name().to_owned();
        tokio::spawn(async move {
            if let Err(e) = store
                .remove_if(BINDINGS, key.as_bytes(), channel.as_bytes())
                .await
            {
                // Expires with its TTL.
                write_failed(&e);
            }
        });
    }

    fn local_len(&self) -> usize {
        self.local.local_len()
    }
}
