//! The upstream REST client against real HTTP servers on 127.0.0.1:0:
//! purpose-built axum servers (and raw TCP listeners for dropped
//! connections) that answer exactly what each test needs and count what
//! they receive.

#[path = "upstream/support.rs"]
mod support;

#[path = "upstream/calls.rs"]
mod calls;

#[path = "upstream/failures.rs"]
mod failures;

#[path = "upstream/credentials.rs"]
mod credentials;
