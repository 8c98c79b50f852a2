//! Views of a journey's result (data minimisation, LGPD art. 6 III): a
//! caller is given the part of the result its `[[callers]] result_view`
//! allows, on `GetJourneyResult` and on each `WatchJourney` result.
//!
//! - `full`: the whole result, biometrics included.
//! - `no_images`: everything but `photos` (the liveness selfie and every
//!   document image) and the OCR objects the upstream sends as raw JSON
//!   (`ocr.crnm`, `ocr.passport`: their fields are not specified, so an
//!   image the vendor puts there would pass unseen).
//! - `status_only`: the journey status and verdict codes only (document
//!   processing status and score, biometric check codes, the face bureau
//!   code and risk class, the liveness verdict): no OCR, no name, no CPF,
//!   no image, no vendor ticket, protocol or free-text cause.
//!
//! Both trimmed views are built from the borrowed result field by field,
//! all the way down: every message is destructured with no `..`, so a
//! field added to the proto does not compile until each view places it,
//! and what a view leaves out is never copied first. `tests.rs` checks
//! the outcome against the descriptors: no `bytes` field, no field named
//! like an image and no raw JSON is reachable in a view but `full`.

mod ocr;
#[cfg(test)]
mod tests;

use crate::{
    domain::ResultView,
    proto::v1::{
        BiometricCheck, DocumentAnalysis, DocumentBiometrics, FaceBureauDigitalLicence,
        FaceBureauJourney, FaceBureauResult, JourneyResult, LivenessResult,
        LivenessResultDigitalLicence, LivenessVerdict, ProcessedDocument, ProcessedFile,
        face_bureau_result, liveness_result,
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

/// Everything but the images, photos and raw JSON.
pub fn no_images(result: &JourneyResult) -> JourneyResult {
    trimmed(result, Trim::NoImages)
}

/// The journey status and verdict codes only.
pub fn status_only(result: &JourneyResult) -> JourneyResult {
    trimmed(result, Trim::StatusOnly)
}

/// The two views that leave something out. Images and raw JSON are left
/// out of both; what `status_only` leaves out besides is *detail*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trim {
    NoImages,
    StatusOnly,
}

impl Trim {
    /// `value` where the view keeps detail (names, OCR, tickets,
    /// protocols, free-text causes, times), its default elsewhere.
    fn detail<T: Clone + Default>(self, value: &T) -> T {
        match self {
            Trim::NoImages => value.clone(),
            Trim::StatusOnly => T::default(),
        }
    }

    /// `value` mapped by `f` where the view keeps detail, else unset.
    fn detail_with<T, U>(self, value: &Option<T>, f: impl FnOnce(&T) -> U) -> Option<U> {
        match self {
            Trim::NoImages => value.as_ref().map(f),
            Trim::StatusOnly => None,
        }
    }
}

fn trimmed(result: &JourneyResult, view: Trim) -> JourneyResult {
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
        customer_reference: view.detail(customer_reference),
        raw_appkey_create_time: view.detail(raw_appkey_create_time),
        appkey_create_time: view.detail(appkey_create_time),
        document_analysis: document_analysis.as_ref().map(|d| analysis(d, view)),
        face_bureau: face_bureau.as_ref().map(|f| face_bureau_result(f, view)),
        liveness: liveness.as_ref().map(|l| liveness_result(l, view)),
        photos: None,
    }
}

fn analysis(d: &DocumentAnalysis, view: Trim) -> DocumentAnalysis {
    let DocumentAnalysis {
        id,
        external_id,
        ticket,
        raw_ticket_create_time,
        ticket_create_time,
        client_id,
        subclient_id,
        user_id,
        processing_status,
        raw_processing_status,
        raw_processing_status_time,
        processing_status_time,
        processing_type_id,
        score,
        ticket_callback_url,
        raw_ticket_return_time,
        ticket_return_time,
        ocr,
        biometrics,
        files,
    } = d;
    DocumentAnalysis {
        id: view.detail(id),
        external_id: view.detail(external_id),
        ticket: view.detail(ticket),
        raw_ticket_create_time: view.detail(raw_ticket_create_time),
        ticket_create_time: view.detail(ticket_create_time),
        client_id: view.detail(client_id),
        subclient_id: view.detail(subclient_id),
        user_id: view.detail(user_id),
        processing_status: *processing_status,
        raw_processing_status: *raw_processing_status,
        raw_processing_status_time: view.detail(raw_processing_status_time),
        processing_status_time: view.detail(processing_status_time),
        processing_type_id: view.detail(processing_type_id),
        score: *score,
        ticket_callback_url: view.detail(ticket_callback_url),
        raw_ticket_return_time: view.detail(raw_ticket_return_time),
        ticket_return_time: view.detail(ticket_return_time),
        ocr: view.detail_with(ocr, ocr::without_raw_json),
        biometrics: biometrics.as_ref().map(|b| document_biometrics(b, view)),
        files: match view {
            Trim::NoImages => files.iter().map(processed_file).collect(),
            Trim::StatusOnly => Vec::new(),
        },
    }
}

