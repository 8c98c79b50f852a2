//! TLS and mutual TLS on the gateway's own listeners.
//!
//! - [`TlsConfig`] (`[tls.grpc]`, `[tls.http]`, `[tls.admin]`): per
//!   listener, a certificate chain and its key, and optionally the CAs
//!   whose client certificates are required (mTLS).
//! - [`ServerTls`]: the loaded rustls configuration of one listener;
//!   [`ServerTls::reload`] re-reads the files (SIGHUP) and swaps it in: the
//!   next connection is served with the new certificate, connections
//!   already open keep theirs.
//! - [`TlsIncoming`]: accepted connections after their handshake, for
//!   tonic (`serve_with_incoming`) and axum (`axum::serve`), from a
//!   listener or from any stream of accepted connections
//!   ([`TlsIncoming::from_stream`], e.g. those a connection gate admits).
//!   Handshakes run in tasks of their own, so a slow or silent client
//!   holds up no one; a failed one is logged and dropped.

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
        self, RootCertStore, ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
        server::WebPkiClientVerifier,
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
}

/// Why a listener's TLS could not be set up. Names files, never their
/// contents.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{what} {}: {reason}", path.display())]
    File {
        /// `certificate`, `private key` or `client CA`.
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

    /// Re-reads the certificate, key and client CA files; on success the
    /// next connection is served with them. On failure the running
    /// configuration stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build(self.listener, &self.settings, &self.alpn, self.client_certs)?;
        *write(&self.current) = config;
        Ok(())
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
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("client CA", path)? {
                roots
                    .add(cert)
                    .map_err(|e| file_error("client CA", path, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match client_certs {
                ClientCerts::Required => verifier,
                ClientCerts::Optional => verifier.allow_unauthenticated(),
            };
            let verifier = verifier.build().map_err(|e| config_error(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| config_error(e.to_string()))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
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
    /// value is dropped or `accepted` ends.
    pub fn from_stream<S, E>(accepted: S, tls: Arc<ServerTls>) -> Self
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
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send(stream).await;
                        }
                        Ok(Err(e)) => {
                            tracing::info!(listener, error = %e, "TLS handshake refused");
                        }
                        Err(_) => {
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
