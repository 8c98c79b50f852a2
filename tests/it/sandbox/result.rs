//! `/document/result`: the journey result
//! (`docs/upstream.md#the-journey-result`).

use idgate::sandbox::samples::{
    self, DocumentKind, DocumentType, FACE_MATCH_NEGATIVE, HAPPY_PERSON, LOW_FORENSICS_SCORE,
    LivenessOutcome, NORMAL_FORENSICS_SCORE, REGISTRY_NEGATIVE, REGISTRY_NOT_FOUND,
    REGISTRY_POSITIVE, RISK_CLASS_PINNED, Side, TestPerson,
};
use idgate::sandbox::{CustomerConfig, SandboxConfig};
use serde_json::Value;

use crate::support::sandbox::{Env, config, standard, start, start_with};

const OCR_KEYS: [&str; 6] = [
    "responseClientRGOcrDTO",
    "responseClientCNHOcrDTO",
    "responseClientDNIOcrDTO",
    "responseClientCINOcrDTO",
    "responseClientCRNMOcrDTO",
    "responseClientPassaporteOcrDTO",
];

fn kind(t: DocumentType, s: Side) -> DocumentKind {
    DocumentKind::new(t, s)
}

/// 2D proof, then `images`, then the clock past the processing delay.
async fn processed_journey(env: &Env, person: TestPerson, images: &[Vec<u8>]) -> (String, Value) {
    let appkey = env.appkey(person).await;
    assert_eq!(
        env.liveness_2d(&appkey, LivenessOutcome::Valid)
            .await
            .status,
        200
    );
    assert_eq!(env.upload(&appkey, images).await.status, 200);
    env.advance(5);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    (appkey, r.body)
}

#[tokio::test]
async fn result_answers_404_for_an_unknown_appkey() {
    let env = start().await;
    assert_eq!(env.result("unknown").await.status, 404);
}

#[tokio::test]
async fn result_answers_404_before_a_liveness_proof() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.upload(
        &appkey,
        &[samples::document_image(kind(DocumentType::Rg, Side::Front))],
    )
    .await;
    assert_eq!(env.result(&appkey).await.status, 404);
}

#[tokio::test]
async fn result_answers_400_when_the_appkey_field_is_missing_or_malformed() {
    let env = start().await;
    assert_eq!(
        env.post_form(&env.result_url(), &[("other", "x")])
            .await
            .status,
        400
    );
    assert_eq!(
        env.post_form(&env.result_url(), &[("appkey", " ")])
            .await
            .status,
        400
    );
    let json = env
        .post_json(&env.result_url(), &serde_json::json!({"appkey": "x"}))
        .await;
    assert_eq!(json.status, 400);
}

#[tokio::test]
async fn result_is_served_only_on_the_result_port() {
    let env = start().await;
    let r = env
        .post_form(&env.core("/document/result"), &[("appkey", "x")])
        .await;
    assert_eq!(r.status, 404);
    assert_ne!(env.sandbox.base_url(), env.sandbox.result_base_url());
}

#[tokio::test]
async fn result_is_not_processed_before_any_document() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["status"], "Não processado");
    assert!(r.body.get("analiseDocumento").is_none());
    assert_eq!(r.body["livenessResult"]["valid"], true);
    assert_eq!(r.body["fotos"]["documento"], serde_json::json!([]));
}

#[tokio::test]
async fn document_processing_moves_through_its_statuses_on_the_clock() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    let front = samples::document_image(kind(DocumentType::Cnh, Side::Front));
    let back = samples::document_image(kind(DocumentType::Cnh, Side::Back));
    env.upload(&appkey, &[front, back]).await;

    let expect = |body: &Value, status: &str, processing: u64, file: u64, processed: u64| {
        assert_eq!(body["status"], status);
        let a = &body["analiseDocumento"];
        assert_eq!(a["statusProcessamento"].as_u64(), Some(processing));
        let docs = a["documentos"].as_array().expect("documentos");
        assert_eq!(docs.len(), 2);
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(d["arquivo"].as_u64(), Some(i as u64 + 1));
            assert_eq!(d["statusArquivo"].as_u64(), Some(file));
            assert!(d["arquivosProcessado"].is_object());
            assert_eq!(
                d["arquivosProcessado"]["statusArquivoProcessado"].as_u64(),
                Some(processed)
            );
        }
        assert_eq!(docs[0]["arquivosProcessado"]["tipo"].as_u64(), Some(4));
        assert_eq!(docs[1]["arquivosProcessado"]["tipo"].as_u64(), Some(5));
    };
    let r = env.result(&appkey).await;
    expect(&r.body, "Em processamento", 2, 7, 10);
    assert!(
        r.body["analiseDocumento"]
            .get("responseClientDadosOcrDTO")
            .is_none()
    );
    assert!(r.body["analiseDocumento"]["score"].is_null());
    env.advance(3);
    expect(
        &env.result(&appkey).await.body,
        "Em processamento",
        3,
        9,
        12,
    );
    env.advance(2);
    let done = env.result(&appkey).await.body;
    expect(&done, "Completo", 4, 22, 19);
    assert_eq!(
        done["analiseDocumento"]["score"].as_u64(),
        Some(u64::from(NORMAL_FORENSICS_SCORE))
    );
    assert!(done["analiseDocumento"]["dtStatusProcessamento"].is_string());
}

