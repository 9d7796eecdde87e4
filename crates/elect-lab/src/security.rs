//! A secured lab's credentials: the CA, a client certificate, etcd's users
//! and their passwords, made when the lab starts and kept in its directory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::pki;

/// A secured lab's credentials, all made when it started and kept in its
/// directory:
/// - etcd serves clients over TLS only, wants a client certificate from
///   the lab's CA (`--client-cert-auth`) and has auth enabled: `root`,
///   and [`Security::user`], whose role may read and write only under
///   [`Security::prefix`]; simple tokens expire after
///   [`Spec::etcd_auth_token_ttl`] (by default [`ETCD_AUTH_TOKEN_TTL`],
///   so every test outlives a few);
/// - ZooKeeper serves TLS clients (a client certificate required) on
///   [`zk::SECURE_PORT`], the members' client address; the plain port
///   2181 stays for health checks and for tools without TLS, and digest
///   credentials protect elect's znodes there as well;
/// - Raft-vote peers talk mutual TLS, each with a certificate naming its
///   id; [`Security::client`] may query them.
///
/// [`Spec::etcd_auth_token_ttl`]: crate::Spec::etcd_auth_token_ttl
/// [`ETCD_AUTH_TOKEN_TTL`]: crate::ETCD_AUTH_TOKEN_TTL
/// [`zk::SECURE_PORT`]: crate::zk::SECURE_PORT
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Security {
    /// The CA certificate every member and client trusts.
    pub ca: PathBuf,
    /// A client certificate and key from the CA (common name
    /// `elect-client`, which is no etcd user).
    pub client: pki::Issued,
    /// The etcd `root` user's password file.
    pub root_password_file: PathBuf,
    /// A user limited to [`Security::prefix`].
    pub user: String,
    /// Its password file.
    pub password_file: PathBuf,
    /// The only keys `user` may read and write: elections under it.
    pub prefix: String,
}

impl Security {
    /// `--cacert`, `--cert` and `--key` for [`Security::client`].
    pub fn tls_flags(&self) -> Vec<String> {
        [
            "--cacert",
            &self.ca.display().to_string(),
            "--cert",
            &self.client.cert.display().to_string(),
            "--key",
            &self.client.key.display().to_string(),
        ]
        .map(str::to_owned)
        .into()
    }

    /// `--user` and `--password-file` for [`Security::user`].
    pub fn user_flags(&self) -> Vec<String> {
        vec![
            "--user".into(),
            self.user.clone(),
            "--password-file".into(),
            self.password_file.display().to_string(),
        ]
    }

    /// Makes the client certificate and the passwords.
    pub(crate) fn create(ca: &pki::Authority) -> Result<Security> {
        let dir = ca.ca().parent().map(Path::to_owned).unwrap_or_default();
        let client = ca.issue("elect-client", &["elect-client"])?;
        let password = |name: &str| -> Result<PathBuf> {
            let path = dir.join(format!("{name}.password"));
            let mut bytes = [0u8; 16];
            std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
            let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            pki::write_private(&path, &secret)?;
            Ok(path)
        };
        Ok(Security {
            ca: ca.ca(),
            client,
            root_password_file: password("root")?,
            user: "elect".into(),
            password_file: password("elect")?,
            prefix: "secured/".into(),
        })
    }
}
