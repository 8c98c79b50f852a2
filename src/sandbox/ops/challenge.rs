//! `POST /challenge`: 2D liveness challenges, executable for 60 seconds.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::sandbox::app::App;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, required};
use crate::sandbox::samples;

#[derive(Deserialize)]
struct Form {
    appkey: Option<String>,
}

/// The challenge types the sandbox asks for (`tipoFace.codigo`).
pub const FACE_TYPES: [&str; 2] = ["cod01", "cod02"];

pub(super) fn handle(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let form: Form = input.form().ok_or(bad)?;
    let appkey = required(form.appkey.as_deref()).ok_or(bad)?;
    let chkey = app.store.new_challenge(appkey, app.clock.now())?;
    let icon = samples::base64(&samples::selfie());
    Ok(Json(json!({
        "chkey": chkey,
        "totalTime": 6,
        "numberOfChallenges": FACE_TYPES.len(),
        "snapFrequenceInMillis": 1490,
        "snapNumber": 2,
        "challenges": [
            {"mensagem": "Olhe para a câmera", "tempoEmSegundos": 3, "tipoFace": {"codigo": FACE_TYPES[0], "imagem": icon}},
            {"mensagem": "Sorria", "tempoEmSegundos": 3, "tipoFace": {"codigo": FACE_TYPES[1], "imagem": icon}},
        ],
    }))
    .into_response())
}
