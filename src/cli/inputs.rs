//! The inputs `idgate journey` sends: the sandbox's sample person, images
//! and licences, so that a journey on the sandbox reaches `Completo`.

use bytes::Bytes;

use super::plan::{DocumentChoice, Person};
use crate::sandbox::samples::{self, DocumentKind, DocumentType, LivenessOutcome, Side};

/// The sandbox's default test person (registry positive), with the birth
/// date in the gateway's `YYYY-MM-DD` form.
pub fn default_person() -> Person {
    let p = samples::HAPPY_PERSON;
    let birth_date = match p.birth_date.split('/').collect::<Vec<_>>().as_slice() {
        [d, m, y] => format!("{y}-{m}-{d}"),
        _ => p.birth_date.to_owned(),
    };
    Person {
        cpf: p.cpf.to_owned(),
        name: p.name.to_owned(),
        birth_date,
        customer_reference: "IDGATEDEMO1".to_owned(),
    }
}

/// Images and licences for a journey, built once.
pub struct JourneyInputs {
    /// A 2D snapshot whose liveness outcome is valid.
    pub snapshot: Bytes,
    /// The digital licence as a QR code image.
    pub licence_image: Bytes,
    /// The digital licence as the app's PDF.
    pub licence_pdf: Bytes,
    /// The digital licence as the QR code's binary.
    pub licence_binary: Bytes,
}

impl Default for JourneyInputs {
    fn default() -> Self {
        Self {
            snapshot: samples::snapshot(LivenessOutcome::Valid).into(),
            licence_image: samples::digital_licence_image().into(),
            licence_pdf: samples::digital_licence_pdf().into(),
            licence_binary: samples::digital_licence_binary().into(),
        }
    }
}

impl JourneyInputs {
    /// The front and back images of `doc` (document types only).
    pub fn document(&self, doc: DocumentChoice) -> Vec<Bytes> {
        let doc_type = match doc {
            DocumentChoice::Rg => DocumentType::Rg,
            DocumentChoice::Cnh => DocumentType::Cnh,
            DocumentChoice::Cnh2022 => DocumentType::Cnh2022,
            DocumentChoice::Dni => DocumentType::Dni,
            DocumentChoice::Cin => DocumentType::Cin,
            DocumentChoice::Crnm => DocumentType::Crnm,
            DocumentChoice::Passport => DocumentType::Passport,
            DocumentChoice::LicenceImage
            | DocumentChoice::LicencePdf
            | DocumentChoice::LicenceBinary => return Vec::new(),
        };
        Side::ALL
            .into_iter()
            .map(|side| samples::document_image(DocumentKind::new(doc_type, side)).into())
            .collect()
    }
}
