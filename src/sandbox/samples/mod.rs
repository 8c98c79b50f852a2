//! Deterministic sample inputs for every outcome the sandbox can produce.
//!
//! The gateway's `idgate journey` command and the integration tests build
//! their requests from these. Same input, same outcome, always. The marker
//! scheme is described in `docs/sandbox.md` ("Choosing outcomes").

mod images;
mod persons;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

pub use super::documents::{
    DIGITAL_LICENCE_BINARY_PREFIX, DocumentFlags, DocumentKind, DocumentType, FLAG_LOW_FORENSICS,
    FLAG_NO_FACE, FLAG_UNREADABLE, ImageFormat, LOW_FORENSICS_SCORE, MARKER_PREFIX,
    NORMAL_FORENSICS_SCORE, Side,
};
pub use super::liveness::{LivenessOutcome, USER_AGENT_MARKER, encode_snapshots};
pub use persons::{
    FACE_MATCH_NEGATIVE, HAPPY_PERSON, REGISTRY_NEGATIVE, REGISTRY_NOT_FOUND, REGISTRY_POSITIVE,
    RISK_CLASS_PINNED, TestPerson,
};

/// The face-bureau risk classes (`serviceID.score`), lowest risk first.
pub const RISK_CLASSES: [&str; 11] = [
    "000", "100", "200", "300", "400", "500", "600", "700", "800", "900", "1000",
];

/// `userAgent` of a 3D session whose proof is valid (also the default).
pub const USER_AGENT_VALID: &str = "idgate-sandbox-liveness=valid";
/// `userAgent` of a 3D session whose proof is invalid (codID 300.1).
pub const USER_AGENT_INVALID: &str = "idgate-sandbox-liveness=invalid";
/// `userAgent` of a 3D session whose user is blocked (codID 300.2).
pub const USER_AGENT_BLOCKED: &str = "idgate-sandbox-liveness=blocked";

/// Snapshot marker of a valid 2D proof (also the default).
pub const SNAPSHOT_MARKER_VALID: &str = "IDGATE-SANDBOX:liveness=valid";
/// Snapshot marker of an invalid 2D proof (codID 300.1).
pub const SNAPSHOT_MARKER_INVALID: &str = "IDGATE-SANDBOX:liveness=invalid";
/// Snapshot marker of a blocked user (codID 300.2).
pub const SNAPSHOT_MARKER_BLOCKED: &str = "IDGATE-SANDBOX:liveness=blocked";

/// Base64 (standard alphabet, padded) as the service expects it.
pub fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// A PNG document image of `kind` (for example RG front).
pub fn document_image(kind: DocumentKind) -> Vec<u8> {
    document_image_with(kind, DocumentFlags::default(), ImageFormat::Png)
}

/// A document image of `kind` with marker flags, as PNG or JPEG.
pub fn document_image_with(
    kind: DocumentKind,
    flags: DocumentFlags,
    format: ImageFormat,
) -> Vec<u8> {
    let marker = format!("{}{}", kind.marker(), flags.suffix());
    match format {
        ImageFormat::Png => images::png(Some(&marker)),
        ImageFormat::Jpeg => images::jpeg(Some(&marker)),
    }
}

/// A valid image with no document in it: the upload answers 400.
pub fn no_document_image() -> Vec<u8> {
    images::png(None)
}

/// A document whose forensics score is [`LOW_FORENSICS_SCORE`].
pub fn low_forensics_image(kind: DocumentKind) -> Vec<u8> {
    let flags = DocumentFlags {
        low_forensics: true,
        ..DocumentFlags::default()
    };
    document_image_with(kind, flags, ImageFormat::Png)
}

/// A document with no face: face match codigo 400.
pub fn face_not_found_image(kind: DocumentKind) -> Vec<u8> {
    let flags = DocumentFlags {
        no_face: true,
        ..DocumentFlags::default()
    };
    document_image_with(kind, flags, ImageFormat::Png)
}

