//! The OCR of a `no_images` view: every typed document read, field by
//! field; the raw JSON objects (`crnm`, `passport`) left out.

use crate::proto::v1::{CinOcr, CnhOcr, DigitalCnhOcr, DniOcr, OcrData, RgOcr};

/// A copy of `$value` that names every field of `$message`: the pattern
/// has no `..`, so a field added to the proto fails to compile here until
/// it is listed (or the message is given a function of its own).
macro_rules! every_field {
    ($message:ident, $value:expr, { $($field:ident),* $(,)? }) => {{
        let $message { $($field),* } = $value;
        $message { $($field: $field.clone()),* }
    }};
}

/// The OCR without the objects the upstream sends as raw JSON.
pub(super) fn without_raw_json(o: &OcrData) -> OcrData {
    let OcrData {
        rg,
        cnh,
        dni,
        cin,
        digital_cnh,
        crnm: _,
        passport: _,
    } = o;
    OcrData {
        rg: rg.as_ref().map(rg_ocr),
        cnh: cnh.as_ref().map(cnh_ocr),
        dni: dni.as_ref().map(dni_ocr),
        cin: cin.as_ref().map(cin_ocr),
        digital_cnh: digital_cnh.as_ref().map(digital_cnh_ocr),
        crnm: None,
        passport: None,
    }
}

fn rg_ocr(o: &RgOcr) -> RgOcr {
    every_field!(RgOcr, o, {
        state, document, issue_date, issue_date_iso, birth_date_iso, rg_number, name, parents,
        father_name, mother_name, origin_document, birth_date, cpf, birthplace, issuing_body,
        raw_create_time, create_time, unsigned,
    })
}

fn cnh_ocr(o: &CnhOcr) -> CnhOcr {
    every_field!(CnhOcr, o, {
        state, state_name, document, name, origin_document, origin_document_number,
        origin_issuer, origin_state, cpf, birth_date, birth_date_iso, parents, father_name,
        mother_name, permission, acc, category, registration_number, expiry_date,
        first_licence_date, place, issue_date, issue_date_iso, security_code, mirror_number,
        renach, raw_create_time, create_time,
    })
}

fn dni_ocr(o: &DniOcr) -> DniOcr {
    every_field!(DniOcr, o, {
        state, issuing_body, birthplace, parents, father_name, mother_name, birth_date,
        birth_date_iso, name, front_remarks, other_rg, issuer, blood_type, civil_registry, cnh,
        cns, cpf, ctps, ctps_series, ctps_state, dni, voter_id, issue_date, issue_date_iso, place,
        military_certificate, social_name, pis, professional, rg, raw_create_time, create_time,
        unsigned,
    })
}

fn cin_ocr(o: &CinOcr) -> CinOcr {
    every_field!(CinOcr, o, {
        document, state, issuing_body, name, cpf, sex, birth_date, nationality, birthplace,
        expiry_date, issuing_post, parents, father_name, mother_name, issuer, place, issue_date,
        unsigned, issue_date_iso, birth_date_iso, raw_create_time, create_time,
    })
}

fn digital_cnh_ocr(o: &DigitalCnhOcr) -> DigitalCnhOcr {
    every_field!(DigitalCnhOcr, o, {
        document, format, extension, name, origin_document, cpf, birth_date, birth_date_iso,
        parents, category, registration_number, expiry_date, first_licence_date, place, renach,
        father_name, mother_name, remarks,
    })
}
