use std::sync::Arc;

use super::*;
use crate::domain::Appkey;

/// An issuer like the router's channel generations: same name, another
/// generation, is another issuer.
#[derive(Debug, Clone)]
struct Generation(Arc<String>);

impl Generation {
    fn new(name: &str) -> Self {
        Self(Arc::new(name.to_owned()))
    }
}

impl Issuer for Generation {
    fn name(&self) -> &str {
        &self.0
    }

    fn is(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn key(s: &str) -> JourneyRef {
    JourneyRef::from_appkey(&Appkey::new(s))
}

async fn bound(store: &MemoryBindings<Generation>, journey: &str) -> Option<String> {
    match store.bound_channel(&key(journey)).await.unwrap() {
        Some(Bound::Here(g)) => Some(g.name().to_owned()),
        Some(Bound::Elsewhere(name)) => panic!("one process bound {name} elsewhere"),
        None => None,
    }
}

#[tokio::test(start_paused = true)]
async fn bindings_expire_after_the_ttl() {
    let b = MemoryBindings::new(Duration::from_secs(10), 10);
    b.bind_session(key("a"), Generation::new("p"))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(bound(&b, "a").await.as_deref(), Some("p"));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(bound(&b, "a").await, None);
    tokio::time::advance(Duration::from_secs(1)).await;
    b.bind_session(key("b"), Generation::new("p"))
        .await
        .unwrap();
    assert_eq!(b.local_len(), 1, "the expired entry is swept on insert");
}

#[tokio::test(start_paused = true)]
async fn the_oldest_binding_is_evicted_past_the_bound() {
    let b = MemoryBindings::new(Duration::from_secs(60), 2);
    b.bind_session(key("a"), Generation::new("p"))
        .await
        .unwrap();
    b.bind_session(key("b"), Generation::new("p"))
        .await
        .unwrap();
    // Re-binding `a` makes `b` the oldest.
    b.bind_session(key("a"), Generation::new("q"))
        .await
        .unwrap();
    b.bind_session(key("c"), Generation::new("p"))
        .await
        .unwrap();
    assert_eq!(b.local_len(), 2);
    assert_eq!(bound(&b, "b").await, None);
    assert_eq!(bound(&b, "a").await.as_deref(), Some("q"));
    assert_eq!(bound(&b, "c").await.as_deref(), Some("p"));
}

#[tokio::test(start_paused = true)]
async fn release_spares_a_newer_session_of_another_generation() {
    let b = MemoryBindings::new(Duration::from_secs(60), 10);
    let (old, new) = (Generation::new("p"), Generation::new("p"));
    b.bind_session(key("a"), new.clone()).await.unwrap();
    b.release_session(&key("a"), &old);
    assert_eq!(bound(&b, "a").await.as_deref(), Some("p"));
    b.release_session(&key("a"), &new);
    assert_eq!(bound(&b, "a").await, None);
}

#[tokio::test(start_paused = true)]
async fn rebinding_the_same_journey_keeps_the_queue_bounded() {
    let b = MemoryBindings::new(Duration::from_secs(60), 4);
    let p = Generation::new("p");
    for _ in 0..100 {
        b.bind_session(key("a"), p.clone()).await.unwrap();
    }
    assert_eq!(b.local_len(), 1);
    let queue = lock(&b.map).queue_len();
    assert!(queue <= 8, "{queue}");
}

#[tokio::test]
async fn a_binding_made_before_a_restart_names_its_channel_after_it() {
    use crate::cluster::embedded::{Embedded, StoreConfig};
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        path: dir.path().join("data"),
        ..StoreConfig::default()
    };
    let ttl = Duration::from_secs(600);
    let bindings = |store| EmbeddedBindings::new(store, ttl, MemoryBindings::new(ttl, 10));
    let a = Generation::new("vendor-a");
    {
        let before = bindings(Embedded::open(&config, None).unwrap());
        before.bind_session(key("k1"), a.clone()).await.unwrap();
        assert!(matches!(
            before.bound_channel(&key("k1")).await,
            Ok(Some(Bound::Here(_)))
        ));
    }
    let after: EmbeddedBindings<Generation> = bindings(Embedded::open(&config, None).unwrap());
    assert!(matches!(
        after.bound_channel(&key("k1")).await,
        Ok(Some(Bound::Elsewhere(name))) if name == "vendor-a"
    ));
    assert!(matches!(after.bound_channel(&key("k2")).await, Ok(None)));
}
