//! The REST operations: one module each, behind one dispatcher that
//! counts calls, applies faults and maps bad input to the operation's
//! status code.

mod appkey;
mod captcha;
mod challenge;
mod credential;
mod document;
mod result;
mod three_d;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tracing::Instrument as _;

use super::app::App;
use super::error::Reject;
use super::faults::{self, FaultAction, FaultPhase};
use super::input::Input;
use crate::domain::JourneyRef;
use crate::domain::Operation;
use crate::telemetry::journey::journey_from_context;
use crate::telemetry::propagation::extract_from_http;
use crate::telemetry::{ServerSpan, record_journey};

/// Which handler a path leads to. `/document` serves two operations,
/// told apart by the body.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    Op(Operation),
    Document,
}

/// The status of malformed input for `op`: 401 ("missing data or data
/// outside the expected pattern") where the spec documents that for the
/// operation, else 400.
fn bad_input(op: Operation) -> Reject {
    match op {
        Operation::DigitalLicence => {
            Reject::unauthorized("missing data or data outside the expected pattern")
        }
        _ => Reject::bad_request("malformed request or data not correctly informed"),
    }
}

/// Serves one REST call: reads the body, counts the call, applies a
/// matching fault, runs the operation.
pub(crate) async fn serve(
    app: Arc<App>,
    route: Route,
    channel: Option<usize>,
    req: Request,
) -> Response {
    // The journey arrives as W3C baggage from the gateway's client span;
    // `/appkey` learns it from the appkey it creates (see below).
    let journey = journey_from_context(&extract_from_http(req.headers()));
    let server_span = req.extensions().get::<ServerSpan>().map(|s| s.0.clone());
    let input = Input::read(req, app.config.max_body_bytes).await;
    let op = match route {
        Route::Op(op) => op,
        Route::Document => document::classify(input.as_ref().ok()),
    };
    let channel_name = channel
        .and_then(|i| app.channels.get(i))
        .map(|c| c.config.name.as_str());
    let span = tracing::info_span!(
        "sandbox.call",
        operation = op.as_str(),
        channel = channel_name.unwrap_or("-"),
        idgate.journey_ref = tracing::field::Empty,
    );
    if let Some(journey) = &journey {
        record_journey(&span, journey);
    }
    let span_for_journey = span.clone();
    let response = async {
        let person = input.as_ref().ok().and_then(|i| app.store.person_of(i));
        let fault = app.faults.on_call(op, channel_name, person.as_deref());
        if let Some(rule) = &fault {
            if rule.latency_ms > 0 {
                tokio::time::sleep(Duration::from_millis(rule.latency_ms)).await;
            }
            if rule.action == FaultAction::RepeatAppkey
                && op == Operation::Appkey
                && let Some(response) = appkey::repeated(&app)
            {
                tracing::info!("fault injected: an appkey issued again");
                return response;
            }
            if rule.phase == FaultPhase::Before {
                if let Some(response) = faults::response(rule.action) {
                    tracing::info!(action = ?rule.action, "fault injected before the operation");
                    return response;
                }
            }
        }
        let response = match &input {
            Ok(input) => run(&app, op, channel.unwrap_or(0), input)
                .unwrap_or_else(IntoResponse::into_response),
            Err(_) => bad_input(op).into_response(),
        };
        if let Some(rule) = fault.filter(|r| r.phase == FaultPhase::After) {
            if let Some(response) = faults::response(rule.action) {
                tracing::info!(action = ?rule.action, "fault injected after the operation");
                return response;
            }
        }
        tracing::debug!(status = response.status().as_u16(), "answered");
        response
    }
    .instrument(span)
    .await;
    // A journey created by this call (`/appkey`): its spans carry it too.
    if let Some(created) = response.extensions().get::<JourneyRef>() {
        record_journey(&span_for_journey, created);
        if let Some(server) = &server_span {
            record_journey(server, created);
        }
    }
    response
}

fn run(app: &App, op: Operation, channel: usize, input: &Input) -> Result<Response, Reject> {
    let bad = bad_input(op);
    match op {
        Operation::Credential => credential::handle(app, input, bad),
        Operation::Appkey => appkey::handle(app, input, bad),
        Operation::Challenge => challenge::handle(app, input, bad),
        Operation::Captcha => captcha::handle(app, input, bad),
        Operation::SessionToken3D => three_d::session_token(app, channel, input, bad),
        Operation::Liveness3D => three_d::liveness(app, channel, input, bad),
        Operation::DocumentImages => document::images(app, input, bad),
        Operation::DigitalLicence => document::digital_licence(app, input, bad),
        Operation::Result => result::handle(app, input, bad),
    }
}

/// The liveness verdict (`docs/upstream.md#2d-submission-captcha`).
fn verdict(outcome: super::liveness::LivenessOutcome, protocol: u64) -> Response {
    (
        StatusCode::OK,
        axum::Json(serde_json::json!({
            "valid": outcome.is_valid(),
            "codID": outcome.cod_id(),
            "cause": outcome.cause(),
            "protocol": protocol.to_string(),
        })),
    )
        .into_response()
}
