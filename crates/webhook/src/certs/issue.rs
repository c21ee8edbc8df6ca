//! Issuing a self-signed CA and the Service's serving certificate with rcgen.

use std::fmt;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;

use super::verify;

/// Backdating of `notBefore`, so a node whose clock is a little behind accepts it.
const CLOCK_SKEW: time::Duration = time::Duration::hours(1);

/// A CA certificate, and its key when this webhook issued it. A CA from elsewhere (or
/// from a version that did not keep the key) has none and cannot sign.
#[derive(Clone, PartialEq, Eq)]
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: Option<String>,
}

/// A serving certificate (leaf first) and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct Serving {
    pub cert_pem: String,
    pub key_pem: String,
}

// Never print a key.
impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ca")
            .field("not_after", &verify::validity(&self.cert_pem).map(|v| v.1))
            .field("key", &self.key_pem.as_ref().map(|_| "(kept)"))
            .finish()
    }
}

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("not_after", &verify::validity(&self.cert_pem).map(|v| v.1))
            .finish_non_exhaustive()
    }
}

/// Why a certificate could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("{0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("the CA's key is not kept, so it cannot sign")]
    NoCaKey,
    #[error("reading the CA certificate: {0}")]
    CaCertificate(String),
    #[error("a validity of {0:?} ends past what a certificate can say")]
    Validity(Duration),
}

/// `now + validity`, when a certificate can carry it.
fn end_of(now: OffsetDateTime, validity: Duration) -> Result<OffsetDateTime, IssueError> {
    time::Duration::try_from(validity)
        .ok()
        .and_then(|validity| now.checked_add(validity))
        .filter(|end| end.year() <= 9999)
        .ok_or(IssueError::Validity(validity))
}

/// The names the API server uses for a Service: `SVC.NS.svc` and
/// `SVC.NS.svc.cluster.local`.
pub fn service_dns_names(service: &str, namespace: &str) -> [String; 2] {
    [
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A new CA (ECDSA P-256) valid from `now` for `validity`. Its common name carries the
/// time of issue, so the CAs of one caBundle can be told apart.
pub fn issue_ca(validity: Duration, now: OffsetDateTime) -> Result<Ca, IssueError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = common_name(&format!("database-webhook-ca-{}", now.unix_timestamp()));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = now - CLOCK_SKEW;
    ca.not_after = end_of(now, validity)?;
    let key = KeyPair::generate()?;
    Ok(Ca {
        cert_pem: ca.self_signed(&key)?.pem(),
        key_pem: Some(key.serialize_pem()),
    })
}

/// A serving certificate for `dns_names` (ECDSA P-256) signed by `ca`, valid from `now`
/// for `validity` but never past the CA's own end.
pub fn issue_serving(
    ca: &Ca,
    dns_names: &[String],
    validity: Duration,
    now: OffsetDateTime,
) -> Result<Serving, IssueError> {
    let ca_key = KeyPair::from_pem(ca.key_pem.as_deref().ok_or(IssueError::NoCaKey)?)?;
    let (_, ca_end) = verify::validity(&ca.cert_pem).map_err(IssueError::CaCertificate)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let mut leaf = CertificateParams::new(dns_names.to_vec())?;
    leaf.distinguished_name =
        common_name(dns_names.first().map_or("database-webhook", String::as_str));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.not_before = now - CLOCK_SKEW;
    leaf.not_after = end_of(now, validity)?.min(ca_end);
    let key = KeyPair::generate()?;
    Ok(Serving {
        cert_pem: leaf.signed_by(&key, &issuer)?.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// When a serving certificate issued by `ca` at `now` would expire.
pub fn serving_end(
    ca: &Ca,
    validity: Duration,
    now: OffsetDateTime,
) -> Result<OffsetDateTime, IssueError> {
    let (_, ca_end) = verify::validity(&ca.cert_pem).map_err(IssueError::CaCertificate)?;
    Ok(end_of(now, validity)?.min(ca_end))
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let now = OffsetDateTime::now_utc();
        let ca = issue_ca(10 * DAY, now).expect("CA");
        let serving = issue_serving(&ca, &["a.b.svc".to_owned()], 30 * DAY, now).expect("leaf");
        let (_, ca_end) = verify::validity(&ca.cert_pem).expect("CA dates");
        let (start, end) = verify::validity(&serving.cert_pem).expect("leaf dates");
        assert_eq!(end, ca_end);
        assert!(start < now);
        assert_eq!(serving_end(&ca, 30 * DAY, now).ok(), Some(ca_end));
    }

    #[test]
    fn a_validity_past_the_year_9999_is_refused() {
        let now = OffsetDateTime::now_utc();
        assert!(matches!(
            issue_ca(Duration::from_secs(u64::MAX), now),
            Err(IssueError::Validity(_))
        ));
    }

    #[test]
    fn a_ca_without_its_key_cannot_sign() {
        let now = OffsetDateTime::now_utc();
        let ca = Ca {
            key_pem: None,
            ..issue_ca(DAY, now).expect("CA")
        };
        assert!(matches!(
            issue_serving(&ca, &["a.b.svc".to_owned()], DAY, now),
            Err(IssueError::NoCaKey)
        ));
    }

    #[test]
    fn debug_never_shows_a_key() {
        let now = OffsetDateTime::now_utc();
        let ca = issue_ca(DAY, now).expect("CA");
        let serving = issue_serving(&ca, &["a.b.svc".to_owned()], DAY, now).expect("leaf");
        let printed = format!("{ca:?} {serving:?}");
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
    }
}
