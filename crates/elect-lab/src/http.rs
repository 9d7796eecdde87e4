//! A plain HTTP/1.1 client, enough to ask a member or an `elect --http`
//! export one question: health, status, metrics. Synchronous, like the
//! rest of the lab; no HTTP crate for a few lines.

use std::collections::BTreeMap;
use std::time::Duration;

/// `GET path` from an HTTP/1.1 server at `addr`: the status code and body
/// (status 0 when nothing answers).
pub fn http_get(addr: &str, path: &str, timeout: Duration) -> (u16, String) {
    http_request(addr, "GET", path, "", timeout)
}

/// One HTTP/1.1 request with `body` (JSON, for etcd's gateway): the status
/// code and body (status 0 when nothing answers).
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> (u16, String) {
    use std::io::{Read, Write};
    let Ok(sock) = addr.parse::<std::net::SocketAddr>().or_else(|_| {
        use std::net::ToSocketAddrs;
        addr.to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other("no address"))
    }) else {
        return (0, String::new());
    };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&sock, timeout) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: elect\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return (status, String::new());
    };
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

/// A chunked body's content: etcd sends its metrics in chunks whose
/// boundaries fall anywhere, mid-line included. A torn body ends at the
/// last whole chunk.
fn dechunk(mut body: &str) -> String {
    let mut content = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = size.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        if size == 0 || rest.len() < size || !rest.is_char_boundary(size) {
            break;
        }
        content.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    content
}

/// Prometheus text exposition summed by metric name (labels dropped).
pub fn sum_prometheus(text: &str) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        if let Ok(v) = value.parse::<f64>() {
            *sums.entry(name.to_owned()).or_insert(0.0) += v;
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined_across_its_chunks() {
        let body = "6\r\nx_tota\r\n5\r\nl 12\n\r\n0\r\n\r\n";
        assert_eq!(dechunk(body), "x_total 12\n");
        assert_eq!(dechunk("6\r\nx_to"), "", "a torn chunk is left out");
    }

    #[test]
    fn prometheus_text_sums_by_name() {
        let text = "# HELP x\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\ny 1.5\n";
        let sums = sum_prometheus(text);
        assert_eq!(sums["x_total"], 5.0);
        assert_eq!(sums["y"], 1.5);
    }
}
