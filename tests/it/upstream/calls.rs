//! Each operation sends the wire contract's request and reads its answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use idgate::domain::{Appkey, SessionToken, Snapshot};
use idgate::proto::v1 as pb;
use idgate::{context::CallContext, upstream::ChannelEndpoint};

use crate::support::upstream::*;

type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn form(body: &str) -> HashMap<String, String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(body)
        .expect("form body")
        .into_iter()
        .collect()
}

fn content_type(h: &HeaderMap) -> String {
    h.get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn captcha_sends_appkey_chkey_and_tagged_data_url_snapshots() {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let addr = serve(Router::new().route(
        CAPTCHA,
        post(move |h: HeaderMap, body: String| async move {
            s.lock().unwrap().push((content_type(&h), body));
            r#"{"valid":false,"codID":"300.1","cause":"prova de vida","protocol":123}"#
        }),
    ))
    .await;
    let a = jpeg(b"one");
    let b = png();
    let verdict = client(addr)
        .captcha(
            &CallContext::unbounded(),
            &Appkey::new("ak-1"),
            "ch-9",
            &[
                Snapshot {
                    image: a.clone(),
                    face_type_code: "2".to_owned(),
                },
                Snapshot {
                    image: b.clone(),
                    face_type_code: "1".to_owned(),
                },
            ],
        )
        .await
        .expect("verdict");
    assert_eq!(verdict.code(), pb::LivenessCode::Invalid);
    assert_eq!(
        (verdict.raw_code.as_str(), verdict.protocol.as_str()),
        ("300.1", "123")
    );
    assert!(!verdict.valid);

    let (ct, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(ct, "application/x-www-form-urlencoded");
    let f = form(&body);
    assert_eq!(f["appkey"], "ak-1");
    assert_eq!(f["chkey"], "ch-9");
    let expected = format!(
        "data:image/jpeg;base64,type:2,{}data:image/png;base64,type:1,{}",
        STANDARD.encode(a.bytes()),
        STANDARD.encode(b.bytes())
    );
    assert_eq!(f["images"], expected);
}

#[tokio::test]
async fn credential_and_appkey_send_the_wire_forms_and_the_credential_verbatim() {
    let seen: Seen = Arc::default();
    let (s1, s2) = (seen.clone(), seen.clone());
    let credential_body = r#"{"token":"tk-abc","expires":"21/11/2099 15:00:00"}"#;
    let addr = serve(
        Router::new()
            .route(
                CREDENTIAL,
                post(move |body: String| async move {
                    s1.lock().unwrap().push(("credential".into(), body));
                    credential_body
                }),
            )
            .route(
                APPKEY,
                post(move |body: String| async move {
                    s2.lock().unwrap().push(("appkey".into(), body));
                    "\"ak-from-bare-string\""
                }),
            ),
    )
    .await;
    let c = client(addr);
    let ctx = CallContext::unbounded();
    let grant = c
        .credential(&ctx, &profile().login, &profile().password)
        .await
        .expect("credential");
    assert_eq!(grant.token.expose(), credential_body);
    assert!(grant.expires.is_some());
    let key = c
        .appkey(&ctx, "operator", &grant.token, &end_user())
        .await
        .expect("appkey");
    assert_eq!(key.expose(), "ak-from-bare-string");

    let seen = seen.lock().unwrap();
    let cred = form(&seen[0].1);
    assert_eq!(
        (cred["user"].as_str(), cred["pass"].as_str()),
        ("operator", "s3cret-pass")
    );
    let ak = form(&seen[1].1);
    assert_eq!(ak["user"], "operator");
    assert_eq!(ak["token"], credential_body);
    assert_eq!(ak["cpf"], "52998224725");
    assert_eq!(ak["nome"], "Maria da Silva");
    assert_eq!(ak["nascimento"], "28/02/1990");
    assert_eq!(ak["idExternoCliente"], "PROP2026X1");
}

#[tokio::test]
async fn document_images_send_plain_base64_json_and_read_a_string_code() {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let addr = serve(Router::new().route(
        DOCUMENT,
        post(move |h: HeaderMap, body: String| async move {
            s.lock().unwrap().push((content_type(&h), body));
            r#"{"appkey":"ak","codigoDocumento":"4711"}"#
        }),
    ))
    .await;
    let img = jpeg(b"front");
    let receipt = client(addr)
        .document_images(
            &CallContext::unbounded(),
            &Appkey::new("ak"),
            &[img.clone(), png()],
        )
        .await
        .expect("receipt");
    assert_eq!(receipt.document_code, 4711);
    let (ct, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(ct, "application/json");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["appkey"], "ak");
    assert_eq!(v["images"][0], STANDARD.encode(img.bytes()));
    assert_eq!(v["images"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn digital_licence_sends_the_qrcode_as_base64() {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let addr = serve(Router::new().route(
        DOCUMENT,
        post(move |body: String| async move {
            s.lock().unwrap().push((String::new(), body));
            r#"{"appkey":"ak","codigoDocumento":12}"#
        }),
    ))
    .await;
    let qr = jpeg(b"qr");
    let receipt = client(addr)
        .digital_licence(&CallContext::unbounded(), &Appkey::new("ak"), &qr)
        .await
        .expect("receipt");
    assert_eq!(receipt.document_code, 12);
    let v: serde_json::Value = serde_json::from_str(&seen.lock().unwrap()[0].1).expect("json");
    assert_eq!(v["qrcode"], STANDARD.encode(qr.bytes()));
}

#[tokio::test]
async fn session_and_liveness_3d_go_to_the_channel_and_read_either_token_name() {
    let seen: Seen = Arc::default();
    let (s1, s2) = (seen.clone(), seen.clone());
    let addr = serve(
        Router::new()
            .route(
                "/alt/v2/session",
                post(move |body: String| async move {
                    s1.lock().unwrap().push(("session".into(), body));
                    r#"{"isContingency":true,"sessionToken":"st-1","vendor":"alt-vendor","url":"https://alt"}"#
                }),
            )
            .route(
                "/alt/v2/liveness",
                post(move |body: String| async move {
                    s2.lock().unwrap().push(("liveness".into(), body));
                    r#"{"valid":true,"codID":200.0,"cause":"","protocol":"9"}"#
                }),
            ),
    )
    .await;
    let channel = ChannelEndpoint::new(
        format!("http://{addr}/alt"),
        "/v2/session",
        "/v2/liveness",
        std::time::Duration::from_secs(2),
    );
    let c = client(addr);
    let ctx = CallContext::unbounded();
    let session = c
        .session_token_3d(&ctx, &channel, &Appkey::new("ak"), Some("SDK/1.0"))
        .await
        .expect("session");
    assert!(session.contingency);
    assert_eq!(session.token, SessionToken::new("st-1"));
    assert_eq!(
        (session.vendor.as_str(), session.vendor_url.as_str()),
        ("alt-vendor", "https://alt")
    );
    let verdict = c
        .liveness_3d(&ctx, &channel, &Appkey::new("ak"), &session.token)
        .await
        .expect("verdict");
    assert_eq!(verdict.code(), pb::LivenessCode::Valid);

    let seen = seen.lock().unwrap();
    let v: serde_json::Value = serde_json::from_str(&seen[0].1).expect("json");
    assert_eq!(
        (v["appkey"].as_str(), v["userAgent"].as_str()),
        (Some("ak"), Some("SDK/1.0"))
    );
    let v: serde_json::Value = serde_json::from_str(&seen[1].1).expect("json");
    assert_eq!(
        (v["appkey"].as_str(), v["sessionToken"].as_str()),
        (Some("ak"), Some("st-1"))
    );
}

#[tokio::test]
async fn challenge_and_result_are_read_from_real_answers() {
    let result_json = r#"{"status":"Completo","idExternoCliente":"PROP2026X1",
        "livenessResult":{"codID":"300.2","valid":false,"protocolo":"1","causa":"bloqueio"},
        "fotos":{"livenessResult":{"frontal":"aGVsbG8="}}}"#;
    let addr = serve(
        Router::new()
            .route(
                CHALLENGE,
                post(|body: String| async move {
                    assert_eq!(form(&body)["appkey"], "ak");
                    r#"{"chkey":"c1","totalTime":10,"numberOfChallenges":1,"snapFrequenceInMillis":500,
                        "snapNumber":3,"challenges":[{"mensagem":"Sorria","tempoEmSegundos":3,
                        "tipoFace":{"codigo":2,"imagem":"aGk="}}]}"#
                }),
            )
            .route(RESULT, post(move || async move { (StatusCode::OK, result_json) })),
    )
    .await;
    let c = client(addr);
    let ctx = CallContext::unbounded();
    let ch = c
        .challenge(&ctx, &Appkey::new("ak"))
        .await
        .expect("challenges");
    assert_eq!((ch.challenge_key.as_str(), ch.snapshot_count), ("c1", 3));
    assert_eq!(
        ch.challenges[0].face_type.as_ref().map(|f| f.icon.clone()),
        Some(bytes::Bytes::from_static(b"hi"))
    );
    assert!(ch.expire_time.is_some());
    let r = c
        .journey_result(&ctx, &Appkey::new("ak"))
        .await
        .expect("result");
    assert_eq!(r.status(), pb::JourneyStatus::Complete);
    let Some(pb::liveness_result::Variant::Journey(l)) = r.liveness.and_then(|l| l.variant) else {
        panic!("journey liveness expected");
    };
    assert_eq!(l.code(), pb::LivenessCode::UserBlocked);
    assert_eq!(
        r.photos.map(|p| p.liveness_frontal),
        Some(bytes::Bytes::from_static(b"hello"))
    );
    assert!(r.document_analysis.is_none());
}
