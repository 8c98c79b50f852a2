//! Views of the result over real sockets: a `no_images` caller is given
//! no image or photo, a `status_only` caller neither OCR, name, CPF,
//! parents nor image, on `GetJourneyResult` and on `WatchJourney`; a
//! `full` caller is given everything on both (so the canaries are really
//! there).

use idgate::proto::v1;
use prost::Message as _;

use super::owners::with_owners_text;
use crate::support::{
    gateway::{TestGateway, by_ref, drain_within, happy_person, rg_images},
    jwt::{TestKey, bearer, jwks_file, jwt_auth},
    wait::EVENT_WAIT,
};

const VIEWERS: &str = r#"
    [[callers]]
    name = "creator"
    jwt_subject = "svc-creator"
    operator_profiles = ["sandbox"]
    operations = ["create_journey", "session_3d", "verify_3d", "documents", "read_result", "watch"]

    [[callers]]
    name = "no-images"
    jwt_subject = "svc-no-images"
    operations = ["read_result", "watch"]
    journeys = "any"
    result_view = "no_images"

    [[callers]]
    name = "status"
    jwt_subject = "svc-status"
    operations = ["read_result", "watch"]
    journeys = "any"
    result_view = "status_only"
"#;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The personal values of a full result: the CPF, name, parents,
/// birthplace and RG number the OCR read, and a slice of every image.
fn canaries(full: &v1::JourneyResult) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut text: Vec<Vec<u8>> = Vec::new();
    let rg = full
        .document_analysis
        .as_ref()
        .and_then(|d| d.ocr.as_ref())
        .and_then(|o| o.rg.as_ref())
        .expect("the full result has the RG's OCR");
    assert!(!rg.cpf.is_empty() && !rg.name.is_empty(), "{rg:?}");
    for value in [
        &rg.cpf,
        &rg.name,
        &rg.parents,
        &rg.father_name,
        &rg.mother_name,
        &rg.birthplace,
        &rg.rg_number,
    ] {
        if !value.is_empty() {
            text.push(value.as_bytes().to_vec());
        }
    }
    let photos = full.photos.as_ref().expect("the full result has photos");
    let mut images = vec![photos.liveness_frontal.to_vec()];
    images.extend(photos.documents.iter().map(|d| d.image.to_vec()));
    let images = images
        .into_iter()
        .filter(|i| i.len() >= 64)
        .map(|i| i[i.len() / 2..i.len() / 2 + 48].to_vec())
        .collect::<Vec<_>>();
    assert!(!images.is_empty(), "the full result holds images");
    (text, images)
}

#[tokio::test]
async fn no_images_and_status_only_hold_none_of_the_persons_canaries() {
    let key = TestKey::es256("views");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| with_owners_text(c, auth, VIEWERS)).await;
    let creator = key.token("svc-creator");

    let created = gw
        .journeys()
        .create_journey(bearer(&creator, happy_person()))
        .await
        .expect("create")
        .into_inner();
    let appkey = created.appkey.clone();
    let mut l = gw.liveness();
    let s = l
        .start_session3_d(bearer(
            &creator,
            v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "test".into(),
            },
        ))
        .await
        .expect("session")
        .into_inner();
    l.verify_liveness3_d(bearer(
        &creator,
        v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: s.session_token,
            channel: s.channel,
        },
    ))
    .await
    .expect("verify");
    gw.documents()
        .submit_document_images(bearer(
            &creator,
            v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            },
        ))
        .await
        .expect("documents");
    gw.finish_processing();

    let read = async |token: &str| {
        gw.journeys()
            .get_journey_result(bearer(
                token,
                v1::GetJourneyResultRequest {
                    appkey: appkey.clone(),
                },
            ))
            .await
            .expect("result")
            .into_inner()
    };
    let watch = async |token: &str| {
        let stream = gw
            .journeys()
            .watch_journey(bearer(token, by_ref(&created.journey_ref)))
            .await
            .expect("watch")
            .into_inner();
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert!(end.is_none(), "{end:?}");
        let last = items.last().expect("a result").clone();
        assert!(last.result.is_some(), "the stream ends with the result");
        last
    };

    let full = read(&creator).await;
    let (text, images) = canaries(full.result.as_ref().expect("result"));
    let full_bytes = full.encode_to_vec();
    // The full view holds every canary on both sides, so their absence
    // below is the view's doing, not a result or stream without them.
    let full_watch_bytes = watch(&creator).await.encode_to_vec();
    for canary in text.iter().chain(&images) {
        assert!(contains(&full_bytes, canary), "the full view holds it");
        assert!(
            contains(&full_watch_bytes, canary),
            "the full view's watch holds it"
        );
    }

    for (token, leaves_text) in [
        (key.token("svc-no-images"), false),
        (key.token("svc-status"), true),
    ] {
        let read_bytes = read(&token).await.encode_to_vec();
        let watch_bytes = watch(&token).await.encode_to_vec();
        for bytes in [&read_bytes, &watch_bytes] {
            for image in &images {
                assert!(!contains(bytes, image), "an image slice in a view");
            }
            for value in &text {
                assert_eq!(
                    contains(bytes, value),
                    !leaves_text,
                    "{}: OCR and the person in no_images only",
                    String::from_utf8_lossy(value)
                );
            }
        }
    }
    // status_only still says how the journey ended.
    let status = read(&key.token("svc-status")).await.result.expect("result");
    assert_eq!(status.status(), v1::JourneyStatus::Complete);
    assert!(status.liveness.is_some() && status.document_analysis.is_some());
    gw.stop().await;
}
