//! Whole journeys through the gateway (issue 2): 3D and 2D liveness, every
//! document type, the digital licence in its three forms, and the business
//! outcomes (negative liveness, registry and face match) as OK responses.

use crate::support::gateway::*;
use idgate::{
    proto::v1::{self, submit_digital_licence_request::Licence},
    sandbox::samples::{self, DocumentKind, DocumentType, LivenessOutcome, Side},
};

/// Submits `images`, lets processing finish and reads the result, which
/// must be `Completo`.
async fn complete_with(gw: &TestGateway, appkey: &str, images: &[Vec<u8>]) -> v1::JourneyResult {
    gw.submit_images(appkey, images)
        .await
        .expect("documents accepted");
    gw.finish_processing();
    let result = gw.result(appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    assert_eq!(result.raw_status, "Completo");
    result
}

fn journey_liveness(result: &v1::JourneyResult) -> &v1::LivenessVerdict {
    match result.liveness.as_ref().and_then(|l| l.variant.as_ref()) {
        Some(v1::liveness_result::Variant::Journey(j)) => j,
        other => panic!("expected the full-journey liveness variant, got {other:?}"),
    }
}

fn journey_bureau(result: &v1::JourneyResult) -> &v1::FaceBureauJourney {
    match result.face_bureau.as_ref().and_then(|b| b.variant.as_ref()) {
        Some(v1::face_bureau_result::Variant::Journey(j)) => j,
        other => panic!("expected the full-journey face bureau variant, got {other:?}"),
    }
}

fn biometrics(result: &v1::JourneyResult) -> &v1::DocumentBiometrics {
    result
        .document_analysis
        .as_ref()
        .and_then(|a| a.biometrics.as_ref())
        .expect("biometrics")
}

fn document_photos(result: &v1::JourneyResult) -> Vec<Vec<u8>> {
    result
        .photos
        .as_ref()
        .expect("photos")
        .documents
        .iter()
        .map(|d| d.image.to_vec())
        .collect()
}

#[tokio::test]
async fn a_3d_journey_completes_with_liveness_bureau_biometrics_and_photos() {
    let gw = TestGateway::start().await;
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let created = gw.create_journey_for(happy_person()).await;
    let after = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!(!created.appkey.is_empty());
    assert!(!created.journey_ref.is_empty());
    assert!(!created.journey_ref.contains(&created.appkey));
    // The appkey's validity from its creation: the embedded sandbox's
    // upstream settings are the defaults ([upstream] appkey_ttl_secs).
    let ttl = idgate::upstream::UpstreamConfig::default().appkey_ttl_secs as i64;
    let expires = created.expire_time.expect("expire_time").seconds;
    assert!(
        (before + ttl..=after + ttl).contains(&expires),
        "{expires} not within [{}, {}]",
        before + ttl,
        after + ttl
    );
    let appkey = created.appkey;

    let verdict = gw
        .run_3d(&appkey, samples::USER_AGENT_VALID)
        .await
        .expect("3D proof");
    assert!(verdict.valid);
    assert_eq!(verdict.code(), v1::LivenessCode::Valid);
    assert!(!verdict.protocol.is_empty());

    let images = document_pair(DocumentType::Rg);
    let result = complete_with(&gw, &appkey, &images).await;

    assert_eq!(result.customer_reference, "TESTREF1");
    assert!(!result.raw_appkey_create_time.is_empty());
    assert!(
        result.appkey_create_time.is_some(),
        "the sandbox's time parses into a timestamp"
    );
    let liveness = journey_liveness(&result);
    assert!(liveness.valid);
    assert_eq!(liveness.code(), v1::LivenessCode::Valid);
    assert_eq!(liveness.protocol, verdict.protocol);
    let bureau = journey_bureau(&result);
    assert_eq!(bureau.code(), v1::FaceBureauCode::Success);
    assert_eq!(bureau.raw_code, 200);
    assert!(samples::RISK_CLASSES.contains(&bureau.raw_score.as_str()));
    assert_ne!(bureau.risk_class(), v1::RiskClass::Unspecified);

    let analysis = result.document_analysis.as_ref().expect("analysis");
    assert_eq!(
        analysis.processing_status(),
        v1::ProcessingStatus::Processed
    );
    assert_eq!(
        analysis.score,
        Some(f64::from(samples::NORMAL_FORENSICS_SCORE))
    );
    let bio = biometrics(&result);
    let face_match = bio.face_match.as_ref().expect("face match");
    assert_eq!(face_match.code(), v1::BiometricCode::Positive);
    let registry = bio.registry.as_ref().expect("registry");
    assert_eq!(registry.code(), v1::BiometricCode::Positive);

    // The photos come back as the bytes that were sent (3D: the sandbox's
    // frontal capture).
    let photos = result.photos.as_ref().expect("photos");
    assert_eq!(
        photos.liveness_frontal.as_ref(),
        samples::selfie().as_slice()
    );
    assert_eq!(document_photos(&result), images);
    gw.stop().await;
}

#[tokio::test]
async fn a_2d_journey_completes_and_returns_the_sent_snapshot_as_frontal_photo() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;

    let ch = gw.challenges(&appkey).await.expect("challenges");
    assert!(!ch.challenge_key.is_empty());
    assert!(!ch.challenges.is_empty());
    assert_eq!(ch.challenge_count as usize, ch.challenges.len());
    assert!(ch.expire_time.is_some());
    assert!(ch.total_duration.is_some_and(|d| d.seconds > 0));
    for c in &ch.challenges {
        let face = c.face_type.as_ref().expect("face type");
        assert!(!face.code.is_empty());
        assert!(!face.icon.is_empty(), "icon decoded from Base64");
    }
    let snapshots = snapshots_for(&ch, LivenessOutcome::Valid);
    let frontal = snapshots[0].image.to_vec();
    let verdict = gw
        .submit_snapshots(&appkey, &ch.challenge_key, snapshots)
        .await
        .expect("2D proof");
    assert!(verdict.valid);
    assert_eq!(verdict.code(), v1::LivenessCode::Valid);

    let images = document_pair(DocumentType::Cnh);
    let result = complete_with(&gw, &appkey, &images).await;
    let liveness = journey_liveness(&result);
    assert!(liveness.valid);
    assert_eq!(liveness.protocol, verdict.protocol);
    let photos = result.photos.as_ref().expect("photos");
    assert_eq!(photos.liveness_frontal.as_ref(), frontal.as_slice());
    assert_eq!(document_photos(&result), images);
    gw.stop().await;
}

