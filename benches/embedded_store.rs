//! What a durable write costs on the embedded store (`[store]`): one
//! insert alone (one transaction, one fsync), and 64 inserts arriving
//! together (group commit: they share transactions, so the cost per
//! insert falls). Records are 300 bytes, about a journey record's size.
//! The figures are the disk's: run on the machine that will serve.
//!
//! `cargo bench --bench embedded_store`

use std::{
    hint::black_box,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idgate::cluster::embedded::{Embedded, Expiry, StoreConfig, Table};

const RECORDS: Table = Table::new("bench");
const VALUE: [u8; 300] = [0x5a; 300];
const CONCURRENT: u64 = 64;

fn embedded_store(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = StoreConfig {
        path: dir.path().join("data"),
        ..StoreConfig::default()
    };
    let store = Embedded::open(&config, None).expect("store");
    let expires = Expiry::after(Duration::from_secs(3600));
    // A new key per insert: every one is a new durable record.
    let next = AtomicU64::new(0);
    let key = || next.fetch_add(1, Ordering::Relaxed).to_be_bytes();
    let mut group = c.benchmark_group("embedded_store");
    group.sample_size(20);
    group.throughput(Throughput::Elements(1));
    group.bench_function("insert_one_durable", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(store.insert(RECORDS, &key(), &VALUE, expires).await).expect("insert")
        })
    });
    group.throughput(Throughput::Elements(CONCURRENT));
    group.bench_function("insert_64_concurrent_group_commit", |b| {
        b.to_async(&rt).iter(|| async {
            let inserts = (0..CONCURRENT).map(|_| {
                let store = store.clone();
                let key = key();
                tokio::spawn(async move { store.insert(RECORDS, &key, &VALUE, expires).await })
            });
            for insert in inserts.collect::<Vec<_>>() {
                black_box(insert.await.expect("task")).expect("insert");
            }
        })
    });
    group.finish();
}

criterion_group!(benches, embedded_store);
criterion_main!(benches);
