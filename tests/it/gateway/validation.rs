//! Validation at the edge: every rule answers `INVALID_ARGUMENT` with a
//! `BadRequest` naming the field, a message that never repeats the value,
//! and no upstream call at all (the sandbox's counters stay at zero).

use crate::support::gateway::*;
use idgate::{
    domain::Operation,
    proto::v1::{self, submit_digital_licence_request::Licence},
    sandbox::samples::{self, DocumentType, LivenessOutcome},
};
use tonic::Code;
use tonic_types::StatusExt;

/// Asserts `status` is a validation error naming exactly `fields`, and
/// that neither its message nor its violations quote any of `values`.
#[track_caller]
fn assert_invalid(status: &tonic::Status, fields: &[&str], values: &[&str]) {
    assert_error(status, Code::InvalidArgument, "INVALID_REQUEST");
    assert_eq!(bad_fields(status), fields, "{status:?}");
    assert!(!retryable(status));
    let descriptions: Vec<String> = status
        .get_details_bad_request()
        .map(|b| {
            b.field_violations
                .into_iter()
                .map(|v| v.description)
                .collect()
        })
        .unwrap_or_default();
    for value in values.iter().filter(|v| !v.trim().is_empty()) {
        assert!(
            !status.message().contains(value),
            "message echoes a value: {}",
            status.message()
        );
        for d in &descriptions {
            assert!(!d.contains(value), "description echoes a value: {d}");
        }
    }
}

async fn create(gw: &TestGateway, req: v1::CreateJourneyRequest) -> tonic::Status {
    gw.journeys()
        .create_journey(req)
        .await
        .expect_err("invalid request refused")
}

#[tokio::test]
async fn create_journey_rejects_each_invalid_field_by_name_without_its_value() {
    let gw = TestGateway::start().await;
    let long_name = "a".repeat(201);
    let long_reference = "A".repeat(256);
    let cases: Vec<(&str, v1::CreateJourneyRequest, String)> = vec![
        ("cpf", cpf("52998224724"), "52998224724".into()),
        ("cpf", cpf("5299822472"), "5299822472".into()),
        ("cpf", cpf("529982247ab"), "529982247ab".into()),
        ("cpf", cpf("11111111111"), "11111111111".into()),
        ("cpf", cpf(""), String::new()),
        ("name", name(""), String::new()),
        ("name", name("Ana\u{7}Souza"), "Ana\u{7}Souza".into()),
        ("name", name("Ana\nSouza"), "Ana\nSouza".into()),
        ("name", name(&long_name), long_name.clone()),
        ("birth_date", birth("2999-01-01"), "2999-01-01".into()),
        ("birth_date", birth("1990-02-30"), "1990-02-30".into()),
        ("birth_date", birth("14-03-1985"), "14-03-1985".into()),
        ("birth_date", birth("1985/03/14"), "1985/03/14".into()),
        ("birth_date", birth(""), String::new()),
        ("customer_reference", reference("REF-1"), "REF-1".into()),
        ("customer_reference", reference("REF 1"), "REF 1".into()),
        (
            "customer_reference",
            reference(&long_reference),
            long_reference.clone(),
        ),
        ("customer_reference", reference(""), String::new()),
    ];
    for (field, req, value) in cases {
        let err = create(&gw, req).await;
        assert_invalid(&err, &[field], &[&value]);
    }
    assert_eq!(gw.total_calls(), 0, "no upstream call");

    // The limits themselves are accepted.
    gw.journeys()
        .create_journey(v1::CreateJourneyRequest {
            name: "a".repeat(200),
            customer_reference: "A".repeat(255),
            ..happy_person()
        })
        .await
        .expect("200-character name and 255-character reference");
    gw.stop().await;
}

fn cpf(v: &str) -> v1::CreateJourneyRequest {
    v1::CreateJourneyRequest {
        cpf: v.into(),
        ..happy_person()
    }
}

fn name(v: &str) -> v1::CreateJourneyRequest {
    v1::CreateJourneyRequest {
        name: v.into(),
        ..happy_person()
    }
}

fn birth(v: &str) -> v1::CreateJourneyRequest {
    v1::CreateJourneyRequest {
        birth_date: v.into(),
        ..happy_person()
    }
}

fn reference(v: &str) -> v1::CreateJourneyRequest {
    v1::CreateJourneyRequest {
        customer_reference: v.into(),
        ..happy_person()
    }
}

