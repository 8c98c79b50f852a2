//! The journey result object by object: the full journey and the digital
//! licence's variants, omitted objects left unset, every OCR type, and the
//! photos (one object accepted, an undecodable image an error naming it).

use super::*;

#[test]
fn full_journey_converts_every_object() {
    let r = result(FULL_JOURNEY).unwrap();
    assert_eq!(r.status(), pb::JourneyStatus::Complete);
    assert_eq!(r.raw_status, "Completo");
    assert_eq!(r.customer_reference, "PROP2026X1");
    assert_eq!(r.raw_appkey_create_time, "2026-11-21 10:15:00");
    // 10:15 in Brasília (UTC-03:00) is 13:15Z.
    assert_eq!(r.appkey_create_time.unwrap().seconds, 1_795_266_900);

    let a = r.document_analysis.unwrap();
    assert_eq!(
        (a.id.as_str(), a.client_id.as_str(), a.user_id.as_str()),
        ("1234", "55", "99")
    );
    assert_eq!(a.processing_status(), pb::ProcessingStatus::Processed);
    assert_eq!(a.raw_processing_status, 4);
    assert_eq!(a.score, Some(97.5));
    assert_eq!(a.processing_type_id, "2");

    let ocr = a.ocr.unwrap();
    let rg = ocr.rg.unwrap();
    assert_eq!(rg.name, "MARIA DA SILVA");
    assert_eq!(rg.rg_number, "12.345.678-9");
    assert_eq!(rg.unsigned, Some(false));
    assert!(ocr.cnh.is_none() && ocr.dni.is_none() && ocr.cin.is_none());
    assert!(ocr.digital_cnh.is_none() && ocr.crnm.is_none() && ocr.passport.is_none());

    let b = a.biometrics.unwrap();
    let fm = b.face_match.unwrap();
    assert_eq!(
        (fm.code(), fm.raw_code.as_str(), fm.score),
        (pb::BiometricCode::Positive, "200", Some(0.93))
    );
    let reg = b.registry.unwrap();
    assert_eq!(reg.code(), pb::BiometricCode::Negative);

    assert_eq!(a.files.len(), 2);
    assert_eq!(a.files[0].status(), pb::FileStatus::Processed);
    assert_eq!(a.files[0].documents[0].kind(), pb::DocumentKind::RgFront);
    assert_eq!(
        a.files[0].documents[0].status(),
        pb::ProcessedDocumentStatus::Processed
    );
    assert_eq!(a.files[1].sequence, 2);
    assert_eq!(a.files[1].status(), pb::FileStatus::Identified);
    let unknown = &a.files[1].documents[1];
    assert_eq!(unknown.kind(), pb::DocumentKind::Unspecified);
    assert_eq!(unknown.raw_kind, 99);
    assert_eq!(unknown.status(), pb::ProcessedDocumentStatus::Unspecified);
    assert_eq!(unknown.raw_status, 77);

    let Some(pb::face_bureau_result::Variant::Journey(fb)) = r.face_bureau.unwrap().variant else {
        panic!("expected the full-journey face bureau variant");
    };
    assert_eq!(fb.code(), pb::FaceBureauCode::Success);
    assert_eq!(fb.risk_class(), pb::RiskClass::Low);
    assert_eq!(fb.raw_score, "300");

    let Some(pb::liveness_result::Variant::Journey(lv)) = r.liveness.unwrap().variant else {
        panic!("expected the full-journey liveness variant");
    };
    assert_eq!(
        (lv.code(), lv.raw_code.as_str(), lv.valid),
        (pb::LivenessCode::Valid, "200.0", true)
    );

    let photos = r.photos.unwrap();
    assert_eq!(
        photos.liveness_frontal.as_ref(),
        [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10]
    );
    assert_eq!(photos.documents[0].description, "RG frente");
    assert_eq!(photos.documents[0].image.as_ref(), b"hello");
}

/// Digital-licence journey: CNH with `formato`/`extensao`, registry only
/// with string code and score, both digital variants, upper-case key.
const DIGITAL_LICENCE: &str = r#"{
  "status": "Em processamento",
  "idExternoCliente": "PROP2",
  "dataCriacaoAppkey": "2026-11-21 11:00:00",
  "analiseDocumento": {
    "statusProcessamento": "3",
    "score": "",
    "ResponseClientDadosOcrDTO": {
      "ResponseClientCNHOcrDTO": {
        "documento": "CNH Digital", "formato": "QR Code", "extensao": "Imagem",
        "nome": "JOAO SOUZA", "cpf": "52998224725", "categoria": "AB",
        "numeroRegistro": "01234567890", "validade": "10/10/2030", "local": "CAMPINAS - SP",
        "renach": "SP123", "observacao": "EAR"
      }
    },
    "biometriaCertiface": {
      "protocolo": 7788,
      "registry": {"codigo": "200", "causa": "Positiva", "score": "0.88"}
    },
    "documentos": []
  },
  "serviceID": {"aprovado": true, "codigo": 1, "conhecido": "false", "protocolo": 42, "scoreBiometrico": "87.5"},
  "livenessResult": {"causa": "QRCODE", "codID": 200, "protocolo": 99, "validado": true}
}"#;

