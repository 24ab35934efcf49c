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
//!   node did not take it in time) is not kept, so a retry may run it; nor a
//!   `502`, which says it may have run (a supervisor that took it and did
//!   not answer): its retry reaches the supervisor again, whose own keys
//!   (per caller, `supervise::socket`) run it once and replay it after.
//!
//! `POST /agui` streams its reply; its `runId` already replays a finished
//! run's stream (`agui::Book`). There the key binds the body only: another
//! body under the same key is `422`; the same body goes on to the book.
//!
//! The rule itself (fingerprints, running and done, bounds, what is kept)
//! is every door's: [`crate::control::keys`]; this is its HTTP side (the
//! header, raw responses, which statuses say "not run", the replay's headers).
//!
//! Keys are kept for [`KEEP`] (longer than any command's budget, which is
//! at most a minute: `runwire-cluster`'s `MAX_BUDGET`), at most
//! [`MAX_KEYS`] of them and [`MAX_BYTES`] of kept replies, oldest first
//! out: memory stays bounded. The store is the server's memory: a server
//! that restarts has ended the sessions it held. A cluster node keeps its
//! own keys on disk (`runwire-cluster`'s `keys.rs`) and passes the key on
//! to this store, so a key is run once on a node both across the node's
//! restarts and on every door.

use crate::control::keys::{self, Keys as Store};

pub use keys::{held_as, valid, KEEP, MAX_BYTES, MAX_KEY, MAX_KEYS, MAX_REPLY};

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The header a replayed reply carries.
pub const REPLAYED: &str = "Idempotent-Replayed";

/// What a request's key says before it runs: the rule's [`keys::Claim`]
/// over the raw HTTP response.
pub type Claim = keys::Claim<Vec<u8>>;

/// The server's keys (one store for every HTTP door), over the one rule
/// ([`crate::control::keys`]), keeping raw responses.
#[derive(Default)]
pub struct Keys(Store<Vec<u8>>);

/// What identifies a request under its key: who asks, the method, the
/// path and the body.
pub fn fingerprint(caller: &str, method: &str, path: &str, body: &[u8]) -> keys::Fingerprint {
    keys::fingerprint(&[caller.as_bytes(), method.as_bytes(), path.as_bytes(), body])
}

impl Keys {
    /// Claims `key` for the request of `fingerprint`; `bind_only`: the reply
    /// will not be kept (a streamed one), the key binds the request only.
    pub fn claim(&self, key: &str, fingerprint: keys::Fingerprint, bind_only: bool) -> Claim {
        self.0.claim(key, fingerprint, bind_only)
    }

    /// The reply of `key`'s command (the raw response as sent); one the
    /// shared rule does not keep ([`keys::kept`]) frees the key instead.
    pub fn done(&self, key: &str, response: &[u8]) {
        if !keys::kept(status_of(response)) {
            self.0.forget(key);
            return;
        }
        self.0.done(key, response.to_vec(), response.len());
    }

    /// Forgets `key` (its command never ran: the request failed before it).
    pub fn forget(&self, key: &str) {
        self.0.forget(key);
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
        let cors_header = ["access-control-allow-origin", "access-control-expose-headers", "vary"];
        if n > 0 && cors_header.iter().any(|h| name.eq_ignore_ascii_case(h)) {
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

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: http://a\r\n\
Access-Control-Expose-Headers: Retry-After\r\nVary: Origin\r\nContent-Length: 2\r\n\r\n{}";

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
        // May have run (a supervisor that took it and said nothing): a retry
        // goes on to the supervisor, whose own keys know.
        k.done("k2", b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
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
        assert!(k.0.bytes() <= MAX_BYTES);
    }

    #[test]
    fn a_replay_carries_this_requests_cors_and_says_so() {
        let r = replayed(OK, &[("Access-Control-Allow-Origin", "http://b".into())]);
        let text = String::from_utf8(r).unwrap();
        assert!(text
            .starts_with("HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: http://b\r\nIdempotent-Replayed: true\r\n"));
        assert!(!text.contains("http://a") && !text.contains("Vary") && text.ends_with("\r\n\r\n{}"), "{text}");
        assert!(!text.contains("Expose"), "only this request's CORS headers: {text}");
        assert_eq!(status_of(OK), Some(200));
    }
}
