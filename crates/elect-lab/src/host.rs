//! What the machine gives the lab: programs on `PATH`, addresses of its
//! own on loopback, names no other lab has, and enough file descriptors.

use std::path::{Path, PathBuf};

/// A name no other lab (of this or a parallel process) has.
pub(crate) fn unique_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{}-{:x}{}",
        std::process::id(),
        nanos & 0xffff,
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A loopback network of our own: `127.<a>.<b>.x`, chosen per call so
/// parallel labs never share an address or a port.
pub fn loopback_net() -> String {
    let seed = (std::process::id() as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos() as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let a = 1 + (seed % 250);
    let b = 1 + ((seed >> 8) % 250);
    format!("127.{a}.{b}")
}

/// Lifts this process's soft limit on open files to the hard one: members
/// it starts inherit it, and a thousand candidates hold several thousand
/// sockets on each side.
pub fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// The full path of `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// This process's private resident memory, in KiB: what it allocated
/// (heap, stacks), without the pages of its executable and libraries,
/// which it faults in once and shares through the page cache with every
/// process running the same binary (0 where /proc does not say).
pub fn private_kib() -> u64 {
    status_kib("RssAnon:")
}

/// A field of `/proc/self/status` given in kB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// The sockets this process holds open (TCP connections and listeners
/// among them), from `/proc/self/fd`.
pub fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// A TCP port of 127.0.0.1 that is free now (bound, then released for the
/// caller's process to bind).
///
/// Chosen below the kernel's ephemeral range: a port the kernel picks for
/// `bind(0)` comes from the range it also gives outgoing connections, so
/// between our release and the caller's bind one of this busy process's
/// connections could take it (compare saw `Address already in use` on a
/// candidate's `--http`). Ports are tried from a point that differs per
/// process and per call, so concurrent test processes rarely meet.
pub fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOWEST: u32 = 10_000;
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let ephemeral_from = u32::from(ephemeral_ports_from());
    if ephemeral_from > LOWEST + 1_000 {
        let span = ephemeral_from - LOWEST;
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let start = std::process::id()
            .wrapping_mul(7_919)
            .wrapping_add(call.wrapping_mul(104_729));
        for step in 0..span.min(2_000) {
            let port = LOWEST + start.wrapping_add(step) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return Ok(port as u16);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The first port of the range the kernel gives outgoing connections
/// (Linux's default where /proc does not say).
fn ephemeral_ports_from() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_ports_are_bindable_and_outside_the_ephemeral_range() {
        let ephemeral_from = super::ephemeral_ports_from();
        let (a, b) = (super::free_port().unwrap(), super::free_port().unwrap());
        assert_ne!(a, b);
        for port in [a, b] {
            assert!(port < ephemeral_from, "{port} is in the ephemeral range");
            std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
