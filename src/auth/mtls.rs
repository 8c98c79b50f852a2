//! The identity of a verified mTLS client certificate: its SPIFFE ID, else
//! its first DNS SAN.
//!
//! A SPIFFE ID is taken as the X.509-SVID specification says: the
//! certificate's one and only URI SAN. A certificate that names a
//! `spiffe://` URI beside another URI is no SVID and has no identity at
//! all (not its DNS name either: it claimed to be a workload and is not a
//! well-formed one).
//!
//! The listener's TLS setup has already verified the chain against the
//! client CA, the CRLs and the clientAuth usage (`tls::client_certs`);
//! this only reads the leaf. A certificate with no identity is refused as
//! unauthenticated, with the cause [`NoIdentity::as_str`].

use x509_parser::{extensions::GeneralName, prelude::FromDer as _};

/// An identity read from a client certificate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MtlsIdentity {
    /// A URI SAN `spiffe://trust-domain/path`.
    Spiffe(String),
    /// The first DNS SAN.
    Dns(String),
}

/// Why a verified certificate gives no identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoIdentity {
    /// Neither a SPIFFE ID nor a DNS name (or an unreadable certificate).
    NoName,
    /// A `spiffe://` URI SAN that is not the certificate's only URI SAN.
    NotAnSvid,
}

impl NoIdentity {
    /// The refusal's cause label.
    pub fn as_str(self) -> &'static str {
        match self {
            NoIdentity::NoName => "no_certificate_identity",
            NoIdentity::NotAnSvid => "spiffe_not_single_uri",
        }
    }
}

/// The identity of the leaf certificate `der`.
pub fn identity_of(der: &[u8]) -> Result<MtlsIdentity, NoIdentity> {
    let (_, cert) =
        x509_parser::certificate::X509Certificate::from_der(der).map_err(|_| NoIdentity::NoName)?;
    let san = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .ok_or(NoIdentity::NoName)?;
    let names = &san.value.general_names;
    let uris: Vec<&str> = names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(uri) => Some(*uri),
            _ => None,
        })
        .collect();
    if uris.iter().any(|uri| uri.starts_with("spiffe://")) {
        return match uris.as_slice() {
            [svid] => Ok(MtlsIdentity::Spiffe((*svid).to_owned())),
            _ => Err(NoIdentity::NotAnSvid),
        };
    }
    names
        .iter()
        .find_map(|n| match n {
            GeneralName::DNSName(dns) => Some(MtlsIdentity::Dns((*dns).to_owned())),
            _ => None,
        })
        .ok_or(NoIdentity::NoName)
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
            SanType::URI("spiffe://corp/ns/onboarding/sa/api".try_into().unwrap()),
        ]);
        assert_eq!(
            identity_of(&der),
            Ok(MtlsIdentity::Spiffe(
                "spiffe://corp/ns/onboarding/sa/api".into()
            ))
        );
    }

    #[test]
    fn a_spiffe_id_beside_another_uri_is_no_svid_and_no_identity() {
        for other in [
            "https://not-spiffe.example",
            "spiffe://corp/ns/other/sa/api",
        ] {
            let der = cert(vec![
                SanType::DnsName("api.onboarding.svc".try_into().unwrap()),
                SanType::URI(other.try_into().unwrap()),
                SanType::URI("spiffe://corp/ns/onboarding/sa/api".try_into().unwrap()),
            ]);
            assert_eq!(identity_of(&der), Err(NoIdentity::NotAnSvid), "{other}");
        }
        // A URI that is no SPIFFE ID leaves the DNS name the identity.
        let der = cert(vec![
            SanType::URI("https://not-spiffe.example".try_into().unwrap()),
            SanType::DnsName("api.onboarding.svc".try_into().unwrap()),
        ]);
        assert_eq!(
            identity_of(&der),
            Ok(MtlsIdentity::Dns("api.onboarding.svc".into()))
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
            Ok(MtlsIdentity::Dns("first.example".into()))
        );
        assert_eq!(identity_of(&cert(vec![])), Err(NoIdentity::NoName));
        assert_eq!(identity_of(b"not a certificate"), Err(NoIdentity::NoName));
    }
}