fn document_biometrics(b: &DocumentBiometrics, view: Trim) -> DocumentBiometrics {
    let DocumentBiometrics {
        protocol,
        face_match,
        registry,
    } = b;
    DocumentBiometrics {
        protocol: view.detail(protocol),
        face_match: face_match.as_ref().map(|c| check(c, view)),
        registry: registry.as_ref().map(|c| check(c, view)),
    }
}

fn check(c: &BiometricCheck, view: Trim) -> BiometricCheck {
    let BiometricCheck {
        code,
        raw_code,
        cause,
        score,
    } = c;
    BiometricCheck {
        code: *code,
        raw_code: raw_code.clone(),
        cause: view.detail(cause),
        score: *score,
    }
}

fn processed_file(f: &ProcessedFile) -> ProcessedFile {
    let ProcessedFile {
        sequence,
        status,
        raw_status,
        documents,
    } = f;
    ProcessedFile {
        sequence: *sequence,
        status: *status,
        raw_status: *raw_status,
        documents: documents.iter().map(processed_document).collect(),
    }
}

fn processed_document(d: &ProcessedDocument) -> ProcessedDocument {
    let ProcessedDocument {
        kind,
        raw_kind,
        status,
        raw_status,
    } = d;
    ProcessedDocument {
        kind: *kind,
        raw_kind: *raw_kind,
        status: *status,
        raw_status: *raw_status,
    }
}

fn face_bureau_result(f: &FaceBureauResult, view: Trim) -> FaceBureauResult {
    use face_bureau_result::Variant;
    let FaceBureauResult { variant } = f;
    let variant = variant.as_ref().map(|v| match v {
        Variant::Journey(j) => {
            let FaceBureauJourney {
                code,
                raw_code,
                protocol,
                risk_class,
                raw_score,
            } = j;
            Variant::Journey(FaceBureauJourney {
                code: *code,
                raw_code: *raw_code,
                protocol: view.detail(protocol),
                risk_class: *risk_class,
                raw_score: raw_score.clone(),
            })
        }
        Variant::DigitalLicence(d) => {
            let FaceBureauDigitalLicence {
                approved,
                code,
                known,
                protocol,
                biometric_score,
            } = d;
            Variant::DigitalLicence(FaceBureauDigitalLicence {
                approved: *approved,
                code: *code,
                known: *known,
                protocol: view.detail(protocol),
                biometric_score: *biometric_score,
            })
        }
    });
    FaceBureauResult { variant }
}

fn liveness_result(l: &LivenessResult, view: Trim) -> LivenessResult {
    use liveness_result::Variant;
    let LivenessResult { variant } = l;
    let variant = variant.as_ref().map(|v| match v {
        Variant::Journey(j) => {
            let LivenessVerdict {
                valid,
                code,
                raw_code,
                cause,
                protocol,
            } = j;
            Variant::Journey(LivenessVerdict {
                valid: *valid,
                code: *code,
                raw_code: raw_code.clone(),
                cause: view.detail(cause),
                protocol: view.detail(protocol),
            })
        }
        Variant::DigitalLicence(d) => {
            let LivenessResultDigitalLicence {
                cause,
                raw_code,
                protocol,
                validated,
            } = d;
            Variant::DigitalLicence(LivenessResultDigitalLicence {
                cause: view.detail(cause),
                raw_code: raw_code.clone(),
                protocol: view.detail(protocol),
                validated: *validated,
            })
        }
    });
    LivenessResult { variant }
}