#[tokio::test]
async fn each_document_type_yields_its_own_ocr_object_and_file_kinds() {
    use v1::DocumentKind as K;
    let gw = TestGateway::start().await;
    let cases = [
        (DocumentType::Rg, K::RgFront, K::RgBack),
        (DocumentType::Cnh, K::CnhFront, K::CnhBack),
        (DocumentType::Cnh2022, K::Cnh2022Front, K::Cnh2022Back),
        (DocumentType::Dni, K::DniFront, K::DniBack),
        (DocumentType::Cin, K::CinFront, K::CinBack),
        (DocumentType::Crnm, K::CrnmFront, K::CrnmBack),
        (DocumentType::Passport, K::PassportFront, K::PassportBack),
    ];
    for (doc_type, front, back) in cases {
        let appkey = gw.create_journey().await;
        gw.pass_3d(&appkey).await;
        let images = document_pair(doc_type);
        let result = complete_with(&gw, &appkey, &images).await;
        let analysis = result.document_analysis.as_ref().expect("analysis");
        let ocr = analysis.ocr.as_ref().expect("ocr");
        let present = [
            ("rg", ocr.rg.is_some()),
            ("cnh", ocr.cnh.is_some()),
            ("dni", ocr.dni.is_some()),
            ("cin", ocr.cin.is_some()),
            ("digital_cnh", ocr.digital_cnh.is_some()),
            ("crnm", ocr.crnm.is_some()),
            ("passport", ocr.passport.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| name)
        .collect::<Vec<_>>();
        let expected = match doc_type {
            DocumentType::Rg => "rg",
            DocumentType::Cnh | DocumentType::Cnh2022 => "cnh",
            DocumentType::Dni => "dni",
            DocumentType::Cin => "cin",
            DocumentType::Crnm => "crnm",
            DocumentType::Passport => "passport",
        };
        assert_eq!(present, [expected], "{doc_type:?}");
        // The OCR holds the end user's data.
        let cpf = samples::HAPPY_PERSON.cpf;
        match doc_type {
            DocumentType::Rg => assert_eq!(ocr.rg.as_ref().unwrap().cpf, cpf),
            DocumentType::Cnh | DocumentType::Cnh2022 => {
                assert_eq!(ocr.cnh.as_ref().unwrap().cpf, cpf)
            }
            DocumentType::Dni => assert_eq!(ocr.dni.as_ref().unwrap().cpf, cpf),
            DocumentType::Cin => assert_eq!(ocr.cin.as_ref().unwrap().cpf, cpf),
            DocumentType::Crnm | DocumentType::Passport => {
                let s = ocr.crnm.as_ref().or(ocr.passport.as_ref()).unwrap();
                assert!(!s.fields.is_empty(), "{doc_type:?}: struct has fields");
            }
        }

        let kinds: Vec<(i32, v1::DocumentKind)> = analysis
            .files
            .iter()
            .map(|f| {
                assert_eq!(f.status(), v1::FileStatus::Processed, "{doc_type:?}");
                assert_eq!(f.documents.len(), 1);
                let d = &f.documents[0];
                assert_eq!(d.status(), v1::ProcessedDocumentStatus::Processed);
                assert_eq!(d.raw_kind, d.kind);
                (f.sequence, d.kind())
            })
            .collect();
        assert_eq!(kinds, [(1, front), (2, back)], "{doc_type:?}");
        let kinds_sent: Vec<u32> = Side::ALL
            .into_iter()
            .map(|s| DocumentKind::new(doc_type, s).tipo())
            .collect();
        assert_eq!(kinds_sent, [front as u32, back as u32]);
        assert_eq!(document_photos(&result), images, "{doc_type:?}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn the_digital_licence_in_each_form_yields_the_digital_result_variants() {
    let gw = TestGateway::start().await;
    let forms = [
        (
            Licence::QrImage(samples::digital_licence_image().into()),
            samples::digital_licence_image(),
            "Imagem",
            "QR Code",
        ),
        (
            Licence::Pdf(samples::digital_licence_pdf().into()),
            samples::digital_licence_pdf(),
            "PDF",
            "Documento",
        ),
        (
            Licence::QrBinary(samples::digital_licence_binary().into()),
            samples::digital_licence_binary(),
            "Binario",
            "QR Code",
        ),
    ];
    for (licence, bytes, extension, format) in forms {
        let appkey = gw.create_journey().await;
        gw.pass_3d(&appkey).await;
        let code = gw.submit_licence(&appkey, licence).await.expect("licence");
        assert!(code > 0);
        gw.finish_processing();
        let result = gw.result(&appkey).await.expect("result");
        assert_eq!(result.status(), v1::JourneyStatus::Complete, "{extension}");

        let analysis = result.document_analysis.as_ref().expect("analysis");
        let ocr = analysis.ocr.as_ref().expect("ocr");
        assert!(ocr.cnh.is_none(), "{extension}: not the paper CNH object");
        let digital = ocr.digital_cnh.as_ref().expect("digital licence OCR");
        assert_eq!(digital.extension, extension);
        assert_eq!(digital.format, format);
        assert_eq!(digital.cpf, samples::HAPPY_PERSON.cpf);
        let kinds: Vec<v1::DocumentKind> = analysis
            .files
            .iter()
            .flat_map(|f| f.documents.iter().map(|d| d.kind()))
            .collect();
        assert_eq!(kinds, [v1::DocumentKind::CnhFront], "{extension}");

        // Digital variants of the face bureau and the liveness result.
        match result.face_bureau.as_ref().and_then(|b| b.variant.as_ref()) {
            Some(v1::face_bureau_result::Variant::DigitalLicence(b)) => {
                assert!(b.approved, "{extension}");
                assert!(b.known, "{extension}");
                assert!(!b.protocol.is_empty());
                assert_eq!(b.biometric_score, Some(93.0));
            }
            other => panic!("{extension}: expected the digital bureau, got {other:?}"),
        }
        match result.liveness.as_ref().and_then(|l| l.variant.as_ref()) {
            Some(v1::liveness_result::Variant::DigitalLicence(l)) => {
                assert!(l.validated, "{extension}");
                assert!(!l.protocol.is_empty());
                assert!(!l.cause.is_empty());
            }
            other => panic!("{extension}: expected the digital liveness, got {other:?}"),
        }
        // Only the registry check, with its string codes read.
        let bio = biometrics(&result);
        assert!(bio.face_match.is_none(), "{extension}");
        let registry = bio.registry.as_ref().expect("registry");
        assert_eq!(registry.code(), v1::BiometricCode::Positive);
        assert_eq!(registry.raw_code, "200");
        assert_eq!(registry.score, Some(0.93));

        assert_eq!(document_photos(&result), [bytes], "{extension}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn negative_2d_liveness_outcomes_are_ok_responses_with_their_codes() {
    let gw = TestGateway::start().await;
    for (outcome, code, raw) in [
        (LivenessOutcome::Invalid, v1::LivenessCode::Invalid, "300.1"),
        (
            LivenessOutcome::Blocked,
            v1::LivenessCode::UserBlocked,
            "300.2",
        ),
    ] {
        let appkey = gw.create_journey().await;
        let (verdict, _) = gw.pass_2d(&appkey, outcome).await;
        assert!(!verdict.valid, "{outcome:?}");
        assert_eq!(verdict.code(), code);
        assert_eq!(verdict.raw_code, raw);
        assert!(!verdict.cause.is_empty(), "{outcome:?}: a cause is given");

        let result = complete_with(&gw, &appkey, &document_pair(DocumentType::Rg)).await;
        let liveness = journey_liveness(&result);
        assert!(!liveness.valid);
        assert_eq!(liveness.code(), code);
        assert_eq!(liveness.raw_code, raw);
    }
    gw.stop().await;
}

#[tokio::test]
async fn negative_3d_liveness_outcomes_are_ok_responses_with_their_codes() {
    let gw = TestGateway::start().await;
    for (user_agent, code, raw) in [
        (
            samples::USER_AGENT_INVALID,
            v1::LivenessCode::Invalid,
            "300.1",
        ),
        (
            samples::USER_AGENT_BLOCKED,
            v1::LivenessCode::UserBlocked,
            "300.2",
        ),
    ] {
        let appkey = gw.create_journey().await;
        let verdict = gw.run_3d(&appkey, user_agent).await.expect("3D verdict");
        assert!(!verdict.valid, "{user_agent}");
        assert_eq!(verdict.code(), code);
        assert_eq!(verdict.raw_code, raw);

        let result = gw.result(&appkey).await.expect("result");
        assert_eq!(result.status(), v1::JourneyStatus::NotProcessed);
        let liveness = journey_liveness(&result);
        assert!(!liveness.valid);
        assert_eq!(liveness.code(), code);
    }
    gw.stop().await;
}

#[tokio::test]
async fn registry_and_face_match_outcomes_follow_the_test_persons() {
    use v1::BiometricCode as B;
    let gw = TestGateway::start().await;
    let cases = [
        (
            samples::REGISTRY_POSITIVE[1],
            B::Positive,
            Some(0.93),
            B::Positive,
        ),
        (
            samples::REGISTRY_NEGATIVE[0],
            B::Negative,
            Some(0.21),
            B::Positive,
        ),
        (
            samples::REGISTRY_NOT_FOUND,
            B::TaxIdNotRegistered,
            None,
            B::Positive,
        ),
        (
            samples::FACE_MATCH_NEGATIVE[0],
            B::TaxIdNotRegistered,
            None,
            B::Negative,
        ),
    ];
    for (who, registry_code, registry_score, face_code) in cases {
        let appkey = gw.create_journey_for(person(who)).await.appkey;
        gw.pass_3d(&appkey).await;
        let result = complete_with(&gw, &appkey, &document_pair(DocumentType::Rg)).await;
        let bio = biometrics(&result);
        let registry = bio.registry.as_ref().expect("registry");
        assert_eq!(registry.code(), registry_code, "{}", who.name);
        assert_eq!(registry.raw_code, (registry_code as i32).to_string());
        assert_eq!(registry.score, registry_score, "{}", who.name);
        assert!(!registry.cause.is_empty());
        let face = bio.face_match.as_ref().expect("face match");
        assert_eq!(face.code(), face_code, "{}", who.name);
    }

    // A document without a face: face match 400, still a complete journey.
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let no_face = vec![samples::face_not_found_image(DocumentKind::new(
        DocumentType::Rg,
        Side::Front,
    ))];
    let result = complete_with(&gw, &appkey, &no_face).await;
    let face = biometrics(&result).face_match.clone().expect("face match");
    assert_eq!(face.code(), B::FaceNotFound);
    assert_eq!(face.score, None);
    gw.stop().await;
}

#[tokio::test]
async fn an_unreadable_document_ends_the_journey_in_error_without_ocr() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let image =
        samples::unreadable_document_image(DocumentKind::new(DocumentType::Cin, Side::Front));
    gw.submit_images(&appkey, &[image]).await.expect("accepted");
    gw.finish_processing();
    let result = gw.result(&appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Error);
    let analysis = result.document_analysis.expect("analysis");
    assert_eq!(analysis.processing_status(), v1::ProcessingStatus::Failed);
    assert!(analysis.ocr.is_none());
    assert_eq!(
        analysis.files[0].status(),
        v1::FileStatus::IdentificationFailed
    );
    gw.stop().await;
}

#[tokio::test]
async fn health_answers_serving_for_the_server_and_the_journey_service() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let gw = TestGateway::start().await;
    let channel = tonic::transport::Channel::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    for service in [
        "",
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
    ] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health check")
            .into_inner()
            .status();
        assert_eq!(status, ServingStatus::Serving, "{service:?}");
    }
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    gw.stop().await;
}

#[tokio::test]
async fn reflection_lists_and_describes_the_journey_services() {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let gw = TestGateway::start().await;
    let channel = tonic::transport::Channel::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut client = ServerReflectionClient::new(channel);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol("idgate.v1.JourneyService".into()),
    ]
    .map(|m| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    });
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection stream")
        .into_inner();

    let first = responses.message().await.expect("answer").expect("one");
    let services: Vec<String> = match first.message_response {
        Some(MessageResponse::ListServicesResponse(l)) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("expected a service list, got {other:?}"),
    };
    for name in [
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
        "grpc.health.v1.Health",
    ] {
        assert!(services.iter().any(|s| s == name), "{name} in {services:?}");
    }

    let second = responses.message().await.expect("answer").expect("two");
    match second.message_response {
        Some(MessageResponse::FileDescriptorResponse(f)) => {
            assert!(!f.file_descriptor_proto.is_empty());
        }
        other => panic!("expected file descriptors, got {other:?}"),
    }
    gw.stop().await;
}
