//! The store's behaviours through its public handle, on real files.

mod child;

use std::time::Duration;

use super::*;

const JOURNEYS: Table = Table::new("journeys");
const BUDGETS: Table = Table::new("budgets");

fn config(dir: &tempfile::TempDir) -> StoreConfig {
    StoreConfig {
        path: dir.path().join("data"),
        ..StoreConfig::default()
    }
}

fn in_an_hour() -> Expiry {
    Expiry::after(Duration::from_secs(3600))
}

fn value(record: Option<Record>) -> Option<Vec<u8>> {
    record.map(|r| r.value.to_vec())
}

#[tokio::test]
async fn a_record_is_inserted_once_and_the_first_writer_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    store
        .insert(JOURNEYS, b"j1", b"first", in_an_hour())
        .await
        .unwrap();
    let second = store.insert(JOURNEYS, b"j1", b"second", in_an_hour()).await;
    assert_eq!(second, Err(StoreError::Taken));
    assert_eq!(
        value(store.get(JOURNEYS, b"j1").unwrap()),
        Some(b"first".to_vec())
    );
    // The same key in another table is another record.
    store
        .insert(BUDGETS, b"j1", b"other", in_an_hour())
        .await
        .unwrap();
    assert_eq!(store.get(JOURNEYS, b"absent").unwrap(), None);
}

#[tokio::test]
async fn put_overwrites_and_conditional_writes_act_only_on_the_expected_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    store
        .put(JOURNEYS, b"k", b"pending:a", in_an_hour())
        .await
        .unwrap();
    store
        .put(JOURNEYS, b"k", b"pending:b", in_an_hour())
        .await
        .unwrap();
    assert!(
        !store
            .replace(JOURNEYS, b"k", b"pending:a", b"done", in_an_hour())
            .await
            .unwrap()
    );
    assert!(
        store
            .replace(JOURNEYS, b"k", b"pending:b", b"done", in_an_hour())
            .await
            .unwrap()
    );
    assert_eq!(
        value(store.get(JOURNEYS, b"k").unwrap()),
        Some(b"done".to_vec())
    );
    assert!(
        !store
            .replace(JOURNEYS, b"none", b"x", b"y", in_an_hour())
            .await
            .unwrap()
    );
    assert!(!store.remove_if(JOURNEYS, b"k", b"pending:b").await.unwrap());
    assert!(store.remove_if(JOURNEYS, b"k", b"done").await.unwrap());
    assert_eq!(store.get(JOURNEYS, b"k").unwrap(), None);
    store
        .put(JOURNEYS, b"k", b"again", in_an_hour())
        .await
        .unwrap();
    assert!(store.remove(JOURNEYS, b"k").await.unwrap());
    assert!(!store.remove(JOURNEYS, b"k").await.unwrap());
}

#[tokio::test]
async fn an_expired_record_reads_as_absent_may_be_inserted_again_and_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    let past = Expiry::at_unix_ms(record::now_ms() - 1);
    store.insert(JOURNEYS, b"old", b"v1", past).await.unwrap();
    store
        .insert(JOURNEYS, b"live", b"v", in_an_hour())
        .await
        .unwrap();
    assert_eq!(store.get(JOURNEYS, b"old").unwrap(), None);
    assert_eq!(store.count(JOURNEYS, b"", 10).unwrap(), 1);
    store.insert(JOURNEYS, b"old", b"v2", past).await.unwrap();
    assert_eq!(store.sweep(100).await.unwrap(), 1, "one entry per record");
    assert_eq!(store.sweep(100).await.unwrap(), 0);
    let live = store.get(JOURNEYS, b"live").unwrap().unwrap();
    assert_eq!(live.value.as_slice(), b"v");
    assert!(live.expires > Expiry::after(Duration::from_secs(3500)));
}

#[tokio::test]
async fn a_budget_counts_every_window_or_none_and_a_refusal_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    let window = |key: &[u8], limit| Window {
        table: BUDGETS,
        key: key.to_vec(),
        limit,
        length: Duration::from_secs(60),
    };
    let windows = || vec![window(b"op:minute", 3), window(b"op:day", 2)];
    let Take::Granted(first) = store.take(windows()).await.unwrap() else {
        panic!("the first call is let through");
    };
    assert_eq!(first.iter().map(|c| c.used).collect::<Vec<_>>(), [1, 1]);
    assert!(first[0].resets_in <= Duration::from_secs(60));
    assert!(first[0].resets_in > Duration::from_secs(50));
    assert!(matches!(
        store.take(windows()).await.unwrap(),
        Take::Granted(_)
    ));
    let refused = store.take(windows()).await.unwrap();
    let Take::Refused {
        window: 1,
        retry_after,
    } = refused
    else {
        panic!("the day window is spent: {refused:?}");
    };
    assert!(retry_after <= Duration::from_secs(60));
    // The refusal counted nothing in the minute window.
    let Take::Granted(minute) = store.take(vec![window(b"op:minute", 3)]).await.unwrap() else {
        panic!("the minute window has room");
    };
    assert_eq!(minute[0].used, 3);
}

