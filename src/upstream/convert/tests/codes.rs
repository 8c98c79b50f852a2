//! Codes and statuses to typed enums: unknown codes keep their raw values,
//! liveness codes compare as decimal text, risk classes follow the score
//! table, journey statuses accept their spellings.

use super::*;

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
fn decimal_normalisation() {
    assert_eq!(normalize_decimal("0200.500").as_deref(), Some("200.5"));
    assert_eq!(normalize_decimal("000").as_deref(), Some("0"));
    assert_eq!(normalize_decimal("1e3"), None);
    assert_eq!(normalize_decimal("-1"), None);
    assert_eq!(normalize_decimal("."), None);
}
