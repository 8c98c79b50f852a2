//! The credential cache: one exchange for many callers, caching, and the
//! single refresh-and-retry of `/appkey` after a 401.

use idgate::testing::CredentialsParts as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use idgate::{
    context::CallContext,
    journey::{CredentialPolicy, Credentials},
    upstream::UpstreamError,
};
use tonic::Code;

use crate::support::{
    upstream::*,
    wait::{EVENT_WAIT, Gate, eventually},
};

/// An upstream whose `/credencial` issues numbered tokens (each request
/// held at `gate` first), and whose `/appkey` answers 401 to the first
/// `reject` calls, then an appkey; it records the tokens `/appkey`
/// received.
struct Upstream {
    credential: Counter,
    appkey: Counter,
    tokens_seen: Arc<Mutex<Vec<String>>>,
    credentials: Credentials,
}

async fn upstream(gate: Gate, reject: usize) -> Upstream {
    let credential = Counter::default();
    let appkey = Counter::default();
    let tokens_seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (c1, c2, seen) = (credential.clone(), appkey.clone(), tokens_seen.clone());
    let addr = serve(
        Router::new()
            .route(
                CREDENTIAL,
                post(move || {
                    let n = c1.hit();
                    let gate = gate.clone();
                    async move {
                        gate.pass().await;
                        format!(r#"{{"token":"tk-{n}","expires":"31/12/2099 23:59:59"}}"#)
                    }
                }),
            )
            .route(
                APPKEY,
                post(move |body: String| {
                    let n = c2.hit();
                    let seen = seen.clone();
                    async move {
                        let form: Vec<(String, String)> =
                            serde_urlencoded::from_str(&body).unwrap_or_default();
                        if let Some((_, t)) = form.into_iter().find(|(k, _)| k == "token") {
                            seen.lock().unwrap().push(t);
                        }
                        if n < reject {
                            (StatusCode::UNAUTHORIZED, String::new())
                        } else {
                            (StatusCode::OK, format!(r#"{{"appkey":"ak-{n}"}}"#))
                        }
                    }
                }),
            ),
    )
    .await;
    let credentials = Credentials::new(client(addr), [profile()], CredentialPolicy::default());
    Upstream {
        credential,
        appkey,
        tokens_seen,
        credentials,
    }
}

/// Spawns `n` calls of `call` and returns once every one is queued:
/// on this current-thread runtime, a call counted as started has run up to
/// its first wait (behind the one credential exchange, which `gate` holds
/// at the upstream until the test opens it).
async fn all_queued<F, T>(
    n: usize,
    gate: &Gate,
    call: impl Fn() -> F,
) -> Vec<tokio::task::JoinHandle<T>>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let started = Arc::new(AtomicUsize::new(0));
    let calls = (0..n)
        .map(|_| {
            let (started, call) = (started.clone(), call());
            tokio::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                call.await
            })
        })
        .collect();
    gate.arrivals(1).await;
    eventually("every caller is queued", EVENT_WAIT, async || {
        started.load(Ordering::SeqCst) == n
    })
    .await;
    calls
}

#[tokio::test]
async fn many_concurrent_create_appkey_calls_exchange_credentials_once() {
    let gate = Gate::closed();
    let up = upstream(gate.clone(), 0).await;
    let calls = all_queued(40, &gate, || {
        let creds = up.credentials.clone();
        async move {
            creds
                .create_appkey(&CallContext::unbounded(), "default", &end_user())
                .await
        }
    })
    .await;
    gate.open();
    for call in futures_util::future::join_all(calls).await {
        call.expect("no panic").expect("appkey");
    }
    assert_eq!(
        up.credential.get(),
        1,
        "one /credencial exchange on the server"
    );
    assert_eq!(up.credentials.exchanges(), 1);
    assert_eq!(up.appkey.get(), 40);
}

#[tokio::test]
async fn a_cached_credential_is_reused_until_expired() {
    let up = upstream(Gate::opened(), 0).await;
    let ctx = CallContext::unbounded();
    up.credentials
        .create_appkey(&ctx, "", &end_user())
        .await
        .expect("first");
    up.credentials
        .create_appkey(&ctx, "default", &end_user())
        .await
        .expect("second");
    assert_eq!(up.credential.get(), 1);
    up.credentials.expire_now();
    up.credentials
        .create_appkey(&ctx, "default", &end_user())
        .await
        .expect("third");
    assert_eq!(up.credential.get(), 2);
    assert_eq!(up.credentials.exchanges(), 2);
}

#[tokio::test]
async fn an_appkey_401_refreshes_the_credential_once_and_retries_once() {
    let up = upstream(Gate::opened(), 1).await;
    let key = up
        .credentials
        .create_appkey(&CallContext::unbounded(), "default", &end_user())
        .await
        .expect("appkey after one refresh");
    assert_eq!(key.expose(), "ak-1");
    assert_eq!(
        up.credential.get(),
        2,
        "one initial exchange plus one refresh"
    );
    assert_eq!(up.appkey.get(), 2, "one rejected call plus one retry");
    let seen = up.tokens_seen.lock().unwrap().clone();
    assert!(
        seen[0].contains("tk-0") && seen[1].contains("tk-1"),
        "the retry used the new token"
    );
}

#[tokio::test]
async fn a_second_appkey_401_is_returned_without_another_refresh() {
    let up = upstream(Gate::opened(), 10).await;
    let err = up
        .credentials
        .create_appkey(&CallContext::unbounded(), "default", &end_user())
        .await
        .unwrap_err();
    let idgate::Error::Upstream(e) = &err else {
        panic!("upstream error expected, got {err:?}");
    };
    assert!(matches!(e, UpstreamError::Status { status: 401, .. }));
    assert_eq!(up.credential.get(), 2);
    assert_eq!(up.appkey.get(), 2);
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn an_unknown_profile_is_rejected_before_any_call() {
    let up = upstream(Gate::opened(), 0).await;
    let err = up
        .credentials
        .create_appkey(&CallContext::unbounded(), "nobody", &end_user())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "OPERATOR_PROFILE_UNKNOWN");
    assert_eq!(up.credential.get(), 0);
}

#[tokio::test]
async fn callers_queued_behind_a_failed_refresh_share_its_failure() {
    let count = Counter::default();
    let c1 = count.clone();
    let gate = Gate::closed();
    let g = gate.clone();
    let addr = serve(Router::new().route(
        CREDENTIAL,
        post(move || {
            c1.hit();
            let gate = g.clone();
            async move {
                gate.pass().await;
                (StatusCode::UNAUTHORIZED, "")
            }
        }),
    ))
    .await;
    let creds = Credentials::new(client(addr), [profile()], CredentialPolicy::default());
    let calls = all_queued(10, &gate, || {
        let creds = creds.clone();
        async move {
            creds
                .create_appkey(&CallContext::unbounded(), "default", &end_user())
                .await
        }
    })
    .await;
    gate.open();
    for call in futures_util::future::join_all(calls).await {
        let err = call.expect("no panic").unwrap_err();
        assert_eq!(err.reason(), "OPERATOR_CREDENTIALS_REJECTED");
    }
    assert_eq!(
        count.get(),
        1,
        "one exchange; the waiters shared its failure"
    );
}
