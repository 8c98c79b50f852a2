//! Views of a journey's result (data minimisation, LGPD art. 6 III): a
//! caller is given the part of the result its `[[callers]] result_view`
//! allows, on `GetJourneyResult` and on each `WatchJourney` result.
//!
//! One function per view, each building the view from the borrowed result
//! field by field (struct literals with no `..`: a field added to the
//! proto must be placed in each view before the code compiles), so what a
//! view leaves out is never copied first.
//!
//! - `full`: the whole result, biometrics included.
//! - `no_images`: everything but `photos` (the liveness selfie and every
//!   document image; no other field of the result holds an image).
//! - `status_only`: the journey status and verdict codes only (document
//!   processing status and score, biometric check codes, the face bureau
//!   code and risk class, the liveness verdict): no OCR, no name, no CPF,
//!   no image, no vendor ticket, protocol or free-text cause.

use crate::{
    domain::ResultView,
    proto::v1::{
        BiometricCheck, DocumentAnalysis, DocumentBiometrics, FaceBureauDigitalLicence,
        FaceBureauJourney, FaceBureauResult, JourneyResult, LivenessResult,
        LivenessResultDigitalLicence, LivenessVerdict, face_bureau_result, liveness_result,
    },
};

/// How one view is built from a result.
pub type Viewer = fn(&JourneyResult) -> JourneyResult;

/// The function of `view`.
pub fn viewer(view: ResultView) -> Viewer {
    match view {
        ResultView::Full => full,
        ResultView::NoImages => no_images,
        ResultView::StatusOnly => status_only,
    }
}

/// `view` of a result the caller owns (`GetJourneyResult`): the full view
/// is the result itself, the others are built from it.
pub fn apply(view: ResultView, result: JourneyResult) -> JourneyResult {
    match view {
        ResultView::Full => result,
        other => viewer(other)(&result),
    }
}

/// The whole result.
pub fn full(result: &JourneyResult) -> JourneyResult {
    result.clone()
}

/// Everything but the images and photos.
pub fn no_images(result: &JourneyResult) -> JourneyResult {
    let JourneyResult {
        status,
        raw_status,
        customer_reference,
        raw_appkey_create_time,
        appkey_create_time,
        document_analysis,
        face_bureau,
        liveness,
        photos: _,
    } = result;
    JourneyResult {
        status: *status,
        raw_status: raw_status.clone(),
        customer_reference: customer_reference.clone(),
        raw_appkey_create_time: raw_appkey_create_time.clone(),
        appkey_create_time: *appkey_create_time,
        document_analysis: document_analysis.clone(),
        face_bureau: face_bureau.clone(),
        liveness: liveness.clone(),
        photos: None,
    }
}

/// The journey status and verdict codes only.
pub fn status_only(result: &JourneyResult) -> JourneyResult {
    JourneyResult {
        status: result.status,
        raw_status: result.raw_status.clone(),
        customer_reference: String::new(),
        raw_appkey_create_time: String::new(),
        appkey_create_time: None,
        document_analysis: result.document_analysis.as_ref().map(document_codes),
        face_bureau: result.face_bureau.as_ref().map(face_bureau_codes),
        liveness: result.liveness.as_ref().map(liveness_codes),
        photos: None,
    }
}

fn document_codes(d: &DocumentAnalysis) -> DocumentAnalysis {
    DocumentAnalysis {
        processing_status: d.processing_status,
        raw_processing_status: d.raw_processing_status,
        score: d.score,
        biometrics: d.biometrics.as_ref().map(|b| DocumentBiometrics {
            protocol: String::new(),
            face_match: b.face_match.as_ref().map(check_codes),
            registry: b.registry.as_ref().map(check_codes),
        }),
        ..DocumentAnalysis::default()
    }
}

fn check_codes(c: &BiometricCheck) -> BiometricCheck {
    BiometricCheck {
        code: c.code,
        raw_code: c.raw_code.clone(),
        cause: String::new(),
        score: c.score,
    }
}

fn face_bureau_codes(f: &FaceBureauResult) -> FaceBureauResult {
    use face_bureau_result::Variant;
    FaceBureauResult {
        variant: f.variant.as_ref().map(|v| match v {
            Variant::Journey(j) => Variant::Journey(FaceBureauJourney {
                code: j.code,
                raw_code: j.raw_code,
                protocol: String::new(),
                risk_class: j.risk_class,
                raw_score: j.raw_score.clone(),
            }),
            Variant::DigitalLicence(d) => Variant::DigitalLicence(FaceBureauDigitalLicence {
                approved: d.approved,
                code: d.code,
                known: d.known,
                protocol: String::new(),
                biometric_score: d.biometric_score,
            }),
        }),
    }
}

fn liveness_codes(l: &LivenessResult) -> LivenessResult {
    use liveness_result::Variant;
    LivenessResult {
        variant: l.variant.as_ref().map(|v| match v {
            Variant::Journey(j) => Variant::Journey(LivenessVerdict {
                valid: j.valid,
                code: j.code,
                raw_code: j.raw_code.clone(),
                cause: String::new(),
                protocol: String::new(),
            }),
            Variant::DigitalLicence(d) => Variant::DigitalLicence(LivenessResultDigitalLicence {
                cause: String::new(),
                raw_code: d.raw_code.clone(),
                protocol: String::new(),
                validated: d.validated,
            }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1::{DocumentPhoto, OcrData, Photos, RgOcr};

    fn canary_result() -> JourneyResult {
        JourneyResult {
            status: 1,
            raw_status: "CONCLUIDO".into(),
            customer_reference: "CANARY-REF".into(),
            document_analysis: Some(DocumentAnalysis {
                processing_status: 4,
                score: Some(0.9),
                ocr: Some(OcrData {
                    rg: Some(RgOcr {
                        name: "CANARY NAME".into(),
                        cpf: "CANARY-CPF".into(),
                        parents: "CANARY PARENTS".into(),
                        ..RgOcr::default()
                    }),
                    ..OcrData::default()
                }),
                ..DocumentAnalysis::default()
            }),
            photos: Some(Photos {
                liveness_frontal: bytes::Bytes::from_static(b"CANARY-SELFIE"),
                documents: vec![DocumentPhoto {
                    description: "front".into(),
                    image: bytes::Bytes::from_static(b"CANARY-DOC"),
                }],
            }),
            ..JourneyResult::default()
        }
    }

    /// The result's wire bytes, lossily as text (its Debug is redacted).
    fn text(r: &JourneyResult) -> String {
        String::from_utf8_lossy(&prost::Message::encode_to_vec(r)).into_owned()
    }

    #[test]
    fn each_view_leaves_out_what_it_says() {
        let r = canary_result();
        let full = text(&apply(ResultView::Full, r.clone()));
        assert!(
            full.contains("CANARY-SELFIE") && full.contains("CANARY-CPF"),
            "{full}"
        );

        let no_images = text(&apply(ResultView::NoImages, r.clone()));
        assert!(no_images.contains("CANARY-CPF"), "OCR stays");
        assert!(!no_images.contains("CANARY-SELFIE"), "{no_images}");
        assert!(!no_images.contains("CANARY-DOC"), "{no_images}");

        let status = apply(ResultView::StatusOnly, r);
        let s = text(&status);
        assert!(!s.contains("CANARY"), "{s}");
        assert_eq!(status.status, 1);
        assert_eq!(status.document_analysis.unwrap().processing_status, 4);
    }
}
