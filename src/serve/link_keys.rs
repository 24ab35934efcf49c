//! Approval links' books at the server (see [`super::links`]): the link
//! routes' rate limits ([`Limiter`]), beside the tokens themselves
//! ([`Keys`], [`Claims`]: `crate::control::links`, which the supervisor
//! mints with too). A leaf: the server's options and state hold these, the
//! link routes and the sessions that mint links use them.

pub use crate::control::links::*;
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests a minute one token may make.
pub const PER_TOKEN: u32 = 30;
/// Requests a minute one client address may make.
pub const PER_ADDRESS: u32 = 120;
/// Keys the limiter holds at most (bounded memory): past it, the key whose
/// window began first makes room. Never a refusal for a full table: one
/// local client can make up any number of tokens and, on loopback, send
/// from any of 2^24 addresses, and a table that refused new keys once full
/// refused every genuine link with it.
pub const MAX_KEYS: usize = 8192;

/// The limiter's key of a token: a digest of fixed size, so that a table
/// full of long made-up tokens stays small.
pub fn limit_key(token: &str) -> String {
    use sha2::Digest;
    let d = Sha256::digest(token.as_bytes());
    let hex: String = d[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("t:{hex}")
}

/// Fixed-window counters, one a key, in bounded memory.
#[derive(Default)]
pub struct Limiter {
    pub(super) counts: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Limiter {
    /// Counts one request of `key`; `false` when it is over `limit` this minute.
    pub fn allow(&self, key: &str, limit: u32) -> bool {
        const WINDOW: Duration = Duration::from_secs(60);
        let now = Instant::now();
        let mut m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if !m.contains_key(key) && m.len() >= MAX_KEYS {
            m.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
            if m.len() >= MAX_KEYS {
                let oldest = m.iter().min_by_key(|(_, (start, _))| *start).map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    m.remove(&k);
                }
            }
        }
        let e = m.entry(key.to_string()).or_insert((now, 0));
        if now.duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
        e.1 <= limit
    }
}
