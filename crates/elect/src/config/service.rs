//! The service an election runs on, one type per backend, each checked
//! once when it is built: etcd's member URLs, ZooKeeper's connect string,
//! the Raft-vote peers. The backends read them through accessors and
//! never split or join a flag's text again.
//!
//! ```
//! use elect::config::{RaftPeers, Service};
//! use elect::Backend;
//!
//! let peers = RaftPeers::parse("a=127.0.0.1:7001,b=127.0.0.1:7002,c=127.0.0.1:7003")?;
//! assert_eq!(peers.address_of("b"), Some("127.0.0.1:7002"));
//! let etcd = Service::parse(Backend::Etcd, "10.0.0.1:2379,10.0.0.2:2379")?;
//! assert_eq!(etcd.to_string(), "http://10.0.0.1:2379,http://10.0.0.2:2379");
//! # Ok::<(), elect::Error>(())
//! ```

use std::fmt;

use crate::backend_kind::Backend;
use crate::error::{Error, Result};

/// Where an election's service is, as its backend needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Service {
    /// etcd members.
    Etcd(EtcdEndpoints),
    /// A ZooKeeper ensemble.
    Zk(ZkEnsemble),
    /// The Raft-vote peers, this process among them when it campaigns.
    Raft(RaftPeers),
}

impl Service {
    /// `--endpoints` as the backend reads it: etcd `host:port,...` (an
    /// `http://` or `https://` scheme is accepted), a ZooKeeper connect
    /// string `host:port,...[/chroot]`, Raft-vote `id=host:port,...`.
    ///
    /// Errors: [`Error::Config`] naming `endpoints`.
    pub fn parse(backend: Backend, text: &str) -> Result<Service> {
        Ok(match backend {
            Backend::Etcd => Service::Etcd(EtcdEndpoints::parse(text)?),
            Backend::Zk => Service::Zk(ZkEnsemble::parse(text)?),
            Backend::Raft => Service::Raft(RaftPeers::parse(text)?),
        })
    }

    /// The backend this service belongs to.
    pub fn backend(&self) -> Backend {
        match self {
            Service::Etcd(_) => Backend::Etcd,
            Service::Zk(_) => Backend::Zk,
            Service::Raft(_) => Backend::Raft,
        }
    }
}

/// As `--endpoints` takes it (etcd's URLs with their scheme).
impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Service::Etcd(e) => e.fmt(f),
            Service::Zk(z) => z.fmt(f),
            Service::Raft(r) => r.fmt(f),
        }
    }
}

/// etcd members as `http://host:port` or `https://host:port` URLs,
/// none twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdEndpoints {
    urls: Vec<String>,
}

impl EtcdEndpoints {
    /// Members as `host:port` (an `http://` or `https://` scheme is
    /// accepted).
    ///
    /// Errors: [`Error::Config`] naming `endpoints`.
    pub fn new<I, S>(members: I) -> Result<EtcdEndpoints>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let members: Vec<S> = members.into_iter().collect();
        let entries = members.iter().flat_map(|m| m.as_ref().split(','));
        Ok(EtcdEndpoints {
            urls: etcd_endpoints(entries.collect())?,
        })
    }

    /// `host:port,...`, as `--endpoints` takes it.
    ///
    /// Errors: [`Error::Config`] naming `endpoints`.
    pub fn parse(text: &str) -> Result<EtcdEndpoints> {
        Ok(EtcdEndpoints {
            urls: etcd_endpoints(text.split(',').collect())?,
        })
    }

    /// The members' URLs.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Whether any member was given as `https://`.
    pub fn wants_tls(&self) -> bool {
        self.urls.iter().any(|u| u.starts_with("https://"))
    }

    /// Every member over TLS.
    pub(crate) fn upgrade_to_https(&mut self) {
        for url in &mut self.urls {
            if let Some(rest) = url.strip_prefix("http://") {
                *url = format!("https://{rest}");
            }
        }
    }
}

impl fmt::Display for EtcdEndpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.urls.join(","))
    }
}

/// A ZooKeeper connect string, `host:port,...[/chroot]`: the client
/// library takes it whole and picks a server itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkEnsemble {
    connect_string: String,
}