#[tokio::test]
async fn processing_delay_is_configurable() {
    let cfg = SandboxConfig {
        processing_delay_ms: 0,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    env.upload(
        &appkey,
        &[samples::document_image(kind(DocumentType::Rg, Side::Front))],
    )
    .await;
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
}

#[tokio::test]
async fn completed_result_has_the_documented_fields_and_types() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, std::slice::from_ref(&image)).await;
    assert_eq!(body["status"], "Completo");
    assert_eq!(body["idExternoCliente"], "journey42");
    // Clock started 2025-01-06 12:00 UTC = 09:00 in Brasília.
    assert_eq!(body["dataCriacaoAppkey"], "2025-01-06 09:00:00");
    let a = &body["analiseDocumento"];
    for key in [
        "id",
        "idCliente",
        "idSubcliente",
        "idUsuario",
        "idTipoProcessamento",
        "statusProcessamento",
        "score",
    ] {
        assert!(a[key].is_u64(), "{key}");
    }
    for key in [
        "idExterno",
        "ticket",
        "dtCriacao",
        "dtStatusProcessamento",
        "dtRetornoTicket",
    ] {
        assert!(a[key].is_string(), "{key}");
    }
    assert!(a.get("urlRetornoTicket").is_some());
    let service = &body["serviceID"];
    assert_eq!(service["codigo"].as_u64(), Some(200));
    assert!(
        service["protocolo"]
            .as_str()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    );
    assert!(service["score"].is_string());
    let liveness = &body["livenessResult"];
    assert_eq!(liveness["codID"].as_f64(), Some(200.0));
    assert_eq!(liveness["valid"], true);
    assert!(liveness["causa"].is_string());
    assert!(
        liveness["protocolo"]
            .as_str()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    );
    let fotos = &body["fotos"];
    assert!(
        fotos["livenessResult"]["frontal"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(fotos["documento"][0]["descricao"], "RG frente");
    assert_eq!(fotos["documento"][0]["imagem"], samples::base64(&image));
    let bio = &a["biometriaCertiface"];
    assert!(bio["protocolo"].is_string());
    assert_eq!(bio["facematch"]["codigo"].as_u64(), Some(200));
    assert!(bio["facematch"]["score"].is_f64());
    assert_eq!(bio["registry"]["codigo"].as_u64(), Some(200));
}

#[tokio::test]
async fn ocr_holds_only_the_type_read_with_the_end_users_data() {
    let env = start().await;
    let cases = [
        (DocumentType::Rg, "responseClientRGOcrDTO"),
        (DocumentType::Cnh, "responseClientCNHOcrDTO"),
        (DocumentType::Cnh2022, "responseClientCNHOcrDTO"),
        (DocumentType::Dni, "responseClientDNIOcrDTO"),
        (DocumentType::Cin, "responseClientCINOcrDTO"),
        (DocumentType::Crnm, "responseClientCRNMOcrDTO"),
        (DocumentType::Passport, "responseClientPassaporteOcrDTO"),
    ];
    let person = REGISTRY_POSITIVE[2];
    for (doc_type, key) in cases {
        let (_, body) = processed_journey(
            &env,
            person,
            &[samples::document_image(kind(doc_type, Side::Front))],
        )
        .await;
        let ocr = body["analiseDocumento"]["responseClientDadosOcrDTO"]
            .as_object()
            .expect("ocr object");
        assert_eq!(ocr.keys().collect::<Vec<_>>(), vec![key], "{doc_type:?}");
        assert!(OCR_KEYS.contains(&key));
        let o = &ocr[key];
        assert_eq!(o["cpf"], person.cpf);
        assert_eq!(o["nome"], person.name.to_uppercase());
        assert_eq!(o["dtNascimento"], person.birth_date);
        assert_eq!(o["dtNascimentoFormatada"], "1978-07-27");
    }
}

#[tokio::test]
async fn registry_check_follows_the_test_environment_cpf_sets() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    let cases = [
        (REGISTRY_POSITIVE.to_vec(), 200),
        (REGISTRY_NEGATIVE.to_vec(), 300),
        (vec![REGISTRY_NOT_FOUND, FACE_MATCH_NEGATIVE[0]], 4),
    ];
    for (people, code) in cases {
        for person in people {
            let (_, body) = processed_journey(&env, person, std::slice::from_ref(&image)).await;
            let registry = &body["analiseDocumento"]["biometriaCertiface"]["registry"];
            assert_eq!(registry["codigo"].as_u64(), Some(code), "{}", person.cpf);
            assert!(registry["causa"].is_string());
            assert_eq!(registry.get("score").is_some(), code != 4);
        }
    }
}

