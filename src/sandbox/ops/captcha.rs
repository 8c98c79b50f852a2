//! `POST /captcha`: the 2D liveness proof; binds the appkey to it.

use axum::response::Response;
use serde::Deserialize;

use crate::sandbox::app::App;
use crate::sandbox::error::Reject;
use crate::sandbox::input::{Input, required};
use crate::sandbox::liveness::{LivenessOutcome, parse_snapshots};
use crate::sandbox::store::Base64Image;

#[derive(Deserialize)]
struct Form {
    appkey: Option<String>,
    chkey: Option<String>,
    images: Option<String>,
}

pub(super) fn handle(app: &App, input: &Input, bad: Reject) -> Result<Response, Reject> {
    let form: Form = input.form().ok_or(bad)?;
    let appkey = required(form.appkey.as_deref()).ok_or(bad)?;
    let chkey = required(form.chkey.as_deref()).ok_or(bad)?;
    let snapshots = required(form.images.as_deref())
        .and_then(parse_snapshots)
        .ok_or(bad)?;
    let outcome = LivenessOutcome::from_snapshots(&snapshots);
    let frontal = Base64Image::encode(snapshots.first().map_or(&[][..], |s| &s.image));
    let protocol = app
        .store
        .bind_2d(appkey, chkey, outcome, frontal, app.clock.now())?;
    app.activity.notify_one();
    Ok(super::verdict(outcome, protocol))
}