impl ZkEnsemble {
    /// Checks `host:port,...[/chroot]`.
    ///
    /// Errors: [`Error::Config`] naming `endpoints`.
    pub fn parse(text: &str) -> Result<ZkEnsemble> {
        Ok(ZkEnsemble {
            connect_string: zk_connect_string(text)?,
        })
    }

    /// The connect string, as the client library takes it.
    pub fn connect_string(&self) -> &str {
        &self.connect_string
    }
}

impl fmt::Display for ZkEnsemble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.connect_string)
    }
}

/// The Raft-vote peers: ids unique, addresses unique, at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftPeers {
    peers: Vec<RaftPeer>,
}

/// One Raft-vote peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftPeer {
    id: String,
    addr: String,
}

impl RaftPeer {
    /// Its id: the name its certificate carries, and what it publishes
    /// while it leads.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl RaftPeers {
    /// Every peer as `(id, "host:port")`.
    ///
    /// Errors: [`Error::Config`] naming `endpoints`: no peers, a bad or
    /// repeated id or address.
    pub fn new<I, A, B>(peers: I) -> Result<RaftPeers>
    where
        I: IntoIterator<Item = (A, B)>,
        A: AsRef<str>,
        B: AsRef<str>,
    {
        let peers: Vec<(A, B)> = peers.into_iter().collect();
        let entries = peers.iter().map(|(id, addr)| {
            let (id, addr) = (id.as_ref(), addr.as_ref());
            (format!("{id}={addr}"), Some((id, addr)))
        });
        Ok(RaftPeers {
            peers: raft_peers(entries.collect())?,
        })
    }

    /// `id=host:port,...`, as `--endpoints` takes it.
    ///
    /// Errors: [`Error::Config`] naming `endpoints`.
    pub fn parse(text: &str) -> Result<RaftPeers> {
        let entries = text
            .split(',')
            .filter(|_| !text.trim().is_empty())
            .map(str::trim)
            // Blanks around '=' are no part of an id or an address
            // ("a = h:1"; found by tests/parsers_fuzz.rs).
            .map(|entry| {
                let parts = entry
                    .split_once('=')
                    .map(|(id, addr)| (id.trim(), addr.trim()));
                (entry.to_owned(), parts)
            });
        Ok(RaftPeers {
            peers: raft_peers(entries.collect())?,
        })
    }

    /// The peers, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &RaftPeer> {
        self.peers.iter()
    }

    /// The peers' ids, in the order given.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.peers.iter().map(RaftPeer::id)
    }

    /// How many peers there are.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Never true: a list of peers holds one at least.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The address of peer `id`.
    pub fn address_of(&self, id: &str) -> Option<&str> {
        self.peers.iter().find(|p| p.id == id).map(RaftPeer::addr)
    }
}

impl fmt::Display for RaftPeers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self
            .peers
            .iter()
            .map(|p| format!("{}={}", p.id, p.addr))
            .collect();
        f.write_str(&list.join(","))
    }
}

/// Longest id we accept: ids are published in keys' values, output lines,
/// environment variables and file names of operators' scripts.
pub const MAX_ID_BYTES: usize = 1024;

/// Checks one `host:port` of any backend's endpoints: the host a DNS
/// name (letters, digits, `-`, `.`, `_`), an IPv4 address, or an IPv6
/// address in brackets (`[::1]:2379`); the port from 1 to 65535. The
/// error says what is wrong with `raw` (an IPv6 address without its
/// brackets, a scheme where none is taken), for a message naming the flag.
pub(crate) fn host_port(raw: &str) -> std::result::Result<(&str, u16), String> {
    if let Some((scheme, _)) = raw.split_once("://") {
        return Err(format!(
            "{raw:?} has a scheme ({scheme}://) where none is taken; write host:port"
        ));
    }
    let (host, port) = raw
        .rsplit_once(':')
        .ok_or_else(|| format!("{raw:?} is not host:port"))?;
    let port = match port.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ if host.contains(':') && !host.starts_with('[') => {
            return Err(format!(
                "{raw:?} looks like an IPv6 address without a port in brackets: write \
                 [address]:port, e.g. [::1]:2379"
            ));
        }
        _ => {
            return Err(format!(
                "{raw:?}: port {port:?} is not a number from 1 to 65535"
            ));
        }
    };
    if let Some(inner) = host.strip_prefix('[') {
        let ok = inner
            .strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
        if !ok {
            return Err(format!(
                "{raw:?}: {host:?} is not an IPv6 address in brackets"
            ));
        }
    } else if host.contains(':') {
        return Err(format!(
            "{raw:?}: an IPv6 address goes in brackets: write [{host}]:{port}"
        ));
    } else if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err(format!("{raw:?} has no valid host before the port"));
    }
    Ok((host, port))
}

