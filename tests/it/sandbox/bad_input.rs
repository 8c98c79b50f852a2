//! Malformed bodies, wrong content types, oversize requests: the spec's
//! status codes, a small JSON message, no state change.

use idgate::sandbox::SandboxConfig;
use idgate::sandbox::samples::HAPPY_PERSON;

use crate::support::sandbox::{config, standard, start, start_with};

#[tokio::test]
async fn form_operations_answer_400_to_json_and_garbage_bodies() {
    let env = start().await;
    for path in ["/credencial", "/appkey", "/challenge", "/captcha"] {
        let url = env.core(path);
        for (ct, body) in [
            (
                "application/json",
                r#"{"user":"sandbox","pass":"sandbox","appkey":"x"}"#,
            ),
            ("text/plain", "user=sandbox&pass=sandbox"),
            ("application/x-www-form-urlencoded", "%%%=&&=%zz"),
        ] {
            let r = env.post_raw(&url, ct, body.as_bytes().to_vec()).await;
            assert_eq!(r.status, 400, "{path} {ct}");
            assert!(r.body["message"].is_string(), "{path} {ct}");
        }
    }
}

#[tokio::test]
async fn json_operations_answer_400_to_forms_and_malformed_json() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let root = standard(&env.sandbox.base_url());
    for url in [
        format!("{root}/3d/session-token"),
        format!("{root}/3d/liveness"),
        env.core("/document"),
    ] {
        for (ct, body) in [
            (
                "application/x-www-form-urlencoded",
                format!("appkey={appkey}"),
            ),
            ("application/json", "{\"appkey\": ".to_owned()),
            ("application/json", "[1,2,3]".to_owned()),
            (
                "application/json",
                format!("{{\"appkey\": 12, \"sessionToken\": \"{appkey}\"}}"),
            ),
        ] {
            let r = env.post_raw(&url, ct, body.into_bytes()).await;
            assert_eq!(r.status, 400, "{url} {ct}");
            assert!(!String::from_utf8_lossy(&r.raw).contains(&appkey));
        }
    }
    let ua = env
        .post_json(
            &format!("{root}/3d/session-token"),
            &serde_json::json!({"appkey": appkey, "userAgent": 5}),
        )
        .await;
    assert_eq!(ua.status, 400);
    // Nothing was bound or opened.
    let st = env.sandbox.appkey_state(&appkey).expect("known");
    assert_eq!((st.open_sessions, st.documents, st.liveness), (0, 0, None));
}

#[tokio::test]
async fn oversize_request_body_answers_400_and_changes_nothing() {
    let cfg = SandboxConfig {
        max_body_bytes: 1024,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let big = vec![b'a'; 4096];
    let body =
        serde_json::json!({ "appkey": appkey, "images": [String::from_utf8(big).expect("ascii")] });
    let r = env.post_json(&env.core("/document"), &body).await;
    assert_eq!(r.status, 400);
    let r = env
        .post_raw(
            &env.core("/credencial"),
            "application/x-www-form-urlencoded",
            vec![b'a'; 4096],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.documents),
        Some(0)
    );
}

#[tokio::test]
async fn unknown_paths_answer_404_with_a_json_message() {
    let env = start().await;
    let r = env.post_form(&env.core("/nope"), &[("a", "b")]).await;
    assert_eq!(r.status, 404);
    assert!(r.body["message"].is_string());
}

#[tokio::test]
async fn content_type_parameters_are_accepted() {
    let env = start().await;
    let r = env
        .post_raw(
            &env.core("/credencial"),
            "application/x-www-form-urlencoded; charset=UTF-8",
            b"user=sandbox&pass=sandbox".to_vec(),
        )
        .await;
    assert_eq!(r.status, 200);
}
