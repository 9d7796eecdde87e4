//! Who may lead is decided by credentials, not by whoever reaches a port.
//!
//! [`Tls`] holds the PEM material of `--cacert`, `--cert` and `--key`,
//! read and parsed once, before any connection, so a bad file is a
//! configuration error naming its flag rather than a handshake failure
//! later. [`User`] is a name and a [`Password`] whose `Debug` and
//! `Display` never show it: configurations are logged, passwords are not.
//!
//! Every backend takes the same three files: etcd and ZooKeeper as a
//! client of their TLS ports, Raft-vote peers as both ends of mutual TLS
//! (see `backend::raft::transport`).

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Once};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};
use crate::input::MAX_SMALL_FILE;

/// A certificate chain and its key, as PEM.
type PemIdentity = (Arc<[u8]>, Arc<[u8]>);

/// The TLS material of one process: the CA it trusts and, for mutual TLS,
/// its own certificate and key.
#[derive(Clone)]
pub struct Tls {
    ca: Arc<[u8]>,
    identity: Option<PemIdentity>,
    server_name: Option<String>,
    /// Where the material came from, for messages.
    source: String,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("source", &self.source)
            .field("client_certificate", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl Tls {
    /// Reads PEM files: `cacert` (one or more CA certificates), and a
    /// certificate and its private key, which go together.
    ///
    /// Errors: [`Error::Config`] naming `cacert`, `cert` or `key`: a file
    /// that cannot be read, holds no certificate (or key), or a
    /// certificate without its key.
    pub fn from_files(cacert: &Path, cert: Option<&Path>, key: Option<&Path>) -> Result<Tls> {
        let read = |field: &'static str, path: &Path| {
            crate::input::read_regular(path, MAX_SMALL_FILE)
                .map_err(|e| Error::config(field, e.to_string()))
        };
        let ca = read("cacert", cacert)?;
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((read("cert", c)?, read("key", k)?)),
            (Some(_), None) => return Err(Error::config("key", "is required with --cert")),
            (None, Some(_)) => return Err(Error::config("cert", "is required with --key")),
            (None, None) => None,
        };
        let mut tls = Tls::from_pem(ca, identity)?;
        tls.source = match cert {
            Some(c) => format!("{} and {}", cacert.display(), c.display()),
            None => cacert.display().to_string(),
        };
        Ok(tls)
    }

    /// The same from PEM text in memory: `ca`, and `(cert, key)`.
    pub fn from_pem(ca: Vec<u8>, identity: Option<(Vec<u8>, Vec<u8>)>) -> Result<Tls> {
        if certificates(&ca).is_empty() {
            return Err(Error::config("cacert", "holds no PEM certificate"));
        }
        if let Some((cert, key)) = &identity {
            if certificates(cert).is_empty() {
                return Err(Error::config("cert", "holds no PEM certificate"));
            }
            if PrivateKeyDer::from_pem_slice(key).is_err() {
                return Err(Error::config("key", "holds no PEM private key"));
            }
        }
        let tls = Tls {
            ca: ca.into(),
            identity: identity.map(|(c, k)| (c.into(), k.into())),
            server_name: None,
            source: "PEM in memory".into(),
        };
        // What a handshake would find much later, blamed on the network:
        // a PEM block around junk, a key that is not the certificate's.
        tls.roots()?;
        tls.certified_key()?;
        Ok(tls)
    }

    /// Our certificate and key as rustls takes them, checked: the
    /// certificate parses as X.509 and the key is its own (`None`
    /// without a client certificate).
    fn certified_key(&self) -> Result<Option<rustls::sign::CertifiedKey>> {
        let Some((cert, key)) = &self.identity else {
            return Ok(None);
        };
        let chain = certificates(cert);
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|_| Error::config("key", "holds no PEM private key"))?;
        rustls::sign::CertifiedKey::from_der(chain, key, &crypto_provider())
            .map(Some)
            .map_err(|e| match e {
                rustls::Error::InconsistentKeys(_) => {
                    Error::config("key", "is not the private key of the certificate in --cert")
                }
                rustls::Error::InvalidCertificate(e) => {
                    Error::config("cert", format!("not an X.509 certificate: {e}"))
                }
                other => Error::config("key", format!("cannot be used: {other}")),
            })
    }

    /// Checks the servers' certificates against `name` instead of the host
    /// of each endpoint (for endpoints given as IP addresses whose
    /// certificates name a host).
    pub fn with_server_name(mut self, name: &str) -> Result<Tls> {
        if rustls::pki_types::ServerName::try_from(name.to_owned()).is_err() {
            return Err(Error::config(
                "server_name",
                format!("{name:?} is not a DNS name or IP address"),
            ));
        }
        self.server_name = Some(name.to_owned());
        Ok(self)
    }

    /// Whether a client certificate (and key) was given.
    pub fn has_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// The name servers' certificates must carry, if not their host's.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    pub(crate) fn ca_pem(&self) -> &[u8] {
        &self.ca
    }

    pub(crate) fn identity_pem(&self) -> Option<(&[u8], &[u8])> {
        self.identity.as_ref().map(|(c, k)| (&c[..], &k[..]))
    }

    /// The trusted CAs, for rustls.
    pub(crate) fn roots(&self) -> Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(&self.ca) {
            roots
                .add(cert)
                .map_err(|e| Error::config("cacert", format!("not a CA certificate: {e}")))?;
        }
        Ok(roots)
    }

    /// Our certificate chain and key, for rustls.
    pub(crate) fn identity(
        &self,
    ) -> Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let (cert, key) = self.identity.as_ref()?;
        let key = PrivateKeyDer::from_pem_slice(key).ok()?;
        Some((certificates(cert), key))
    }
}

