//! Upstream wire types: serde mirrors of the REST answers, with the spec's
//! field names (and, where the spec leaves a shape unstated, those of the
//! service's public client code); both are in `docs/upstream.md`.
//!
//! Parsing is lenient where upstream encoders are known to differ (numbers
//! as strings and back, an object or a list, the two names of the 3D
//! session token) and strict where a wrong shape means the answer cannot
//! be used. A parse failure is described by serde's category and position
//! only: serde's messages quote the offending values, which can be
//! personal data.

pub mod field;
mod image;
mod result;
mod scalar;

use std::fmt;

use serde::Deserialize;

pub use image::{Base64Image, UndecodableImage};
pub use result::{
    AnaliseDocumento, ArquivoProcessado, BiometriaDocumento, BiometricCheckWire, CinOcrWire,
    CnhOcrWire, DadosOcr, DniOcrWire, Documento, FotoDocumento, FotoLiveness, Fotos,
    JourneyResultWire, LivenessResultWire, RgOcrWire, ServiceId,
};
pub use scalar::{Flag, Int, Num, OneOrMany, Text, parse_int_text};

/// Why an answer could not be read. The description holds no value from
/// the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

impl WireError {
    /// Describes a serde_json failure by category and position only.
    pub fn from_json(e: &serde_json::Error) -> Self {
        let category = match e.classify() {
            serde_json::error::Category::Io => "io error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected type or value",
            serde_json::error::Category::Eof => "unexpected end of input",
        };
        WireError(format!(
            "{category} at line {} column {}",
            e.line(),
            e.column()
        ))
    }

    /// A required field is missing or empty.
    pub fn missing(field: &'static str) -> Self {
        WireError(format!("missing field `{field}`"))
    }
}

impl From<UndecodableImage> for WireError {
    fn from(e: UndecodableImage) -> Self {
        WireError(e.to_string())
    }
}

/// Parses JSON into `T`, describing failures without values.
pub fn parse_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::from_json(&e))
}

/// `/credencial`: `{"token", "expires": "dd/MM/yyyy HH:mm:ss"}`. The
/// gateway sends the whole body back to `/appkey`, so only `expires` is
/// read here.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct CredentialWire {
    /// The token proper.
    pub token: Text,
    /// Expiry, `dd/MM/yyyy HH:mm:ss`, upstream local time.
    pub expires: Text,
}

/// A credential answer, read for what the cache needs.
#[derive(Clone)]
pub struct CredentialAnswer {
    /// The whole body, verbatim: what `/appkey` takes as `token`.
    pub body: String,
    /// The `expires` text, if the body is a JSON object that has one.
    pub expires: Option<String>,
}

impl fmt::Debug for CredentialAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialAnswer")
            .field("body", &"<redacted>")
            .field("expires", &self.expires)
            .finish()
    }
}

/// Reads a `/credencial` answer: a JSON object with a non-empty `token`
/// (and, usually, `expires`), or an opaque plain-text token.
pub fn parse_credential(body: &[u8]) -> Result<CredentialAnswer, WireError> {
    let text = std::str::from_utf8(body).map_err(|_| WireError("body is not UTF-8".into()))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(WireError("empty body".into()));
    }
    if trimmed.starts_with('{') {
        let wire: CredentialWire = parse_json(trimmed.as_bytes())?;
        if wire.token.as_deref().is_none_or(|t| t.trim().is_empty()) {
            return Err(WireError::missing("token"));
        }
        return Ok(CredentialAnswer {
            body: trimmed.to_owned(),
            expires: wire.expires.0.filter(|e| !e.trim().is_empty()),
        });
    }
    if trimmed.chars().any(char::is_control) {
        return Err(WireError(
            "plain-text token holds control characters".into(),
        ));
    }
    Ok(CredentialAnswer {
        body: trimmed.to_owned(),
        expires: None,
    })
}

/// `/appkey`: `{"appkey": "..."}`.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
struct AppkeyWire {
    appkey: Text,
}