#[tokio::test]
async fn create_journey_names_every_invalid_field_in_one_answer() {
    let gw = TestGateway::start().await;
    let err = create(
        &gw,
        v1::CreateJourneyRequest {
            cpf: "123.456.789-00".into(),
            name: "   ".into(),
            birth_date: "2999-12-31".into(),
            customer_reference: "not alnum!".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        },
    )
    .await;
    assert_invalid(
        &err,
        &["cpf", "name", "birth_date", "customer_reference"],
        &["123.456.789-00", "2999-12-31", "not alnum!"],
    );
    assert_eq!(gw.total_calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_operator_profile_is_invalid_argument() {
    let gw = TestGateway::start().await;
    let err = create(
        &gw,
        v1::CreateJourneyRequest {
            operator_profile: "no-such-profile".into(),
            ..happy_person()
        },
    )
    .await;
    assert_error(&err, Code::InvalidArgument, "OPERATOR_PROFILE_UNKNOWN");
    assert!(!retryable(&err));
    assert_eq!(gw.total_calls(), 0);
    // The configured profile by name works.
    gw.journeys()
        .create_journey(v1::CreateJourneyRequest {
            operator_profile: "sandbox".into(),
            ..happy_person()
        })
        .await
        .expect("the embedded sandbox's profile");
    gw.stop().await;
}

#[tokio::test]
async fn a_formatted_cpf_and_a_brazilian_birth_date_are_accepted_and_normalised() {
    let gw = TestGateway::start().await;
    let p = samples::HAPPY_PERSON;
    let formatted = format!(
        "{}.{}.{}-{}",
        &p.cpf[0..3],
        &p.cpf[3..6],
        &p.cpf[6..9],
        &p.cpf[9..11]
    );
    let appkey = gw
        .create_journey_for(v1::CreateJourneyRequest {
            cpf: formatted,
            birth_date: p.birth_date.into(),
            name: format!("  {}  ", p.name),
            ..happy_person()
        })
        .await
        .appkey;
    gw.pass_3d(&appkey).await;
    gw.submit_images(&appkey, &document_pair(DocumentType::Rg))
        .await
        .expect("documents");
    gw.finish_processing();
    let result = gw.result(&appkey).await.expect("result");
    let rg = result.document_analysis.unwrap().ocr.unwrap().rg.unwrap();
    assert_eq!(rg.cpf, p.cpf, "sent as 11 digits");
    assert_eq!(rg.birth_date, p.birth_date, "sent as dd/mm/yyyy");
    assert_eq!(rg.name, p.name.to_uppercase(), "sent trimmed");
    gw.stop().await;
}

fn images(contents: Vec<Vec<u8>>) -> Vec<v1::DocumentImage> {
    contents
        .into_iter()
        .map(|c| v1::DocumentImage { content: c.into() })
        .collect()
}

/// A JPEG of `len` bytes (magic, then filler).
fn jpeg_of(len: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xE0];
    v.resize(len, 0);
    v
}

#[tokio::test]
async fn document_images_are_checked_for_presence_format_size_and_count() {
    let gw = TestGateway::start_with(|c| {
        c.limits.max_image_bytes = 1024;
        c.limits.max_images = 3;
    })
    .await;
    let good = samples::document_image(samples::DocumentKind::new(
        DocumentType::Rg,
        samples::Side::Front,
    ));
    assert!(good.len() <= 1024, "the sample fits the test cap");
    let cases: Vec<(Vec<v1::DocumentImage>, Vec<&str>)> = vec![
        (vec![], vec!["images"]),
        (images(vec![vec![]]), vec!["images[0].content"]),
        (
            images(vec![good.clone(), b"GIF89a not an image".to_vec()]),
            vec!["images[1].content"],
        ),
        (
            images(vec![good.clone(), jpeg_of(1025)]),
            vec!["images[1].content"],
        ),
        (images(vec![good.clone(); 4]), vec!["images"]),
    ];
    let mut d = gw.documents();
    for (imgs, fields) in cases {
        let err = d
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: "an-appkey".into(),
                images: imgs,
            })
            .await
            .unwrap_err();
        assert_invalid(&err, &fields, &["an-appkey"]);
    }
    assert_eq!(gw.total_calls(), 0, "no upstream call");

    // A PDF is a document image too: it passes validation and is sent
    // once; the sandbox finds no document in it and answers 400.
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let pdf = samples::digital_licence_pdf();
    assert!(pdf.len() <= 1024, "the sample fits the test cap");
    let err = gw.submit_images(&appkey, &[pdf]).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "DOCUMENT_UNUSABLE");
    assert!(
        bad_fields(&err).is_empty(),
        "not a validation error: {err:?}"
    );
    assert_eq!(gw.calls(Operation::DocumentImages), 1);
    gw.stop().await;
}

