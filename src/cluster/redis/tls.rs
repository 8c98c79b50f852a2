//! The Redis clients, with the trusted roots and the client certificate
//! of `rediss://`.
//!
//! Without `[cluster] ca_file` the redis crate's rustls client trusts the
//! system's roots (a managed Redis with a public certificate); with it,
//! only the CAs of that file (a self-managed Redis on a private CA). With
//! `cert_file` and `key_file` it presents that certificate to a Redis
//! that asks for one. A `redis://` URL ignores all three.
//!
//! Sentinel: `rediss://` sentinels are reached over TLS, and so is the
//! master they name (a deployment that encrypts one encrypts both:
//! Redis's `tls-replication yes` is what lets sentinels reach a TLS-only
//! master), both trusting the same roots and shown the same client
//! certificate.

use redis::{
    Client, ConnectionAddr, ConnectionInfo, RedisResult, TlsMode,
    sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType},
};

use secrecy::ExposeSecret as _;

use crate::cluster::config::{ClusterSettings, RedisTls};

/// A client for `info`, with the roots and client certificate of `tls`.
pub(super) fn client(info: ConnectionInfo, tls: &RedisTls) -> RedisResult<Client> {
    match tls.certificates() {
        Some(certificates) => Client::build_with_tls(info, certificates),
        None => Client::open(info),
    }
}

/// A resolver of the master `master_name` through `sentinels`, over TLS to
/// both when `over_tls` (with the roots and client certificate of
/// `settings`); asking the sentinels as their ACL user and password, and
/// the master as its own, when `settings` give them.
pub(super) fn sentinel_client(
    sentinels: &[(String, u16)],
    master_name: &str,
    over_tls: bool,
    settings: &ClusterSettings,
) -> RedisResult<SentinelClient> {
    let addresses = sentinels.iter().map(|(host, port)| {
        let (host, port) = (host.clone(), *port);
        if over_tls {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                // The roots and client certificate are set below.
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host, port)
        }
    });
    let mut builder =
        SentinelClientBuilder::new(addresses, master_name, SentinelServerType::Master)?;
    if let Some(user) = &settings.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &settings.password {
        builder = builder.set_client_to_redis_password(password.expose_secret());
    }
    if let Some(user) = &settings.sentinel_username {
        builder = builder.set_client_to_sentinel_username(user);
    }
    if let Some(password) = &settings.sentinel_password {
        builder = builder.set_client_to_sentinel_password(password.expose_secret());
    }
    if over_tls {
        builder = builder
            .set_client_to_sentinel_tls_mode(TlsMode::Secure)
            .set_client_to_redis_tls_mode(TlsMode::Secure);
        if let Some(certificates) = settings.tls.certificates() {
            builder = builder
                .set_client_to_sentinel_certificates(certificates.clone())
                .set_client_to_redis_certificates(certificates);
        }
    }
    builder.build()
}
