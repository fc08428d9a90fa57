//! Key material for servers on loopback: a CA and a serving certificate it
//! signed ([`Serving`]), used by the local control plane ([`Pki`]: valid for
//! `localhost` and `127.0.0.1`, which rustls needs as an IP SAN, plus the
//! service-account signing key) and by the HTTPS Git server.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// Key material of the control plane, PEM-encoded, written to the state
/// directory by the caller.
pub struct Pki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub service_account_key: String,
    pub service_account_public_key: String,
}

impl Pki {
    pub fn generate() -> Result<Pki, rcgen::Error> {
        let serving = Serving::generate(
            "camelk-local-ca",
            "kube-apiserver",
            &[
                "localhost",
                "127.0.0.1",
                "kubernetes",
                "kubernetes.default.svc",
                "10.0.0.1",
            ],
        )?;
        let sa_key = KeyPair::generate()?;
        Ok(Pki {
            ca_cert: serving.ca_cert,
            serving_cert: serving.cert,
            serving_key: serving.key.serialize_pem(),
            service_account_key: sa_key.serialize_pem(),
            service_account_public_key: sa_key.public_key_pem(),
        })
    }
}

/// A fresh CA and one serving certificate it signed.
pub struct Serving {
    /// The CA certificate, PEM: what a client must trust.
    pub ca_cert: String,
    /// The serving certificate, PEM and DER.
    pub cert: String,
    pub cert_der: Vec<u8>,
    pub key: KeyPair,
}

impl Serving {
    /// A CA named `ca_name` and a certificate for `common_name`, valid for
    /// `names` (DNS names or IP addresses).
    pub fn generate(
        ca_name: &str,
        common_name: &str,
        names: &[&str],
    ) -> Result<Serving, rcgen::Error> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, ca_name);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let cert = params.signed_by(&key, &ca)?;
        Ok(Serving {
            ca_cert: ca.pem(),
            cert: cert.pem(),
            cert_der: cert.der().to_vec(),
            key,
        })
    }
}
