//! Request bodies, written straight into one pre-sized buffer.
//!
//! Image payloads are Base64-encoded directly into the body (in chunks for
//! the form encoding, which must also percent-escape the Base64), so an
//! upload costs the body buffer and nothing else. The Base64 is
//! `base64-simd`'s (AVX2/SSE4.1 chosen at run time, scalar otherwise): the
//! same text as the `base64` crate's, a few times faster on images.

use base64_simd::STANDARD;

use crate::domain::{ImageKind, ImagePayload, Snapshot};

/// `application/x-www-form-urlencoded`.
pub const FORM: &str = "application/x-www-form-urlencoded";
/// `application/json`.
pub const JSON: &str = "application/json";

/// Length of the Base64 encoding of `n` bytes, with padding.
pub fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Builds an `application/x-www-form-urlencoded` body.
pub struct FormBody {
    buf: String,
}

impl FormBody {
    /// An empty body with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        FormBody {
            buf: String::with_capacity(capacity),
        }
    }

    fn separator(&mut self) {
        if !self.buf.is_empty() {
            self.buf.push('&');
        }
    }

    /// Appends `name=value`, escaped.
    pub fn pair(&mut self, name: &str, value: &str) -> &mut Self {
        self.separator();
        escape_into(&mut self.buf, name);
        self.buf.push('=');
        escape_into(&mut self.buf, value);
        self
    }

    /// Starts a field whose value is appended in parts.
    pub fn start(&mut self, name: &str) -> &mut Self {
        self.separator();
        escape_into(&mut self.buf, name);
        self.buf.push('=');
        self
    }

    /// Appends escaped text to the current value.
    pub fn text(&mut self, value: &str) -> &mut Self {
        escape_into(&mut self.buf, value);
        self
    }

    /// Appends the Base64 of `bytes` to the current value, escaped, in
    /// chunks (no buffer the size of the image).
    pub fn base64(&mut self, bytes: &[u8]) -> &mut Self {
        // 3 KiB of input per chunk: a multiple of 3 so no padding appears
        // inside the value.
        let mut chunk = String::with_capacity(4096);
        for part in bytes.chunks(3 * 1024) {
            chunk.clear();
            STANDARD.encode_append(part, &mut chunk);
            escape_into(&mut self.buf, &chunk);
        }
        self
    }

    /// Appends one 2D snapshot to the current value, as the data URL the
    /// service expects: `data:<mime>;base64,type:<face type code>,<base64>`.
    pub fn snapshot(&mut self, snapshot: &Snapshot) -> &mut Self {
        self.text("data:")
            .text(snapshot_mime(&snapshot.image))
            .text(";base64,type:")
            .text(&snapshot.face_type_code)
            .text(",")
            .base64(snapshot.image.bytes())
    }

    /// The body.
    pub fn finish(self) -> String {
        self.buf
    }
}

/// Form-encodes `s` into `out`: letters, digits and `*-._` stay, space
/// becomes `+`, everything else `%XX` (the WHATWG form serializer).
fn escape_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xF)]));
            }
        }
    }
}

/// Escaped size of Base64 text of `n` raw bytes in a form value: `+`, `/`
/// and `=` take three bytes each, so this is an upper bound that avoids
/// reallocations for typical images.
pub fn form_base64_capacity(n: usize) -> usize {
    base64_len(n) + base64_len(n) / 16 * 2 + 16
}

/// The MIME type of a 2D snapshot in its data URL.
fn snapshot_mime(image: &ImagePayload) -> &'static str {
    match image.kind() {
        Some(ImageKind::Png) => "image/png",
        _ => "image/jpeg",
    }
}

/// Writes `s` as a JSON string literal (with quotes).
pub fn json_string_into(out: &mut String, s: &str) {
    // serde_json's escaping of a &str cannot fail.
    match serde_json::to_string(s) {
        Ok(lit) => out.push_str(&lit),
        Err(_) => out.push_str("\"\""),
    }
}

