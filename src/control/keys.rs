//! The idempotency key rule, one for every door that runs a command (issue
//! 34: "a key is executed once on any door"): the HTTP routes'
//! `Idempotency-Key` (`serve::idempotency`, a thin wrapper over this), the
//! supervisor's control socket and `runwire-session`'s input lines
//! (`"idempotency_key"`), and the cluster node's keys on disk
//! (`runwire-cluster`'s `keys.rs`, which keeps this store's entries in a file).
//!
//! - The first command under a key runs ([`Claim::Run`]); its reply is kept
//!   ([`Keys::done`]).
//! - The same key with the same command ([`fingerprint`]: what the door says
//!   identifies it, e.g. who asks, where and the body) gets that reply again
//!   ([`Claim::Replay`]) and nothing runs. While the first still runs, a
//!   retry is told so ([`Claim::Running`]) and not run beside it.
//! - The same key with another command is refused ([`Claim::Conflict`]): a
//!   key names one command.
//! - A reply that says the command was not run is not kept: the door calls
//!   [`Keys::forget`] instead, so a retry may run it.
//!
//! Bounded: a key is kept for [`Limits::keep`] (longer than any command's
//! budget, at most a minute), at most [`Limits::max_keys`] keys and
//! [`Limits::max_bytes`] of kept replies, oldest first out. A reply larger
//! than [`Limits::max_reply`] is not kept; its key still binds its command.
//! No IO: a door keeps its store where its commands live (the server's and
//! the supervisor's memory, the session's loop; a cluster node's file).

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
/// The longest key accepted (the same on every door, the cluster's included).
pub const MAX_KEY: usize = 200;

/// Whether a reply with this HTTP status is kept for its key, on every door
/// that keeps replies (the server's routes, a node's store of forwarded
/// commands). Not kept: a reply that says the command did not run (503,
/// 504), or that it may have run where a retry finds out (502: a supervisor
/// that took it and did not answer, whose own keys run it once), and a
/// reply with no status. A retry may then run it; a kept one would answer
/// every retry with the same failure.
pub fn kept(status: Option<u16>) -> bool {
    !matches!(status, Some(502..=504) | None)
}

/// Whether `k` can be a key: 1 to [`MAX_KEY`] printable ASCII characters.
pub fn valid(k: &str) -> bool {
    !k.is_empty() && k.len() <= MAX_KEY && k.bytes().all(|b| b.is_ascii_graphic())
}

/// Why a key is refused, in the words every door uses.
pub fn invalid_text() -> String {
    format!("an idempotency key is 1 to {MAX_KEY} printable ASCII characters")
}

/// The refusal of [`Claim::Conflict`].
pub fn conflict_text(key: &str) -> String {
    format!("idempotency key {key:?} was used for another command: nothing was done; a new command takes a new key")
}

/// The refusal of [`Claim::Running`].
pub fn running_text(key: &str) -> String {
    format!("the command of idempotency key {key:?} is still running: it is not run again; retry for its reply")
}

/// What identifies a command under its key: its parts (each length-prefixed,
/// so no two splits of the same bytes agree), as a digest: a body may be a
/// megabyte.
pub fn fingerprint(parts: &[&[u8]]) -> Fingerprint {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

pub type Fingerprint = [u8; 32];

/// What a store holds `key` under: the key of `caller` (a token's name, a
/// socket request's actor, a forwarded command's person), not everyone's,
/// so two people who pick one key never refuse or replay each other's
/// commands, on any door. Hex of a digest: a fixed length, and itself a
/// [`valid`] key (a node's store keeps it on disk).
pub fn held_as(caller: &str, key: &str) -> String {
    to_hex(&fingerprint(&[caller.as_bytes(), key.as_bytes()]))
}

/// A fingerprint in lowercase hex (how a door's file keeps it).
pub fn to_hex(fp: &Fingerprint) -> String {
    fp.iter().map(|b| format!("{b:02x}")).collect()
}

/// [`to_hex`] read back; `None` for anything else.
pub fn from_hex(s: &str) -> Option<Fingerprint> {
    let mut fp = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, b) in fp.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(fp)
}