#[tokio::test]
async fn face_match_follows_the_cpf_sets_and_the_no_face_marker() {
    let env = start().await;
    let rg = kind(DocumentType::Rg, Side::Front);
    for person in FACE_MATCH_NEGATIVE {
        let (_, body) = processed_journey(&env, person, &[samples::document_image(rg)]).await;
        assert_eq!(
            body["analiseDocumento"]["biometriaCertiface"]["facematch"]["codigo"].as_u64(),
            Some(300)
        );
    }
    let (_, body) =
        processed_journey(&env, HAPPY_PERSON, &[samples::face_not_found_image(rg)]).await;
    let fm = &body["analiseDocumento"]["biometriaCertiface"]["facematch"];
    assert_eq!(fm["codigo"].as_u64(), Some(400));
    assert!(fm.get("score").is_none());
}

#[tokio::test]
async fn risk_class_is_pinned_per_cpf_and_stable() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    for (class, person) in RISK_CLASS_PINNED {
        let (_, body) = processed_journey(&env, person, std::slice::from_ref(&image)).await;
        assert_eq!(body["serviceID"]["score"], class);
    }
    let (_, a) = processed_journey(&env, REGISTRY_NOT_FOUND, std::slice::from_ref(&image)).await;
    let (_, b) = processed_journey(&env, REGISTRY_NOT_FOUND, std::slice::from_ref(&image)).await;
    assert_eq!(a["serviceID"]["score"], b["serviceID"]["score"]);
}

