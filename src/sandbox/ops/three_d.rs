//! `POST /3d/session-token` and `POST /3d/liveness`, served per channel.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sandbox::app::App;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, json_str};
use crate::sandbox::liveness::LivenessOutcome;

pub(super) fn session_token(
    app: &App,
    channel: usize,
    input: &Input,
    bad: Reject,
) -> Result<Response, Reject> {
    let body = input.json_object().ok_or(bad)?;
    let appkey = json_str(body, "appkey").ok_or(bad)?;
    let user_agent = match body.get("userAgent") {
        None | Some(Value::Null) => None,
        Some(Value::String(ua)) => Some(ua.as_str()),
        Some(_) => return Err(bad),
    };
    let state = app
        .channels
        .get(channel)
        .ok_or(Reject::internal("channel not configured"))?;
    let outcome = LivenessOutcome::from_user_agent(user_agent);
    let token = app
        .store
        .new_session(appkey, channel, outcome, app.clock.now())?;
    Ok(Json(json!({
        "isContingency": state.contingency.load(Ordering::Relaxed),
        "token": token,
        "vendor": state.config.vendor,
        "url": state.config.vendor_url,
    }))
    .into_response())
}

pub(super) fn liveness(
    app: &App,
    channel: usize,
    input: &Input,
    bad: Reject,
) -> Result<Response, Reject> {
    let body = input.json_object().ok_or(bad)?;
    let appkey = json_str(body, "appkey").ok_or(bad)?;
    let session = json_str(body, "sessionToken").ok_or(bad)?;
    // Every 3D proof returns the same selfie, encoded once per sandbox.
    let frontal = app.selfie.clone();
    let (outcome, protocol) =
        app.store
            .finish_3d(appkey, session, channel, frontal, app.clock.now())?;
    app.activity.notify_one();
    Ok(super::verdict(outcome, protocol))
}
