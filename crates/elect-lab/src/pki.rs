//! A throwaway certificate authority for secured labs: made when the lab
//! starts, kept in its directory, gone with it. Nothing is committed.
//!
//! Certificates are issued for both server and client use (etcd and
//! ZooKeeper servers, Raft-vote peers that are both), with the subject
//! alternative names asked for: host addresses, `localhost`, a peer's id.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Issued {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// A CA whose certificate is `dir/ca.pem`.
pub struct Authority {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(format!("{what}: {e}")))
}

impl Authority {
    /// A new CA named `name`, its files in `dir` (created).
    pub fn new(dir: &Path, name: &str) -> Result<Authority> {
        std::fs::create_dir_all(dir)?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| failed("CA parameters", e))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name = distinguished(name);
        let key = KeyPair::generate().map_err(|e| failed("CA key", e))?;
        let issuer =
            CertifiedIssuer::self_signed(params, key).map_err(|e| failed("CA certificate", e))?;
        std::fs::write(dir.join("ca.pem"), issuer.pem())?;
        Ok(Authority {
            dir: dir.to_owned(),
            issuer,
        })
    }

    /// The CA certificate's file.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Issues `name.pem` and `name-key.pem`: common name `name`, valid for
    /// `sans` (IP addresses or DNS names), for servers and clients alike.
    pub fn issue(&self, name: &str, sans: &[&str]) -> Result<Issued> {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(|e| failed("certificate parameters", e))?;
        params.distinguished_name = distinguished(name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().map_err(|e| failed("key", e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| failed("certificate", e))?;
        let issued = Issued {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        };
        std::fs::write(&issued.cert, cert.pem())?;
        write_private(&issued.key, &key.serialize_pem())?;
        Ok(issued)
    }
}

fn distinguished(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Writes a secret readable by its owner only.
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use elect::credentials::Tls;

    #[test]
    fn issued_certificates_load_as_tls_material() {
        let dir = std::env::temp_dir().join(format!("elect-pki-{}", std::process::id()));
        let ca = Authority::new(&dir, "test CA").unwrap();
        let peer = ca.issue("p1", &["p1", "127.0.0.1"]).unwrap();
        let tls = Tls::from_files(&ca.ca(), Some(&peer.cert), Some(&peer.key)).unwrap();
        assert!(tls.has_identity());
        let mode = std::fs::metadata(&peer.key).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