/// Checks `host:port,...` (an `http://` or `https://` scheme is accepted)
/// and returns URLs, `http://` unless `https://` was given.
fn etcd_endpoints(entries: Vec<&str>) -> Result<Vec<String>> {
    const FLAG: &str = "endpoints";
    let mut urls = Vec::new();
    for raw in entries.iter().map(|e| e.trim()) {
        if raw.is_empty() {
            let text = entries.join(",");
            return Err(Error::config(FLAG, format!("empty entry in {text:?}")));
        }
        let (scheme, hostport) = match raw.split_once("://") {
            Some(("https", rest)) => ("https", rest),
            Some(("http", rest)) => ("http", rest),
            Some((other, _)) => {
                return Err(Error::config(
                    FLAG,
                    format!("{raw:?}: the scheme {other}:// is not http:// or https://"),
                ));
            }
            None => ("http", raw),
        };
        let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
        let (host, port) = host_port(hostport).map_err(|why| Error::config(FLAG, why))?;
        let url = format!("{scheme}://{host}:{port}");
        if urls.contains(&url) {
            return Err(Error::config(FLAG, format!("{raw:?} is listed twice")));
        }
        urls.push(url);
    }
    Ok(urls)
}

/// Checks a ZooKeeper connect string `host:port,...[/chroot]`.
fn zk_connect_string(text: &str) -> Result<String> {
    const FLAG: &str = "endpoints";
    if let Some((scheme, _)) = text.split_once("://") {
        return Err(Error::config(
            FLAG,
            format!(
                "{text:?}: a ZooKeeper connect string takes no scheme ({scheme}://): \
                 host:port,...[/chroot] (TLS comes with --cacert)"
            ),
        ));
    }
    let (hosts, chroot) = match text.find('/') {
        Some(i) => (&text[..i], Some(&text[i..])),
        None => (text, None),
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut members = Vec::new();
    for hostport in hosts.split(',').map(str::trim) {
        if !seen.insert(hostport) {
            return Err(Error::config(FLAG, format!("{hostport:?} is listed twice")));
        }
        host_port(hostport).map_err(|why| Error::config(FLAG, why))?;
        members.push(hostport);
    }
    if let Some(chroot) = chroot
        && chroot != "/"
    {
        zk_path(chroot).map_err(|e| match e {
            Error::Config { reason, .. } => Error::config(FLAG, format!("chroot {reason}")),
            other => other,
        })?;
    }
    // The members as checked, without the blanks around them that the
    // client library would take as part of a host name (found by
    // tests/parsers_fuzz.rs); a chroot is a znode path, blanks included.
    Ok(members.join(",") + chroot.unwrap_or(""))
}

/// Checks a ZooKeeper election path: absolute, no trailing `/`, no empty,
/// `.` or `..` segments, no control characters.
pub(crate) fn zk_path(path: &str) -> Result<String> {
    const FLAG: &str = "election";
    let bad = |why: &str| Err(Error::config(FLAG, format!("{path:?} {why}")));
    if !path.starts_with('/') {
        return bad("is not an absolute ZooKeeper path (it must start with '/')");
    }
    if path == "/" {
        return bad("is the root; give the election its own znode");
    }
    if path.ends_with('/') {
        return bad("ends with '/'");
    }
    let reserved = |c: char| matches!(c, '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}');
    if path.chars().any(|c| c.is_control() || reserved(c)) {
        return bad("contains control or reserved characters");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return bad("contains an empty segment ('//')"),
            "." | ".." => return bad("contains a '.' or '..' segment"),
            "zookeeper" if path.starts_with("/zookeeper") => {
                return bad("is under /zookeeper, which ZooKeeper reserves");
            }
            _ => {}
        }
    }
    Ok(path.to_owned())
}

