//! The upstream REST client against real HTTP servers on 127.0.0.1:0:
//! purpose-built axum servers (and raw TCP listeners for dropped
//! connections) that answer exactly what each test needs and count what
//! they receive.

mod calls;
mod credentials;
mod failures;
