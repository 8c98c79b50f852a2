//! Integration tests of the sandbox: real listeners on 127.0.0.1:0, real
//! HTTP with reqwest, time moved with a `ManualClock`.

mod bad_input;
mod credentials;
mod documents;
mod faults;
mod liveness_2d;
mod liveness_3d;
mod result;
mod webhook;
