//! Journeys have owners: a journey created by caller A is refused to an
//! `own` caller B on every RPC that names it, by appkey and by reference,
//! on the replica that created it and on another replica sharing Redis,
//! before any vendor call; A is served on all nine, and an `any` caller on
//! every read and watch form. Refusals name no appkey, reference or
//! caller.

use idgate::{
    auth::AuthConfig,
    config::Config,
    proto::v1,
    sandbox::{
        SandboxHandle,
        samples::{self, LivenessOutcome},
    },
};
use tonic::Code;

use crate::support::{
    fleet::Fleet,
    gateway::{
        TestGateway, assert_error, by_appkey, by_ref, happy_person, rg_images, snapshots_for,
    },
    jwt::{TestKey, bearer, callers, jwks_file, jwt_auth},
    wait::EVENT_WAIT,
};

/// Two callers of the same rights on their own journeys, and a back
/// office on any journey.
const OWNERS: &str = r#"
    [[callers]]
    name = "caller-a"
    jwt_subject = "svc-a"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]

    [[callers]]
    name = "caller-b"
    jwt_subject = "svc-b"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]

    [[callers]]
    name = "backoffice"
    jwt_subject = "svc-backoffice"
    operations = ["read_result", "watch", "session_3d"]
    journeys = "any"
"#;

/// `[auth]` and [`OWNERS`] on `c`, with the profile names `c` has.
pub fn with_owners(c: &mut Config, auth: AuthConfig) {
    with_owners_text(c, auth, OWNERS);
}

/// `[auth]` and the `[[callers]]` of `callers_text` on `c`, their
/// `operator_profiles = ["sandbox", "default"]` made the profiles `c` has.
pub fn with_owners_text(c: &mut Config, auth: AuthConfig, callers_text: &str) {
    c.auth = Some(auth);
    let profiles: Vec<String> = c
        .operator_profiles()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let text = callers_text.replace(
        r#"operator_profiles = ["sandbox", "default"]"#,
        &format!("operator_profiles = {profiles:?}"),
    );
    c.callers = callers(&text);
}

pub(super) struct Tokens {
    pub(super) a: String,
    pub(super) b: String,
    pub(super) backoffice: String,
}

pub(super) fn key_and_auth() -> (TestKey, AuthConfig) {
    let key = TestKey::es256("owners");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    (key, auth)
}

pub(super) fn tokens(key: &TestKey) -> Tokens {
    Tokens {
        a: key.token("svc-a"),
        b: key.token("svc-b"),
        backoffice: key.token("svc-backoffice"),
    }
}

/// Asserts JOURNEY_NOT_OWNED with no value of the journey or the callers.
#[track_caller]
fn assert_not_owned(status: &tonic::Status, created: &v1::CreateJourneyResponse) {
    assert_error(status, Code::PermissionDenied, "JOURNEY_NOT_OWNED");
    let text = format!("{status:?}");
    for value in [&created.appkey, &created.journey_ref, "caller-a", "svc-"] {
        assert!(!text.contains(value), "{text}");
    }
}

/// Every RPC that names a journey, as `token`, on `gw`: each refused
/// JOURNEY_NOT_OWNED, and the vendor (`sandbox`) never called.
pub(super) async fn refused_everywhere(
    gw: &TestGateway,
    sandbox: &SandboxHandle,
    token: &str,
    created: &v1::CreateJourneyResponse,
) {
    let total = || -> u64 { sandbox.all_calls().iter().map(|c| c.count).sum() };
    let before = total();
    let appkey = created.appkey.clone();
    let statuses = [
        gw.journeys()
            .get_journey_result(bearer(
                token,
                v1::GetJourneyResultRequest {
                    appkey: appkey.clone(),
                },
            ))
            .await
            .map(drop),
        gw.journeys()
            .watch_journey(bearer(token, by_appkey(&appkey)))
            .await
            .map(drop),
        gw.journeys()
            .watch_journey(bearer(token, by_ref(&created.journey_ref)))
            .await
            .map(drop),
        gw.liveness()
            .start_session3_d(bearer(
                token,
                v1::StartSession3DRequest {
                    appkey: appkey.clone(),
                    user_agent: "test".into(),
                },
            ))
            .await
            .map(drop),
        gw.liveness()
            .verify_liveness3_d(bearer(
                token,
                v1::VerifyLiveness3DRequest {
                    appkey: appkey.clone(),
                    session_token: "a-session-token".into(),
                    channel: String::new(),
                },
            ))
            .await
            .map(drop),
        gw.liveness()
            .create_challenges(bearer(
                token,
                v1::CreateChallengesRequest {
                    appkey: appkey.clone(),
                },
            ))
            .await
            .map(drop),
        gw.liveness()
            .submit_challenge_response(bearer(
                token,
                v1::SubmitChallengeResponseRequest {
                    appkey: appkey.clone(),
                    challenge_key: "a-challenge-key".into(),
                    snapshots: vec![v1::Snapshot {
                        image: samples::snapshot(LivenessOutcome::Valid).into(),
                        face_type_code: "1".into(),
                    }],
                },
            ))
            .await
            .map(drop),
        gw.documents()
            .submit_document_images(bearer(
                token,
                v1::SubmitDocumentImagesRequest {
                    appkey: appkey.clone(),
                    images: rg_images(),
                },
            ))
            .await
            .map(drop),
        gw.documents()
            .submit_digital_licence(bearer(
                token,
                v1::SubmitDigitalLicenceRequest {
                    appkey: appkey.clone(),
                    licence: Some(v1::submit_digital_licence_request::Licence::QrBinary(
                        b"licence".to_vec().into(),
                    )),
                },
            ))
            .await
            .map(drop),
    ];
    for (i, status) in statuses.into_iter().enumerate() {
        let err = status.expect_err(&format!("call {i} refused"));
        assert_not_owned(&err, created);
    }
    assert_eq!(total(), before, "no vendor call for a refused caller");
}

