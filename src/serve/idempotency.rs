//! `Idempotency-Key` on the HTTP doors that execute a command: the task and
//! run routes (`POST /runs/…/tasks/…/{verb}`, `POST /runs/…/{verb}`), an
//! approval link's `POST /a/<token>` and `POST /agui` (issue 34: "a key is
//! executed once on any door").
//!
//! - The first request with a key runs; its reply is kept.
//! - The same key again with the same request (method, path, body, caller)
//!   gets that reply again, marked `Idempotent-Replayed: true`, and nothing
//!   runs. While the first is still running, a retry is answered `409`
//!   (it is not run a second time beside it).
//! - The same key with another request is refused `422`: a key names one
//!   command.
//! - A reply that says the command was not run (`503`, `504`: a hub whose
//!   node did not take it in time) is not kept, so a retry may run it.
//!
//! `POST /agui` streams its reply; its `runId` already replays a finished
//! run's stream (`agui::Book`). There the key binds the body only: another
//! body under the same key is `422`; the same body goes on to the book.
//!
//! Keys are kept for [`KEEP`] (longer than any command's budget, which is
//! at most a minute: `runwire-cluster`'s `MAX_BUDGET`), at most
//! [`MAX_KEYS`] of them and [`MAX_BYTES`] of kept replies, oldest first
//! out: memory stays bounded. The store is the server's memory: a server
//! that restarts has ended the sessions it held. A cluster node keeps its
//! own keys on disk (`runwire-cluster`'s `keys.rs`) and passes the key on
//! to this store, so a key is run once on a node both across the node's
//! restarts and on every door.

use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a key is remembered.
pub const KEEP: Duration = Duration::from_secs(15 * 60);
/// The most keys remembered at once.
pub const MAX_KEYS: usize = 10_000;
/// The most reply bytes kept at once (all keys together).
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
/// The longest reply kept for a replay (control replies are a few hundred bytes).
pub const MAX_REPLY: usize = 256 * 1024;
/// The longest key accepted (the cluster's limit).
pub const MAX_KEY: usize = 200;
/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The header a replayed reply carries.
pub const REPLAYED: &str = "Idempotent-Replayed";

/// Whether `k` can be a key: 1 to [`MAX_KEY`] printable ASCII characters.
pub fn valid(k: &str) -> bool {
    !k.is_empty() && k.len() <= MAX_KEY && k.bytes().all(|b| b.is_ascii_graphic())
}

/// What a request's key says before it runs.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// A new key: run the command, then [`Keys::done`] (or [`Keys::forget`]).
    Run,
    /// Seen, with this request: its first reply (the raw HTTP response).
    Replay(Vec<u8>),
    /// Seen, with this request, and still running.
    Running,
    /// Seen with another request.
    Conflict,
}

enum State {
    Running,
    Done(Vec<u8>),
    /// Seen; its reply is not kept (too large, or a streamed one).
    Bound,
}

struct Entry {
    fingerprint: [u8; 32],
    at: Instant,
    state: State,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    order: VecDeque<(Instant, String)>,
    bytes: usize,
}

/// The server's keys (one store for every door).
#[derive(Default)]
pub struct Keys {
    inner: Mutex<Inner>,
}

