//! Base64 image fields of upstream answers, decoded once into the bytes
//! the protobuf messages carry.
//!
//! Upstream encoders differ: some prefix a data URL
//! (`data:image/jpeg;base64,`), some drop the padding, some use the
//! URL-safe alphabet or wrap lines. All of these decode; anything else is
//! an error that names the field, never the content.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::de::{self, Deserialize, Deserializer, Visitor};

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// A Base64 image as it sits in the answer, borrowed from the body when
/// the JSON string has no escapes. `Debug` prints only its length.
#[derive(Clone, Default)]
pub struct Base64Image<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Base64Image<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Base64Image<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Base64 string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Base64Image(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Base64Image(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Base64Image(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Base64Image(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Base64Image(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Debug for Base64Image<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(s) => write!(f, "Base64Image({} chars)", s.len()),
            None => f.write_str("Base64Image(None)"),
        }
    }
}

impl Base64Image<'_> {
    /// Decodes the image; absent or empty is an empty payload. `path` names
    /// the field in the error (e.g. `fotos.documento[1].imagem`).
    pub fn decode(&self, path: &str) -> Result<bytes::Bytes, UndecodableImage> {
        match self.0.as_deref() {
            None => Ok(bytes::Bytes::new()),
            // Bytes::from(Vec) takes the buffer over: no copy.
            Some(text) => decode_base64_image(text)
                .map(bytes::Bytes::from)
                .ok_or_else(|| UndecodableImage {
                    path: path.to_owned(),
                }),
        }
    }
}

/// An image field that is not Base64. Names the field path only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable Base64 image at {path}")]
pub struct UndecodableImage {
    /// Path of the field in the answer.
    pub path: String,
}

/// Decodes Base64 text, with or without a data-URL prefix, padding, line
/// breaks, in the standard or URL-safe alphabet.
/// `None` when the text is not Base64.
pub fn decode_base64_image(text: &str) -> Option<Vec<u8>> {
    let mut s = text.trim();
    if let Some(rest) = s.strip_prefix("data:") {
        // `data:<mime>;base64,<payload>`: the payload follows the first comma.
        let (_, payload) = rest.split_once(',')?;
        s = payload.trim();
    }
    if s.is_empty() {
        return Some(Vec::new());
    }
    // Nearly every image is canonical, padded, standard-alphabet Base64 on
    // one line: decode that with SIMD in one pass, without the scans below.
    // Whatever the strict decoder accepts, the lenient one decodes to the
    // same bytes, so falling back on its refusal changes no outcome.
    if let Ok(bytes) = base64_simd::STANDARD.decode_to_vec(s.as_bytes()) {
        return Some(bytes);
    }
    decode_lenient(s)
}

/// The lenient decoder for what the SIMD fast path refuses: line breaks,
/// missing padding, trailing bits, the URL-safe alphabet, or not Base64.
fn decode_lenient(s: &str) -> Option<Vec<u8>> {
    let cleaned: Cow<'_, str> = if s.bytes().any(|b| b.is_ascii_whitespace()) {
        Cow::Owned(s.chars().filter(|c| !c.is_ascii_whitespace()).collect())
    } else {
        Cow::Borrowed(s)
    };
    let engine = if cleaned.bytes().any(|b| b == b'-' || b == b'_') {
        &URL_SAFE_LENIENT
    } else {
        &STANDARD_LENIENT
    };
    engine.decode(cleaned.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_plain_prefixed_unpadded_wrapped_and_url_safe_base64() {
        assert_eq!(decode_base64_image("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64_image("aGVsbG8").unwrap(), b"hello");
        assert_eq!(
            decode_base64_image("data:image/jpeg;base64,aGVsbG8=").unwrap(),
            b"hello"
        );
        assert_eq!(decode_base64_image("aGVs\r\nbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64_image("__8").unwrap(), [0xff, 0xff]);
        assert_eq!(decode_base64_image("").unwrap(), b"");
    }

    #[test]
    fn rejects_text_that_is_not_base64() {
        assert!(decode_base64_image("not base64!").is_none());
        assert!(decode_base64_image("data:image/png;base64").is_none());
        assert!(decode_base64_image("a").is_none());
    }

    #[test]
    fn error_names_the_path_not_the_content() {
        let img = Base64Image(Some(Cow::Borrowed("%%%secret%%%")));
        let err = img.decode("fotos.documento[0].imagem").unwrap_err();
        assert_eq!(
            err.to_string(),
            "undecodable Base64 image at fotos.documento[0].imagem"
        );
    }
}
