//! Document kinds and how the sandbox recognises them in uploaded bytes.
//!
//! A real service runs OCR; the sandbox reads an ASCII marker instead:
//! `IDGATE-SANDBOX:<type>-<side>[+flag...]`, embedded anywhere in an
//! otherwise valid PNG (a `tEXt` chunk) or JPEG (a `COM` segment). The
//! [`samples`](super::samples) module builds such images.

use std::fmt;

/// Prefix of every sandbox marker.
pub const MARKER_PREFIX: &str = "IDGATE-SANDBOX:";

/// The document families the service reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentType {
    /// Registro Geral (identity card).
    Rg,
    /// Driver licence (paper, before 2022).
    Cnh,
    /// Driver licence, 2022 layout.
    Cnh2022,
    /// Documento Nacional de Identidade.
    Dni,
    /// Carteira de Identidade Nacional.
    Cin,
    /// Registro Nacional Migratório.
    Crnm,
    /// Passport.
    Passport,
}

impl DocumentType {
    /// Every type, in `tipo` order.
    pub const ALL: [DocumentType; 7] = [
        DocumentType::Rg,
        DocumentType::Cnh,
        DocumentType::Dni,
        DocumentType::Cnh2022,
        DocumentType::Cin,
        DocumentType::Crnm,
        DocumentType::Passport,
    ];

    /// Marker name of the type (`rg`, `cnh2022`, ...).
    pub fn marker_name(self) -> &'static str {
        match self {
            DocumentType::Rg => "rg",
            DocumentType::Cnh => "cnh",
            DocumentType::Cnh2022 => "cnh2022",
            DocumentType::Dni => "dni",
            DocumentType::Cin => "cin",
            DocumentType::Crnm => "crnm",
            DocumentType::Passport => "passport",
        }
    }

    /// The key of this type's OCR object inside `responseClientDadosOcrDTO`.
    /// Both licence layouts share the CNH object.
    pub fn ocr_key(self) -> &'static str {
        match self {
            DocumentType::Rg => "responseClientRGOcrDTO",
            DocumentType::Cnh | DocumentType::Cnh2022 => "responseClientCNHOcrDTO",
            DocumentType::Dni => "responseClientDNIOcrDTO",
            DocumentType::Cin => "responseClientCINOcrDTO",
            DocumentType::Crnm => "responseClientCRNMOcrDTO",
            DocumentType::Passport => "responseClientPassaporteOcrDTO",
        }
    }

    fn label(self) -> &'static str {
        match self {
            DocumentType::Rg => "RG",
            DocumentType::Cnh => "CNH",
            DocumentType::Cnh2022 => "CNH 2022",
            DocumentType::Dni => "DNI",
            DocumentType::Cin => "CIN",
            DocumentType::Crnm => "CRNM",
            DocumentType::Passport => "Passaporte",
        }
    }
}

/// Front or back of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Front (frente).
    Front,
    /// Back (verso).
    Back,
}

impl Side {
    /// Both sides.
    pub const ALL: [Side; 2] = [Side::Front, Side::Back];

    fn marker_name(self) -> &'static str {
        match self {
            Side::Front => "front",
            Side::Back => "back",
        }
    }
}

/// One side of one document type: what a document image shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocumentKind {
    /// The family.
    pub doc_type: DocumentType,
    /// The side.
    pub side: Side,
}

impl DocumentKind {
    /// Builds a kind.
    pub const fn new(doc_type: DocumentType, side: Side) -> Self {
        Self { doc_type, side }
    }

    /// Every kind (14 of them).
    pub fn all() -> impl Iterator<Item = DocumentKind> {
        DocumentType::ALL
            .into_iter()
            .flat_map(|t| Side::ALL.into_iter().map(move |s| DocumentKind::new(t, s)))
    }

    /// The spec's `arquivosProcessado.tipo` code.
    pub fn tipo(self) -> u32 {
        let front = match self.doc_type {
            DocumentType::Rg => 1,
            DocumentType::Cnh => 4,
            DocumentType::Dni => 6,
            DocumentType::Cnh2022 => 10,
            DocumentType::Cin => 13,
            DocumentType::Crnm => 15,
            DocumentType::Passport => 17,
        };
        match self.side {
            Side::Front => front,
            Side::Back => front + 1,
        }
    }

    /// The marker text that makes the sandbox read an image as this kind,
    /// for example `IDGATE-SANDBOX:rg-front`.
    pub fn marker(self) -> String {
        format!("{MARKER_PREFIX}{self}")
    }

    /// `fotos.documento[].descricao`, for example `RG frente`.
    pub fn description(self) -> String {
        let side = match self.side {
            Side::Front => "frente",
            Side::Back => "verso",
        };
        format!("{} {side}", self.doc_type.label())
    }

    fn from_marker_name(name: &str) -> Option<Self> {
        let (t, s) = name.rsplit_once('-')?;
        let doc_type = DocumentType::ALL
            .into_iter()
            .find(|d| d.marker_name() == t)?;
        let side = Side::ALL.into_iter().find(|x| x.marker_name() == s)?;
        Some(Self::new(doc_type, side))
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.doc_type.marker_name(),
            self.side.marker_name()
        )
    }
}

/// Optional conditions a document marker can carry after `+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocumentFlags {
    /// `+low-forensics`: the forensics score is low ([`LOW_FORENSICS_SCORE`]).
    pub low_forensics: bool,
    /// `+no-face`: no face in the document; face match answers 400.
    pub no_face: bool,
    /// `+unreadable`: processing fails; the journey ends in `Erro`.
    pub unreadable: bool,
}

