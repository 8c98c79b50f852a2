//! The identity of a verified mTLS client certificate: its SPIFFE ID (the
//! first URI SAN that starts with `spiffe://`), else its first DNS SAN.
//!
//! The listener's TLS setup has already verified the chain against the
//! client CA; this only reads the leaf. A certificate with neither name has
//! no identity (refused as unauthenticated).

use x509_parser::{extensions::GeneralName, prelude::FromDer as _};

/// An identity read from a client certificate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MtlsIdentity {
    /// A URI SAN `spiffe://trust-domain/path`.
    Spiffe(String),
    /// The first DNS SAN.
    Dns(String),
}

/// The identity of the leaf certificate `der`, if it names one.
pub fn identity_of(der: &[u8]) -> Option<MtlsIdentity> {
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    let names = &san.value.general_names;
    let spiffe = names.iter().find_map(|n| match n {
        GeneralName::URI(uri) if uri.starts_with("spiffe://") => Some(*uri),
        _ => None,
    });
    if let Some(uri) = spiffe {
        return Some(MtlsIdentity::Spiffe(uri.to_owned()));
    }
    names.iter().find_map(|n| match n {
        GeneralName::DNSName(dns) => Some(MtlsIdentity::Dns((*dns).to_owned())),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair, SanType};

    use super::*;

    fn cert(sans: Vec<SanType>) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_spiffe_id_wins_over_dns_names() {
        let der = cert(vec![
            SanType::DnsName("api.onboarding.svc".try_into().unwrap()),
            SanType::URI("https://not-spiffe.example".try_into().unwrap()),
            SanType::URI("spiffe://corp/ns/onboarding/sa/api".try_into().unwrap()),
        ]);
        assert_eq!(
            identity_of(&der),
            Some(MtlsIdentity::Spiffe(
                "spiffe://corp/ns/onboarding/sa/api".into()
            ))
        );
    }

    #[test]
    fn else_the_first_dns_name_and_else_nothing() {
        let der = cert(vec![
            SanType::DnsName("first.example".try_into().unwrap()),
            SanType::DnsName("second.example".try_into().unwrap()),
        ]);
        assert_eq!(
            identity_of(&der),
            Some(MtlsIdentity::Dns("first.example".into()))
        );
        assert_eq!(identity_of(&cert(vec![])), None);
        assert_eq!(identity_of(b"not a certificate"), None);
    }
}
