//! The sandbox-only control API, under `/_sandbox` on the core listener.
//!
//! | method | path | body / answer |
//! |---|---|---|
//! | GET | `/_sandbox/faults` | installed rules |
//! | POST | `/_sandbox/faults` | a [`FaultRule`]; 201 `{"id"}` or 400 |
//! | DELETE | `/_sandbox/faults` | clears all; 204 |
//! | DELETE | `/_sandbox/faults/{id}` | 204 or 404 |
//! | GET | `/_sandbox/calls` | `[{operation, channel?, count}]` |
//! | DELETE | `/_sandbox/calls` | resets counters; 204 |
//! | GET | `/_sandbox/channels` | `[{name, vendor, vendor_url, contingency}]` |
//! | PUT | `/_sandbox/channels/{name}/contingency` | `{"contingency": bool}`; 204 or 404 |
//! | GET | `/_sandbox/state` | table sizes and webhook counters |

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, put};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::app::App;
use super::error::message_response;
use super::faults::{self, FaultRule};

/// The admin routes, to be nested under `/_sandbox`.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/faults/{id}", delete(remove_fault))
        .route("/calls", get(calls).delete(reset_calls))
        .route("/channels", get(channels))
        .route("/channels/{name}/contingency", put(set_contingency))
        .route("/state", get(state))
        .with_state(app)
}

async fn list_faults(State(app): State<Arc<App>>) -> Response {
    Json(app.faults.list()).into_response()
}

async fn add_fault(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let Ok(rule) = serde_json::from_slice::<FaultRule>(&body) else {
        return message_response(StatusCode::BAD_REQUEST, "body is not a fault rule");
    };
    if let Err(e) = faults::validate(&rule, &app.channel_names()) {
        return message_response(StatusCode::BAD_REQUEST, &e.to_string());
    }
    let id = app.faults.add(rule);
    (StatusCode::CREATED, Json(json!({ "id": id }))).into_response()
}

async fn clear_faults(State(app): State<Arc<App>>) -> StatusCode {
    app.faults.clear();
    StatusCode::NO_CONTENT
}

async fn remove_fault(State(app): State<Arc<App>>, Path(id): Path<u64>) -> Response {
    if app.faults.remove(id) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        message_response(StatusCode::NOT_FOUND, "no such fault")
    }
}

async fn calls(State(app): State<Arc<App>>) -> Response {
    Json(app.faults.all_calls()).into_response()
}

async fn reset_calls(State(app): State<Arc<App>>) -> StatusCode {
    app.faults.reset_calls();
    StatusCode::NO_CONTENT
}

async fn channels(State(app): State<Arc<App>>) -> Response {
    let list: Vec<_> = app
        .channels
        .iter()
        .map(|c| {
            json!({
                "name": c.config.name,
                "vendor": c.config.vendor,
                "vendor_url": c.config.vendor_url,
                "contingency": c.contingency.load(Ordering::Relaxed),
            })
        })
        .collect();
    Json(list).into_response()
}

#[derive(Deserialize)]
struct Contingency {
    contingency: bool,
}

async fn set_contingency(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(Contingency { contingency }) = serde_json::from_slice(&body) else {
        return message_response(
            StatusCode::BAD_REQUEST,
            "body must be {\"contingency\": bool}",
        );
    };
    match app.channel_index(&name).and_then(|i| app.channels.get(i)) {
        Some(channel) => {
            channel.contingency.store(contingency, Ordering::Relaxed);
            StatusCode::NO_CONTENT.into_response()
        }
        None => message_response(StatusCode::NOT_FOUND, "no such channel"),
    }
}

async fn state(State(app): State<Arc<App>>) -> Response {
    Json(json!({
        "store": app.store.sizes(app.clock.now()),
        "webhook": *app.webhook_stats.borrow(),
    }))
    .into_response()
}
