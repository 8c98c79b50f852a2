//! Which client certificates a listener with a client CA accepts.
//!
//! rustls' webpki verifier checks the chain to the client CA, the
//! validity period and, with `crl_files`, revocation (an end-entity or an
//! intermediate listed in a CRL of its issuer; a certificate whose issuer
//! has no CRL is accepted). It refuses a certificate whose extended key
//! usage leaves out clientAuth, but accepts one with no EKU at all, as RFC
//! 5280 allows: [`ClientAuthOnly`] refuses that too, unless the listener
//! says `allow_no_eku`, so a server certificate of the same CA is never a
//! client identity.

use std::{path::Path, sync::Arc};

use tokio_rustls::rustls::{
    self, CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore,
    SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime, pem::PemObject},
    server::{
        WebPkiClientVerifier,
        danger::{ClientCertVerified, ClientCertVerifier},
    },
};
use x509_parser::prelude::FromDer as _;

use super::{ClientCerts, ListenerTls, TlsError, certificates, file_error};

/// The verifier of `settings`' client certificates, its files read now.
pub(super) fn verifier(
    listener: &'static str,
    settings: &ListenerTls,
    ca_file: &Path,
    client_certs: ClientCerts,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates("client CA", ca_file)? {
        roots
            .add(cert)
            .map_err(|e| file_error("client CA", ca_file, e))?;
    }
    let mut crls = Vec::new();
    for path in &settings.crl_files {
        crls.extend(revocation_lists(path)?);
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .with_crls(crls)
        .allow_unknown_revocation_status();
    let builder = match client_certs {
        ClientCerts::Required => builder,
        ClientCerts::Optional => builder.allow_unauthenticated(),
    };
    let webpki = builder.build().map_err(|e| TlsError::Config {
        listener,
        reason: e.to_string(),
    })?;
    Ok(Arc::new(ClientAuthOnly {
        webpki,
        allow_no_eku: settings.allow_no_eku,
    }))
}

/// The PEM CRLs of `path`: at least one.
fn revocation_lists(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let crls = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|e| file_error("CRL", path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error("CRL", path, e))?;
    if crls.is_empty() {
        return Err(file_error("CRL", path, "no PEM X509 CRL in the file"));
    }
    Ok(crls)
}

/// webpki's verdict, and then an extended key usage that names clientAuth
/// (or none at all, with `allow_no_eku`).
#[derive(Debug)]
struct ClientAuthOnly {
    webpki: Arc<dyn ClientCertVerifier>,
    allow_no_eku: bool,
}

impl ClientCertVerifier for ClientAuthOnly {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .webpki
            .verify_client_cert(end_entity, intermediates, now)?;
        match client_auth_eku(end_entity) {
            Eku::ClientAuth => Ok(verified),
            Eku::Absent if self.allow_no_eku => Ok(verified),
            Eku::Absent | Eku::Other => Err(CertificateError::InvalidPurpose.into()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// What a certificate's extended key usage says of client authentication.
#[derive(Debug, PartialEq, Eq)]
enum Eku {
    /// The extension names clientAuth.
    ClientAuth,
    /// No extension: any usage, per RFC 5280.
    Absent,
    /// The extension leaves clientAuth out, or cannot be read.
    Other,
}

fn client_auth_eku(der: &[u8]) -> Eku {
    let Ok((_, cert)) = x509_parser::certificate::X509Certificate::from_der(der) else {
        return Eku::Other;
    };
    match cert.extended_key_usage() {
        Ok(Some(eku)) if eku.value.client_auth => Eku::ClientAuth,
        Ok(None) => Eku::Absent,
        Ok(Some(_)) | Err(_) => Eku::Other,
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair};

    use super::*;

    fn with_eku(purposes: Vec<ExtendedKeyUsagePurpose>) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["client.test".to_owned()]).unwrap();
        params.extended_key_usages = purposes;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn only_an_eku_naming_client_auth_says_client() {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        assert_eq!(
            client_auth_eku(&with_eku(vec![ClientAuth])),
            Eku::ClientAuth
        );
        assert_eq!(
            client_auth_eku(&with_eku(vec![ServerAuth, ClientAuth])),
            Eku::ClientAuth
        );
        assert_eq!(client_auth_eku(&with_eku(vec![ServerAuth])), Eku::Other);
        assert_eq!(client_auth_eku(&with_eku(vec![])), Eku::Absent);
        assert_eq!(client_auth_eku(b"not a certificate"), Eku::Other);
    }
}
