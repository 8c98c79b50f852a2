//! What a replica trusts and presents on `rediss://` connections:
//! `[cluster] ca_file`, and `cert_file` with `key_file` for a Redis that
//! asks clients for a certificate (`tls-auth-clients yes`, Redis's own
//! default once TLS is on).
//!
//! The files are read and their PEM checked once, when the configuration
//! is resolved, so a wrong file stops the start naming its key rather
//! than failing every connection later. Errors name the key and the file,
//! never what is in it.

use std::path::Path;

use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use zeroize::Zeroizing;

use super::invalid;
use crate::config_source::ConfigError;

/// A client certificate chain and its private key, PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    cert_pem: Vec<u8>,
    key_pem: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity(..)")
    }
}

/// The TLS side of `[cluster]`, read and checked.
#[derive(Debug, Clone, Default)]
pub struct RedisTls {
    /// The CAs trusted (PEM); none: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Presented when Redis asks for a client certificate.
    pub client: Option<ClientIdentity>,
}

impl RedisTls {
    /// Reads `ca_file` and, together, `cert_file` and `key_file`.
    pub(super) fn read(
        ca_file: Option<&Path>,
        cert_file: Option<&Path>,
        key_file: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let ca_pem = ca_file
            .map(|path| read_certificates("cluster.ca_file", path))
            .transpose()?;
        let client = match (cert_file, key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(ClientIdentity::read(cert, key)?),
            _ => {
                return Err(invalid(
                    "cluster.cert_file and cluster.key_file come together (a client certificate and its key)",
                ));
            }
        };
        Ok(Self { ca_pem, client })
    }

    /// What the redis crate's rustls client takes; `None` when nothing is
    /// set (the system's roots, no client certificate).
    pub(crate) fn certificates(&self) -> Option<TlsCertificates> {
        if self.ca_pem.is_none() && self.client.is_none() {
            return None;
        }
        Some(TlsCertificates {
            client_tls: self.client.as_ref().map(|c| ClientTlsConfig {
                client_cert: c.cert_pem.clone(),
                client_key: c.key_pem.to_vec(),
            }),
            root_cert: self.ca_pem.clone(),
        })
    }
}

impl ClientIdentity {
    fn read(cert_file: &Path, key_file: &Path) -> Result<Self, ConfigError> {
        let cert_pem = read_certificates("cluster.cert_file", cert_file)?;
        let key_pem = Zeroizing::new(read("cluster.key_file", key_file)?);
        if PrivateKeyDer::from_pem_slice(&key_pem).is_err() {
            return Err(no_pem("cluster.key_file", key_file, "private key"));
        }
        Ok(Self { cert_pem, key_pem })
    }
}

/// The file of `key`, which must hold at least one PEM certificate.
fn read_certificates(key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let pem = read(key, path)?;
    if CertificateDer::pem_slice_iter(&pem).next().is_none() {
        return Err(no_pem(key, path, "certificate"));
    }
    Ok(pem)
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| invalid(format!("{key} {}: {e}", path.display())))
}

fn no_pem(key: &str, path: &Path, what: &str) -> ConfigError {
    invalid(format!("{key} {}: no PEM {what} in it", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate and key of a fresh self-signed CA, as PEM files.
    fn pem_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["idgate".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (c, k) = (dir.join("client.pem"), dir.join("client.key"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    #[test]
    fn a_client_certificate_comes_with_its_key_and_both_must_hold_pem() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pem_files(dir.path());
        let tls = RedisTls::read(Some(&cert), Some(&cert), Some(&key)).unwrap();
        let certs = tls.certificates().expect("something to present");
        assert!(certs.client_tls.is_some() && certs.root_cert.is_some());
        assert!(!format!("{tls:?}").contains("PRIVATE KEY"));

        let err = RedisTls::read(None, Some(&cert), None).unwrap_err();
        assert!(err.to_string().contains("come together"), "{err}");
        // The certificate given as the key: named, its content not quoted.
        let err = RedisTls::read(None, Some(&cert), Some(&cert))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cluster.key_file") && err.contains("private key"),
            "{err}"
        );
        assert!(!err.contains("BEGIN"), "{err}");
        // The key given as the certificate.
        let err = RedisTls::read(None, Some(&key), Some(&key))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cluster.cert_file"), "{err}");
        assert!(!err.contains("BEGIN"), "{err}");
        let missing = dir.path().join("absent.pem");
        let err = RedisTls::read(Some(&missing), None, None).unwrap_err();
        assert!(err.to_string().contains("cluster.ca_file"), "{err}");
        assert!(
            RedisTls::read(None, None, None)
                .unwrap()
                .certificates()
                .is_none()
        );
    }
}
