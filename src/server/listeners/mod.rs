//! The three listeners: the public gRPC API (with health and reflection),
//! the HTTP listener (webhook receiver, `/metrics`, `/healthz`) and the
//! admin gRPC listener (`ChannelAdminService`, behind a bearer token).
//! Each is served on an already bound socket until `stopped` turns true.
//!
//! One job per file:
//!
//! | File     | Job                                                              |
//! |----------|------------------------------------------------------------------|
//! | `aging`  | connection age: one tonic server per connection, GOAWAY at its jittered age |
//! | `bind`   | binding the sockets, before anything else starts                 |
//! | `grpc`   | serving the two gRPC listeners (the public one on the serving runtime) |
//! | `http`   | the HTTP listener's accept loop and `/healthz`                   |
//! | `scrape` | `/metrics`: counters kept elsewhere synced in at scrape time     |

mod aging;
mod bind;
mod grpc;
mod http;
mod scrape;

use std::sync::Arc;

use tokio::net::TcpListener;

use super::connections::ConnectionGate;
use crate::tls::ServerTls;

pub(super) use bind::{Bound, bind, bind_shared};
pub(super) use grpc::{PublicApi, serve_admin, serve_public};
pub(super) use http::{app as http_app, serve_http};
pub(super) use scrape::Scrape;

/// Where a listener accepts: its socket, the gate its connections pass,
/// and its TLS when configured.
pub(super) struct Accept {
    pub(super) listener: TcpListener,
    pub(super) gate: ConnectionGate,
    pub(super) tls: Option<Arc<ServerTls>>,
}
