//! `POST /credencial`: operator login and password for a credential token.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq as _;

use crate::sandbox::app::App;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, required};

#[derive(Deserialize)]
struct Form {
    user: Option<String>,
    pass: Option<String>,
}

pub(super) fn handle(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let form: Form = input.form().ok_or(bad)?;
    let user = required(form.user.as_deref()).ok_or(bad)?;
    let pass = required(form.pass.as_deref()).ok_or(bad)?;
    let known = app.config.operators.iter().fold(false, |found, o| {
        let matches = o.login.as_bytes().ct_eq(user.as_bytes())
            & o.password.as_bytes().ct_eq(pass.as_bytes());
        found | bool::from(matches)
    });
    if !known {
        return Err(Reject::unauthorized("login or password not accepted"));
    }
    let (token, expires) = app.store.issue_token(user, app.clock.now())?;
    Ok(Json(serde_json::json!({
        "token": token,
        "expires": app.time.br_datetime(expires),
    }))
    .into_response())
}