/// Flag text for [`DocumentFlags::low_forensics`].
pub const FLAG_LOW_FORENSICS: &str = "low-forensics";
/// Flag text for [`DocumentFlags::no_face`].
pub const FLAG_NO_FACE: &str = "no-face";
/// Flag text for [`DocumentFlags::unreadable`].
pub const FLAG_UNREADABLE: &str = "unreadable";
/// Forensics score of a normal document.
pub const NORMAL_FORENSICS_SCORE: u32 = 97;
/// Forensics score of a document marked `+low-forensics`.
pub const LOW_FORENSICS_SCORE: u32 = 12;

impl DocumentFlags {
    /// The marker suffix (`+low-forensics+no-face`), empty without flags.
    pub fn suffix(self) -> String {
        let mut out = String::new();
        for (on, name) in [
            (self.low_forensics, FLAG_LOW_FORENSICS),
            (self.no_face, FLAG_NO_FACE),
            (self.unreadable, FLAG_UNREADABLE),
        ] {
            if on {
                out.push('+');
                out.push_str(name);
            }
        }
        out
    }
}

/// A document recognised in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recognised {
    /// What the image shows.
    pub kind: DocumentKind,
    /// Conditions the marker asked for.
    pub flags: DocumentFlags,
}

/// The image container formats the sandbox accepts for documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
}

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
const JPEG_MAGIC: &[u8] = b"\xFF\xD8\xFF";

/// The container format of `bytes`, from its magic number.
pub fn image_format(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(PNG_MAGIC) {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(JPEG_MAGIC) {
        Some(ImageFormat::Jpeg)
    } else {
        None
    }
}

/// Reads a document from an image: a PNG or JPEG carrying a document
/// marker. `None` means "no document found in the image".
pub fn recognise(bytes: &[u8]) -> Option<Recognised> {
    image_format(bytes)?;
    markers(bytes).find_map(|token| {
        let mut parts = token.split('+');
        let kind = DocumentKind::from_marker_name(parts.next()?)?;
        let mut flags = DocumentFlags::default();
        for flag in parts {
            match flag {
                FLAG_LOW_FORENSICS => flags.low_forensics = true,
                FLAG_NO_FACE => flags.no_face = true,
                FLAG_UNREADABLE => flags.unreadable = true,
                _ => {}
            }
        }
        Some(Recognised { kind, flags })
    })
}

/// Every marker token in `bytes` (the text after [`MARKER_PREFIX`], up to
/// the first byte that cannot belong to a token).
pub fn markers(bytes: &[u8]) -> impl Iterator<Item = &str> {
    let prefix = MARKER_PREFIX.as_bytes();
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let at = rest.windows(prefix.len()).position(|w| w == prefix)?;
        let after = &rest[at + prefix.len()..];
        let len = after
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'=' | b'_')))
            .unwrap_or(after.len());
        rest = &after[len..];
        // Token bytes are ASCII by construction.
        std::str::from_utf8(&after[..len]).ok()
    })
}

/// How a digital driver licence was sent (`extensao` in the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LicenceFormat {
    /// A picture of the QR code (PNG or JPEG).
    Image,
    /// The PDF exported by the licence app.
    Pdf,
    /// The QR code's binary payload, read by a scanner.
    Binary,
}

/// Start of the bytes the sandbox accepts as a digital licence's QR
/// binary (after Base64 decoding of `qrcode`).
pub const DIGITAL_LICENCE_BINARY_PREFIX: &[u8] = b"IDGATE-SANDBOX:cnh-digital-qr";

impl LicenceFormat {
    /// Detects the format from the decoded `qrcode` bytes; `None` is "out
    /// of the expected pattern" (401).
    pub fn detect(bytes: &[u8]) -> Option<Self> {
        if image_format(bytes).is_some() {
            Some(LicenceFormat::Image)
        } else if bytes.starts_with(b"%PDF") {
            Some(LicenceFormat::Pdf)
        } else if bytes.starts_with(DIGITAL_LICENCE_BINARY_PREFIX) {
            Some(LicenceFormat::Binary)
        } else {
            None
        }
    }

    /// `extensao` in the result.
    pub fn extensao(self) -> &'static str {
        match self {
            LicenceFormat::Image => "Imagem",
            LicenceFormat::Pdf => "PDF",
            LicenceFormat::Binary => "Binario",
        }
    }

    /// `formato` in the result: the PDF is the document itself; image and
    /// binary both carry the QR code.
    pub fn formato(self) -> &'static str {
        match self {
            LicenceFormat::Pdf => "Documento",
            LicenceFormat::Image | LicenceFormat::Binary => "QR Code",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tipo_codes_match_the_spec_table() {
        let codes: Vec<u32> = DocumentKind::all().map(DocumentKind::tipo).collect();
        assert_eq!(
            codes,
            vec![1, 2, 4, 5, 6, 7, 10, 11, 13, 14, 15, 16, 17, 18]
        );
    }

    #[test]
    fn marker_round_trips_through_recognise() {
        for kind in DocumentKind::all() {
            let mut png = PNG_MAGIC.to_vec();
            png.extend_from_slice(kind.marker().as_bytes());
            png.extend_from_slice(b"+no-face\0");
            let got = recognise(&png).expect("recognised");
            assert_eq!(got.kind, kind);
            assert!(got.flags.no_face && !got.flags.low_forensics);
        }
    }

    #[test]
    fn marker_outside_an_image_is_not_a_document() {
        assert_eq!(recognise(b"IDGATE-SANDBOX:rg-front"), None);
    }
}