#[tokio::test]
async fn snapshots_need_a_face_type_code_and_an_image_within_limits() {
    let gw = TestGateway::start_with(|c| {
        c.limits.max_image_bytes = 1024;
        c.limits.max_images = 2;
    })
    .await;
    let good = samples::snapshot(LivenessOutcome::Valid);
    let snap = |image: Vec<u8>, code: &str| v1::Snapshot {
        image: image.into(),
        face_type_code: code.into(),
    };
    let cases: Vec<(Vec<v1::Snapshot>, Vec<&str>)> = vec![
        (vec![], vec!["snapshots"]),
        (
            vec![snap(good.clone(), "")],
            vec!["snapshots[0].face_type_code"],
        ),
        (
            vec![snap(good.clone(), "cod01"), snap(good.clone(), "a,b")],
            vec!["snapshots[1].face_type_code"],
        ),
        (vec![snap(vec![], "cod01")], vec!["snapshots[0].image"]),
        (
            vec![snap(samples::digital_licence_pdf(), "cod01")],
            vec!["snapshots[0].image"],
        ),
        (
            vec![snap(jpeg_of(2048), "cod01")],
            vec!["snapshots[0].image"],
        ),
        (
            vec![
                snap(good.clone(), "cod01"),
                snap(good.clone(), "cod02"),
                snap(good.clone(), "cod01"),
            ],
            vec!["snapshots"],
        ),
    ];
    for (snapshots, fields) in cases {
        let err = gw
            .submit_snapshots("an-appkey", "a-challenge-key", snapshots)
            .await
            .unwrap_err();
        assert_invalid(&err, &fields, &["an-appkey", "a-challenge-key"]);
    }
    assert_eq!(gw.total_calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn appkeys_session_tokens_and_challenge_keys_are_required() {
    let gw = TestGateway::start().await;
    let snapshot = vec![v1::Snapshot {
        image: samples::snapshot(LivenessOutcome::Valid).into(),
        face_type_code: "cod01".into(),
    }];
    for missing in ["", "   ", "has space", "tab\there"] {
        let err = gw.challenges(missing).await.unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw.result(missing).await.unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw
            .submit_images(missing, &document_pair(DocumentType::Rg))
            .await
            .unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw
            .submit_licence(missing, Licence::Pdf(samples::digital_licence_pdf().into()))
            .await
            .unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw
            .submit_snapshots(missing, "a-challenge-key", snapshot.clone())
            .await
            .unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw
            .liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: missing.into(),
                user_agent: String::new(),
            })
            .await
            .unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing]);
        let err = gw
            .liveness()
            .verify_liveness3_d(v1::VerifyLiveness3DRequest {
                appkey: missing.into(),
                session_token: "a-session-token".into(),
                channel: String::new(),
            })
            .await
            .unwrap_err();
        assert_invalid(&err, &["appkey"], &[missing, "a-session-token"]);
    }
    let err = gw
        .liveness()
        .verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: "an-appkey".into(),
            session_token: String::new(),
            channel: String::new(),
        })
        .await
        .unwrap_err();
    assert_invalid(&err, &["session_token"], &["an-appkey"]);
    let err = gw
        .submit_snapshots("an-appkey", "", snapshot)
        .await
        .unwrap_err();
    assert_invalid(&err, &["challenge_key"], &["an-appkey"]);
    assert_eq!(gw.total_calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn a_digital_licence_must_match_its_declared_form() {
    let gw = TestGateway::start().await;
    let cases: Vec<(Option<Licence>, &str)> = vec![
        (None, "licence"),
        (
            Some(Licence::QrImage(samples::digital_licence_pdf().into())),
            "qr_image",
        ),
        (
            Some(Licence::Pdf(samples::digital_licence_image().into())),
            "pdf",
        ),
        (
            Some(Licence::QrBinary(samples::digital_licence_image().into())),
            "qr_binary",
        ),
        (
            Some(Licence::QrBinary(samples::digital_licence_pdf().into())),
            "qr_binary",
        ),
        (Some(Licence::QrBinary(Vec::new().into())), "qr_binary"),
        (Some(Licence::QrImage(Vec::new().into())), "qr_image"),
    ];
    for (licence, field) in cases {
        let err = gw
            .documents()
            .submit_digital_licence(v1::SubmitDigitalLicenceRequest {
                appkey: "an-appkey".into(),
                licence,
            })
            .await
            .unwrap_err();
        assert_invalid(&err, &[field], &["an-appkey"]);
    }
    assert_eq!(gw.total_calls(), 0);
    gw.stop().await;
}
