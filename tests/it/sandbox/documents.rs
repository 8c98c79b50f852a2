//! `/document`: document images and the digital licence.

use idgate::sandbox::samples::{
    self, DocumentFlags, DocumentKind, DocumentType, HAPPY_PERSON, ImageFormat, LivenessOutcome,
    Side,
};
use serde_json::json;

use crate::support::sandbox::start;

fn rg_front() -> DocumentKind {
    DocumentKind::new(DocumentType::Rg, Side::Front)
}

#[tokio::test]
async fn document_upload_returns_appkey_and_document_code() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let r = env
        .upload(&appkey, &[samples::document_image(rg_front())])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.str("appkey"), appkey);
    assert!(r.body["codigoDocumento"].is_u64());
}

#[tokio::test]
async fn image_without_a_document_answers_400_and_the_appkey_stays_usable() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let r = env.upload(&appkey, &[samples::no_document_image()]).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.documents),
        Some(0)
    );
    let r = env
        .upload(&appkey, &[samples::document_image(rg_front())])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        env.liveness_2d(&appkey, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn every_document_kind_is_recognised_in_png_and_jpeg() {
    let env = start().await;
    for format in [ImageFormat::Png, ImageFormat::Jpeg] {
        for kind in DocumentKind::all() {
            let appkey = env.appkey(HAPPY_PERSON).await;
            let image = samples::document_image_with(kind, DocumentFlags::default(), format);
            let r = env.upload(&appkey, &[image]).await;
            assert_eq!(r.status, 200, "{kind} {format:?}");
        }
    }
}

#[tokio::test]
async fn document_upload_answers_400_for_malformed_images() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let url = env.core("/document");
    for body in [
        json!({ "appkey": appkey }),
        json!({ "appkey": appkey, "images": [] }),
        json!({ "appkey": appkey, "images": "abc" }),
        json!({ "appkey": appkey, "images": ["%%% not base64"] }),
        json!({ "appkey": appkey, "images": [42] }),
        json!({ "images": [samples::base64(&samples::document_image(rg_front()))] }),
    ] {
        assert_eq!(env.post_json(&url, &body).await.status, 400, "{body}");
    }
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.documents),
        Some(0)
    );
}

#[tokio::test]
async fn document_upload_answers_401_for_an_unknown_appkey() {
    let env = start().await;
    let r = env
        .upload("unknown", &[samples::document_image(rg_front())])
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn digital_licence_is_accepted_as_image_pdf_or_binary() {
    let env = start().await;
    for bytes in [
        samples::digital_licence_image(),
        samples::digital_licence_pdf(),
        samples::digital_licence_binary(),
    ] {
        let appkey = env.appkey(HAPPY_PERSON).await;
        let r = env.digital_licence(&appkey, &bytes).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.str("appkey"), appkey);
        assert!(r.body["codigoDocumento"].is_u64());
    }
}

#[tokio::test]
async fn digital_licence_answers_401_for_missing_or_out_of_pattern_data() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let url = env.core("/document");
    let pdf = samples::base64(&samples::digital_licence_pdf());
    for body in [
        json!({ "appkey": appkey, "qrcode": samples::base64(&samples::out_of_pattern_licence()) }),
        json!({ "appkey": appkey, "qrcode": "%%% not base64 %%%" }),
        json!({ "appkey": appkey, "qrcode": "" }),
        json!({ "appkey": appkey, "qrcode": null }),
        json!({ "appkey": appkey, "qrcode": 7 }),
        json!({ "qrcode": pdf }),
        json!({ "appkey": "unknown", "qrcode": pdf }),
    ] {
        let r = env.post_json(&url, &body).await;
        assert_eq!(r.status, 401, "{body}");
        assert!(r.body["message"].is_string());
    }
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.documents),
        Some(0)
    );
}