/// What a command's key says before it runs.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim<R> {
    /// A new key: run the command, then [`Keys::done`] (or [`Keys::forget`]).
    Run,
    /// Seen, with this command: its first reply.
    Replay(R),
    /// Seen, with this command, and still running (or, restored from a
    /// file, started and never answered: it may have run).
    Running,
    /// Seen with another command.
    Conflict,
}

/// A store's bounds ([`KEEP`], [`MAX_KEYS`], [`MAX_BYTES`], [`MAX_REPLY`] by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub keep: Duration,
    pub max_keys: usize,
    pub max_bytes: usize,
    pub max_reply: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { keep: KEEP, max_keys: MAX_KEYS, max_bytes: MAX_BYTES, max_reply: MAX_REPLY }
    }
}

enum State<R> {
    Running,
    Done(R, usize),
    /// Seen; its reply is not kept (too large, or a streamed one).
    Bound,
}

struct Entry<R> {
    fingerprint: Fingerprint,
    at: Instant,
    /// Which claim of the key this is (a key forgotten and claimed again
    /// has a newer one), so an old place in the order removes nothing.
    seq: u64,
    state: State<R>,
}

struct Inner<R> {
    map: HashMap<String, Entry<R>>,
    order: VecDeque<(Instant, u64, String)>,
    bytes: usize,
    seq: u64,
}

/// One door's keys.
pub struct Keys<R> {
    limits: Limits,
    inner: Mutex<Inner<R>>,
}

impl<R: Clone> Default for Keys<R> {
    fn default() -> Keys<R> {
        Keys::new(Limits::default())
    }
}

