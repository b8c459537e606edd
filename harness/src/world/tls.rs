//! The certificates of a scenario's TLS Redis, made when it starts and
//! removed with it: a certificate authority of the run's own, the server's
//! certificate for `localhost` and 127.0.0.1 signed by it, and (for a
//! scenario whose server must not be trusted) another authority that signed
//! nothing the server shows. The instances trust an authority the way an
//! operator gives a private CA to rustls-native-certs: `SSL_CERT_FILE`.
//! A process started with that variable (a benchmark that runs itself
//! again, so its own client trusts the authority) opens the files its
//! parent made ([`TlsFiles::open`]).

use std::path::{Path, PathBuf};

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
    /// A directory opened holds no authority (`ca.pem`) to read.
    #[error("reading the test certificates in {}: {source}", dir.display())]
    Open {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The files of one TLS Redis, in a directory of their own.
pub struct TlsFiles {
    dir: PathBuf,
    /// The temporary directory, removed with these files, when they were
    /// made here; none when another process made them ([`TlsFiles::open`]).
    _made: Option<tempfile::TempDir>,
}

impl TlsFiles {
    /// Makes the authority, the server's key and certificate, and another
    /// authority.
    pub fn make() -> Result<TlsFiles, TlsError> {
        let made = tempfile::Builder::new().prefix("harness-tls-").tempdir()?;
        let files = TlsFiles {
            dir: made.path().to_owned(),
            _made: Some(made),
        };
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

    /// The files another process made in `dir` ([`TlsFiles::dir`]), left
    /// there when these are dropped: that process removes them.
    pub fn open(dir: &Path) -> Result<TlsFiles, TlsError> {
        let files = TlsFiles {
            dir: dir.to_owned(),
            _made: None,
        };
        std::fs::metadata(files.ca()).map_err(|source| TlsError::Open {
            dir: dir.to_owned(),
            source,
        })?;
        Ok(files)
    }

    /// The directory they are in, for [`TlsFiles::open`] in another process.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_opened_elsewhere_are_the_same_and_left_to_their_maker() {
        let made = TlsFiles::make().expect("make");
        let opened = TlsFiles::open(made.dir()).expect("open");
        assert_eq!(opened.ca(), made.ca());
        assert_eq!(opened.certificate(), made.certificate());
        drop(opened);
        assert!(made.ca().exists(), "dropping the opened files removed them");
        let dir = made.dir().to_owned();
        drop(made);
        assert!(!dir.exists(), "the maker left {}", dir.display());
        match TlsFiles::open(&dir) {
            Err(TlsError::Open { dir: d, .. }) => assert_eq!(d, dir),
            Err(other) => panic!("not Open: {other}"),
            Ok(_) => panic!("opened a directory with no authority"),
        }
    }
}