#[tokio::test]
async fn a_window_reopens_with_its_count_at_zero_once_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    let window = || {
        vec![Window {
            table: BUDGETS,
            key: b"w".to_vec(),
            limit: 1,
            length: Duration::from_millis(50),
        }]
    };
    assert!(matches!(
        store.take(window()).await.unwrap(),
        Take::Granted(_)
    ));
    assert!(matches!(
        store.take(window()).await.unwrap(),
        Take::Refused { .. }
    ));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let Take::Granted(counted) = store.take(window()).await.unwrap() else {
        panic!("the window reopened");
    };
    assert_eq!(counted[0].used, 1);
}

#[tokio::test]
async fn a_prefix_walk_sees_only_the_live_records_it_names_up_to_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    for j in [b"ana:j1", b"ana:j2", b"ana:j3", b"bob:j1"] {
        store.insert(JOURNEYS, j, b"r", in_an_hour()).await.unwrap();
    }
    let past = Expiry::at_unix_ms(1);
    store.insert(JOURNEYS, b"ana:j0", b"r", past).await.unwrap();
    store
        .insert(BUDGETS, b"ana:x", b"r", in_an_hour())
        .await
        .unwrap();
    assert_eq!(store.count(JOURNEYS, b"ana:", 100).unwrap(), 3);
    assert_eq!(store.count(JOURNEYS, b"ana:", 2).unwrap(), 2, "bounded");
    assert_eq!(store.count(JOURNEYS, b"bob:", 100).unwrap(), 1);
    assert_eq!(store.count(JOURNEYS, b"ana:", 0).unwrap(), 0);
    assert!(store.scan(JOURNEYS, b"ana:", 0).unwrap().is_empty());
    let keys: Vec<_> = store
        .scan(JOURNEYS, b"ana:", 2)
        .unwrap()
        .into_iter()
        .map(|(k, r)| (k, r.value.to_vec()))
        .collect();
    assert_eq!(
        keys,
        [
            (b"ana:j1".to_vec(), b"r".to_vec()),
            (b"ana:j2".to_vec(), b"r".to_vec())
        ]
    );
}

#[tokio::test]
async fn records_outlive_the_process_and_nothing_planted_is_in_clear_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"appkey-CANARY-52998224725-Maria da Silva";
    {
        let store = Embedded::open(&config(&dir), None).unwrap();
        store
            .insert(JOURNEYS, b"j1", secret, in_an_hour())
            .await
            .unwrap();
    }
    let raw = std::fs::read(config(&dir).store_file()).unwrap();
    for planted in [&b"CANARY"[..], b"52998224725", b"Maria"] {
        assert!(
            !raw.windows(planted.len()).any(|w| w == planted),
            "in clear on disk"
        );
    }
    let store = Embedded::open(&config(&dir), None).unwrap();
    assert_eq!(
        value(store.get(JOURNEYS, b"j1").unwrap()),
        Some(secret.to_vec())
    );
}

#[tokio::test]
async fn a_store_at_max_bytes_refuses_new_records_by_its_key_and_keeps_every_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        max_bytes: config::MIN_MAX_BYTES,
        ..config(&dir)
    };
    let store = Embedded::open(&c, None).unwrap();
    let big = [7u8; 2000];
    let mut stored = 0u32;
    let refused = loop {
        match store
            .insert(JOURNEYS, &stored.to_be_bytes(), &big, in_an_hour())
            .await
        {
            Ok(()) => stored += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(refused, StoreError::Full { max_bytes, .. } if max_bytes == c.max_bytes));
    assert!(refused.to_string().contains("store.max_bytes"), "{refused}");
    assert!(stored > 300, "about 1 MiB of 2 KB records: {stored}");
    for i in 0..stored {
        assert!(
            store.get(JOURNEYS, &i.to_be_bytes()).unwrap().is_some(),
            "record {i} kept"
        );
    }
    // A live record may still change; a removal makes room again.
    store
        .put(JOURNEYS, &0u32.to_be_bytes(), &big, in_an_hour())
        .await
        .unwrap();
    store.remove(JOURNEYS, &1u32.to_be_bytes()).await.unwrap();
    store
        .insert(JOURNEYS, b"new", &big, in_an_hour())
        .await
        .unwrap();
    // The count survives a restart.
    drop(store);
    let store = Embedded::open(&c, None).unwrap();
    let again = store.insert(JOURNEYS, b"newer", &big, in_an_hour()).await;
    assert!(matches!(again, Err(StoreError::Full { .. })), "{again:?}");
}

