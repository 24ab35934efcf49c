//! Small helpers of the whole sidecar (a leaf: imports nothing of the crate
//! but its report).

use std::time::{Duration, SystemTime};

/// `f` until it succeeds, saying each new error once: a sidecar outlives
/// a cluster that is electing a leader, restarting, or not set up yet.
pub async fn retry<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut last = String::new();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                let m = format!("{e:#}");
                if m != last {
                    crate::report(format!("cluster: {what}: {m} (retrying)"));
                    last = m;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A new idempotency key (for a command whose client gave none).
pub fn new_key() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok();
    if !random {
        // No /dev/urandom: unique still (a clock, this process, a counter).
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        b[..8].copy_from_slice(&now_ms().to_be_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_be_bytes());
        b[12..].copy_from_slice(&(n as u32).to_be_bytes());
    }
    format!("k-{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}
