//! Image and PDF payloads, recognised by their magic bytes.

use std::fmt;

use bytes::Bytes;

/// The kinds of file the upstream accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// PNG (`89 50 4E 47 0D 0A 1A 0A`).
    Png,
    /// PDF (`%PDF-`).
    Pdf,
}

impl ImageKind {
    /// Recognises a payload by its first bytes.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageKind::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageKind::Png)
        } else if bytes.starts_with(b"%PDF-") {
            Some(ImageKind::Pdf)
        } else {
            None
        }
    }
}

/// An image or PDF payload: biometric or identifying data. Shares the
/// request's buffer (no copy) and redacts itself in `Debug`.
#[derive(Clone)]
pub struct ImagePayload {
    bytes: Bytes,
    kind: Option<ImageKind>,
}

impl ImagePayload {
    /// Checks `bytes` against `accept` and `max_bytes`; the error says what
    /// is wrong without quoting the content.
    pub fn parse(bytes: Bytes, accept: &[ImageKind], max_bytes: usize) -> Result<Self, String> {
        if bytes.is_empty() {
            return Err("is required (empty)".to_owned());
        }
        if bytes.len() > max_bytes {
            return Err(format!("is larger than the limit of {max_bytes} bytes"));
        }
        let kind = ImageKind::sniff(&bytes);
        match kind {
            Some(k) if accept.contains(&k) => Ok(ImagePayload { bytes, kind }),
            _ => Err(format!("must be {}", describe(accept))),
        }
    }

    /// Wraps bytes accepted without a type check (the digital licence's
    /// QR binary), still bounded by `max_bytes`.
    pub fn parse_opaque(bytes: Bytes, max_bytes: usize) -> Result<Self, String> {
        if bytes.is_empty() {
            return Err("is required (empty)".to_owned());
        }
        if bytes.len() > max_bytes {
            return Err(format!("is larger than the limit of {max_bytes} bytes"));
        }
        let kind = ImageKind::sniff(&bytes);
        Ok(ImagePayload { bytes, kind })
    }

    /// The payload.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The recognised kind, if any.
    pub fn kind(&self) -> Option<ImageKind> {
        self.kind
    }
}

fn describe(accept: &[ImageKind]) -> String {
    let names: Vec<&str> = accept
        .iter()
        .map(|k| match k {
            ImageKind::Jpeg => "JPEG",
            ImageKind::Png => "PNG",
            ImageKind::Pdf => "PDF",
        })
        .collect();
    format!("a {} file", names.join(" or "))
}

impl fmt::Debug for ImagePayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ImagePayload({:?}, {} bytes)",
            self.kind,
            self.bytes.len()
        )
    }
}

/// One 2D liveness snapshot: the image, and the face type code of the
/// challenge it answers (it travels inside the snapshot's data URL).
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The JPEG or PNG image.
    pub image: ImagePayload,
    /// The face type code of the challenge (`tipoFace.codigo`).
    pub face_type_code: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMG: &[ImageKind] = &[ImageKind::Jpeg, ImageKind::Png];

    #[test]
    fn accepts_jpeg_and_png_and_rejects_others_empty_and_oversize() {
        let jpeg = Bytes::from_static(&[0xFF, 0xD8, 0xFF, 0xE0, 1, 2]);
        assert_eq!(
            ImagePayload::parse(jpeg.clone(), IMG, 100).unwrap().kind(),
            Some(ImageKind::Jpeg)
        );
        assert!(ImagePayload::parse(Bytes::from_static(b"GIF89a"), IMG, 100).is_err());
        assert!(ImagePayload::parse(Bytes::new(), IMG, 100).is_err());
        assert!(ImagePayload::parse(jpeg, IMG, 3).is_err());
        assert!(ImagePayload::parse(Bytes::from_static(b"%PDF-1.7"), IMG, 100).is_err());
    }
}
