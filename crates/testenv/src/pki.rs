//! A throw-away certificate authority for one control plane: the API server's serving
//! certificate, client certificates for users, and the service-account signing key.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA that issues serving and client certificates (ECDSA P-256).
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl TestCa {
    /// Creates a new self-signed CA named `common_name`.
    pub fn new(common_name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM, for trust bundles (`caBundle`, kubeconfig).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn issue_server(&self, names: &[&str]) -> Result<CertifiedKey, rcgen::Error> {
        let sans: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name = name(names.first().copied().unwrap_or("server"), &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.sign(&params)
    }

    /// A client certificate for user `user` in `groups` (CN and O, as Kubernetes reads them).
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertifiedKey, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(user, groups);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Result<CertifiedKey, rcgen::Error> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A fresh key pair as (private PKCS#8 PEM, public PEM), e.g. for service-account tokens.
pub fn key_pair_pem() -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

fn name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}
