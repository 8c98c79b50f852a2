//! The Redis clients, with the trusted roots of `rediss://`.
//!
//! Without `[cluster] ca_file` the redis crate's rustls client trusts the
//! system's roots (a managed Redis with a public certificate); with it,
//! only the CAs of that file (a self-managed Redis on a private CA). A
//! `redis://` URL ignores both.
//!
//! Sentinel: `rediss://` sentinels are reached over TLS, and so is the
//! master they name (a deployment that encrypts one encrypts both:
//! Redis's `tls-replication yes` is what lets sentinels reach a TLS-only
//! master), both trusting the same roots.

use redis::{
    Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo as _, RedisResult, TlsCertificates,
    TlsMode,
    sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType},
};

/// The CAs of `ca_pem` (PEM) as the redis crate takes them.
fn roots(ca_pem: &[u8]) -> TlsCertificates {
    TlsCertificates {
        client_tls: None,
        root_cert: Some(ca_pem.to_vec()),
    }
}

/// A client for `info`, trusting the CAs of `ca_pem` (PEM) when given.
pub(super) fn client(info: ConnectionInfo, ca_pem: Option<&[u8]>) -> RedisResult<Client> {
    match ca_pem {
        Some(pem) => Client::build_with_tls(info, roots(pem)),
        None => Client::open(info),
    }
}

/// A resolver of the master `master_name` through `sentinels`, over TLS to
/// both when `tls`; the master's ACL user and password, if any (the
/// sentinels get none).
pub(super) fn sentinel_client(
    sentinels: &[(String, u16)],
    master_name: &str,
    tls: bool,
    ca_pem: Option<&[u8]>,
    username: Option<&str>,
    password: Option<&str>,
) -> RedisResult<SentinelClient> {
    let scheme = if tls { "rediss" } else { "redis" };
    let addresses = sentinels
        .iter()
        .map(|(host, port)| {
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            format!("{scheme}://{host}:{port}")
                .into_connection_info()
                .map(|info| info.addr().clone())
        })
        .collect::<RedisResult<Vec<ConnectionAddr>>>()?;
    let mut builder =
        SentinelClientBuilder::new(addresses, master_name, SentinelServerType::Master)?;
    if let Some(user) = username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = password {
        builder = builder.set_client_to_redis_password(password);
    }
    if tls {
        builder = builder
            .set_client_to_sentinel_tls_mode(TlsMode::Secure)
            .set_client_to_redis_tls_mode(TlsMode::Secure);
        if let Some(pem) = ca_pem {
            builder = builder
                .set_client_to_sentinel_certificates(roots(pem))
                .set_client_to_redis_certificates(roots(pem));
        }
    }
    builder.build()
}
