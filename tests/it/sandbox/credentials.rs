//! `/credencial` and `/appkey`: the credential token and appkey lifecycle.

use idgate::sandbox::samples::{HAPPY_PERSON, LivenessOutcome, TestPerson};
use idgate::sandbox::{OperatorConfig, SandboxConfig};

use crate::support::sandbox::{config, start, start_with};

#[tokio::test]
async fn credential_returns_token_and_expiry_in_service_format() {
    let env = start().await;
    let r = env
        .post_form(
            &env.core("/credencial"),
            &[("user", "sandbox"), ("pass", "sandbox")],
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(!r.str("token").is_empty());
    // 12:00 UTC + 3 h, written in Brasília time (UTC-3).
    assert_eq!(r.str("expires"), "06/01/2025 12:00:00");
}

#[tokio::test]
async fn credential_answers_401_for_wrong_password_and_unknown_login() {
    let env = start().await;
    for (user, pass) in [("sandbox", "wrong"), ("nobody", "sandbox")] {
        let r = env
            .post_form(&env.core("/credencial"), &[("user", user), ("pass", pass)])
            .await;
        assert_eq!(r.status, 401, "{user}");
        assert!(r.body["message"].is_string());
        assert!(!String::from_utf8_lossy(&r.raw).contains(pass));
    }
}

#[tokio::test]
async fn credential_accepts_configured_operators_only() {
    let mut cfg = config();
    cfg.operators = vec![OperatorConfig {
        login: "ops".into(),
        password: "s3cret".into(),
    }];
    let env = start_with(cfg).await;
    let ok = env
        .post_form(
            &env.core("/credencial"),
            &[("user", "ops"), ("pass", "s3cret")],
        )
        .await;
    assert_eq!(ok.status, 200);
    let default = env
        .post_form(
            &env.core("/credencial"),
            &[("user", "sandbox"), ("pass", "sandbox")],
        )
        .await;
    assert_eq!(default.status, 401);
}

#[tokio::test]
async fn credential_answers_400_when_a_field_is_missing() {
    let env = start().await;
    let r = env
        .post_form(&env.core("/credencial"), &[("user", "sandbox")])
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn appkey_accepts_the_credential_body_verbatim_or_the_bare_token() {
    let env = start().await;
    let body = env.credential().await;
    let verbatim = env.appkey_with(&body, HAPPY_PERSON).await;
    assert_eq!(verbatim.status, 200);
    assert!(!verbatim.str("appkey").is_empty());
    let bare: serde_json::Value = serde_json::from_str(&body).expect("json");
    let bare = bare["token"].as_str().expect("token");
    let r = env.appkey_with(bare, HAPPY_PERSON).await;
    assert_eq!(r.status, 200);
    assert_ne!(r.str("appkey"), verbatim.str("appkey"));
}

#[tokio::test]
async fn one_credential_token_creates_many_appkeys_while_valid() {
    let env = start().await;
    let token = env.credential().await;
    for _ in 0..3 {
        assert_eq!(env.appkey_with(&token, HAPPY_PERSON).await.status, 200);
    }
    env.advance(3 * 3600 - 1);
    assert_eq!(env.appkey_with(&token, HAPPY_PERSON).await.status, 200);
}

#[tokio::test]
async fn credential_token_answers_401_after_it_expires() {
    let env = start().await;
    let token = env.credential().await;
    env.advance(3 * 3600);
    let r = env.appkey_with(&token, HAPPY_PERSON).await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn credential_token_expiry_is_configurable() {
    let cfg = SandboxConfig {
        credential_ttl_secs: 60,
        ..config()
    };
    let env = start_with(cfg).await;
    let token = env.credential().await;
    env.advance(60);
    assert_eq!(env.appkey_with(&token, HAPPY_PERSON).await.status, 401);
}

#[tokio::test]
async fn appkey_answers_401_for_an_unknown_token_or_another_operators_user() {
    let env = start().await;
    assert_eq!(
        env.appkey_with("not-a-token", HAPPY_PERSON).await.status,
        401
    );
    let token = env.credential().await;
    let r = env
        .post_form(
            &env.core("/appkey"),
            &[
                ("user", "someone-else"),
                ("token", &token),
                ("cpf", HAPPY_PERSON.cpf),
                ("nome", HAPPY_PERSON.name),
                ("nascimento", HAPPY_PERSON.birth_date),
                ("idExternoCliente", "abc"),
            ],
        )
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn appkey_answers_400_for_invalid_end_user_data() {
    let env = start().await;
    let token = env.credential().await;
    let bad_people = [
        TestPerson {
            cpf: "52998224724",
            ..HAPPY_PERSON
        }, // wrong check digit
        TestPerson {
            cpf: "1234",
            ..HAPPY_PERSON
        },
        TestPerson {
            birth_date: "1985-03-14",
            ..HAPPY_PERSON
        },
        TestPerson {
            birth_date: "31/02/1985",
            ..HAPPY_PERSON
        },
        TestPerson {
            name: "  ",
            ..HAPPY_PERSON
        },
    ];
    for person in bad_people {
        let r = env.appkey_with(&token, person).await;
        assert_eq!(r.status, 400, "{person:?}");
        assert!(!String::from_utf8_lossy(&r.raw).contains(person.cpf));
    }
    for external in ["has space", "dash-ed", &"a".repeat(256)] {
        let r = env
            .post_form(
                &env.core("/appkey"),
                &[
                    ("user", "sandbox"),
                    ("token", &token),
                    ("cpf", HAPPY_PERSON.cpf),
                    ("nome", HAPPY_PERSON.name),
                    ("nascimento", HAPPY_PERSON.birth_date),
                    ("idExternoCliente", external),
                ],
            )
            .await;
        assert_eq!(r.status, 400, "{external}");
    }
    assert_eq!(env.sandbox.store_sizes().appkeys, 0);
}

#[tokio::test]
async fn appkey_accepts_a_punctuated_cpf() {
    let env = start().await;
    let token = env.credential().await;
    let r = env
        .appkey_with(
            &token,
            TestPerson {
                cpf: "521.100.001-39",
                ..HAPPY_PERSON
            },
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn appkey_answers_401_after_it_expires() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.advance(5 * 60 - 1);
    assert_eq!(env.challenge(&appkey).await.status, 200);
    env.advance(1);
    assert_eq!(env.challenge(&appkey).await.status, 401);
    let st = env
        .sandbox
        .appkey_state(&appkey)
        .expect("kept for its result");
    assert!(st.expired);
}

#[tokio::test]
async fn every_appkey_operation_answers_401_after_expiry() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let chkey = env.challenge(&appkey).await.str("chkey");
    env.advance(5 * 60);
    let root = crate::support::sandbox::standard(&env.sandbox.base_url());
    assert_eq!(
        env.captcha(&appkey, &chkey, LivenessOutcome::Valid)
            .await
            .status,
        401
    );
    assert_eq!(env.session_token(&root, &appkey, None).await.status, 401);
    let doc =
        idgate::sandbox::samples::document_image(idgate::sandbox::samples::DocumentKind::new(
            idgate::sandbox::samples::DocumentType::Rg,
            idgate::sandbox::samples::Side::Front,
        ));
    assert_eq!(env.upload(&appkey, &[doc]).await.status, 401);
    let pdf = idgate::sandbox::samples::digital_licence_pdf();
    assert_eq!(env.digital_licence(&appkey, &pdf).await.status, 401);
}

#[tokio::test]
async fn appkey_expiry_is_configurable() {
    let cfg = SandboxConfig {
        appkey_ttl_secs: 30,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.advance(30);
    assert_eq!(env.challenge(&appkey).await.status, 401);
}

#[tokio::test]
async fn appkey_answers_500_when_the_store_is_full_until_entries_expire() {
    let cfg = SandboxConfig {
        max_entries: 1,
        result_retention_secs: 0,
        ..config()
    };
    let env = start_with(cfg).await;
    let token = env.credential().await;
    assert_eq!(env.appkey_with(&token, HAPPY_PERSON).await.status, 200);
    let full = env.appkey_with(&token, HAPPY_PERSON).await;
    assert_eq!(full.status, 500);
    assert!(full.body["message"].is_string());
    // Expired entries are purged, which makes room again.
    env.advance(5 * 60);
    assert_eq!(env.appkey_with(&token, HAPPY_PERSON).await.status, 200);
}
