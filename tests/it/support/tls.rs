//! TLS for tests: a certificate authority made per test (rcgen), the
//! certificates it signs in files, and a TLS listener for axum servers
//! (the OTLP/HTTP collector over TLS).
//!
//! Listener TLS, mTLS, certificate reload and the exporter's private-CA
//! settings are all proven against these, never against a fixed
//! certificate checked in.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        self,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

/// A certificate and its key, PEM and DER.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
}

/// A CA made for one test, its certificate in a file of its own.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "idgate test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key"))
            .expect("CA certificate");
        let dir = super::temp::dir("ca");
        std::fs::write(dir.path().join("ca.pem"), issuer.pem()).expect("CA file");
        TestCa { issuer, dir }
    }

    /// The CA certificate's file (PEM).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Writes `leaf` as `NAME.pem` and `NAME.key` beside the CA file;
    /// returns both paths.
    pub fn write(&self, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
        let cert = self.dir.path().join(format!("{name}.pem"));
        let key = self.dir.path().join(format!("{name}.key"));
        std::fs::write(&cert, &leaf.cert_pem).expect("certificate file");
        std::fs::write(&key, &leaf.key_pem).expect("key file");
        (cert, key)
    }

    /// A certificate for `names` (DNS names or IP addresses), for a
    /// server or a client (both extended key usages).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .expect("params");
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.sign(params)
    }

    /// A certificate of `params`, signed by this CA.
    pub fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    /// Writes, as `NAME.crl.pem`, a CRL of this CA that revokes the
    /// certificates of `serials`; returns its path.
    pub fn write_crl(&self, name: &str, serials: &[u64]) -> PathBuf {
        let now = time::OffsetDateTime::now_utc();
        let crl = CertificateRevocationListParams {
            this_update: now - time::Duration::hours(1),
            next_update: now + time::Duration::days(1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|serial| RevokedCertParams {
                    serial_number: SerialNumber::from(*serial),
                    revocation_time: now - time::Duration::minutes(1),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&self.issuer)
        .expect("CRL");
        let path = self.dir.path().join(format!("{name}.crl.pem"));
        std::fs::write(&path, crl.pem().expect("CRL PEM")).expect("CRL file");
        path
    }
}

impl TestCa {
    /// A client certificate whose subject alternative names are `sans`
    /// (a SPIFFE ID is a `SanType::URI`).
    pub fn leaf_with_sans(&self, sans: Vec<rcgen::SanType>) -> Leaf {
        self.sign(client_params(sans))
    }
}

/// The parameters of a client certificate (clientAuth EKU) whose subject
/// alternative names are `sans`, for tests to change before signing.
pub fn client_params(sans: Vec<rcgen::SanType>) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.subject_alt_names = sans;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
}

/// Accepts TCP connections and completes their TLS handshake; a failed
/// handshake is dropped and the next connection awaited.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, identity: &Leaf) -> TlsListener {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(
                vec![identity.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone())),
            )
            .expect("server certificate");
        TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
