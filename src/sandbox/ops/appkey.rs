//! `POST /appkey`: an appkey for one end user, under a credential token.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::domain::{Appkey, JourneyRef};
use crate::sandbox::app::App;
use crate::sandbox::cpf;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, required};
use crate::sandbox::store::EndUser;
use crate::sandbox::wire_time::parse_br_date;

#[derive(Deserialize)]
struct Form {
    user: Option<String>,
    token: Option<String>,
    cpf: Option<String>,
    nome: Option<String>,
    nascimento: Option<String>,
    #[serde(rename = "idExternoCliente")]
    external_id: Option<String>,
}

const MAX_NAME_CHARS: usize = 255;
const MAX_EXTERNAL_ID_CHARS: usize = 255;

pub(super) fn handle(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let form: Form = input.form().ok_or(bad)?;
    let login = required(form.user.as_deref()).ok_or(bad)?;
    let raw_token = required(form.token.as_deref()).ok_or(bad)?;
    let cpf = required(form.cpf.as_deref())
        .and_then(cpf::normalize)
        .ok_or(bad)?;
    let name = required(form.nome.as_deref())
        .filter(|n| n.chars().count() <= MAX_NAME_CHARS && !n.chars().any(char::is_control))
        .ok_or(bad)?;
    let birth = required(form.nascimento.as_deref())
        .and_then(parse_br_date)
        .ok_or(bad)?;
    let external_id = required(form.external_id.as_deref())
        .filter(|id| {
            id.len() <= MAX_EXTERNAL_ID_CHARS && id.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .ok_or(bad)?;
    let token =
        bare_token(raw_token).ok_or(Reject::unauthorized("credential token not recognised"))?;
    let user = EndUser {
        cpf,
        name: name.to_owned(),
        birth,
    };
    let appkey =
        app.store
            .create_appkey(&token, login, user, external_id.to_owned(), app.clock.now())?;
    // Not the appkey: its reference, for the spans of this call.
    let journey = JourneyRef::from_appkey(&Appkey::new(appkey.as_str()));
    let mut response = Json(serde_json::json!({ "appkey": appkey })).into_response();
    response.extensions_mut().insert(journey);
    Ok(response)
}

/// The answer of a vendor that repeats itself: the appkey issued last,
/// if it lives (`None`: answer normally).
pub(super) fn repeated(app: &App) -> Option<Response> {
    let appkey = app.store.last_appkey(app.clock.now())?;
    let journey = JourneyRef::from_appkey(&Appkey::new(appkey.as_str()));
    let mut response = Json(serde_json::json!({ "appkey": appkey })).into_response();
    response.extensions_mut().insert(journey);
    Some(response)
}

/// The token inside `token`: the whole `/credencial` body verbatim
/// (`{"token": ..., "expires": ...}`), a JSON string, or the bare token.
fn bare_token(raw: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Credential {
        token: String,
    }
    if raw.starts_with('{') {
        serde_json::from_str::<Credential>(raw)
            .ok()
            .map(|c| c.token)
    } else if raw.starts_with('"') {
        serde_json::from_str::<String>(raw).ok()
    } else {
        Some(raw.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::bare_token;

    #[test]
    fn token_is_taken_from_body_string_or_bare_text() {
        assert_eq!(
            bare_token(r#"{"token":"abc","expires":"x"}"#).as_deref(),
            Some("abc")
        );
        assert_eq!(bare_token(r#""abc""#).as_deref(), Some("abc"));
        assert_eq!(bare_token("abc").as_deref(), Some("abc"));
        assert_eq!(bare_token("{not json"), None);
    }
}
