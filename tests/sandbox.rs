//! Integration tests of the sandbox: real listeners on 127.0.0.1:0, real
//! HTTP with reqwest, time moved with a `ManualClock`.

#[path = "sandbox/bad_input.rs"]
mod bad_input;
#[path = "sandbox/credentials.rs"]
mod credentials;
#[path = "sandbox/documents.rs"]
mod documents;
#[path = "sandbox/faults.rs"]
mod faults;
#[path = "sandbox/helpers.rs"]
mod helpers;
#[path = "sandbox/liveness_2d.rs"]
mod liveness_2d;
#[path = "sandbox/liveness_3d.rs"]
mod liveness_3d;
#[path = "sandbox/result.rs"]
mod result;
#[path = "sandbox/webhook.rs"]
mod webhook;