#[tokio::test]
async fn low_forensics_document_gets_a_low_score() {
    let env = start().await;
    let image = samples::low_forensics_image(kind(DocumentType::Cnh, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert_eq!(body["status"], "Completo");
    assert_eq!(
        body["analiseDocumento"]["score"].as_u64(),
        Some(u64::from(LOW_FORENSICS_SCORE))
    );
}

#[tokio::test]
async fn unreadable_document_ends_the_journey_in_erro() {
    let env = start().await;
    let image = samples::unreadable_document_image(kind(DocumentType::Rg, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert_eq!(body["status"], "Erro");
    let a = &body["analiseDocumento"];
    assert_eq!(a["statusProcessamento"].as_u64(), Some(6));
    assert_eq!(a["documentos"][0]["statusArquivo"].as_u64(), Some(8));
    assert_eq!(
        a["documentos"][0]["arquivosProcessado"]["statusArquivoProcessado"].as_u64(),
        Some(11)
    );
    assert!(a.get("responseClientDadosOcrDTO").is_none());
}

#[tokio::test]
async fn disabled_checks_are_omitted_from_the_result() {
    let cfg = SandboxConfig {
        customer: CustomerConfig {
            face_match: false,
            ..CustomerConfig::default()
        },
        ..config()
    };
    let env = start_with(cfg).await;
    let image = samples::document_image(kind(DocumentType::Rg, Side::Front));
    let (_, body) = processed_journey(&env, HAPPY_PERSON, std::slice::from_ref(&image)).await;
    let bio = &body["analiseDocumento"]["biometriaCertiface"];
    assert!(bio.get("facematch").is_none());
    assert!(bio.get("registry").is_some());

    let cfg = SandboxConfig {
        customer: CustomerConfig {
            face_match: false,
            registry: false,
            ..CustomerConfig::default()
        },
        ..config()
    };
    let env = start_with(cfg).await;
    let (_, body) = processed_journey(&env, HAPPY_PERSON, &[image]).await;
    assert!(body["analiseDocumento"].get("biometriaCertiface").is_none());
}

#[tokio::test]
async fn digital_licence_result_uses_the_digital_variants() {
    let env = start().await;
    let cases = [
        (samples::digital_licence_image(), "Imagem", "QR Code"),
        (samples::digital_licence_pdf(), "PDF", "Documento"),
        (samples::digital_licence_binary(), "Binario", "QR Code"),
    ];
    for (bytes, extensao, formato) in cases {
        let appkey = env.appkey(HAPPY_PERSON).await;
        let root = standard(&env.sandbox.base_url());
        let token = env.session_token(&root, &appkey, None).await.str("token");
        assert_eq!(env.liveness_3d(&root, &appkey, &token).await.status, 200);
        assert_eq!(env.digital_licence(&appkey, &bytes).await.status, 200);
        env.advance(5);
        let body = env.result(&appkey).await.body;
        assert_eq!(body["status"], "Completo");
        let cnh = &body["analiseDocumento"]["responseClientDadosOcrDTO"]["responseClientCNHOcrDTO"];
        assert_eq!(cnh["extensao"], extensao);
        assert_eq!(cnh["formato"], formato);
        assert_eq!(cnh["cpf"], HAPPY_PERSON.cpf);
        assert_eq!(cnh["dtNascimentoFormatada"], "1985-03-14");
        let bio = &body["analiseDocumento"]["biometriaCertiface"];
        assert!(bio.get("facematch").is_none());
        assert_eq!(bio["registry"]["codigo"], "200");
        assert!(bio["registry"]["causa"].is_string());
        assert!(bio["registry"]["score"].is_string());
        let s = &body["serviceID"];
        assert_eq!(s["aprovado"], true);
        assert_eq!(s["conhecido"], true);
        assert!(
            s["codigo"].is_u64() && s["protocolo"].is_u64() && s["scoreBiometrico"].is_number()
        );
        let l = &body["livenessResult"];
        assert!(l["causa"].is_string() && l["protocolo"].is_u64());
        assert_eq!(l["codID"].as_f64(), Some(200.0));
        assert_eq!(l["validado"], true);
        assert_eq!(
            body["fotos"]["documento"][0]["imagem"],
            samples::base64(&bytes)
        );
    }
}

#[tokio::test]
async fn result_stays_readable_after_the_appkey_expires_until_retention_ends() {
    let cfg = SandboxConfig {
        result_retention_secs: 3600,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Invalid).await;
    env.advance(5 * 60);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["livenessResult"]["codID"].as_f64(), Some(300.1));
    env.advance(3600);
    assert_eq!(env.result(&appkey).await.status, 404);
    assert_eq!(env.sandbox.store_sizes().appkeys, 0);
}

#[tokio::test]
async fn result_answers_401_after_the_appkey_expires_when_so_configured() {
    let cfg = SandboxConfig {
        result_readable_after_expiry: false,
        ..config()
    };
    let env = start_with(cfg).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    assert_eq!(
        env.result(&appkey).await.status,
        200,
        "readable while valid"
    );
    env.advance(5 * 60);
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert!(r.body.to_string().contains("expired"), "{:?}", r.body);
    // Unknown appkeys are still 404, not 401.
    assert_eq!(env.result("unknown").await.status, 404);
}

#[tokio::test]
async fn same_input_gives_the_same_outcome() {
    let env = start().await;
    let image = samples::document_image(kind(DocumentType::Dni, Side::Front));
    let (_, a) = processed_journey(&env, REGISTRY_NEGATIVE[1], std::slice::from_ref(&image)).await;
    let (_, b) = processed_journey(&env, REGISTRY_NEGATIVE[1], std::slice::from_ref(&image)).await;
    let strip = |mut v: Value| {
        v.as_object_mut().expect("body").remove("dataCriacaoAppkey");
        let a = v["analiseDocumento"].as_object_mut().expect("analysis");
        for key in [
            "id",
            "ticket",
            "dtCriacao",
            "dtStatusProcessamento",
            "dtRetornoTicket",
        ] {
            a.remove(key);
        }
        a["biometriaCertiface"]
            .as_object_mut()
            .expect("bio")
            .remove("protocolo");
        for o in ["serviceID", "livenessResult"] {
            v[o].as_object_mut().expect("object").remove("protocolo");
        }
        v["analiseDocumento"]["responseClientDadosOcrDTO"]["responseClientDNIOcrDTO"]
            .as_object_mut()
            .expect("dni")
            .remove("dtCriacao");
        v
    };
    assert_eq!(strip(a), strip(b));
}

#[tokio::test]
async fn frontal_photo_is_the_proofs_image_on_every_read() {
    let env = start().await;
    let two_d = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&two_d, LivenessOutcome::Valid).await;
    let three_d = env.appkey(HAPPY_PERSON).await;
    let root = standard(&env.sandbox.base_url());
    let token = env.session_token(&root, &three_d, None).await.str("token");
    assert_eq!(env.liveness_3d(&root, &three_d, &token).await.status, 200);
    let expected = [
        (
            &two_d,
            samples::base64(&samples::snapshot(LivenessOutcome::Valid)),
        ),
        (&three_d, samples::base64(&samples::selfie())),
    ];
    for (appkey, frontal) in expected {
        for _ in 0..2 {
            let body = env.result(appkey).await.body;
            assert_eq!(body["fotos"]["livenessResult"]["frontal"], frontal.as_str());
        }
    }
}
