//! `POST /document`: document images, or the digital driver licence.

use axum::Json;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::domain::Operation;
use crate::sandbox::app::App;
use crate::sandbox::documents::{LicenceFormat, recognise};
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, json_str};
use crate::sandbox::store::{Base64Image, DocumentImage, SubmissionContent};

/// A body with a `qrcode` field is a digital licence; anything else
/// (malformed bodies included) is an image upload.
pub(super) fn classify(input: Option<&Input>) -> Operation {
    match input.and_then(Input::json_object) {
        Some(body) if body.contains_key("qrcode") => Operation::DigitalLicence,
        _ => Operation::DocumentImages,
    }
}

/// Decodes Base64 text, ignoring ASCII whitespace (line-wrapped Base64);
/// the text is copied only when it holds some.
fn decode(text: &str) -> Option<Vec<u8>> {
    let decoded = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        STANDARD.decode(compact)
    } else {
        STANDARD.decode(text)
    };
    decoded.ok().filter(|b| !b.is_empty())
}

fn accepted(appkey: &str, code: u64) -> Response {
    Json(json!({ "appkey": appkey, "codigoDocumento": code })).into_response()
}

pub(super) fn images(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let body = input.json_object().ok_or(bad)?;
    let appkey = json_str(body, "appkey").ok_or(bad)?;
    let images = body
        .get("images")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or(bad)?;
    let decoded: Vec<Vec<u8>> = images
        .iter()
        .map(|v| v.as_str().and_then(decode))
        .collect::<Option<_>>()
        .ok_or(bad)?;
    let now = app.clock.now();
    // An expired appkey answers 401 whatever the images hold.
    app.store.require_live(appkey, now)?;
    let documents: Vec<DocumentImage> = decoded
        .into_iter()
        .filter_map(|bytes| {
            recognise(&bytes).map(|recognised| DocumentImage {
                recognised,
                image: Base64Image::encode(&bytes),
            })
        })
        .collect();
    if documents.is_empty() {
        return Err(Reject::bad_request(
            "no document found in the images; send new images",
        ));
    }
    let code = app
        .store
        .submit(appkey, SubmissionContent::Images(documents), now)?;
    app.activity.notify_one();
    Ok(accepted(appkey, code))
}

pub(super) fn digital_licence(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let body = input.json_object().ok_or(bad)?;
    let appkey = json_str(body, "appkey").ok_or(bad)?;
    let bytes = json_str(body, "qrcode").and_then(decode).ok_or(bad)?;
    let format = LicenceFormat::detect(&bytes).ok_or(bad)?;
    let content = SubmissionContent::Licence {
        format,
        image: Base64Image::encode(&bytes),
    };
    let code = app.store.submit(appkey, content, app.clock.now())?;
    app.activity.notify_one();
    Ok(accepted(appkey, code))
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn decode_accepts_plain_and_wrapped_base64() {
        assert_eq!(
            decode("aGVsbG8gd29ybGQ=").as_deref(),
            Some(&b"hello world"[..])
        );
        assert_eq!(
            decode("aGVs\r\nbG8g d29y\tbGQ=\n").as_deref(),
            Some(&b"hello world"[..])
        );
        assert_eq!(decode(""), None);
        assert_eq!(decode(" \n"), None);
        assert_eq!(decode("not base64!"), None);
    }
}
