//! Request bodies: read under a size limit, then parsed as a form or as
//! JSON only when the content type says so.

use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The body could not be read: too large, or the connection failed.
#[derive(Debug, thiserror::Error)]
#[error("request body too large or unreadable")]
pub(crate) struct BodyError;

/// A request body with its media type. Not `Debug`: bodies hold secrets
/// and personal data.
pub(crate) struct Input {
    media_type: Option<String>,
    body: Bytes,
    json: OnceLock<Option<Value>>,
}

const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";

impl Input {
    /// Reads the whole body of `req`, refusing more than `limit` bytes.
    pub(crate) async fn read(req: Request, limit: usize) -> Result<Self, BodyError> {
        let media_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        let body = axum::body::to_bytes(req.into_body(), limit)
            .await
            .map_err(|_| BodyError)?;
        Ok(Self {
            media_type,
            body,
            json: OnceLock::new(),
        })
    }

    /// The body as a URL-encoded form; `None` for another content type or a
    /// malformed body.
    pub(crate) fn form<T: DeserializeOwned>(&self) -> Option<T> {
        if self.media_type.as_deref() != Some(FORM) {
            return None;
        }
        serde_urlencoded::from_bytes(&self.body).ok()
    }

    /// The body as a JSON object (parsed once); `None` for another content
    /// type, malformed JSON or a non-object.
    pub(crate) fn json_object(&self) -> Option<&serde_json::Map<String, Value>> {
        self.json
            .get_or_init(|| {
                if self.media_type.as_deref() != Some(JSON) {
                    return None;
                }
                serde_json::from_slice::<Value>(&self.body).ok()
            })
            .as_ref()
            .and_then(Value::as_object)
    }
}

/// A required text field: present and not blank.
pub(crate) fn required(field: Option<&str>) -> Option<&str> {
    field.map(str::trim).filter(|v| !v.is_empty())
}

/// A required text field of a JSON object.
pub(crate) fn json_str<'a>(
    object: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Option<&'a str> {
    required(object.get(key).and_then(Value::as_str))
}