/// Builds an `application/json` object, field by field, with Base64
/// images written straight into the body.
pub struct JsonBody {
    buf: String,
}

impl JsonBody {
    /// An empty object with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = String::with_capacity(capacity + 2);
        buf.push('{');
        JsonBody { buf }
    }

    fn name(&mut self, name: &str) {
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        json_string_into(&mut self.buf, name);
        self.buf.push(':');
    }

    /// Appends `"name": "value"`.
    pub fn string(&mut self, name: &str, value: &str) -> &mut Self {
        self.name(name);
        json_string_into(&mut self.buf, value);
        self
    }

    /// Appends `"name": "<base64 of bytes>"`.
    pub fn base64(&mut self, name: &str, bytes: &[u8]) -> &mut Self {
        self.name(name);
        self.buf.push('"');
        STANDARD.encode_append(bytes, &mut self.buf);
        self.buf.push('"');
        self
    }

    /// Appends `"name": ["<base64>", ...]`, one item per image.
    pub fn base64_list(&mut self, name: &str, images: &[ImagePayload]) -> &mut Self {
        self.name(name);
        self.buf.push('[');
        for (i, image) in images.iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            self.buf.push('"');
            STANDARD.encode_append(image.bytes(), &mut self.buf);
            self.buf.push('"');
        }
        self.buf.push(']');
        self
    }

    /// The body.
    pub fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

/// Room for the Base64 of `images` in a JSON list, quotes and commas
/// included.
pub fn json_base64_capacity(images: &[ImagePayload]) -> usize {
    images.iter().map(|i| base64_len(i.bytes().len()) + 3).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use bytes::Bytes;

    #[test]
    fn form_escaping_round_trips_through_a_standard_decoder() {
        let mut f = FormBody::with_capacity(0);
        f.pair("user", "op erator")
            .pair("token", "{\"a\":\"b/c+d=\"}&x")
            .pair("nome", "João Conceição ã");
        let body = f.finish();
        let decoded: Vec<(String, String)> = serde_urlencoded::from_str(&body).unwrap();
        assert_eq!(
            decoded,
            vec![
                ("user".into(), "op erator".into()),
                ("token".into(), "{\"a\":\"b/c+d=\"}&x".into()),
                ("nome".into(), "João Conceição ã".into()),
            ]
        );
    }

    #[test]
    fn chunked_base64_equals_one_shot_base64() {
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut f = FormBody::with_capacity(form_base64_capacity(raw.len()));
        f.start("images")
            .text("data:image/jpeg;base64,type:1,")
            .base64(&raw);
        let decoded: Vec<(String, String)> = serde_urlencoded::from_str(&f.finish()).unwrap();
        let expected = format!("data:image/jpeg;base64,type:1,{}", STANDARD.encode(&raw));
        assert_eq!(decoded[0].1, expected);
    }

    #[test]
    fn json_bodies_are_valid_json_with_plain_base64() {
        let img = ImagePayload::parse_opaque(Bytes::from_static(b"\xff\xd8\xffabc"), 100).unwrap();
        let images = [img.clone(), img.clone()];
        let mut body = JsonBody::with_capacity(json_base64_capacity(&images));
        body.string("appkey", "k\"1").base64_list("images", &images);
        let v: serde_json::Value = serde_json::from_str(&body.finish()).unwrap();
        assert_eq!(v["appkey"], "k\"1");
        assert_eq!(v["images"][1], STANDARD.encode(b"\xff\xd8\xffabc"));
        let mut body = JsonBody::with_capacity(0);
        body.string("appkey", "k").base64("qrcode", img.bytes());
        let v: serde_json::Value = serde_json::from_str(&body.finish()).unwrap();
        assert_eq!(v["qrcode"], STANDARD.encode(b"\xff\xd8\xffabc"));
        assert_eq!(JsonBody::with_capacity(0).finish(), "{}");
    }
}
