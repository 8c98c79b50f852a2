//! What a reload leaves of an open stream: the decision for each change
//! of an entry, and a guarded stream ended or narrowed by a replaced
//! table as it waits for its next message.

use std::sync::Arc;

use tokio::sync::mpsc;
use tonic_types::StatusExt as _;

use super::*;
use crate::{
    auth::{CallerConfig, Policy},
    domain::{CallerLimits, Permissions, ProfileGrant},
    proto::v1,
};

const SUBJECT: &str = "svc-a";

fn table(entry: &str) -> CallerTable {
    #[derive(serde::Deserialize)]
    struct Doc {
        callers: Vec<CallerConfig>,
    }
    let doc: Doc = toml::from_str(entry).expect("[[callers]]");
    CallerTable::build(&doc.callers, &crate::auth::Shares::UNBOUNDED).expect("table")
}

fn entry(name: &str, rest: &str) -> String {
    format!("[[callers]]\nname = \"{name}\"\njwt_subject = \"{SUBJECT}\"\n{rest}\n")
}

const WATCHER: &str = "operations = [\"watch\"]\njourneys = \"any\"\nresult_view = \"full\"";

fn caller(journeys: JourneyScope, view: ResultView, permissions: Permissions) -> Caller {
    Caller {
        name: CallerName::new("a"),
        permissions,
        profiles: ProfileGrant::Only(Arc::from(Vec::<String>::new())),
        journeys,
        result_view: view,
        limits: CallerLimits::default(),
    }
}

fn identity() -> Identity {
    Identity::JwtSubject(SUBJECT.into())
}

#[test]
fn each_narrowing_of_an_entry_ends_or_narrows_the_stream_and_nothing_else_does() {
    let watch: Permissions = [Permission::Watch].into_iter().collect();
    let any = |view| caller(JourneyScope::Any, view, watch);
    let own = caller(JourneyScope::Own, ResultView::Full, watch);
    let other = Watched::Here(Some(CallerName::new("b")));
    let mine = Watched::Here(Some(CallerName::new("a")));
    let full = ResultView::Full;

    assert_eq!(standing_of(&any(full), &other, full), Standing::Kept(full));
    assert_eq!(
        standing_of(
            &caller(JourneyScope::Any, full, Permissions::NONE),
            &other,
            full
        ),
        Standing::Revoked(Revocation::Operation)
    );
    assert_eq!(
        standing_of(&own, &other, full),
        Standing::Revoked(Revocation::Journeys)
    );
    assert_eq!(standing_of(&own, &mine, full), Standing::Kept(full));
    assert_eq!(
        standing_of(&own, &Watched::Foreign, full),
        Standing::Kept(full)
    );
    assert_eq!(
        standing_of(&own, &Watched::Unverified, full),
        Standing::Revoked(Revocation::Journeys)
    );
    assert_eq!(
        standing_of(&own, &Watched::Here(None), full),
        Standing::Revoked(Revocation::Journeys)
    );
    // A narrower view applies; a wider one waits for the next watch.
    assert_eq!(
        standing_of(&any(ResultView::StatusOnly), &other, ResultView::NoImages),
        Standing::Kept(ResultView::StatusOnly)
    );
    assert_eq!(
        standing_of(&any(full), &other, ResultView::NoImages),
        Standing::Kept(ResultView::NoImages)
    );
}

#[test]
fn a_removed_entry_or_an_identity_moved_to_another_entry_is_removed() {
    let opened = Opened {
        identity: identity(),
        name: CallerName::new("a"),
        view: ResultView::Full,
        watched: Watched::Foreign,
    };
    assert_eq!(
        opened.standing(&table(&entry("a", WATCHER))),
        Standing::Kept(ResultView::Full)
    );
    assert_eq!(
        opened.standing(&CallerTable::default()),
        Standing::Revoked(Revocation::Removed)
    );
    assert_eq!(
        opened.standing(&table(&entry("b", WATCHER))),
        Standing::Revoked(Revocation::Removed)
    );
}

