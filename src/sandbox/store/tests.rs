use super::*;
use crate::sandbox::documents::LicenceFormat;

const T0: OffsetDateTime = time::macros::datetime!(2025-01-06 12:00:00 UTC);

fn limits(max_entries: usize) -> Limits {
    Limits {
        credential_ttl: time::Duration::hours(3),
        appkey_ttl: time::Duration::minutes(5),
        challenge_window: time::Duration::minutes(1),
        retention: time::Duration::hours(24),
        processing_delay: time::Duration::seconds(5),
        max_entries,
    }
}

fn at(secs: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(secs)
}

fn user() -> EndUser {
    EndUser {
        cpf: "00000000191".into(),
        name: "TEST".into(),
        birth: time::macros::date!(1990 - 01 - 01),
    }
}

fn licence() -> SubmissionContent {
    SubmissionContent::Licence {
        format: LicenceFormat::Pdf,
        image: Base64Image::encode(b"%PDF"),
    }
}

/// An appkey created at `now`, with a token of its own.
fn appkey(store: &Store, now: OffsetDateTime) -> String {
    let (token, _) = store.issue_token("op", now).expect("token");
    store
        .create_appkey(&token, "op", user(), "EXT".into(), now)
        .expect("appkey")
}

/// An appkey with a 2D proof made at `now`.
fn proven(store: &Store, now: OffsetDateTime) -> String {
    let key = appkey(store, now);
    let ch = store.new_challenge(&key, now).expect("challenge");
    store
        .bind_2d(
            &key,
            &ch,
            LivenessOutcome::Valid,
            Base64Image::encode(b""),
            now,
        )
        .expect("bound");
    key
}

fn announced(store: &Store, now: OffsetDateTime) -> Vec<String> {
    store
        .take_finished(now)
        .0
        .into_iter()
        .map(|(key, _)| key)
        .collect()
}

#[test]
fn resubmission_while_processing_is_announced_once_when_it_finishes() {
    let store = Store::new(limits(100));
    let key = proven(&store, at(0));
    store.submit(&key, licence(), at(0)).expect("first");
    assert_eq!(store.take_finished(at(1)), (vec![], Some(at(5))));
    store.submit(&key, licence(), at(3)).expect("second");
    // The first submission's due time passes: nothing, the second is
    // the one pending.
    assert_eq!(store.take_finished(at(5)), (vec![], Some(at(8))));
    let (done, next) = store.take_finished(at(8));
    assert_eq!(done, vec![(key.clone(), JourneyStatus::Complete)]);
    assert_eq!(next, None);
    assert!(announced(&store, at(60)).is_empty());
    assert!(store.lock_pending_is_empty());
}

#[test]
fn resubmission_after_the_notice_is_announced_again() {
    let store = Store::new(limits(100));
    let key = proven(&store, at(0));
    store.submit(&key, licence(), at(0)).expect("first");
    assert_eq!(announced(&store, at(5)), vec![key.clone()]);
    store.submit(&key, licence(), at(6)).expect("second");
    assert!(announced(&store, at(10)).is_empty());
    assert_eq!(announced(&store, at(11)), vec![key.clone()]);
    assert!(announced(&store, at(60)).is_empty());
}

#[test]
fn submission_before_the_proof_is_announced_once_the_proof_is_made() {
    let store = Store::new(limits(100));
    let key = appkey(&store, at(0));
    store.submit(&key, licence(), at(0)).expect("submitted");
    // No proof: no notice is pending, even once processing ended.
    assert_eq!(store.take_finished(at(10)), (vec![], None));
    let ch = store.new_challenge(&key, at(10)).expect("challenge");
    store
        .bind_2d(
            &key,
            &ch,
            LivenessOutcome::Valid,
            Base64Image::encode(b""),
            at(10),
        )
        .expect("bound");
    assert_eq!(announced(&store, at(10)), vec![key]);
    assert!(announced(&store, at(60)).is_empty());
}

#[test]
fn journeys_are_announced_in_due_order() {
    let store = Store::new(limits(100));
    let late = proven(&store, at(0));
    let early = proven(&store, at(0));
    store.submit(&late, licence(), at(2)).expect("late");
    store.submit(&early, licence(), at(1)).expect("early");
    assert_eq!(store.take_finished(at(0)), (vec![], Some(at(6))));
    assert_eq!(announced(&store, at(6)), vec![early]);
    assert_eq!(announced(&store, at(7)), vec![late]);
}

#[test]
fn a_proof_drops_only_its_own_appkeys_challenges_and_sessions() {
    let store = Store::new(limits(100));
    let (a, b) = (appkey(&store, at(0)), appkey(&store, at(0)));
    let ch = store.new_challenge(&a, at(0)).expect("challenge");
    for key in [&a, &b] {
        store.new_challenge(key, at(0)).expect("challenge");
        store
            .new_session(key, 0, LivenessOutcome::Valid, at(0))
            .expect("session");
        store
            .new_session(key, 1, LivenessOutcome::Valid, at(0))
            .expect("session");
    }
    assert_eq!(store.sizes(at(0)).challenges, 3);
    assert_eq!(store.sizes(at(0)).sessions, 4);
    store
        .bind_2d(
            &a,
            &ch,
            LivenessOutcome::Valid,
            Base64Image::encode(b""),
            at(1),
        )
        .expect("bound");
    let sizes = store.sizes(at(1));
    assert_eq!((sizes.challenges, sizes.sessions), (1, 2));
    let state = store.appkey_state(&a, at(1)).expect("a");
    assert_eq!((state.open_challenges, state.open_sessions), (0, 0));
    let state = store.appkey_state(&b, at(1)).expect("b");
    assert_eq!((state.open_challenges, state.open_sessions), (1, 2));
    // A purged challenge leaves its appkey's key list too.
    assert_eq!(store.sizes(at(61)).challenges, 0);
    assert!(lock(&store.inner).appkeys[&b].challenge_keys.is_empty());
    assert_eq!(lock(&store.inner).appkeys[&b].session_keys.len(), 2);
}

fn purges(store: &Store) -> u64 {
    lock(&store.inner).purges
}

fn ms(ms: i64) -> OffsetDateTime {
    T0 + time::Duration::milliseconds(ms)
}

#[test]
fn a_full_table_is_not_purged_again_before_anything_can_expire() {
    let store = Store::new(limits(2));
    store.issue_token("op", at(0)).expect("first");
    store.issue_token("op", at(0)).expect("second");
    let before = purges(&store);
    for i in 0..100 {
        let refused = store.issue_token("op", ms(i * 5)).expect_err("full");
        assert_eq!(refused, FULL);
    }
    assert_eq!(purges(&store), before);
    // Once the tokens expire, the insert purges and succeeds.
    store.issue_token("op", at(3 * 3600)).expect("room again");
}

#[test]
fn a_full_table_is_purged_as_soon_as_an_entry_expires() {
    let store = Store::new(Limits {
        credential_ttl: time::Duration::milliseconds(500),
        ..limits(1)
    });
    store.issue_token("op", ms(0)).expect("first");
    let before = purges(&store);
    assert_eq!(store.issue_token("op", ms(200)).expect_err("full"), FULL);
    assert_eq!(purges(&store), before);
    // Less than a second after the last purge, but the token expired.
    store.issue_token("op", ms(600)).expect("room again");
    assert_eq!(purges(&store), before + 1);
}

impl Store {
    fn lock_pending_is_empty(&self) -> bool {
        lock(&self.inner).pending.is_empty()
    }
}
