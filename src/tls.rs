//! TLS and mutual TLS on the gateway's own listeners.
//!
//! - [`TlsConfig`] (`[tls.grpc]`, `[tls.http]`, `[tls.admin]`): per
//!   listener, a certificate chain and its key, and optionally the CAs
//!   whose client certificates are required (mTLS), the CRLs that revoke
//!   some, and whether a client certificate without an extended key usage
//!   is one (`client_certs`: only a clientAuth EKU says so by default).
//! - [`ServerTls`]: the loaded rustls configuration of one listener;
//!   [`ServerTls::reload`] re-reads the files (SIGHUP) and swaps it in: the
//!   next connection is served with the new certificate, connections
//!   already open keep theirs.
//! - [`TlsIncoming`]: accepted connections after their handshake, for
//!   tonic (`serve_with_incoming`) and axum (`axum::serve`), from a
//!   listener or from any stream of accepted connections
//!   ([`TlsIncoming::from_stream`], e.g. those a connection gate admits).
//!   Handshakes run in tasks of their own, so a slow or silent client
//!   holds up no one; a failed one is logged, reported by its cause
//!   ([`HandshakeEvents`]: `expired`, `revoked`, ...) and dropped.

mod client_certs;

use std::{
    io,
    path::{Path, PathBuf},
    pin::Pin,
    sync::{Arc, RwLock},
    task::{Context, Poll},
    time::Duration,
};

use serde::Deserialize;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::mpsc,
};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        self, CertificateError, ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    },
    server::TlsStream,
};
use tokio_stream::{Stream, StreamExt as _};

use crate::sync::{read, write};

/// How long a client has to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server to take them.
const ACCEPT_QUEUE: usize = 128;

/// `[tls]`: TLS per listener; a listener without a section is plaintext.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The public gRPC listener.
    pub grpc: Option<ListenerTls>,
    /// The HTTP listener (webhook, `/metrics`, `/healthz`).
    pub http: Option<ListenerTls>,
    /// The admin gRPC listener.
    pub admin: Option<ListenerTls>,
}

/// The certificate of one listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    /// PEM certificate chain, the listener's certificate first.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM CA certificates: when set, clients must present a certificate
    /// issued by one of them.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// PEM CRLs of the client CA (or of its intermediates): a client
    /// certificate they list fails the handshake. Re-read on SIGHUP.
    #[serde(default)]
    pub crl_files: Vec<PathBuf>,
    /// Accept a client certificate with no extended key usage at all (by
    /// default only one whose EKU names clientAuth is a client's).
    #[serde(default)]
    pub allow_no_eku: bool,
}

impl ListenerTls {
    /// A listener's certificate and key, no client certificates asked.
    pub fn new(cert_file: PathBuf, key_file: PathBuf) -> Self {
        Self {
            cert_file,
            key_file,
            client_ca_file: None,
            crl_files: Vec::new(),
            allow_no_eku: false,
        }
    }

    /// The keys that say something of client certificates only make sense
    /// beside `client_ca_file`; `section` is `tls.grpc`, ...
    pub fn validate(&self, section: &str) -> Result<(), String> {
        if self.client_ca_file.is_some() {
            return Ok(());
        }
        match (self.crl_files.is_empty(), self.allow_no_eku) {
            (true, false) => Ok(()),
            (false, _) => Err(format!(
                "[{section}] crl_files revokes client certificates, but no {section}.client_ca_file asks for them"
            )),
            (true, true) => Err(format!(
                "[{section}] allow_no_eku is about client certificates, but no {section}.client_ca_file asks for them"
            )),
        }
    }
}

/// Why a listener's TLS could not be set up. Names files, never their
/// contents.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{what} {}: {reason}", path.display())]
    File {
        /// `certificate`, `private key`, `client CA` or `CRL`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the combination (a key that does not match the
    /// certificate, an unusable CA, ...).
    #[error("TLS configuration of {listener}: {reason}")]
    Config {
        /// The listener.
        listener: &'static str,
        /// Why.
        reason: String,
    },
}

fn file_error(what: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        what,
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// Whether a listener with a client CA requires a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    /// A client without a certificate fails the handshake.
    Required,
    /// A client may present none (it is then authenticated otherwise, by a
    /// bearer token: `[auth] mode = "jwt_or_mtls"`); one it presents must
    /// still verify against the CA.
    Optional,
}

/// The TLS configuration of one listener, swappable at run time.
#[derive(Debug)]
pub struct ServerTls {
    listener: &'static str,
    settings: ListenerTls,
    alpn: Vec<Vec<u8>>,
    client_certs: ClientCerts,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Loads `settings` for `listener`, offering the `alpn` protocols
    /// (`h2` for gRPC, `http/1.1` for the HTTP listener).
    pub fn load(
        listener: &'static str,
        settings: &ListenerTls,
        alpn: &[&[u8]],
    ) -> Result<Arc<Self>, TlsError> {
        Self::load_with(listener, settings, alpn, ClientCerts::Required)
    }