/// A stream whose messages the test sends.
fn fed() -> (mpsc::UnboundedSender<WatchJourneyResponse>, WatchStream) {
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((Ok(item), rx))
    });
    (tx, Box::pin(stream))
}

fn guarded(policy: &Policy, stream: WatchStream) -> Result<WatchStream, Error> {
    let mut extensions = http::Extensions::new();
    extensions.insert(identity());
    let revocable = Revocations::new(policy.subscribe())
        .of(&extensions)
        .expect("an identity and a table");
    let caller = policy.resolve(&identity()).expect("the caller");
    revocable.ending_on_revocation(stream, &caller, Watched::Foreign)
}

#[tokio::test]
async fn a_replaced_table_without_the_caller_ends_a_waiting_stream_caller_revoked() {
    let policy = Policy::new(table(&entry("a", WATCHER)));
    let (tx, stream) = fed();
    let mut stream = guarded(&policy, stream).expect("a stream");
    let status = v1::WatchJourneyResponse {
        status: v1::JourneyStatus::Processing as i32,
        ..Default::default()
    };
    tx.send(status.clone()).expect("send");
    assert_eq!(stream.next().await.expect("an item").expect("ok"), status);

    // A reload that keeps the caller changes nothing.
    policy.replace(table(&entry("a", WATCHER)));
    tx.send(status.clone()).expect("send");
    assert_eq!(stream.next().await.expect("an item").expect("ok"), status);

    // The stream waits for its next message when the caller is removed.
    let next = tokio::spawn(async move {
        let item = stream.next().await;
        (item, stream.next().await)
    });
    policy.replace(CallerTable::default());
    let (item, after) = next.await.expect("task");
    let ended = item.expect("an item").expect_err("revoked");
    assert_eq!(ended.code(), tonic::Code::PermissionDenied);
    let info = ended.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "CALLER_REVOKED");
    assert_eq!(info.metadata["cause"], "removed");
    assert!(after.is_none(), "nothing after the end");
    drop(tx);
}

#[tokio::test]
async fn a_caller_removed_before_its_stream_opened_gets_no_stream() {
    let policy = Policy::new(table(&entry("a", WATCHER)));
    let mut extensions = http::Extensions::new();
    extensions.insert(identity());
    let revocable = Revocations::new(policy.subscribe())
        .of(&extensions)
        .expect("revocable");
    let caller = policy.resolve(&identity()).expect("the caller");
    policy.replace(table(&entry("a", "operations = [\"read_result\"]")));
    let (_tx, stream) = fed();
    assert!(matches!(
        revocable.ending_on_revocation(stream, &caller, Watched::Foreign),
        Err(Error::CallerRevoked(Revocation::Operation))
    ));
}

#[tokio::test]
async fn a_narrowed_view_applies_to_the_next_result() {
    let policy = Policy::new(table(&entry("a", WATCHER)));
    let (tx, stream) = fed();
    let mut stream = guarded(&policy, stream).expect("a stream");
    let result = v1::JourneyResult {
        status: v1::JourneyStatus::Complete as i32,
        photos: Some(v1::Photos {
            liveness_frontal: b"frontal".to_vec().into(),
            documents: Vec::new(),
        }),
        ..Default::default()
    };
    let response = v1::WatchJourneyResponse {
        status: v1::JourneyStatus::Complete as i32,
        result: Some(result),
        ..Default::default()
    };
    policy.replace(table(&entry(
        "a",
        "operations = [\"watch\"]\njourneys = \"any\"\nresult_view = \"status_only\"",
    )));
    tx.send(response).expect("send");
    let got = stream.next().await.expect("an item").expect("ok");
    let result = got.result.expect("the result");
    assert!(result.photos.is_none(), "{result:?}");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
}

#[test]
fn an_open_caller_or_a_gateway_without_a_table_is_never_revoked() {
    let mut extensions = http::Extensions::new();
    assert!(
        Revocations::new(Policy::default().subscribe())
            .of(&extensions)
            .is_none()
    );
    extensions.insert(identity());
    assert!(Revocations::default().of(&extensions).is_none());
}