/// What identifies a request under its key: who asks, the method, the
/// path and the body (a digest: a body may be a megabyte).
pub fn fingerprint(caller: &str, method: &str, path: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [caller.as_bytes(), method.as_bytes(), path.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update(body);
    h.finalize().into()
}

impl Keys {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `key` for the request of `fingerprint`; `bind_only`: the reply
    /// will not be kept (a streamed one), the key binds the request only.
    pub fn claim(&self, key: &str, fingerprint: [u8; 32], bind_only: bool) -> Claim {
        let now = Instant::now();
        let mut m = self.lock();
        m.prune(now);
        if let Some(e) = m.map.get(key) {
            if e.fingerprint != fingerprint {
                return Claim::Conflict;
            }
            return match &e.state {
                State::Running => Claim::Running,
                State::Done(r) => Claim::Replay(r.clone()),
                State::Bound => Claim::Run,
            };
        }
        let state = if bind_only { State::Bound } else { State::Running };
        m.map.insert(key.to_string(), Entry { fingerprint, at: now, state });
        m.order.push_back((now, key.to_string()));
        m.prune(now);
        Claim::Run
    }

    /// The reply of `key`'s command (the raw response as sent); one that
    /// says the command did not run (503, 504) frees the key instead.
    pub fn done(&self, key: &str, response: &[u8]) {
        let status = status_of(response);
        let mut m = self.lock();
        if matches!(status, Some(503 | 504) | None) {
            m.map.remove(key);
            return;
        }
        let keep = response.len() <= MAX_REPLY;
        if let Some(e) = m.map.get_mut(key) {
            e.state = if keep { State::Done(response.to_vec()) } else { State::Bound };
            if keep {
                m.bytes += response.len();
            }
        }
        let now = Instant::now();
        m.prune(now);
    }

    /// Forgets `key` (its command never ran: the request failed before it).
    pub fn forget(&self, key: &str) {
        let mut m = self.lock();
        if let Some(Entry { state: State::Done(r), .. }) = m.map.remove(key) {
            m.bytes -= r.len();
        }
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Oldest first: past their time, or over the bounds.
    fn prune(&mut self, now: Instant) {
        while let Some((at, k)) = self.order.front() {
            let old = now.duration_since(*at) > KEEP;
            if !old && self.order.len() <= MAX_KEYS && self.bytes <= MAX_BYTES {
                break;
            }
            // The entry may have been forgotten and claimed again since (a newer `at`).
            if self.map.get(k).is_some_and(|e| e.at == *at) {
                if let Some(Entry { state: State::Done(r), .. }) = self.map.remove(k) {
                    self.bytes -= r.len();
                }
            }
            self.order.pop_front();
        }
    }
}

/// The status of a raw response (`HTTP/1.1 200 OK…`).
pub fn status_of(response: &[u8]) -> Option<u16> {
    let line = response.split(|b| *b == b'\n').next()?;
    std::str::from_utf8(line).ok()?.split(' ').nth(1)?.trim().parse().ok()
}

/// A kept response again for another request: its CORS headers are this
/// request's (`cors`), and it says it is a replay.
pub fn replayed(response: &[u8], cors: &[(&'static str, String)]) -> Vec<u8> {
    let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else { return response.to_vec() };
    let head = String::from_utf8_lossy(&response[..end]);
    let mut out = String::new();
    for (n, line) in head.split("\r\n").enumerate() {
        let name = line.split(':').next().unwrap_or("").trim();
        if n > 0 && (name.eq_ignore_ascii_case("access-control-allow-origin") || name.eq_ignore_ascii_case("vary")) {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
        if n == 0 {
            for (k, v) in cors {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str(&format!("{REPLAYED}: true\r\n"));
        }
    }
    out.push_str("\r\n");
    let mut v = out.into_bytes();
    v.extend_from_slice(&response[end + 4..]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] =
        b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: http://a\r\nVary: Origin\r\nContent-Length: 2\r\n\r\n{}";

    #[test]
    fn a_key_runs_once_replays_its_reply_and_refuses_another_request() {
        let k = Keys::default();
        let f = fingerprint("ana", "POST", "/runs/r/tasks/t/steer", b"{\"msg\":\"x\"}");
        let g = fingerprint("ana", "POST", "/runs/r/tasks/t/steer", b"{\"msg\":\"y\"}");
        assert_ne!(f, fingerprint("bo", "POST", "/runs/r/tasks/t/steer", b"{\"msg\":\"x\"}"));
        assert_eq!(k.claim("k1", f, false), Claim::Run);
        assert_eq!(k.claim("k1", f, false), Claim::Running);
        assert_eq!(k.claim("k1", g, false), Claim::Conflict);
        k.done("k1", OK);
        assert_eq!(k.claim("k1", f, false), Claim::Replay(OK.to_vec()));
        assert_eq!(k.claim("k1", g, false), Claim::Conflict);
        // Not run: the key is free again.
        assert_eq!(k.claim("k2", f, false), Claim::Run);
        k.done("k2", b"HTTP/1.1 504 Gateway Timeout\r\n\r\n");
        assert_eq!(k.claim("k2", f, false), Claim::Run);
        k.forget("k2");
        // A streamed reply: the key binds the body only.
        assert_eq!(k.claim("k3", f, true), Claim::Run);
        assert_eq!(k.claim("k3", f, true), Claim::Run);
        assert_eq!(k.claim("k3", g, true), Claim::Conflict);
        assert!(valid("click-0a1b") && !valid("") && !valid("a b") && !valid(&"x".repeat(MAX_KEY + 1)));
    }

    #[test]
    fn keys_are_bounded() {
        let k = Keys::default();
        let f = fingerprint("", "POST", "/p", b"");
        for n in 0..MAX_KEYS + 50 {
            assert_eq!(k.claim(&format!("k{n}"), f, false), Claim::Run);
            k.done(&format!("k{n}"), OK);
        }
        assert_eq!(k.len(), MAX_KEYS);
        assert_eq!(k.claim("k0", f, false), Claim::Run, "the oldest went first");
        // Bytes too: a few large replies push out the old ones.
        let big = [b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), &vec![b'x'; MAX_REPLY - 100]].concat();
        for n in 0..(MAX_BYTES / big.len() + 5) {
            let key = format!("b{n}");
            assert_eq!(k.claim(&key, f, false), Claim::Run);
            k.done(&key, &big);
        }
        assert!(k.lock().bytes <= MAX_BYTES);
    }

    #[test]
    fn a_replay_carries_this_requests_cors_and_says_so() {
        let r = replayed(OK, &[("Access-Control-Allow-Origin", "http://b".into())]);
        let text = String::from_utf8(r).unwrap();
        assert!(text
            .starts_with("HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: http://b\r\nIdempotent-Replayed: true\r\n"));
        assert!(!text.contains("http://a") && !text.contains("Vary") && text.ends_with("\r\n\r\n{}"), "{text}");
        assert_eq!(status_of(OK), Some(200));
    }
}