/// A document that fails processing: the journey ends in `Erro`.
pub fn unreadable_document_image(kind: DocumentKind) -> Vec<u8> {
    let flags = DocumentFlags {
        unreadable: true,
        ..DocumentFlags::default()
    };
    document_image_with(kind, flags, ImageFormat::Png)
}

/// A JPEG snapshot that makes a 2D proof end with `outcome`.
pub fn snapshot(outcome: LivenessOutcome) -> Vec<u8> {
    images::jpeg(Some(&outcome.snapshot_marker()))
}

/// The `/captcha` `images` field: one [`snapshot`] per challenge type.
pub fn snapshots_payload(outcome: LivenessOutcome, face_types: &[&str]) -> String {
    let image = snapshot(outcome);
    encode_snapshots(face_types.iter().map(|code| (*code, image.as_slice())))
}

/// A plain selfie (no marker); the sandbox also returns it as the 3D
/// frontal photo in `fotos`.
pub fn selfie() -> Vec<u8> {
    images::jpeg(None)
}

/// [`selfie`] padded with zeros after its end marker to `bytes` (the
/// sandbox's `selfie_bytes`), as large as a real capture; never shorter
/// than the sample.
pub fn selfie_of(bytes: usize) -> Vec<u8> {
    let mut image = selfie();
    image.resize(image.len().max(bytes), 0);
    image
}

/// A digital driver licence sent as a picture of its QR code (PNG).
pub fn digital_licence_image() -> Vec<u8> {
    images::png(Some("IDGATE-SANDBOX:cnh-digital-qr"))
}

/// A digital driver licence sent as the PDF the licence app exports.
pub fn digital_licence_pdf() -> Vec<u8> {
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n".to_vec()
}

/// A digital driver licence sent as the QR code's binary payload: bytes
/// starting with [`DIGITAL_LICENCE_BINARY_PREFIX`].
pub fn digital_licence_binary() -> Vec<u8> {
    let mut out = DIGITAL_LICENCE_BINARY_PREFIX.to_vec();
    out.extend_from_slice(&[0x00, 0x01, 0x02, 0xFE, 0xFF]);
    out
}

/// Bytes that are no licence format at all: `/document` answers 401.
pub fn out_of_pattern_licence() -> Vec<u8> {
    b"GIF89a: not a licence in any accepted format".to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::documents::{LicenceFormat, recognise};

    #[test]
    fn constants_match_the_marker_functions() {
        assert_eq!(USER_AGENT_VALID, LivenessOutcome::Valid.user_agent());
        assert_eq!(USER_AGENT_INVALID, LivenessOutcome::Invalid.user_agent());
        assert_eq!(USER_AGENT_BLOCKED, LivenessOutcome::Blocked.user_agent());
        assert_eq!(
            SNAPSHOT_MARKER_VALID,
            LivenessOutcome::Valid.snapshot_marker()
        );
        assert_eq!(
            SNAPSHOT_MARKER_INVALID,
            LivenessOutcome::Invalid.snapshot_marker()
        );
        assert_eq!(
            SNAPSHOT_MARKER_BLOCKED,
            LivenessOutcome::Blocked.snapshot_marker()
        );
    }

    #[test]
    fn sample_documents_are_recognised_and_the_blank_one_is_not() {
        for kind in DocumentKind::all() {
            assert_eq!(recognise(&document_image(kind)).map(|r| r.kind), Some(kind));
        }
        assert_eq!(recognise(&no_document_image()), None);
        let kind = DocumentKind::new(DocumentType::Cnh, Side::Front);
        assert!(recognise(&low_forensics_image(kind)).is_some_and(|r| r.flags.low_forensics));
    }

    #[test]
    fn sample_licences_have_the_expected_formats() {
        assert_eq!(
            LicenceFormat::detect(&digital_licence_image()),
            Some(LicenceFormat::Image)
        );
        assert_eq!(
            LicenceFormat::detect(&digital_licence_pdf()),
            Some(LicenceFormat::Pdf)
        );
        assert_eq!(
            LicenceFormat::detect(&digital_licence_binary()),
            Some(LicenceFormat::Binary)
        );
        assert_eq!(LicenceFormat::detect(&out_of_pattern_licence()), None);
    }
}
