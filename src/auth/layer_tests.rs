//! The authenticator's decisions and the layer's answers.

use std::{convert::Infallible, sync::Mutex, time::Duration};

use serde_json::json;
use tonic_types::StatusExt as _;

use super::*;
use crate::auth::{
    config::JwtConfig,
    jwt::tests::{TestKey, jwks_of},
};

#[derive(Default)]
struct Counted(Mutex<Vec<(&'static str, &'static str)>>);

impl AuthEvents for Counted {
    fn refused(&self, reason: &'static str, cause: &'static str) {
        self.0.lock().unwrap().push((reason, cause));
    }
    fn jwks_fetch_failed(&self) {}
    fn refused_from_memory(&self) {}
    fn connection_closed_for_refusals(&self) {}
}

const TABLE: &str = r#"
    [[callers]]
    name = "onboarding"
    jwt_subject = "svc-a"
    operations = ["create_journey"]
"#;

async fn authenticator(key: &TestKey, events: Arc<Counted>) -> (Authenticator, tempfile::TempPath) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, jwks_of(&[key]).as_bytes()).unwrap();
    let path = file.into_temp_path();
    let jwt: JwtConfig = toml::from_str(&format!(
        "jwks_file = {:?}\nissuer = \"iss\"\naudience = \"idgate\"",
        &*path
    ))
    .unwrap();
    let auth = AuthConfig {
        mode: AuthMode::Jwt,
        jwt: Some(jwt),
        allow_plaintext_tokens: true,
    };
    #[derive(serde::Deserialize)]
    struct Doc {
        callers: Vec<CallerConfig>,
    }
    let callers = toml::from_str::<Doc>(TABLE).unwrap().callers;
    let a = Authenticator::from_config(&auth, &callers, crate::auth::Shares::UNBOUNDED, events)
        .await
        .unwrap();
    (a, path)
}

fn token(key: &TestKey, sub: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    key.sign(&json!({"sub": sub, "iss": "iss", "aud": "idgate", "exp": exp}))
}

fn headers(authorization: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(v) = authorization {
        h.insert(AUTHORIZATION, v.parse().unwrap());
    }
    h
}

#[tokio::test]
async fn credentials_resolve_to_callers_or_are_refused() {
    let key = TestKey::es256("k");
    let (auth, _file) = authenticator(&key, Arc::default()).await;
    let ext = http::Extensions::new();
    let ok = format!("Bearer {}", token(&key, "svc-a"));
    let caller = auth.authenticate(&headers(Some(&ok)), &ext).await.unwrap();
    assert_eq!(caller.name.as_str(), "onboarding");
    let lower = format!("bearer {}", token(&key, "svc-a"));
    assert!(
        auth.authenticate(&headers(Some(&lower)), &ext)
            .await
            .is_ok()
    );
    let unknown = format!("Bearer {}", token(&key, "svc-z"));
    assert_eq!(
        auth.authenticate(&headers(Some(&unknown)), &ext).await,
        Err(Refusal::Unknown("jwt"))
    );
    assert_eq!(
        auth.authenticate(&headers(None), &ext).await,
        Err(Refusal::Unauthenticated("no_credential"))
    );
    for bad in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer    ", "token"] {
        assert_eq!(
            auth.authenticate(&headers(Some(bad)), &ext).await,
            Err(Refusal::Unauthenticated("malformed")),
            "{bad}"
        );
    }
    assert_eq!(
        auth.authenticate(&headers(Some("Bearer a.b.c")), &ext)
            .await,
        Err(Refusal::Unauthenticated("malformed"))
    );
}

#[tokio::test]
async fn the_open_authenticator_lets_everyone_in() {
    let auth = Authenticator::open(Arc::new(crate::auth::NoEvents));
    assert!(!auth.enabled());
    let caller = auth
        .authenticate(&headers(None), &http::Extensions::new())
        .await
        .unwrap();
    assert_eq!(*caller, Caller::open());
}

#[tokio::test]
async fn a_reload_swaps_the_table() {
    let key = TestKey::es256("k");
    let (auth, _file) = authenticator(&key, Arc::default()).await;
    let ok = format!("Bearer {}", token(&key, "svc-a"));
    let ext = http::Extensions::new();
    let prepared = auth.prepare_reload(&[]).unwrap();
    assert!(
        auth.authenticate(&headers(Some(&ok)), &ext).await.is_ok(),
        "a prepared reload changes nothing"
    );
    prepared.commit();
    assert_eq!(
        auth.authenticate(&headers(Some(&ok)), &ext).await,
        Err(Refusal::Unknown("jwt"))
    );
}

