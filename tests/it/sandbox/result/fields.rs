//! The shape of a completed result: its documented fields and types, OCR
//! holding only the type read, the digital licence's variants, the
//! frontal photo, and the same input giving the same outcome.

use idgate::sandbox::samples::{
    self, DocumentType, HAPPY_PERSON, LivenessOutcome, REGISTRY_NEGATIVE, REGISTRY_POSITIVE, Side,
};
use serde_json::Value;

use super::{kind, processed_journey};
use crate::support::sandbox::{standard, start};

const OCR_KEYS: [&str; 6] = [
    "responseClientRGOcrDTO",
    "responseClientCNHOcrDTO",
    "responseClientDNIOcrDTO",
    "responseClientCINOcrDTO",
    "responseClientCRNMOcrDTO",
    "responseClientPassaporteOcrDTO",
];

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
