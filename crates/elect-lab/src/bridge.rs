//! The one bridge between the lab's synchronous code and the async clients
//! (etcd's, ZooKeeper's) it sometimes needs: one runtime for the whole
//! process, started on first use, whose workers run what the lab hands
//! them while the calling thread waits. It may be called from inside
//! another runtime (the caller's thread blocks; the work runs on the
//! bridge's workers), so the lab and `elect compare` need no runtime of
//! their own.

use std::future::Future;
use std::sync::LazyLock;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("elect-lab-bridge")
        .enable_all()
        .build()
        .expect("the lab's runtime")
});

/// Runs `future` to its end on the bridge's runtime and returns its
/// output.
///
/// # Errors
/// The future panicked.
pub fn block_on<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> std::io::Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    RUNTIME.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv()
        .map_err(|_| std::io::Error::other("a lab task panicked"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_from_plain_threads_and_from_inside_a_runtime() {
        assert_eq!(super::block_on(async { 1 + 1 }).unwrap(), 2);
        let inner = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async { super::block_on(async { 3 }).unwrap() });
        assert_eq!(inner, 3);
        assert!(super::block_on(async { panic!("planted") }).is_err());
    }
}
