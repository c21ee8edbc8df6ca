//! Issuing a self-signed CA and the Service's serving certificate with rcgen.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// How long the CA is valid.
const CA_VALIDITY: Duration = Duration::days(3650);
/// How long the serving certificate is valid; `bootstrap` renews it well before.
const SERVING_VALIDITY: Duration = Duration::days(365);
/// Backdating of `notBefore`, so a node whose clock is a little behind accepts it.
const CLOCK_SKEW: Duration = Duration::hours(1);

/// A CA and the serving certificate and key it signed, all PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The names the API server uses for a Service: `SVC.NS.svc` and
/// `SVC.NS.svc.cluster.local`.
pub fn service_dns_names(service: &str, namespace: &str) -> [String; 2] {
    [
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A new CA and a serving certificate for `dns_names` (ECDSA P-256), valid from now.
pub fn issue(dns_names: &[String]) -> Result<Bundle, rcgen::Error> {
    let now = OffsetDateTime::now_utc();
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = common_name("database-webhook-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = now - CLOCK_SKEW;
    ca.not_after = now + CA_VALIDITY;
    let ca_key = KeyPair::generate()?;
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::new(dns_names.to_vec())?;
    leaf.distinguished_name =
        common_name(dns_names.first().map_or("database-webhook", String::as_str));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.not_before = now - CLOCK_SKEW;
    leaf.not_after = now + SERVING_VALIDITY;
    let key = KeyPair::generate()?;
    let cert_pem = leaf.signed_by(&key, &issuer)?.pem();
    Ok(Bundle {
        ca_pem,
        cert_pem,
        key_pem: key.serialize_pem(),
    })
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}
