//! Reading certificates: their validity dates, whether a CA can be used, and whether a
//! serving certificate chains to its CA, names the Service and matches its key.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use time::OffsetDateTime;

use super::{Ca, Serving};
use crate::tls;

/// The DER of every certificate in `pem`, skipping blocks that do not parse.
pub fn ders(pem: &str) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .map(|der| der.to_vec())
        .collect()
}

/// `der` as a PEM block.
pub fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// `notBefore` and `notAfter` of the first certificate in `pem`.
pub fn validity(pem: &str) -> Result<(OffsetDateTime, OffsetDateTime), String> {
    let der = first(pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|err| format!("not an X.509 certificate: {err}"))?;
    let validity = cert.validity();
    Ok((
        validity.not_before.to_datetime(),
        validity.not_after.to_datetime(),
    ))
}

fn first(pem: &str) -> Result<Vec<u8>, String> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .ok_or("no PEM certificate")?
        .map(|der| der.to_vec())
        .map_err(|err| format!("not PEM: {err}"))
}

/// `Ok` when `ca` is one CA certificate, valid `at`, whose key (when kept) is its own.
pub fn usable_ca(ca: &Ca, at: OffsetDateTime) -> Result<(), String> {
    let der = first(&ca.cert_pem).map_err(|err| format!("ca.crt: {err}"))?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|err| format!("ca.crt is not an X.509 certificate: {err}"))?;
    if !cert.is_ca() {
        return Err("ca.crt is not a CA certificate".into());
    }
    if !cert.validity().is_valid_at(at.into()) {
        return Err("ca.crt is not valid now".into());
    }
    if let Some(key_pem) = &ca.key_pem {
        let key = rcgen::KeyPair::from_pem(key_pem)
            .map_err(|err| format!("ca.key does not load: {err}"))?;
        if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
            return Err("ca.key is not the key of ca.crt".into());
        }
    }
    Ok(())
}

/// `Ok` when `serving` serves every name in `dns_names` at `at`: it loads with its key,
/// chains to `ca_pem` and names each of them; otherwise why not.
pub fn check_serving(
    ca_pem: &str,
    serving: &Serving,
    dns_names: &[String],
    at: OffsetDateTime,
) -> Result<(), String> {
    tls::server_config(serving.cert_pem.as_bytes(), serving.key_pem.as_bytes())
        .map_err(|err| format!("the certificate and key do not load: {err}"))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
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
    let mut chain = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes());
    let leaf = chain
        .next()
        .ok_or("tls.crt holds no certificate")?
        .map_err(|err| format!("tls.crt is not PEM: {err}"))?;
    let intermediates: Vec<_> = chain.filter_map(Result::ok).collect();
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at.unix_timestamp()).unwrap_or_default(),
    ));
    for name in dns_names {
        let server_name =
            ServerName::try_from(name.as_str()).map_err(|err| format!("{name}: {err}"))?;
        verifier
            .verify_server_cert(&leaf, &intermediates, &server_name, &[], at)
            .map_err(|err| format!("tls.crt is not valid for {name} now: {err}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::certs::{issue_ca, issue_serving, service_dns_names};

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    fn names() -> Vec<String> {
        service_dns_names("database-webhook", "database-operator-system").to_vec()
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    fn pair() -> (Ca, Serving) {
        let ca = issue_ca(10 * DAY, now()).expect("CA");
        let serving = issue_serving(&ca, &names(), DAY, now()).expect("serving");
        (ca, serving)
    }

    #[test]
    fn a_fresh_pair_serves_until_it_expires() {
        let (ca, serving) = pair();
        assert_eq!(usable_ca(&ca, now()), Ok(()));
        assert_eq!(
            check_serving(&ca.cert_pem, &serving, &names(), now()),
            Ok(())
        );
        let later = now() + 2 * DAY;
        let reason = check_serving(&ca.cert_pem, &serving, &names(), later).expect_err("expired");
        assert!(reason.contains("now"), "{reason}");
        assert!(usable_ca(&ca, now() + 11 * DAY).is_err());
    }

    #[test]
    fn a_certificate_for_another_service_does_not_serve() {
        let (ca, _) = pair();
        let other = issue_serving(&ca, &service_dns_names("other", "elsewhere"), DAY, now())
            .expect("serving");
        let reason = check_serving(&ca.cert_pem, &other, &names(), now()).expect_err("names");
        assert!(
            reason.contains("database-webhook.database-operator-system.svc"),
            "{reason}"
        );
    }

    #[test]
    fn a_certificate_from_another_ca_or_with_another_key_does_not_serve() {
        let (ca, serving) = pair();
        let (other_ca, other_serving) = pair();
        assert!(check_serving(&other_ca.cert_pem, &serving, &names(), now()).is_err());
        let mismatched = Serving {
            key_pem: other_serving.key_pem,
            ..serving
        };
        assert!(check_serving(&ca.cert_pem, &mismatched, &names(), now()).is_err());
    }

    #[test]
    fn a_ca_with_another_key_or_a_leaf_as_ca_is_not_usable() {
        let (ca, serving) = pair();
        let (other, _) = pair();
        let swapped = Ca {
            key_pem: other.key_pem,
            ..ca
        };
        assert!(usable_ca(&swapped, now()).is_err());
        let leaf = Ca {
            cert_pem: serving.cert_pem,
            key_pem: None,
        };
        assert!(usable_ca(&leaf, now()).is_err());
    }

    #[test]
    fn pem_blocks_round_trip() {
        let (ca, serving) = pair();
        let both = format!("{}{}", ca.cert_pem, serving.cert_pem);
        let blocks = ders(&both);
        assert_eq!(blocks.len(), 2);
        assert_eq!(ders(&pem_of(&blocks[0])), vec![blocks[0].clone()]);
        assert_eq!(
            validity(&pem_of(&blocks[1])).expect("validity"),
            validity(&serving.cert_pem).expect("validity")
        );
    }
}
