//! The Redis client, with the trusted roots of `rediss://`.
//!
//! Without `[cluster] ca_file` the redis crate's rustls client trusts the
//! system's roots (a managed Redis with a public certificate); with it,
//! only the CAs of that file (a self-managed Redis on a private CA). A
//! `redis://` URL ignores both.

use redis::{Client, ConnectionInfo, RedisResult, TlsCertificates};

/// A client for `info`, trusting the CAs of `ca_pem` (PEM) when given.
pub(super) fn client(info: ConnectionInfo, ca_pem: Option<&[u8]>) -> RedisResult<Client> {
    match ca_pem {
        Some(pem) => Client::build_with_tls(
            info,
            TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.to_vec()),
            },
        ),
        None => Client::open(info),
    }
}