/// Reads an `/appkey` answer: `{"appkey": "..."}`, a bare JSON string, or
/// plain text. Returns the appkey text.
pub fn parse_appkey(body: &[u8]) -> Result<String, WireError> {
    let text = std::str::from_utf8(body).map_err(|_| WireError("body is not UTF-8".into()))?;
    let trimmed = text.trim();
    let key = if trimmed.starts_with('{') {
        parse_json::<AppkeyWire>(trimmed.as_bytes())?
            .appkey
            .0
            .ok_or(WireError::missing("appkey"))?
    } else if trimmed.starts_with('"') {
        parse_json::<String>(trimmed.as_bytes())?
    } else {
        trimmed.to_owned()
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(WireError::missing("appkey"));
    }
    if key.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(WireError(
            "appkey holds white space or control characters".into(),
        ));
    }
    Ok(key.to_owned())
}

/// `/challenge`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChallengesWire<'a> {
    /// Key of this set of challenges.
    pub chkey: Text,
    /// Total time for all challenges, seconds.
    pub total_time: Int,
    /// Number of challenges.
    pub number_of_challenges: Int,
    /// Interval between snapshots, ms.
    pub snap_frequence_in_millis: Int,
    /// Number of snapshots.
    pub snap_number: Int,
    /// The challenges.
    #[serde(borrow)]
    pub challenges: OneOrMany<ChallengeWire<'a>>,
}

/// One challenge.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChallengeWire<'a> {
    /// Instruction for the user.
    pub mensagem: Text,
    /// Seconds to hold the face.
    pub tempo_em_segundos: Int,
    /// The face to make.
    #[serde(borrow)]
    pub tipo_face: Option<TipoFace<'a>>,
}

/// `tipoFace`.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct TipoFace<'a> {
    /// Face type code, kept as text (`"01"`, `"cod01"`, `1`).
    pub codigo: Text,
    /// Icon, Base64.
    #[serde(borrow)]
    pub imagem: Base64Image<'a>,
}

/// The liveness verdict of `/captcha` and `/3d/liveness`
/// (`docs/upstream.md#2d-submission-captcha`).
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct VerdictWire {
    /// Positive access.
    pub valid: Flag,
    /// Transaction type code, as sent (`200.0`, `"300.1"`).
    #[serde(rename = "codID")]
    pub cod_id: Text,
    /// Why the process ended without success.
    pub cause: Text,
    /// Transaction protocol.
    pub protocol: Text,
}

/// `/3d/session-token` (`docs/upstream.md#3d-session-3dsession-token`).
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct Session3DWire {
    /// Contingency indicator.
    #[serde(rename = "isContingency")]
    pub is_contingency: Flag,
    /// The session token (name of 4.5).
    pub token: Text,
    /// The session token (name of 2.3).
    #[serde(rename = "sessionToken")]
    pub session_token: Text,
    /// Vendor name.
    pub vendor: Text,
    /// Vendor address.
    pub url: Text,
}

impl Session3DWire {
    /// The token under either name (`token` first); `None` if both are
    /// absent or empty.
    pub fn take_token(&mut self) -> Option<String> {
        [self.token.0.take(), self.session_token.0.take()]
            .into_iter()
            .flatten()
            .find(|t| !t.trim().is_empty())
    }
}

/// `/document` answer: `{appkey, codigoDocumento}`.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DocumentAcceptedWire {
    /// The appkey of the request (not used).
    pub appkey: Text,
    /// Unique code of the processed document.
    pub codigo_documento: Int,
}

macro_rules! opaque_debug {
    ($($t:ident $(<$l:lifetime>)?),* $(,)?) => {$(
        impl $(<$l>)? fmt::Debug for $t $(<$l>)? {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($t), " { <redacted> }"))
            }
        }
    )*};
}

opaque_debug!(
    CredentialWire,
    ChallengesWire<'a>,
    ChallengeWire<'a>,
    TipoFace<'a>,
    VerdictWire,
    Session3DWire,
    DocumentAcceptedWire,
);

#[cfg(test)]
mod tests;