#[test]
fn digital_licence_journey_uses_the_digital_variants() {
    let r = result(DIGITAL_LICENCE).unwrap();
    assert_eq!(r.status(), pb::JourneyStatus::Processing);
    let a = r.document_analysis.unwrap();
    assert_eq!(a.processing_status(), pb::ProcessingStatus::InProcessing);
    assert_eq!(a.score, None);
    let ocr = a.ocr.unwrap();
    assert!(ocr.cnh.is_none());
    let d = ocr.digital_cnh.unwrap();
    assert_eq!(
        (d.format.as_str(), d.extension.as_str(), d.remarks.as_str()),
        ("QR Code", "Imagem", "EAR")
    );
    let b = a.biometrics.unwrap();
    assert_eq!(b.protocol, "7788");
    assert!(b.face_match.is_none());
    let reg = b.registry.unwrap();
    assert_eq!(
        (reg.code(), reg.raw_code.as_str(), reg.score),
        (pb::BiometricCode::Positive, "200", Some(0.88))
    );

    let Some(pb::face_bureau_result::Variant::DigitalLicence(fb)) = r.face_bureau.unwrap().variant
    else {
        panic!("expected the digital-licence face bureau variant");
    };
    assert!(fb.approved && !fb.known);
    assert_eq!(
        (fb.code, fb.protocol.as_str(), fb.biometric_score),
        (1, "42", Some(87.5))
    );

    let Some(pb::liveness_result::Variant::DigitalLicence(lv)) = r.liveness.unwrap().variant else {
        panic!("expected the digital-licence liveness variant");
    };
    assert!(lv.validated);
    assert_eq!((lv.raw_code.as_str(), lv.protocol.as_str()), ("200", "99"));
    assert!(r.photos.is_none());
}

#[test]
fn omitted_objects_stay_unset() {
    let r = result(r#"{"status":"Nao processado"}"#).unwrap();
    assert_eq!(r.status(), pb::JourneyStatus::NotProcessed);
    assert!(r.document_analysis.is_none() && r.face_bureau.is_none());
    assert!(r.liveness.is_none() && r.photos.is_none());
    let r = result(r#"{"analiseDocumento":{"biometriaCertiface":{"protocolo":"p"}}}"#).unwrap();
    assert_eq!(r.status(), pb::JourneyStatus::Unspecified);
    let a = r.document_analysis.unwrap();
    assert!(a.ocr.is_none());
    let b = a.biometrics.unwrap();
    assert!(b.face_match.is_none() && b.registry.is_none());
}

#[test]
fn other_ocr_types_convert_and_crnm_passport_stay_raw() {
    let r = result(
        r#"{"analiseDocumento":{"responseClientDadosOcrDTO":{
            "responseClientCNHOcrDTO":{"estado":"SP","categoria":"ABCDE","codSeguranca":"123","espelho":"456"},
            "responseClientDNIOcrDTO":{"dni":"DNI1","outroRG":"R2","serieCTPS":"S1","flAnalfabeto":"true"},
            "ResponseClientCINOcrDTO":{"documento":"CIN","sexo":"F","analfabeto":0},
            "responseClientCRNMOcrDTO":{"rnm":"V123","validade":null,"classificacao":["A",1.5]},
            "responseClientPassaporteOcrDTO":{"numero":"FX1","pais":{"codigo":"BRA"}}
        }}}"#,
    )
    .unwrap();
    let ocr = r.document_analysis.unwrap().ocr.unwrap();
    let cnh = ocr.cnh.unwrap();
    assert_eq!(
        (
            cnh.category.as_str(),
            cnh.security_code.as_str(),
            cnh.mirror_number.as_str()
        ),
        ("ABCDE", "123", "456")
    );
    let dni = ocr.dni.unwrap();
    assert_eq!(
        (
            dni.other_rg.as_str(),
            dni.ctps_series.as_str(),
            dni.unsigned
        ),
        ("R2", "S1", Some(true))
    );
    let cin = ocr.cin.unwrap();
    assert_eq!((cin.sex.as_str(), cin.unsigned), ("F", Some(false)));
    use prost_types::value::Kind;
    let crnm = ocr.crnm.unwrap();
    assert_eq!(
        crnm.fields["rnm"].kind,
        Some(Kind::StringValue("V123".into()))
    );
    assert_eq!(crnm.fields["validade"].kind, Some(Kind::NullValue(0)));
    let passport = ocr.passport.unwrap();
    let Some(Kind::StructValue(pais)) = &passport.fields["pais"].kind else {
        panic!("nested object expected");
    };
    assert_eq!(
        pais.fields["codigo"].kind,
        Some(Kind::StringValue("BRA".into()))
    );
}

#[test]
fn an_undecodable_image_is_an_error_naming_its_path() {
    let err = result(
        r#"{"fotos":{"livenessResult":{"frontal":"aGVsbG8="},
            "documento":[{"descricao":"a","imagem":"aGVsbG8="},{"descricao":"b","imagem":"%%%MARIA%%%"}]}}"#,
    )
    .unwrap_err();
    assert_eq!(
        err.0,
        "undecodable Base64 image at fotos.documento[1].imagem"
    );
}

#[test]
fn a_single_document_photo_object_is_accepted() {
    let r = result(r#"{"fotos":{"documento":{"descricao":"CNH","imagem":"aGk="}}}"#).unwrap();
    let p = r.photos.unwrap();
    assert!(p.liveness_frontal.is_empty());
    assert_eq!(p.documents[0].image.as_ref(), b"hi");
}