#[tokio::test]
async fn the_sweeper_gives_expired_records_bytes_back() {
    let dir = tempfile::tempdir().unwrap();
    let c = StoreConfig {
        max_bytes: config::MIN_MAX_BYTES,
        ..config(&dir)
    };
    let store = Embedded::open(&c, None).unwrap();
    let soon = Expiry::after(Duration::from_millis(100));
    let big = [7u8; 20_000];
    let mut i = 0u32;
    while store
        .insert(JOURNEYS, &i.to_be_bytes(), &big, soon)
        .await
        .is_ok()
    {
        i += 1;
    }
    let sweeper = store.start_sweeper(Duration::from_millis(20));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store
        .insert(JOURNEYS, b"after", &big, in_an_hour())
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sweeper made no room"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(store);
    // The sweeper ends with the store.
    tokio::time::timeout(Duration::from_secs(5), sweeper)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_full_queue_answers_busy_at_once_rather_than_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open_with_queue(&config(&dir), None, 2).unwrap();
    let writes = (0u32..64).map(|i| {
        let store = store.clone();
        async move {
            store
                .put(JOURNEYS, &i.to_be_bytes(), b"v", in_an_hour())
                .await
        }
    });
    let outcomes = futures_util::future::join_all(writes).await;
    let busy = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StoreError::Busy { queued: 2, .. })))
        .count();
    assert!(busy > 0, "{outcomes:?}");
    assert!(outcomes.iter().any(Result::is_ok));
    let answered =
        |o: &&Result<(), StoreError>| o.is_ok() || matches!(o, Err(StoreError::Busy { .. }));
    assert_eq!(outcomes.iter().filter(answered).count(), 64);
}

#[tokio::test]
async fn concurrent_writers_are_each_answered_once_their_write_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Embedded::open(&config(&dir), None).unwrap();
    let writes = (0u32..64).map(|i| {
        let store = store.clone();
        async move {
            store
                .insert(JOURNEYS, &i.to_be_bytes(), b"v", in_an_hour())
                .await
        }
    });
    let outcomes = futures_util::future::join_all(writes).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    drop(store);
    let store = Embedded::open(&config(&dir), None).unwrap();
    assert_eq!(store.count(JOURNEYS, b"", 1000).unwrap(), 64);
}

#[test]
fn an_unwritable_path_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the directory should be: refused even for root.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let c = StoreConfig {
        path: file.join("data"),
        ..StoreConfig::default()
    };
    let e = Embedded::open(&c, None).unwrap_err();
    assert!(matches!(e, StoreError::Unwritable { .. }), "{e:?}");
    assert!(e.to_string().contains(&c.path.display().to_string()), "{e}");
}

#[test]
fn a_corrupt_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(&dir);
    std::fs::create_dir_all(&c.path).unwrap();
    std::fs::write(c.store_file(), vec![0x5a; 64 * 1024]).unwrap();
    let e = Embedded::open(&c, None).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("store.redb"), "{e}");
}

#[test]
fn a_second_open_of_one_store_is_refused_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = Embedded::open(&config(&dir), None).unwrap();
    let e = Embedded::open(&config(&dir), None).unwrap_err();
    assert!(matches!(e, StoreError::Locked { .. }), "{e:?}");
    assert!(e.to_string().contains("store.redb"), "{e}");
    drop(first);
    Embedded::open(&config(&dir), None).unwrap();
}

#[tokio::test]
async fn a_store_opened_under_another_key_is_refused_rather_than_read_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let key = |b| Some(Keys::new(&[b; 32], None));
    {
        let store = Embedded::open(&config(&dir), key(1)).unwrap();
        store
            .insert(JOURNEYS, b"j", b"v", in_an_hour())
            .await
            .unwrap();
    }
    let e = Embedded::open(&config(&dir), key(2)).unwrap_err();
    assert!(matches!(e, StoreError::WrongKey { .. }), "{e:?}");
    // During a rotation the previous key opens what it sealed.
    let rotated = Some(Keys::new(&[2; 32], Some(&[1; 32])));
    let store = Embedded::open(&config(&dir), rotated).unwrap();
    assert_eq!(
        value(store.get(JOURNEYS, b"j").unwrap()),
        Some(b"v".to_vec())
    );
    // Without a [cluster] key, the key file's: created 0600 beside the file.
    let other = tempfile::tempdir().unwrap();
    Embedded::open(&config(&other), None).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&config(&other).key_file()), 0o600);
    assert_eq!(mode(&config(&other).path), 0o700);
}
