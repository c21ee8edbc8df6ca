//! Whether an existing CA and serving certificate can be kept: the certificate chains to
//! the CA, names the Service, matches its key and stays valid for a while yet.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::Bundle;
use crate::tls;

/// A certificate with less validity left than this is replaced.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// `Ok` when `bundle` serves `dns_names` now and still will after [`RENEW_BEFORE`];
/// otherwise why it must be replaced.
pub fn check(bundle: &Bundle, dns_names: &[String]) -> Result<(), String> {
    tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())
        .map_err(|err| format!("the certificate and key do not load: {err}"))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle.ca_pem.as_bytes()) {
        let ca = ca.map_err(|err| format!("ca.crt is not PEM: {err}"))?;
        roots
            .add(ca)
            .map_err(|err| format!("ca.crt is not a CA certificate: {err}"))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|err| format!("ca.crt cannot verify: {err}"))?;
    let mut chain = CertificateDer::pem_slice_iter(bundle.cert_pem.as_bytes());
    let leaf = chain
        .next()
        .ok_or("tls.crt holds no certificate")?
        .map_err(|err| format!("tls.crt is not PEM: {err}"))?;
    let intermediates: Vec<_> = chain.filter_map(Result::ok).collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    for name in dns_names {
        let server_name =
            ServerName::try_from(name.as_str()).map_err(|err| format!("{name}: {err}"))?;
        for (when, at) in [("now", now), ("in 30 days", now + RENEW_BEFORE)] {
            verifier
                .verify_server_cert(
                    &leaf,
                    &intermediates,
                    &server_name,
                    &[],
                    UnixTime::since_unix_epoch(at),
                )
                .map_err(|err| format!("not valid for {name} {when}: {err}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{issue, service_dns_names};

    fn names() -> Vec<String> {
        service_dns_names("database-webhook", "database-operator-system").to_vec()
    }

    #[test]
    fn a_fresh_bundle_is_kept() {
        let bundle = issue(&names()).expect("issued");
        assert_eq!(check(&bundle, &names()), Ok(()));
    }

    #[test]
    fn a_bundle_for_another_service_is_replaced() {
        let bundle = issue(&service_dns_names("other", "elsewhere")).expect("issued");
        let reason = check(&bundle, &names()).expect_err("wrong names");
        assert!(
            reason.contains("database-webhook.database-operator-system.svc"),
            "{reason}"
        );
    }

    #[test]
    fn a_certificate_from_another_ca_is_replaced() {
        let mut bundle = issue(&names()).expect("issued");
        bundle.ca_pem = issue(&names()).expect("issued").ca_pem;
        assert!(check(&bundle, &names()).is_err());
    }

    #[test]
    fn a_key_that_does_not_match_is_replaced() {
        let mut bundle = issue(&names()).expect("issued");
        bundle.key_pem = issue(&names()).expect("issued").key_pem;
        assert!(check(&bundle, &names()).is_err());
    }

    #[test]
    fn a_certificate_expiring_within_30_days_is_replaced() {
        let mut params = rcgen::CertificateParams::new(names()).expect("params");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(10);
        let key = rcgen::KeyPair::generate().expect("key");
        let issuer_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = ca_params.self_signed(&issuer_key).expect("ca").pem();
        let issuer = rcgen::Issuer::new(ca_params, issuer_key);
        let cert_pem = params.signed_by(&key, &issuer).expect("leaf").pem();
        let bundle = Bundle {
            ca_pem,
            cert_pem,
            key_pem: key.serialize_pem(),
        };
        let reason = check(&bundle, &names()).expect_err("expires soon");
        assert!(reason.contains("in 30 days"), "{reason}");
    }
}
