//! `POST {result}/document/result`: the journey result
//! (`docs/upstream.md#the-journey-result`).

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::sandbox::app::App;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, required};
use crate::sandbox::result::{ResultSettings, build};

#[derive(Deserialize)]
struct Form {
    appkey: Option<String>,
}

pub(super) fn handle(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let form: Form = input.form().ok_or(bad)?;
    let appkey = required(form.appkey.as_deref()).ok_or(bad)?;
    let now = app.clock.now();
    let record = app.store.journey(appkey, now)?;
    if !app.config.result_readable_after_expiry && now >= record.expires_at {
        return Err(Reject::unauthorized("appkey expired"));
    }
    let liveness = record
        .liveness
        .as_ref()
        .ok_or(Reject::not_found("liveness proof not performed"))?;
    let settings = ResultSettings {
        customer: &app.config.customer,
        time: app.time,
        processing_delay: app.limits.processing_delay,
        webhook_url: app.config.webhook.url.as_deref(),
    };
    Ok(Json(build(&record, liveness, now, &settings)).into_response())
}