fn certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(|c| c.ok())
        .collect()
}

/// The rustls crypto provider elect uses (ring). Installed as the process
/// default once, so that clients built inside dependencies agree.
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Someone else (the embedding program) may have chosen first.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The environment variable a password may come from (never argv, where
/// every user of the machine can read it). A wrapped command does not
/// inherit it.
pub const PASSWORD_VAR: &str = "ELECT_PASSWORD";

/// A password: shown as `***` whenever printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wraps `password`.
    pub fn new(password: impl Into<String>) -> Password {
        Password(password.into())
    }

    /// Reads a password file: its first line, without the line ending.
    ///
    /// Errors: [`Error::Config`] naming `password_file` when it cannot be
    /// read or is empty.
    pub fn from_file(path: &Path) -> Result<Password> {
        let text = crate::input::read_regular_text(path, MAX_SMALL_FILE)
            .map_err(|e| Error::config("password_file", e.to_string()))?;
        let line = text.lines().next().unwrap_or("");
        if line.is_empty() {
            return Err(Error::config(
                "password_file",
                format!("{}: the first line is empty", path.display()),
            ));
        }
        Ok(Password(line.to_owned()))
    }

    /// The password itself, for the one place that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A user of etcd's auth or ZooKeeper's digest scheme.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    name: String,
    password: Password,
}

impl User {
    /// `name` with `password`.
    ///
    /// Errors: [`Error::Config`] naming `user` when the name is empty or
    /// holds a `:` (ZooKeeper's digest separates name and password with
    /// one).
    pub fn new(name: &str, password: Password) -> Result<User> {
        if name.is_empty() || name.contains(':') {
            return Err(Error::config(
                "user",
                format!("{name:?}: a user name is not empty and has no ':'"),
            ));
        }
        Ok(User {
            name: name.to_owned(),
            password,
        })
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn password(&self) -> &Password {
        &self.password
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        let user = User::new("alice", Password::new("hunter2")).unwrap();
        assert!(!format!("{user:?}").contains("hunter2"));
        assert_eq!(user.password().to_string(), "***");
        assert_eq!(user.password().expose(), "hunter2");
    }

    #[test]
    fn bad_material_names_its_flag() {
        let err = |r: Result<Tls>| match r.unwrap_err() {
            Error::Config { field, .. } => field,
            other => panic!("{other}"),
        };
        assert_eq!(err(Tls::from_pem(b"junk".to_vec(), None)), "cacert");
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        let ca_pem = ca.cert.pem().into_bytes();
        assert!(Tls::from_pem(ca_pem.clone(), None).is_ok());
        assert_eq!(
            err(Tls::from_pem(
                ca_pem.clone(),
                Some((b"x".to_vec(), b"y".to_vec()))
            )),
            "cert"
        );
        assert_eq!(
            err(Tls::from_pem(ca_pem.clone(), Some((ca_pem, b"y".to_vec())))),
            "key"
        );
        assert!(User::new("a:b", Password::new("p")).is_err());
        // A PEM block around junk, and a key that is not the certificate's.
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        assert_eq!(err(Tls::from_pem(junk.clone(), None)), "cacert");
        let leaf = rcgen::generate_simple_self_signed(vec!["leaf".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["other".into()]).unwrap();
        let (leaf_pem, other_key) = (
            leaf.cert.pem().into_bytes(),
            other.signing_key.serialize_pem(),
        );
        assert_eq!(
            err(Tls::from_pem(
                ca.cert.pem().into_bytes(),
                Some((junk, leaf.signing_key.serialize_pem().into_bytes()))
            )),
            "cert"
        );
        assert_eq!(
            err(Tls::from_pem(
                ca.cert.pem().into_bytes(),
                Some((leaf_pem.clone(), other_key.into_bytes()))
            )),
            "key"
        );
        let key = leaf.signing_key.serialize_pem().into_bytes();
        assert!(Tls::from_pem(ca.cert.pem().into_bytes(), Some((leaf_pem, key))).is_ok());
    }
}
