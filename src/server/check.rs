//! `idgate check --config FILE`: the configuration loaded and validated by
//! the code `serve` runs, every file it names read (certificates, keys,
//! client CAs, CRLs, the JWKS file, secrets), the embedded store opened
//! (created on a first run; refused, naming its path and the cause, when
//! it is unwritable, corrupt, locked by a running gateway or sealed under
//! another key), and nothing bound or called: no socket is opened, no URL
//! fetched, no Redis reached, no sandbox started. Like `nginx -t` or `promtool check config`, a step
//! before a deploy.

use std::fmt;

use super::{
    StartError,
    preflight::{Preflight, preflight},
};
use crate::{auth::Authenticator, config::Config};

/// What a valid configuration would serve, in one line.
#[derive(Debug)]
pub struct Checked {
    listeners: Vec<String>,
    auth: String,
    upstream: String,
    /// Where the state beyond a call lives.
    state: String,
    /// Retired keys still set, each with where it lives now.
    retired: Vec<(&'static str, &'static str)>,
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "configuration valid: {}; {}; {}; {}",
            self.listeners.join(", "),
            self.auth,
            self.upstream,
            self.state
        )?;
        for (retired, now) in &self.retired {
            write!(f, "; retired key {retired} (now {now})")?;
        }
        Ok(())
    }
}

/// Checks `config` (already validated by [`Config::load`]) as a start
/// would, up to its first socket: the start's own [`preflight`], then the
/// JWKS file and the caller table without a fetch.
pub fn check(config: &Config) -> Result<Checked, StartError> {
    let checked = preflight(config)?;
    let upstream = match &checked.upstream {
        Some(resolved) => format!(
            "upstream with {} operator profile(s) and {} 3D channel(s)",
            resolved.operators.len(),
            resolved.channels.len()
        ),
        None => "the embedded sandbox as upstream".to_owned(),
    };
    let auth = match &config.auth {
        None => "callers not authenticated (embedded sandbox)".to_owned(),
        Some(a) => {
            let keys = Authenticator::check(a, &config.callers, super::callers::shares(config))?;
            let jwks = keys.map_or(String::new(), |n| format!(", {n} JWKS key(s)"));
            format!(
                "auth {} with {} caller(s){jwks}",
                a.mode.as_str(),
                config.callers.len()
            )
        }
    };
    Ok(Checked {
        listeners: listeners(config, &checked),
        auth,
        upstream,
        state: checked.state.describe(),
        retired: config.retired_keys(),
    })
}

/// Each listener that would be served, with its address and TLS.
fn listeners(config: &Config, checked: &Preflight) -> Vec<String> {
    let tls = &checked.tls;
    let listener =
        |name: &str, addr, tls: bool| format!("{name} {addr}{}", if tls { " (TLS)" } else { "" });
    let mut listeners = vec![
        listener("grpc", config.listen.grpc, tls.grpc.is_some()),
        listener("http", config.listen.http, tls.http.is_some()),
    ];
    if checked.serves_admin() {
        listeners.push(listener("admin", config.listen.admin, tls.admin.is_some()));
    }
    listeners
}
