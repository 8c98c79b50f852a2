//! Tiny, valid PNG and JPEG files that carry a text marker.

/// Ends every marker text: the bytes that follow a chunk's text (its CRC)
/// could otherwise extend the token.
const TERMINATOR: &str = "\n";

/// A 1x1 grey PNG with an optional `tEXt` chunk (`Comment`) holding `text`
/// and a newline.
pub fn png(text: Option<&str>) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    // IHDR: 1x1, bit depth 8, colour type 0 (grey), default methods.
    let ihdr = [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0];
    chunk(&mut out, b"IHDR", &ihdr);
    if let Some(text) = text {
        let mut data = b"Comment\0".to_vec();
        data.extend_from_slice(text.as_bytes());
        data.extend_from_slice(TERMINATOR.as_bytes());
        chunk(&mut out, b"tEXt", &data);
    }
    // One scanline: filter byte 0, one grey pixel; zlib with a stored block.
    let raw = [0u8, 0x80];
    let mut idat = vec![0x78, 0x01, 0x01];
    let len = raw.len() as u16;
    idat.extend_from_slice(&len.to_le_bytes());
    idat.extend_from_slice(&(!len).to_le_bytes());
    idat.extend_from_slice(&raw);
    idat.extend_from_slice(&adler32(&raw).to_be_bytes());
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    // Chunk data is tiny here; it always fits in u32.
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in bytes {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// An 8x8 grey baseline JPEG with an optional `COM` segment holding `text`
/// and a newline.
pub fn jpeg(text: Option<&str>) -> Vec<u8> {
    let mut out = vec![0xFF, 0xD8];
    if let Some(text) = text {
        out.extend_from_slice(&[0xFF, 0xFE]);
        // Markers are short; the segment length always fits in u16.
        let len = text.len() + TERMINATOR.len() + 2;
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(TERMINATOR.as_bytes());
    }
    // DQT: table 0, all ones.
    out.extend_from_slice(&[0xFF, 0xDB, 0x00, 0x43, 0x00]);
    out.extend_from_slice(&[1u8; 64]);
    // SOF0: 8-bit, 8x8, one component (id 1, 1x1 sampling, table 0).
    out.extend_from_slice(&[
        0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 0x08, 0x00, 0x08, 0x01, 0x01, 0x11, 0x00,
    ]);
    // DHT: DC table 0 and AC table 0, each a single 1-bit code for symbol 0.
    for class in [0x00u8, 0x10] {
        out.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x14, class, 0x01]);
        out.extend_from_slice(&[0u8; 15]);
        out.push(0x00);
    }
    // SOS, then one block: DC difference 0, end of block; padded with ones.
    out.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00]);
    out.push(0x3F);
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_known_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn adler32_matches_the_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn png_and_jpeg_carry_the_marker_text() {
        let marker = "IDGATE-SANDBOX:rg-front";
        for bytes in [png(Some(marker)), jpeg(Some(marker))] {
            assert!(bytes.windows(marker.len()).any(|w| w == marker.as_bytes()));
        }
        assert!(jpeg(None).ends_with(&[0xFF, 0xD9]));
    }
}