impl<R: Clone> Keys<R> {
    pub fn new(limits: Limits) -> Keys<R> {
        let inner = Inner { map: HashMap::new(), order: VecDeque::new(), bytes: 0, seq: 0 };
        Keys { limits, inner: Mutex::new(inner) }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<R>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `key` for the command of `fingerprint`; `bind_only`: the reply
    /// will not be kept (a streamed one), the key binds the command only.
    pub fn claim(&self, key: &str, fingerprint: Fingerprint, bind_only: bool) -> Claim<R> {
        let now = Instant::now();
        let mut m = self.lock();
        m.prune(now, &self.limits);
        if let Some(e) = m.map.get(key) {
            if e.fingerprint != fingerprint {
                return Claim::Conflict;
            }
            return match &e.state {
                State::Running => Claim::Running,
                State::Done(r, _) => Claim::Replay(r.clone()),
                State::Bound => Claim::Run,
            };
        }
        let state = if bind_only { State::Bound } else { State::Running };
        m.insert(key, fingerprint, now, state);
        m.prune(now, &self.limits);
        Claim::Run
    }

    /// What `key` holds for the command of `fingerprint`, without claiming
    /// it (a door that looks before it checks the rest of the command):
    /// `None` unseen; [`Claim::Conflict`] seen with another command;
    /// [`Claim::Replay`] done; [`Claim::Running`] running; [`Claim::Run`]
    /// bound with no reply kept.
    pub fn peek(&self, key: &str, fingerprint: Fingerprint) -> Option<Claim<R>> {
        let mut m = self.lock();
        m.prune(Instant::now(), &self.limits);
        let e = m.map.get(key)?;
        if e.fingerprint != fingerprint {
            return Some(Claim::Conflict);
        }
        Some(match &e.state {
            State::Running => Claim::Running,
            State::Done(r, _) => Claim::Replay(r.clone()),
            State::Bound => Claim::Run,
        })
    }

    /// The reply of `key`'s command, `size` bytes of it counted against the
    /// bounds (one over [`Limits::max_reply`] is not kept; the key still
    /// binds its command). A reply that says the command did not run is
    /// [`Keys::forget`]'s instead.
    pub fn done(&self, key: &str, reply: R, size: usize) {
        let now = Instant::now();
        let mut m = self.lock();
        let keep = size <= self.limits.max_reply;
        let Some(e) = m.map.get_mut(key) else { return };
        let old = std::mem::replace(&mut e.state, if keep { State::Done(reply, size) } else { State::Bound });
        if let State::Done(_, n) = old {
            m.bytes -= n;
        }
        if keep {
            m.bytes += size;
        }
        m.prune(now, &self.limits);
    }

    /// Forgets `key` (its command never ran: it failed before, or its reply
    /// says it was not run).
    pub fn forget(&self, key: &str) {
        let mut m = self.lock();
        if let Some(Entry { state: State::Done(_, n), .. }) = m.map.remove(key) {
            m.bytes -= n;
        }
    }

    /// Puts back a key read from a door's own file, claimed `age` ago, with
    /// its reply (`None`: started and never answered, [`Claim::Running`]
    /// from now on). One past its time is not put back. Restore oldest first.
    pub fn restore(&self, key: &str, fingerprint: Fingerprint, age: Duration, reply: Option<(R, usize)>) {
        let now = Instant::now();
        if age > self.limits.keep {
            return;
        }
        let at = now.checked_sub(age).unwrap_or(now);
        let mut m = self.lock();
        if let Some(Entry { state: State::Done(_, n), .. }) = m.map.remove(key) {
            m.bytes -= n;
        }
        let state = match reply {
            Some((r, n)) if n <= self.limits.max_reply => State::Done(r, n),
            Some(_) => State::Bound,
            None => State::Running,
        };
        if let State::Done(_, n) = &state {
            m.bytes += n;
        }
        m.insert(key, fingerprint, at, state);
        m.prune(now, &self.limits);
    }

    /// The keys remembered, oldest first, with their age, fingerprint and
    /// reply (`None`: running, or not kept): what a door with a file writes back.
    pub fn entries(&self) -> Vec<(String, Duration, Fingerprint, Option<R>)> {
        let now = Instant::now();
        let m = self.lock();
        m.order
            .iter()
            .filter_map(|(_, seq, k)| {
                let e = m.map.get(k).filter(|e| e.seq == *seq)?;
                let reply = match &e.state {
                    State::Done(r, _) => Some(r.clone()),
                    _ => None,
                };
                Some((k.clone(), now.saturating_duration_since(e.at), e.fingerprint, reply))
            })
            .collect()
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reply bytes kept.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl<R> Inner<R> {
    fn insert(&mut self, key: &str, fingerprint: Fingerprint, at: Instant, state: State<R>) {
        self.seq += 1;
        let seq = self.seq;
        self.map.insert(key.to_string(), Entry { fingerprint, at, seq, state });
        self.order.push_back((at, seq, key.to_string()));
    }

    /// Oldest first: past their time, or over the bounds.
    fn prune(&mut self, now: Instant, limits: &Limits) {
        while let Some((at, seq, k)) = self.order.front() {
            let old = now.saturating_duration_since(*at) > limits.keep;
            let live = self.map.get(k).is_some_and(|e| e.seq == *seq);
            if live && !old && self.map.len() <= limits.max_keys && self.bytes <= limits.max_bytes {
                break;
            }
            if live {
                if let Some(Entry { state: State::Done(_, n), .. }) = self.map.remove(k) {
                    self.bytes -= n;
                }
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_key_is_held_as_its_callers() {
        let ana = held_as("ana", "click-1");
        assert_eq!(ana, held_as("ana", "click-1"));
        assert_ne!(ana, held_as("bob", "click-1"));
        assert_ne!(ana, held_as("ana", "click-2"));
        assert_ne!(held_as("ab", "c"), held_as("a", "bc"), "no two splits agree");
        // Itself a valid key (a node keeps it on disk), whatever the name's length.
        assert!(valid(&ana) && valid(&held_as(&"p".repeat(64), &"k".repeat(MAX_KEY))));
    }

    use super::*;

    fn fp(s: &str) -> Fingerprint {
        fingerprint(&[b"ana", s.as_bytes()])
    }

    #[test]
    fn a_key_runs_once_replays_its_reply_and_refuses_another_command() {
        let k: Keys<String> = Keys::default();
        assert_ne!(fingerprint(&[b"a", b"bc"]), fingerprint(&[b"ab", b"c"]), "parts are delimited");
        assert_eq!(k.claim("k1", fp("x"), false), Claim::Run);
        assert_eq!(k.claim("k1", fp("x"), false), Claim::Running);
        assert_eq!(k.claim("k1", fp("y"), false), Claim::Conflict);
        k.done("k1", "first".into(), 5);
        assert_eq!(k.claim("k1", fp("x"), false), Claim::Replay("first".into()));
        assert_eq!(k.claim("k1", fp("y"), false), Claim::Conflict);
        // Not run: the key is free again.
        assert_eq!(k.claim("k2", fp("x"), false), Claim::Run);
        k.forget("k2");
        assert_eq!(k.claim("k2", fp("y"), false), Claim::Run);
        // A streamed reply: the key binds the command only.
        assert_eq!(k.claim("k3", fp("x"), true), Claim::Run);
        assert_eq!(k.claim("k3", fp("x"), true), Claim::Run);
        assert_eq!(k.claim("k3", fp("y"), true), Claim::Conflict);
        // Too large to keep: bound, not replayed.
        assert_eq!(k.claim("k4", fp("x"), false), Claim::Run);
        k.done("k4", "huge".into(), MAX_REPLY + 1);
        assert_eq!((k.claim("k4", fp("x"), false), k.claim("k4", fp("y"), false)), (Claim::Run, Claim::Conflict));
        assert!(valid("click-0a1b") && !valid("") && !valid("a b") && !valid(&"x".repeat(MAX_KEY + 1)));
    }

    #[test]
    fn keys_are_bounded_in_number_bytes_and_time() {
        let limits = Limits { keep: Duration::from_millis(200), max_keys: 100, max_bytes: 1000, max_reply: 300 };
        let k: Keys<String> = Keys::new(limits);
        for n in 0..150 {
            assert_eq!(k.claim(&format!("k{n}"), fp(""), false), Claim::Run);
            k.done(&format!("k{n}"), String::new(), 1);
        }
        assert_eq!(k.len(), 100);
        assert_eq!(k.claim("k0", fp("other"), false), Claim::Run, "the oldest went first");
        for n in 0..10 {
            let key = format!("b{n}");
            assert_eq!(k.claim(&key, fp(""), false), Claim::Run);
            k.done(&key, String::new(), 300);
        }
        assert!(k.bytes() <= 1000, "{}", k.bytes());
        assert_eq!(k.claim("b9", fp(""), false), Claim::Replay(String::new()), "the newest stays");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(k.claim("b9", fp("other"), false), Claim::Run, "past its time: forgotten");
        assert_eq!(k.len(), 1);
        // A forgotten key claimed again is not removed by its old place in the order.
        k.forget("b9");
        assert_eq!(k.claim("b9", fp(""), false), Claim::Run);
        assert_eq!(k.claim("b9", fp(""), false), Claim::Running);
    }

    #[test]
    fn restored_keys_replay_and_a_started_one_is_never_run_again() {
        let k: Keys<String> = Keys::default();
        k.restore("a", fp("x"), Duration::from_secs(60), Some(("first".into(), 5)));
        k.restore("b", fp("x"), Duration::from_secs(30), None);
        k.restore("old", fp("x"), KEEP + Duration::from_secs(1), Some(("gone".into(), 4)));
        assert_eq!(k.peek("a", fp("x")), Some(Claim::Replay("first".into())));
        assert_eq!(k.peek("a", fp("y")), Some(Claim::Conflict), "another command under the key");
        assert_eq!((k.peek("b", fp("x")), k.peek("c", fp("x"))), (Some(Claim::Running), None));
        assert_eq!(k.claim("a", fp("x"), false), Claim::Replay("first".into()));
        assert_eq!(k.claim("b", fp("x"), false), Claim::Running);
        assert_eq!(k.claim("old", fp("x"), false), Claim::Run);
        let e = k.entries();
        assert_eq!(e.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["a", "b", "old"]);
        assert!(e[0].1 >= Duration::from_secs(60) && e[0].3.as_deref() == Some("first") && e[1].3.is_none());
    }
}
