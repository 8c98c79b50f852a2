//! `idgate check --config FILE`: the configuration loaded and validated by
//! the code `serve` runs, every file it names read (certificates, keys,
//! client CAs, CRLs, the JWKS file, secrets), and nothing bound or
//! called: no socket is opened, no URL fetched, no Redis reached, no
//! sandbox started. Like `nginx -t` or `promtool check config`, a step
//! before a deploy.

use std::fmt;

use super::{StartError, callers, setup::ListenerTlsSet, upstream};
use crate::{auth::Authenticator, config::Config, upstream::HttpClientFactory};

/// What a valid configuration would serve, in one line.
#[derive(Debug)]
pub struct Checked {
    listeners: Vec<String>,
    auth: String,
    upstream: String,
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "configuration valid: {}; {}; {}",
            self.listeners.join(", "),
            self.auth,
            self.upstream
        )
    }
}

/// Checks `config` (already validated by [`Config::load`]) as a start
/// would, up to its first socket.
pub fn check(config: &Config) -> Result<Checked, StartError> {
    let tls = ListenerTlsSet::load(&config.tls, callers::grpc_client_certs(config))?;
    config.webhook.resolve_unchecked()?;
    config.cluster.resolve()?;
    let upstream = match &config.upstream {
        Some(up) => {
            let resolved = upstream::configured(config, up)?;
            HttpClientFactory::new(&resolved.config)?;
            format!(
                "upstream with {} operator profile(s) and {} 3D channel(s)",
                resolved.operators.len(),
                resolved.channels.len()
            )
        }
        None => "the embedded sandbox as upstream".to_owned(),
    };
    callers::check_required(config)?;
    let auth = match &config.auth {
        None => "callers not authenticated (embedded sandbox)".to_owned(),
        Some(a) => {
            let keys = Authenticator::check(a, &config.callers, callers::shares(config))?;
            let jwks = keys.map_or(String::new(), |n| format!(", {n} JWKS key(s)"));
            format!(
                "auth {} with {} caller(s){jwks}",
                a.mode.as_str(),
                config.callers.len()
            )
        }
    };
    let listener =
        |name: &str, addr, tls: bool| format!("{name} {addr}{}", if tls { " (TLS)" } else { "" });
    let mut listeners = vec![
        listener("grpc", config.listen.grpc, tls.grpc.is_some()),
        listener("http", config.listen.http, tls.http.is_some()),
    ];
    if config.admin.resolve_token().is_ok() {
        listeners.push(listener("admin", config.listen.admin, tls.admin.is_some()));
    }
    Ok(Checked {
        listeners,
        auth,
        upstream,
    })
}
