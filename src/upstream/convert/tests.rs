//! Conversion of realistic answers, both variants, lenient types, unknown
//! codes and omitted objects.

use std::time::{Duration, SystemTime};

use super::*;
use crate::upstream::wire::{ChallengesWire, JourneyResultWire, parse_json};

fn result(json: &str) -> Result<pb::JourneyResult, WireError> {
    let wire: JourneyResultWire<'_> = parse_json(json.as_bytes())?;
    journey_result(wire, WireTimes::new(-180))
}

/// Full journey, RG read, face match and registry both run, numbers as
/// numbers, `arquivosProcessado` as an object.
const FULL_JOURNEY: &str = r#"{
  "status": "Completo",
  "idExternoCliente": "PROP2026X1",
  "dataCriacaoAppkey": "2026-11-21 10:15:00",
  "analiseDocumento": {
    "id": 1234, "idExterno": "ext-9", "ticket": "TCK-77", "dtCriacao": "2026-11-21 10:16:00",
    "idCliente": 55, "idSubcliente": "7", "idUsuario": 99, "statusProcessamento": 4,
    "dtStatusProcessamento": "2026-11-21 10:17:00", "idTipoProcessamento": 2, "score": 97.5,
    "urlRetornoTicket": "https://cb.example/t", "dtRetornoTicket": "2026-11-21 10:17:05",
    "responseClientDadosOcrDTO": {
      "responseClientRGOcrDTO": {
        "estado": "SP", "documento": "RG", "dtExpedicao": "01/02/2015",
        "dtExpedicaoFormatada": "2015-02-01", "dtNascimentoFormatada": "1990-02-28",
        "nrRg": "12.345.678-9", "nome": "MARIA DA SILVA", "filiacao": "JOSE / ANA",
        "nomePai": "JOSE DA SILVA", "nomeMae": "ANA DA SILVA", "docOrigem": "CERT NASC",
        "dtNascimento": "28/02/1990", "cpf": "52998224725", "naturalidade": "SAO PAULO",
        "nomenclatura": "SSP", "dtCriacao": "2026-11-21 10:16:30", "flAnalfabeto": false,
        "campoNovo": {"x": 1}
      }
    },
    "biometriaCertiface": {
      "protocolo": "PB-1",
      "facematch": {"codigo": 200, "causa": "Positiva", "score": 0.93},
      "registry": {"codigo": 300, "causa": "Negativa", "score": 0.21}
    },
    "documentos": [
      {"arquivo": 1, "statusArquivo": 22,
       "arquivosProcessado": {"tipo": 1, "statusArquivoProcessado": 19}},
      {"arquivo": "2", "statusArquivo": "9",
       "arquivosProcessado": [{"tipo": 2, "statusArquivoProcessado": 12},
                              {"tipo": 99, "statusArquivoProcessado": 77}]}
    ]
  },
  "serviceID": {"codigo": 200, "protocolo": "SID-1", "score": "300"},
  "livenessResult": {"causa": "", "codID": 200.0, "protocolo": "LV-1", "valid": true},
  "fotos": {
    "livenessResult": {"frontal": "data:image/jpeg;base64,/9j/4AAQ"},
    "documento": [{"descricao": "RG frente", "imagem": "aGVsbG8"}]
  }
}"#;

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
fn unknown_codes_keep_their_raw_values() {
    let r = result(
        r#"{"status":"Suspenso",
            "analiseDocumento":{"statusProcessamento":71,
              "biometriaCertiface":{"facematch":{"codigo":"999","causa":"?"}},
              "documentos":[{"arquivo":1,"statusArquivo":23,"arquivosProcessado":[]}]},
            "serviceID":{"codigo":503,"protocolo":"p","score":"350"},
            "livenessResult":{"codID":"100.1","valid":false}}"#,
    )
    .unwrap();
    assert_eq!(
        (r.status(), r.raw_status.as_str()),
        (pb::JourneyStatus::Unspecified, "Suspenso")
    );
    let a = r.document_analysis.unwrap();
    assert_eq!(
        (a.processing_status(), a.raw_processing_status),
        (pb::ProcessingStatus::Unspecified, 71)
    );
    let fm = a.biometrics.unwrap().face_match.unwrap();
    assert_eq!(
        (fm.code(), fm.raw_code.as_str(), fm.score),
        (pb::BiometricCode::Unspecified, "999", None)
    );
    assert_eq!(
        (a.files[0].status(), a.files[0].raw_status),
        (pb::FileStatus::Unspecified, 23)
    );
    let Some(pb::face_bureau_result::Variant::Journey(fb)) = r.face_bureau.unwrap().variant else {
        panic!("journey variant expected");
    };
    assert_eq!(
        (fb.code(), fb.raw_code),
        (pb::FaceBureauCode::Unspecified, 503)
    );
    assert_eq!(
        (fb.risk_class(), fb.raw_score.as_str()),
        (pb::RiskClass::Unspecified, "350")
    );
    let Some(pb::liveness_result::Variant::Journey(lv)) = r.liveness.unwrap().variant else {
        panic!("journey variant expected");
    };
    assert_eq!(
        (lv.code(), lv.raw_code.as_str()),
        (pb::LivenessCode::Unspecified, "100.1")
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

#[test]
fn liveness_codes_compare_as_decimal_text() {
    assert_eq!(liveness_code("200.0"), pb::LivenessCode::Valid);
    assert_eq!(liveness_code("200"), pb::LivenessCode::Valid);
    assert_eq!(liveness_code("300.1"), pb::LivenessCode::Invalid);
    assert_eq!(liveness_code("300.10"), pb::LivenessCode::Invalid);
    assert_eq!(liveness_code(" 300.2 "), pb::LivenessCode::UserBlocked);
    assert_eq!(liveness_code("300.21"), pb::LivenessCode::Unspecified);
    assert_eq!(liveness_code("300"), pb::LivenessCode::Unspecified);
    assert_eq!(liveness_code(""), pb::LivenessCode::Unspecified);
    assert_eq!(liveness_code("abc"), pb::LivenessCode::Unspecified);
}

#[test]
fn risk_classes_follow_the_score_table() {
    use pb::RiskClass as R;
    for (raw, class) in [
        ("000", R::NoInformation),
        ("100", R::VeryLow),
        ("200", R::VeryLow),
        ("300", R::Low),
        ("400", R::Medium),
        ("500", R::Medium),
        ("600", R::Medium),
        ("700", R::High),
        ("800", R::High),
        ("900", R::Highest),
        ("1000", R::Highest),
        ("1000.0", R::Highest),
        ("150", R::Unspecified),
        ("", R::Unspecified),
    ] {
        assert_eq!(risk_class(raw), class, "{raw}");
    }
}

#[test]
fn journey_statuses_accept_accents_case_and_error_spellings() {
    use pb::JourneyStatus as S;
    assert_eq!(journey_status("Completo"), S::Complete);
    assert_eq!(journey_status("Em processamento"), S::Processing);
    assert_eq!(journey_status("Não processado"), S::NotProcessed);
    assert_eq!(journey_status("Nao processado"), S::NotProcessed);
    assert_eq!(journey_status("Erro"), S::Error);
    assert_eq!(journey_status("Error"), S::Error);
    assert_eq!(journey_status("Pendente"), S::Unspecified);
}

#[test]
fn verdict_converts_with_raw_and_typed_code() {
    let v = verdict(
        parse_json(br#"{"valid":false,"codID":300.2,"cause":"bloqueado","protocol":7}"#).unwrap(),
    );
    assert_eq!(
        (v.valid, v.code(), v.raw_code.as_str()),
        (false, pb::LivenessCode::UserBlocked, "300.2")
    );
    assert_eq!((v.cause.as_str(), v.protocol.as_str()), ("bloqueado", "7"));
}

#[test]
fn challenges_convert_with_icons_and_a_sixty_second_deadline() {
    let json = br#"{"chkey":"CH-1","totalTime":"12","numberOfChallenges":2,
        "snapFrequenceInMillis":1000,"snapNumber":4,
        "challenges":[{"mensagem":"Sorria","tempoEmSegundos":3,"tipoFace":{"codigo":2,"imagem":"aGk="}},
                      {"mensagem":"Olhe","tempoEmSegundos":"3","tipoFace":{"codigo":"1","imagem":null}}]}"#;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let wire: ChallengesWire<'_> = parse_json(json).unwrap();
    let c = challenges(wire, at).unwrap();
    assert_eq!(c.challenge_key, "CH-1");
    assert_eq!((c.challenge_count, c.snapshot_count), (2, 4));
    assert_eq!(
        c.total_duration,
        Some(prost_types::Duration {
            seconds: 12,
            nanos: 0
        })
    );
    assert_eq!(
        c.snapshot_interval,
        Some(prost_types::Duration {
            seconds: 1,
            nanos: 0
        })
    );
    assert_eq!(c.challenges[1].duration.unwrap().seconds, 3);
    assert_eq!(
        c.challenges[0].face_type.as_ref().unwrap().icon.as_ref(),
        b"hi"
    );
    assert_eq!(c.challenges[1].face_type.as_ref().unwrap().code, "1");
    assert_eq!(c.challenges[0].face_type.as_ref().unwrap().code, "2");
    assert_eq!(c.expire_time.unwrap().seconds, 1_800_000_060);

    let wire: ChallengesWire<'_> = parse_json(br#"{"challenges":[]}"#).unwrap();
    assert_eq!(challenges(wire, at).unwrap_err().0, "missing field `chkey`");
    let wire: ChallengesWire<'_> =
        parse_json(br#"{"chkey":"k","challenges":[{"tipoFace":{"codigo":1,"imagem":"!!"}}]}"#)
            .unwrap();
    assert_eq!(
        challenges(wire, at).unwrap_err().0,
        "undecodable Base64 image at challenges[0].tipoFace.imagem"
    );
}

#[test]
fn session_3d_requires_a_token_and_reports_contingency() {
    let s = session_3d(
        parse_json(
            br#"{"isContingency":true,"token":"canary-st-1","vendor":"alt","url":"https://v"}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert!(s.contingency);
    assert!(!format!("{s:?}").contains("canary"));
    assert_eq!(
        (
            s.session_token.expose(),
            s.vendor.as_str(),
            s.vendor_url.as_str()
        ),
        ("canary-st-1", "alt", "https://v")
    );
    assert!(session_3d(parse_json(br#"{"vendor":"v"}"#).unwrap()).is_err());
}

#[test]
fn decimal_normalisation() {
    assert_eq!(normalize_decimal("0200.500").as_deref(), Some("200.5"));
    assert_eq!(normalize_decimal("000").as_deref(), Some("0"));
    assert_eq!(normalize_decimal("1e3"), None);
    assert_eq!(normalize_decimal("-1"), None);
    assert_eq!(normalize_decimal("."), None);
}

#[test]
fn every_time_of_the_result_is_a_timestamp_beside_its_raw_text() {
    let r = result(FULL_JOURNEY).unwrap();
    let a = r.document_analysis.unwrap();
    assert_eq!(a.raw_ticket_create_time, "2026-11-21 10:16:00");
    assert_eq!(a.ticket_create_time.unwrap().seconds, 1_795_266_900 + 60);
    assert_eq!(a.raw_processing_status_time, "2026-11-21 10:17:00");
    assert_eq!(
        a.processing_status_time.unwrap().seconds,
        1_795_266_900 + 120
    );
    assert_eq!(a.ticket_return_time.unwrap().seconds, 1_795_266_900 + 125);
    let rg = a.ocr.unwrap().rg.unwrap();
    assert_eq!(rg.raw_create_time, "2026-11-21 10:16:30");
    assert_eq!(rg.create_time.unwrap().seconds, 1_795_266_900 + 90);
}

#[test]
fn wire_times_read_every_written_form_in_the_upstream_offset_and_none_for_junk() {
    let brasilia = WireTimes::new(-180);
    let at = |raw: &str| brasilia.parse(raw).map(|t| (t.seconds, t.nanos));
    assert_eq!(at("2026-11-21 10:15:00"), Some((1_795_266_900, 0)));
    assert_eq!(at(" 2026-11-21T10:15:00 "), Some((1_795_266_900, 0)));
    assert_eq!(
        at("2026-11-21 10:15:00.250"),
        Some((1_795_266_900, 250_000_000))
    );
    assert_eq!(at("21/11/2026 10:15:00"), Some((1_795_266_900, 0)));
    assert_eq!(
        at("2026-11-21T13:15:00Z"),
        Some((1_795_266_900, 0)),
        "an explicit offset wins"
    );
    assert_eq!(
        WireTimes::new(0)
            .parse("2026-11-21 13:15:00")
            .unwrap()
            .seconds,
        1_795_266_900
    );
    for junk in ["", "  ", "ontem", "2026-13-40 99:00:00", "21/11/2026"] {
        assert_eq!(at(junk), None, "{junk:?}");
    }
}