    /// [`ServerTls::load`], saying whether a client certificate is required
    /// when `settings` names a client CA.
    pub fn load_with(
        listener: &'static str,
        settings: &ListenerTls,
        alpn: &[&[u8]],
        client_certs: ClientCerts,
    ) -> Result<Arc<Self>, TlsError> {
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let config = build(listener, settings, &alpn, client_certs)?;
        Ok(Arc::new(Self {
            listener,
            settings: settings.clone(),
            alpn,
            client_certs,
            current: RwLock::new(config),
        }))
    }

    /// Re-reads the certificate, key, client CA and CRL files; on success
    /// the next connection is served with them. On failure the running
    /// configuration stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.install(self.prepare()?);
        Ok(())
    }

    /// The checking half of [`ServerTls::reload`]: the files read again
    /// and built into a configuration, which is not served yet.
    pub fn prepare(&self) -> Result<Arc<ServerConfig>, TlsError> {
        build(self.listener, &self.settings, &self.alpn, self.client_certs)
    }

    /// Serves `config` (from [`ServerTls::prepare`]) from the next
    /// connection on; open connections keep theirs.
    pub fn install(&self, config: Arc<ServerConfig>) {
        *write(&self.current) = config;
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(read(&self.current).clone())
    }
}

fn build(
    listener: &'static str,
    settings: &ListenerTls,
    alpn: &[Vec<u8>],
    client_certs: ClientCerts,
) -> Result<Arc<ServerConfig>, TlsError> {
    let config_error = |reason: String| TlsError::Config { listener, reason };
    let chain = certificates("certificate", &settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|e| file_error("private key", &settings.key_file, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(e.to_string()))?;
    let builder = match &settings.client_ca_file {
        Some(ca_file) => builder.with_client_cert_verifier(client_certs::verifier(
            listener,
            settings,
            ca_file,
            client_certs,
            provider,
        )?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| config_error(e.to_string()))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
}

/// What the handshakes of a listener report: implemented by the gateway's
/// metrics. Labels are fixed words.
pub trait HandshakeEvents: Send + Sync + 'static {
    /// A handshake on `listener` failed for `cause` (see [`refusal_cause`]).
    fn handshake_failed(&self, listener: &'static str, cause: &'static str);
}

/// Why a handshake failed, as a fixed word: `expired`, `not_yet_valid`,
/// `revoked`, `unknown_issuer` (no trusted CA signed it: none of that
/// name, or one whose signature does not verify), `not_client_auth` (no
/// clientAuth EKU),
/// `bad_certificate` (any other certificate fault), `no_certificate`,
/// `timeout` (see [`HANDSHAKE_TIMEOUT`]) or `protocol`.
pub fn refusal_cause(error: &io::Error) -> &'static str {
    let Some(rustls) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    else {
        return "protocol";
    };
    match rustls {
        rustls::Error::InvalidCertificate(e) => match e {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => "expired",
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "not_yet_valid"
            }
            CertificateError::Revoked => "revoked",
            CertificateError::UnknownIssuer | CertificateError::BadSignature => "unknown_issuer",
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                "not_client_auth"
            }
            _ => "bad_certificate",
        },
        rustls::Error::NoCertificatesPresented => "no_certificate",
        _ => "protocol",
    }
}

/// Connections accepted on a listener, after their TLS handshake.
#[derive(Debug)]
pub struct TlsIncoming<IO = TcpStream> {
    connections: mpsc::Receiver<TlsStream<IO>>,
}

impl<IO> TlsIncoming<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    /// Runs the handshake of `tls` on every connection `accepted` yields
    /// (a listener's, or those a connection gate admitted), until this
    /// value is dropped or `accepted` ends; each failure told to `events`.
    pub fn from_stream<S, E>(
        accepted: S,
        tls: Arc<ServerTls>,
        events: Arc<dyn HandshakeEvents>,
    ) -> Self
    where
        S: Stream<Item = Result<IO, E>> + Send + 'static,
        E: std::fmt::Display + Send,
    {
        let (tx, connections) = mpsc::channel(ACCEPT_QUEUE);
        tokio::spawn(async move {
            tokio::pin!(accepted);
            loop {
                let next = tokio::select! {
                    () = tx.closed() => return,
                    next = accepted.next() => next,
                };
                let io = match next {
                    None => return,
                    Some(Ok(io)) => io,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, listener = tls.listener, "accept failed");
                        continue;
                    }
                };
                let acceptor = tls.acceptor();
                let tx = tx.clone();
                let listener = tls.listener;
                let events = Arc::clone(&events);
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send(stream).await;
                        }
                        Ok(Err(e)) => {
                            let cause = refusal_cause(&e);
                            events.handshake_failed(listener, cause);
                            tracing::info!(listener, cause, error = %e, "TLS handshake refused");
                        }
                        Err(_) => {
                            events.handshake_failed(listener, "timeout");
                            tracing::info!(listener, "TLS handshake timed out");
                        }
                    }
                });
            }
        });
        Self { connections }
    }
}

impl<IO> Stream for TlsIncoming<IO> {
    type Item = io::Result<TlsStream<IO>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.connections.poll_recv(cx).map(|c| c.map(Ok))
    }
}
