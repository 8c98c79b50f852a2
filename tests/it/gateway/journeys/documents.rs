//! Each form a document arrives in (every paper document type and the
//! digital licence as QR image, PDF or QR binary) is read into its own OCR
//! object, file kinds and result variants, so callers never guess which
//! document they hold.

use super::{biometrics, complete_with, document_photos};
use crate::support::gateway::*;
use idgate::{
    proto::v1::{self, submit_digital_licence_request::Licence},
    sandbox::samples::{self, DocumentKind, DocumentType, Side},
};

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
