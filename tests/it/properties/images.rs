//! Base64 images: the decoder's SIMD fast path must not change what
//! decodes. It accepts and refuses exactly what the lenient `base64`
//! decoder it replaced did, with the same bytes, and its error names the
//! field only.

use base64::Engine as _;
use idgate::upstream::wire;
use proptest::prelude::*;

use super::{any_bytes, cases};

/// The Base64 image decoder as it was before its SIMD fast path, with the
/// `base64` crate alone: the reference the fast path must agree with.
fn reference_image_decode(text: &str) -> Option<Vec<u8>> {
    use base64::alphabet;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let mut s = text.trim();
    if let Some(rest) = s.strip_prefix("data:") {
        s = rest.split_once(',')?.1.trim();
    }
    let cleaned: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let alphabet = if cleaned.bytes().any(|b| b == b'-' || b == b'_') {
        &alphabet::URL_SAFE
    } else {
        &alphabet::STANDARD
    };
    GeneralPurpose::new(alphabet, LENIENT)
        .decode(cleaned.as_bytes())
        .ok()
}

/// Base64 text in the forms upstream encoders use, long enough for the
/// SIMD loops, then now and then one character replaced (padding, the
/// other alphabet, white space, non-ASCII, or a flipped trailing bit).
fn image_text() -> impl Strategy<Value = String> {
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    (
        any_bytes(300),
        0usize..4,
        0u8..4,
        prop::option::weighted(
            0.5,
            (
                any::<usize>(),
                prop::sample::select(vec![
                    '=', '-', '_', '+', '/', ' ', '\n', 'A', 'B', 'Q', 'g', 'é', '\0', '.',
                ]),
            ),
        ),
    )
        .prop_map(move |(bytes, engine, form, replace)| {
            let mut text = engines[engine].encode(&bytes);
            if let Some((at, c)) = replace.filter(|_| !text.is_empty()) {
                let at = at % text.len();
                text.replace_range(at..=at, &c.to_string());
            }
            match form {
                0 => text,
                1 => format!("data:image/jpeg;base64,{text}"),
                2 => {
                    let mut mid = text.len() / 2;
                    while !text.is_char_boundary(mid) {
                        mid -= 1;
                    }
                    let (a, b) = text.split_at(mid);
                    format!("{a}\r\n{b}")
                }
                _ => format!(" {text}\n"),
            }
        })
}

proptest! {
    #![proptest_config(cases(2000))]

    /// The image decoder (SIMD fast path, lenient fallback) accepts and
    /// refuses exactly what the lenient `base64` decoder does, with the
    /// same bytes, and its error names the field only.
    #[test]
    fn image_decoding_agrees_with_the_lenient_reference(text in image_text()) {
        let image = wire::Base64Image(Some(std::borrow::Cow::Borrowed(&text)));
        match (image.decode("fotos.documento[0].imagem"), reference_image_decode(&text)) {
            (Ok(got), Some(want)) => prop_assert_eq!(&got[..], &want[..]),
            (Err(e), None) => {
                prop_assert_eq!(e.to_string(), "undecodable Base64 image at fotos.documento[0].imagem")
            }
            (got, want) => prop_assert!(false, "decoder {:?}, reference {:?}", got.map(|b| b.len()), want.map(|b| b.len())),
        }
    }
}
