//! TLS of the command-line clients: `--ca`, `--cert`, `--key` and
//! `https://` gateway addresses, shared by `idgate journey` and
//! `idgate channels`.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// How a client reaches a gateway listener over TLS. The default is
/// plaintext for `http://` and the system's roots for `https://`.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// PEM CA certificates trusted beside the system's roots.
    pub ca: Option<PathBuf>,
    /// PEM client certificate chain, for listeners that require one (mTLS).
    pub cert: Option<PathBuf>,
    /// The client certificate's PEM private key.
    pub key: Option<PathBuf>,
}

/// Why a client endpoint could not be set up. Names files, never their
/// contents.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    /// A file could not be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// `--ca`, `--cert` or `--key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--cert` without `--key`, or the reverse.
    #[error("--cert and --key go together")]
    HalfIdentity,
    /// The address is not a usable URL, or TLS could not be set on it.
    #[error("invalid address {url}: {source}")]
    Address {
        /// The address as given (made a URL).
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ClientTlsError> {
    std::fs::read(path).map_err(|source| ClientTlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

impl ClientTls {
    /// True when any TLS option is given.
    pub fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    /// An endpoint for `url` (`host:port`, `http://` or `https://`); a bare
    /// address is `https://` when TLS options are given, else `http://`.
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, ClientTlsError> {
        let url = if url.contains("://") {
            url.to_owned()
        } else if self.is_set() {
            format!("https://{url}")
        } else {
            format!("http://{url}")
        };
        let address = |source| ClientTlsError::Address {
            url: url.clone(),
            source,
        };
        let endpoint = Endpoint::from_shared(url.clone()).map_err(address)?;
        if !url.starts_with("https://") {
            return Ok(endpoint);
        }
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &self.ca {
            tls = tls.ca_certificate(Certificate::from_pem(read("--ca", ca)?));
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(
                    read("--cert", cert)?,
                    read("--key", key)?,
                ));
            }
            (None, None) => {}
            _ => return Err(ClientTlsError::HalfIdentity),
        }
        endpoint.tls_config(tls).map_err(address)
    }
}
