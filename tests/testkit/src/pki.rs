//! Key material for a local control plane: one CA, the API server's serving
//! certificate (valid for `localhost` and `127.0.0.1`, which rustls needs as an
//! IP SAN) and the service-account signing key.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// PEM-encoded key material, written to the state directory by the caller.
pub struct Pki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub service_account_key: String,
    pub service_account_public_key: String,
}

impl Pki {
    pub fn generate() -> Result<Pki, rcgen::Error> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "camelk-local-ca");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default.svc".to_string(),
            "10.0.0.1".to_string(),
        ])?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let sa_key = KeyPair::generate()?;
        Ok(Pki {
            ca_cert: ca.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            service_account_key: sa_key.serialize_pem(),
            service_account_public_key: sa_key.public_key_pem(),
        })
    }
}
