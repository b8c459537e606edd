//! The certificates of a scenario's TLS Redis, made when it starts and
//! removed with it: a certificate authority of the run's own, the server's
//! certificate for `localhost` and 127.0.0.1 signed by it, and (for a
//! scenario whose server must not be trusted) another authority that signed
//! nothing the server shows. The instances trust an authority the way an
//! operator gives a private CA to rustls-native-certs: `SSL_CERT_FILE`.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// Why the certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused the parameters or could not sign.
    #[error("making the test certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("writing the test certificates: {0}")]
    Write(#[from] std::io::Error),
}

/// The files of one TLS Redis, in a directory of their own.
pub struct TlsFiles {
    dir: tempfile::TempDir,
}

impl TlsFiles {
    /// Makes the authority, the server's key and certificate, and another
    /// authority.
    pub fn make() -> Result<TlsFiles, TlsError> {
        let dir = tempfile::Builder::new().prefix("harness-tls-").tempdir()?;
        let files = TlsFiles { dir };
        let (ca_pem, issuer) = authority("harness scenario CA")?;
        let (other_pem, _) = authority("harness scenario CA, not the server's")?;
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate()?;
        let certificate = params.signed_by(&key, &issuer)?;
        std::fs::write(files.ca(), ca_pem)?;
        std::fs::write(files.other_ca(), other_pem)?;
        std::fs::write(files.certificate(), certificate.pem())?;
        std::fs::write(files.key(), key.serialize_pem())?;
        Ok(files)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The authority that signed the server's certificate (PEM).
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// An authority that signed nothing the server shows (PEM).
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.pem")
    }

    /// The server's certificate (PEM), for `localhost` and 127.0.0.1.
    pub fn certificate(&self) -> PathBuf {
        self.path("server.pem")
    }

    /// The server's private key (PEM).
    pub fn key(&self) -> PathBuf {
        self.path("server.key")
    }
}

/// A self-signed authority: its certificate (PEM) and what signs with it.
fn authority(name: &str) -> Result<(String, Issuer<'static, KeyPair>), TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate()?;
    let certificate = params.self_signed(&key)?;
    Ok((certificate.pem(), Issuer::new(params, key)))
}
