//! `/challenge` and `/captcha`: 2D liveness.

use idgate::sandbox::samples::{self, HAPPY_PERSON, LivenessOutcome};

use crate::support::sandbox::start;

#[tokio::test]
async fn challenge_returns_the_documented_shape() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let r = env.challenge(&appkey).await;
    assert_eq!(r.status, 200);
    assert!(!r.str("chkey").is_empty());
    for key in [
        "totalTime",
        "numberOfChallenges",
        "snapFrequenceInMillis",
        "snapNumber",
    ] {
        assert!(r.body[key].is_u64(), "{key}");
    }
    let challenges = r.body["challenges"].as_array().expect("array");
    assert_eq!(
        challenges.len() as u64,
        r.body["numberOfChallenges"].as_u64().unwrap_or(0)
    );
    for c in challenges {
        assert!(c["mensagem"].is_string());
        assert!(c["tempoEmSegundos"].is_u64());
        assert!(c["tipoFace"]["codigo"].is_string());
        assert!(c["tipoFace"]["imagem"].is_string());
    }
}

#[tokio::test]
async fn an_appkey_generates_many_challenges_before_captcha() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let first = env.challenge(&appkey).await.str("chkey");
    let second = env.challenge(&appkey).await.str("chkey");
    assert_ne!(first, second);
    // Either challenge may be the one executed.
    assert_eq!(
        env.captcha(&appkey, &first, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn captcha_binds_the_appkey_so_challenge_and_second_captcha_answer_401() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let chkey = env.challenge(&appkey).await.str("chkey");
    let other = env.challenge(&appkey).await.str("chkey");
    assert_eq!(
        env.captcha(&appkey, &chkey, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
    assert_eq!(env.challenge(&appkey).await.status, 401);
    assert_eq!(
        env.captcha(&appkey, &other, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    assert_eq!(
        env.captcha(&appkey, &chkey, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    let root = crate::support::sandbox::standard(&env.sandbox.base_url());
    assert_eq!(env.session_token(&root, &appkey, None).await.status, 401);
}

#[tokio::test]
async fn challenges_are_void_60_seconds_after_generation() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let chkey = env.challenge(&appkey).await.str("chkey");
    env.advance(60);
    assert_eq!(
        env.captcha(&appkey, &chkey, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    // The appkey is not bound: new challenges can be generated and executed.
    let fresh = env.challenge(&appkey).await.str("chkey");
    env.advance(59);
    assert_eq!(
        env.captcha(&appkey, &fresh, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn captcha_answers_401_for_an_unknown_chkey_or_another_appkeys_chkey() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let other_appkey = env.appkey(HAPPY_PERSON).await;
    let others_chkey = env.challenge(&other_appkey).await.str("chkey");
    assert_eq!(
        env.captcha(&appkey, "unknown", LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    assert_eq!(
        env.captcha(&appkey, &others_chkey, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    assert_eq!(
        env.captcha("unknown", &others_chkey, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn snapshot_markers_choose_the_2d_verdict() {
    let env = start().await;
    let cases = [
        (LivenessOutcome::Valid, true, 200.0),
        (LivenessOutcome::Invalid, false, 300.1),
        (LivenessOutcome::Blocked, false, 300.2),
    ];
    for (outcome, valid, cod_id) in cases {
        let appkey = env.appkey(HAPPY_PERSON).await;
        let r = env.liveness_2d(&appkey, outcome).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["valid"], valid, "{outcome:?}");
        assert_eq!(r.body["codID"].as_f64(), Some(cod_id));
        assert!(r.body["cause"].is_string());
        let protocol = r.str("protocol");
        assert!(!protocol.is_empty() && protocol.bytes().all(|b| b.is_ascii_digit()));
    }
}

#[tokio::test]
async fn snapshots_without_marker_give_a_valid_proof() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let chkey = env.challenge(&appkey).await.str("chkey");
    let selfie = samples::selfie();
    let images = samples::encode_snapshots([("cod01", selfie.as_slice())]);
    let r = env
        .post_form(
            &env.core("/captcha"),
            &[("appkey", &appkey), ("chkey", &chkey), ("images", &images)],
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["codID"].as_f64(), Some(200.0));
}

#[tokio::test]
async fn captcha_with_malformed_images_answers_400_and_keeps_the_appkey_unbound() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let chkey = env.challenge(&appkey).await.str("chkey");
    for images in ["", "not snapshots", "data:image/jpeg;base64,type:cod01,%%%"] {
        let r = env
            .post_form(
                &env.core("/captcha"),
                &[("appkey", &appkey), ("chkey", &chkey), ("images", images)],
            )
            .await;
        assert_eq!(r.status, 400, "{images}");
    }
    assert_eq!(
        env.captcha(&appkey, &chkey, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
}