async fn through_layer(
    auth: Arc<Authenticator>,
    path: &str,
    authorization: Option<&str>,
) -> (Response<tonic::body::Body>, Option<String>) {
    let seen = Arc::new(Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let inner = tower::service_fn(move |r: Request<tonic::body::Body>| {
        let seen = Arc::clone(&seen2);
        async move {
            *seen.lock().unwrap() = r
                .extensions()
                .get::<Arc<Caller>>()
                .map(|c| c.name.as_str().to_owned());
            Ok::<_, Infallible>(Response::new(tonic::body::Body::empty()))
        }
    });
    let mut svc = AuthLayer::new(auth, |_| "unknown").layer(inner);
    let mut request = Request::new(tonic::body::Body::empty());
    *request.uri_mut() = path.parse().unwrap();
    *request.headers_mut() = headers(authorization);
    let response = tokio::time::timeout(Duration::from_secs(5), svc.call(request))
        .await
        .unwrap()
        .unwrap();
    let caller = seen.lock().unwrap().clone();
    (response, caller)
}

#[tokio::test]
async fn the_layer_hands_the_caller_on_or_answers_with_the_reason() {
    let key = TestKey::ed25519("k");
    let events = Arc::new(Counted::default());
    let (auth, _file) = authenticator(&key, Arc::clone(&events)).await;
    let auth = Arc::new(auth);
    let rpc = "/idgate.v1.JourneyService/CreateJourney";
    let ok = format!("Bearer {}", token(&key, "svc-a"));
    let (_, caller) = through_layer(Arc::clone(&auth), rpc, Some(&ok)).await;
    assert_eq!(caller.as_deref(), Some("onboarding"));

    let (_, caller) = through_layer(Arc::clone(&auth), "/grpc.health.v1.Health/Check", None).await;
    assert_eq!(caller, None, "health passes without a caller");

    let secret_token = token(&key, "svc-secret-subject");
    for (authorization, code, reason) in [
        (None, tonic::Code::Unauthenticated, "CALLER_UNAUTHENTICATED"),
        (
            Some(format!("Bearer {secret_token}")),
            tonic::Code::PermissionDenied,
            "CALLER_UNKNOWN",
        ),
    ] {
        let (response, caller) =
            through_layer(Arc::clone(&auth), rpc, authorization.as_deref()).await;
        assert_eq!(caller, None, "refused before the handler");
        let status = tonic::Status::from_header_map(response.headers()).unwrap();
        assert_eq!(status.code(), code);
        assert_eq!(
            status.get_error_details().error_info().unwrap().reason,
            reason
        );
        assert!(!status.message().contains("svc-secret-subject"));
        assert!(!status.message().contains(&secret_token));
    }
    assert_eq!(
        *events.0.lock().unwrap(),
        [
            ("CALLER_UNAUTHENTICATED", "no_credential"),
            ("CALLER_UNKNOWN", "no_caller_entry")
        ]
    );
}

#[tokio::test]
async fn the_twentieth_refusal_in_a_row_tells_the_connection_to_go_away() {
    use crate::net::{Activity, AgePhase, ConnectionAge};

    let key = TestKey::es256("k");
    let (auth, _file) = authenticator(&key, Arc::default()).await;
    let mut svc = AuthLayer::new(Arc::new(auth), |_| "unknown").layer(tower::service_fn(
        |_: Request<tonic::body::Body>| async {
            Ok::<_, Infallible>(Response::new(tonic::body::Body::empty()))
        },
    ));
    let conn = ConnInfo {
        remote: "127.0.0.1:1".parse().unwrap(),
        remote_text: "127.0.0.1:1".into(),
        activity: Arc::new(Activity::default()),
        age: Arc::new(ConnectionAge::new(None)),
    };
    let forged = format!("Bearer {}", token(&TestKey::es256("k"), "svc-a"));
    let good = format!("Bearer {}", token(&key, "svc-a"));
    let mut call = async |authorization: &str| {
        let mut request = Request::new(tonic::body::Body::empty());
        *request.uri_mut() = "/idgate.v1.JourneyService/CreateJourney".parse().unwrap();
        *request.headers_mut() = headers(Some(authorization));
        request.extensions_mut().insert(conn.clone());
        svc.call(request).await.unwrap();
    };
    let phase = || conn.age.phase();
    for _ in 0..MAX_REFUSALS_IN_A_ROW - 1 {
        call(&forged).await;
    }
    call(&good).await;
    for _ in 0..MAX_REFUSALS_IN_A_ROW - 1 {
        call(&forged).await;
    }
    assert_eq!(
        phase(),
        AgePhase::Open,
        "an authenticated call ends the run"
    );
    call(&forged).await;
    assert_eq!(phase(), AgePhase::Aged, "told to go away");
}