/// Checks raft peers, each entry as written (`id=host:port`) with its id
/// and address if it has both: every entry has an id, ids are unique,
/// addresses are host:port.
fn raft_peers(entries: Vec<(String, Option<(&str, &str)>)>) -> Result<Vec<RaftPeer>> {
    const FLAG: &str = "endpoints";
    if entries.is_empty() {
        return Err(Error::config(
            FLAG,
            "lists no peers; give id=host:port,... for every peer, this one included",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut addresses = std::collections::BTreeSet::new();
    let mut peers = Vec::new();
    for (entry, parts) in entries {
        let (id, addr) = parts.ok_or_else(|| {
            Error::config(
                FLAG,
                format!("{entry:?} has no peer id; write id=host:port"),
            )
        })?;
        // An id is written before '=' in a list split at ',': neither may
        // be in it, or the list would not read back.
        let id = candidate_id(id)
            .ok()
            .filter(|id| !id.contains([',', '=']))
            .ok_or_else(|| {
                Error::config(FLAG, format!("{entry:?} has an empty or invalid peer id"))
            })?;
        host_port(addr).map_err(|why| Error::config(FLAG, format!("{entry:?}: {why}")))?;
        if !seen.insert(id.clone()) {
            return Err(Error::config(FLAG, format!("peer id {id:?} appears twice")));
        }
        if !addresses.insert(addr.to_owned()) {
            return Err(Error::config(
                FLAG,
                format!("address {addr:?} is given to two peers"),
            ));
        }
        peers.push(RaftPeer {
            id,
            addr: addr.to_owned(),
        });
    }
    Ok(peers)
}

/// Checks the id published as leader.
pub(crate) fn candidate_id(id: &str) -> Result<String> {
    const FLAG: &str = "id";
    if id.is_empty() {
        return Err(Error::config(FLAG, "must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::config(
            FLAG,
            format!("is {} bytes long; the limit is {MAX_ID_BYTES}", id.len()),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::config(
            FLAG,
            format!("{id:?} contains control characters"),
        ));
    }
    Ok(id.to_owned())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `--endpoints` of etcd, as the checks read it.
    fn etcd_endpoints(text: &str) -> Result<Vec<String>> {
        EtcdEndpoints::parse(text).map(|e| e.urls)
    }

    /// `--endpoints` of Raft-vote, as the checks read it.
    fn raft_peers(text: &str) -> Result<RaftPeers> {
        RaftPeers::parse(text)
    }

    /// The field a configuration error names.
    pub(in crate::config) fn flag_of(e: Error) -> &'static str {
        match e {
            Error::Config { field, .. } => field,
            other => panic!("not a configuration error: {other}"),
        }
    }

    #[test]
    fn endpoints_are_normalised() {
        assert_eq!(
            etcd_endpoints("127.0.0.1:2379, http://h:1/").unwrap(),
            vec!["http://127.0.0.1:2379", "http://h:1"]
        );
        assert_eq!(
            etcd_endpoints("[::1]:2379").unwrap(),
            vec!["http://[::1]:2379"]
        );
    }

    #[test]
    fn malformed_endpoints_name_the_flag() {
        for bad in [
            "",
            "localhost",
            "host:",
            "host:0",
            "host:99999",
            ":2379",
            "a:1,,b:2",
            "https://h",
            "h/x:1",
            "::1:2379",
            "[::1:2379",
            "[nope]:1",
            "ftp://x:1",
            "a b:1",
            "u@h:1",
        ] {
            let err = etcd_endpoints(bad).expect_err(bad);
            assert_eq!(flag_of(err), "endpoints", "{bad}");
        }
        // https is accepted (the configuration then wants TLS material).
        assert_eq!(etcd_endpoints("https://h:1").unwrap(), ["https://h:1"]);
    }

    #[test]
    fn duplicates_are_refused() {
        assert_eq!(
            flag_of(etcd_endpoints("h:1,http://h:1").unwrap_err()),
            "endpoints"
        );
        assert_eq!(
            flag_of(zk_connect_string("h:1,h:1/x").unwrap_err()),
            "endpoints"
        );
        assert_eq!(flag_of(raft_peers("a=h:1,b=h:1").unwrap_err()), "endpoints");
    }

    #[test]
    fn zk_connect_strings() {
        assert!(zk_connect_string("a:2181,b:2181/apps/x").is_ok());
        assert_eq!(
            zk_connect_string(" a:2181 , b:2181/apps/x y").unwrap(),
            "a:2181,b:2181/apps/x y"
        );
        assert!(zk_connect_string("a:2181/").is_ok());
        for bad in [
            "a",
            "a:0",
            "a:2181//x",
            "a:2181/x/",
            ":1",
            "ftp://x",
            "::1:2181",
            "127.0.0.1",
        ] {
            assert_eq!(
                flag_of(zk_connect_string(bad).unwrap_err()),
                "endpoints",
                "{bad}"
            );
        }
    }

    #[test]
    fn zk_paths() {
        assert!(zk_path("/elections/jobs").is_ok());
        for bad in [
            "jobs",
            "/",
            "/a/",
            "/a//b",
            "/a/./b",
            "/a/..",
            "/a\nb",
            "/zookeeper/x",
        ] {
            assert_eq!(flag_of(zk_path(bad).unwrap_err()), "election", "{bad}");
        }
    }

    #[test]
    fn lists_and_iterators_read_alike() {
        let parsed = EtcdEndpoints::parse("a:1,https://b:2").unwrap();
        assert_eq!(EtcdEndpoints::new(["a:1", "https://b:2"]).unwrap(), parsed);
        assert_eq!(EtcdEndpoints::new(["a:1,https://b:2"]).unwrap(), parsed);
        let peers = RaftPeers::parse("a=h:1,b=h:2").unwrap();
        assert_eq!(RaftPeers::new([("a", "h:1"), ("b", "h:2")]).unwrap(), peers);
        assert_eq!(peers.to_string(), "a=h:1,b=h:2");
        // An id or address that would not read back from the list.
        for (id, addr) in [("a,b", "h:1"), ("a=b", "h:1"), ("a", "h,i:1")] {
            let err = RaftPeers::new([(id, addr)]).unwrap_err();
            assert_eq!(flag_of(err), "endpoints", "{id} {addr}");
        }
        let none: [(&str, &str); 0] = [];
        assert_eq!(flag_of(RaftPeers::new(none).unwrap_err()), "endpoints");
    }

    #[test]
    fn raft_peer_lists() {
        let peers = RaftPeers::parse("a=127.0.0.1:7001, b=h:2").unwrap();
        assert_eq!(peers.to_string(), "a=127.0.0.1:7001,b=h:2");
        assert_eq!(peers.ids().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(peers.address_of("b"), Some("h:2"));
        assert_eq!(peers.address_of("c"), None);
        let spaced = RaftPeers::parse("a = 127.0.0.1:7001 ,b= h:2").unwrap();
        assert_eq!(spaced, peers);
        let built = RaftPeers::new([("a", "127.0.0.1:7001"), ("b", "h:2")]).unwrap();
        assert_eq!(built, peers);
        for bad in [
            "",
            "127.0.0.1:7001",
            "=h:1",
            "a=h",
            "a=h:0",
            "a=h:1,a=h:2",
            "a=:1",
        ] {
            assert_eq!(flag_of(raft_peers(bad).unwrap_err()), "endpoints", "{bad}");
        }
    }

    #[test]
    fn ids() {
        assert!(candidate_id("node-a").is_ok());
        assert!(candidate_id("").is_err());
        assert!(candidate_id("a\tb").is_err());
        assert!(candidate_id(&"x".repeat(MAX_ID_BYTES + 1)).is_err());
    }
}