/// The owner's journeys served to it on all nine call forms: a 3D proof,
/// documents, the result and a watch by reference and by appkey on
/// `created`; a 2D proof and a digital licence on a second journey, since
/// a journey takes one proof and one document submission.
async fn served(gw: &TestGateway, token: &str, created: &v1::CreateJourneyResponse) {
    let appkey = created.appkey.clone();
    let mut l = gw.liveness();
    let s = l
        .start_session3_d(bearer(
            token,
            v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "test".into(),
            },
        ))
        .await
        .expect("the owner starts a session")
        .into_inner();
    let verdict = l
        .verify_liveness3_d(bearer(
            token,
            v1::VerifyLiveness3DRequest {
                appkey: appkey.clone(),
                session_token: s.session_token,
                channel: s.channel,
            },
        ))
        .await
        .expect("the owner verifies")
        .into_inner();
    assert!(verdict.verdict.expect("verdict").valid);
    gw.documents()
        .submit_document_images(bearer(
            token,
            v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            },
        ))
        .await
        .expect("the owner submits documents");
    reads_and_watches(gw, token, created, "the owner").await;

    let second = create(gw, token).await;
    let challenges = l
        .create_challenges(bearer(
            token,
            v1::CreateChallengesRequest {
                appkey: second.appkey.clone(),
            },
        ))
        .await
        .expect("the owner creates challenges")
        .into_inner();
    let verdict = l
        .submit_challenge_response(bearer(
            token,
            v1::SubmitChallengeResponseRequest {
                appkey: second.appkey.clone(),
                challenge_key: challenges.challenge_key.clone(),
                snapshots: snapshots_for(&challenges, LivenessOutcome::Valid),
            },
        ))
        .await
        .expect("the owner answers the challenges")
        .into_inner();
    assert!(verdict.verdict.expect("verdict").valid);
    let licence = gw
        .documents()
        .submit_digital_licence(bearer(
            token,
            v1::SubmitDigitalLicenceRequest {
                appkey: second.appkey.clone(),
                licence: Some(v1::submit_digital_licence_request::Licence::QrBinary(
                    samples::digital_licence_binary().into(),
                )),
            },
        ))
        .await
        .expect("the owner submits a digital licence")
        .into_inner();
    assert!(licence.document_code > 0);
}

/// The read and watch forms on `created` served to `token`: its result,
/// and a watch by reference and by appkey that each yield an item.
async fn reads_and_watches(
    gw: &TestGateway,
    token: &str,
    created: &v1::CreateJourneyResponse,
    who: &str,
) {
    gw.journeys()
        .get_journey_result(bearer(
            token,
            v1::GetJourneyResultRequest {
                appkey: created.appkey.clone(),
            },
        ))
        .await
        .unwrap_or_else(|e| panic!("{who} reads the result: {e:?}"));
    for (form, request) in [
        ("reference", by_ref(&created.journey_ref)),
        ("appkey", by_appkey(&created.appkey)),
    ] {
        let mut stream = gw
            .journeys()
            .watch_journey(bearer(token, request))
            .await
            .unwrap_or_else(|e| panic!("{who} watches by {form}: {e:?}"))
            .into_inner();
        let first = tokio::time::timeout(EVENT_WAIT, stream.message())
            .await
            .unwrap_or_else(|_| panic!("{who}'s watch by {form} yields an item in time"))
            .unwrap_or_else(|e| panic!("{who}'s watch by {form}: {e:?}"));
        assert!(first.is_some(), "{who}'s watch by {form} yields an item");
    }
}

pub(super) async fn create(gw: &TestGateway, token: &str) -> v1::CreateJourneyResponse {
    gw.journeys()
        .create_journey(bearer(token, happy_person()))
        .await
        .expect("create")
        .into_inner()
}

#[tokio::test]
async fn a_journey_is_refused_to_another_own_caller_and_served_to_its_owner() {
    let (key, auth) = key_and_auth();
    let gw = TestGateway::start_with(|c| with_owners(c, auth)).await;
    let t = tokens(&key);
    let created = create(&gw, &t.a).await;

    refused_everywhere(&gw, gw.sandbox(), &t.b, &created).await;
    served(&gw, &t.a, &created).await;
    // B's own journey is B's, and A may not touch it either.
    let of_b = create(&gw, &t.b).await;
    let err = gw
        .journeys()
        .watch_journey(bearer(&t.a, by_ref(&of_b.journey_ref)))
        .await
        .expect_err("A may not watch B's journey");
    assert_not_owned(&err, &of_b);
    // A back office (`journeys = "any"`) reads and watches a journey it
    // did not create, by appkey and by reference.
    reads_and_watches(&gw, &t.backoffice, &created, "an any caller").await;
    let metrics = gw.metrics_text().await;
    assert!(
        super::refusals(&metrics, "JOURNEY_NOT_OWNED", "journey") >= 10.0,
        "refusals counted"
    );
    gw.stop().await;
}

#[tokio::test]
async fn ownership_holds_across_replicas_sharing_redis() {
    let (key, auth) = key_and_auth();
    let mut fleet = Fleet::start(0, 1).await;
    fleet
        .add_replicas_with(2, |c| with_owners(c, auth.clone()))
        .await;
    let t = tokens(&key);
    let (one, other) = (&fleet.replicas[0], &fleet.replicas[1]);
    let created = create(one, &t.a).await;

    refused_everywhere(other, &fleet.sandbox, &t.b, &created).await;
    refused_everywhere(one, &fleet.sandbox, &t.b, &created).await;
    served(other, &t.a, &created).await;
    fleet.stop().await;
}
