//! The supervisor's control socket (`spec/SUPERVISOR.md`): one JSON
//! request line on a unix socket, one JSON reply line back. This module is
//! both ends: the wire shape, the client `runwire-serve` uses ([`call`]),
//! and the supervisor's listener ([`bind`], [`serve`]), which reads each
//! request and hands it to the supervisor's loop; the command it carries
//! is read and checked there as every door's (`crate::control::Command`).
//!
//! Trust: the run's own files (liveness and all of `runstate/`) are in its
//! worktree, where its agent can write, so nothing here reads them to find
//! or signal a process. The socket is always `$HARNESS_HOME/sock/<runId>.sock`
//! and the supervisor that may answer on it is the one recorded at
//! registration in `<runId>.owner.json` beside it ([`Owner`]): a peer whose
//! `SO_PEERCRED` pid, start time and boot id are not the recorded ones is
//! refused before a byte is sent.

use crate::control::keys::{Claim, Keys};
use crate::util::lines::{read_capped, Capped, Rest};
use crate::util::procid::Ident;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Largest steer message accepted, in bytes (the one rule: [`crate::control::MAX_TEXT`]).
pub const MAX_MSG: usize = crate::control::MAX_TEXT;
/// Largest request line read: an answer as large as a session input line
/// takes (an edited tool input of up to [`crate::control::MAX_LINE`], what
/// the HTTP routes and a session's own input admit), with room for the
/// request's other fields; a maximal steer JSON-escaped fits too.
pub const MAX_LINE: usize = crate::control::MAX_LINE + 64 * 1024;
/// What every caller is told when no supervisor answers.
pub const NOT_LIVE: &str = "run not supervised / not live";

use super::request::start_budget;
pub use super::request::{late, monotonic_ms, past_deadline, Request, LATE};
/// One control reply: the reply of every door ([`crate::control::Reply`]).
pub use crate::control::Reply;

/// `$HARNESS_HOME/sock/<runId>.sock`: where a run's supervisor listens
/// (liveness's `sock` names it for people; control never reads it there).
pub fn sock_path(home: &Path, run_id: &str) -> PathBuf {
    home.join("sock").join(format!("{run_id}.sock"))
}

/// `$HARNESS_HOME/sock/<runId>.owner.json`: the [`Owner`] record.
pub fn owner_path(home: &Path, run_id: &str) -> PathBuf {
    home.join("sock").join(format!("{run_id}.owner.json"))
}

pub const OWNER_VERSION: &str = "control-owner/v1";
/// Largest owner record read (a plan's worth of groups fits many times).
const MAX_OWNER: u64 = 1 << 20;

/// Who controls a run: the supervisor registered for it, and the process
/// groups it started that may still run (each by its leader). Written only
/// by that supervisor, in the 0700 `sock/` directory outside any worktree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    pub v: String,
    pub supervisor: Ident,
    /// Task id to the leader of the group its current process runs in.
    #[serde(default)]
    pub groups: BTreeMap<String, Ident>,
}

impl Owner {
    /// This process as the supervisor, with no groups yet.
    pub fn me() -> Result<Owner, String> {
        let me = Ident::me().ok_or("cannot read this process's start time and boot id under /proc")?;
        Ok(Owner { v: OWNER_VERSION.into(), supervisor: me, groups: BTreeMap::new() })
    }

    /// The record of `run_id`; `None` when there is none or it is not one
    /// (a FIFO, a huge or foreign file).
    pub fn read(home: &Path, run_id: &str) -> Option<Owner> {
        let p = owner_path(home, run_id);
        let f = std::fs::File::open(&p).ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        // A small pretty-printed record, read whole up to its cap.
        let mut buf = String::new();
        f.take(MAX_OWNER).read_to_string(&mut buf).ok()?;
        serde_json::from_str::<Owner>(&buf).ok().filter(|o| o.v == OWNER_VERSION)
    }

    /// Replaces the record (atomically, mode 0600).
    pub fn write(&self, home: &Path, run_id: &str) -> std::io::Result<()> {
        let p = owner_path(home, run_id);
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::runs::write_atomic(&p, &bytes)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
    }
}

/// Records this process as the owner of run `run_id` (`runwire-serve`'s
/// recorded runs: the same record a supervisor writes, with no groups), in
/// the 0700 `sock/` directory. Returns the record's path: its writer
/// removes it once the run's end is journaled.
pub fn own(home: &Path, run_id: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = home.join("sock");
    if !dir.is_dir() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Owner::me().map_err(std::io::Error::other)?.write(home, run_id)?;
    Ok(owner_path(home, run_id))
}

/// A run whose owner was gone when [`recover`] looked, and what it
/// journaled for it (`None`: the run had ended; only its owner record was
/// removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub run_id: String,
    pub reason: Option<String>,
}

/// What an owner's crash left a run in, as its journal will say it: the
/// state its unfinished tasks get, and why. A session held between turns
/// had finished its turns: `committed`, as a shutdown records it.
fn crash_reason(who: &str, status: &str) -> Option<(&'static str, String)> {
    let (state, doing) = match status {
        "needs_input" => ("failed", "waiting for an answer"),
        "idle" => ("committed", "holding the session between turns"),
        "paused" => ("failed", "the run was paused"),
        "running" | "registered" => ("failed", "the agent was running"),
        _ => return None,
    };
    Some((state, format!("{who} stopped while {doing}")))
}

/// The runs owned by a process that is gone (its owner record in `sock/`
/// names a pid, start time and boot id no process has now), among those
/// `mine` accepts: each one's unfinished tasks are journaled `failed` with
/// why (`"server stopped while waiting for an answer"`; `committed` for a
/// session held between turns, as a shutdown records it) and the run
/// `finished`, once: then the owner record goes. A live owner's runs are
/// left alone. Called by `runwire-serve` as it starts, for its own runs
/// (a supervisor continues its run from the journal instead).
pub fn recover(
    home: &Path,
    actor: &str,
    who: &str,
    mine: impl Fn(&crate::runs::registry::Pointer) -> bool,
) -> Vec<Recovered> {
    use crate::runs::journal::{self, Record};
    let reg = crate::runs::registry::Registry::at(home);
    let Ok(rd) = std::fs::read_dir(home.join("sock")) else { return Vec::new() };
    let mut ids: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".owner.json").map(str::to_string))
        .filter(|id| crate::runs::valid_id(id))
        .collect();
    ids.sort();
    let mut out = Vec::new();
    for id in ids {
        let Some(owner) = Owner::read(home, &id) else { continue };
        if owner.supervisor.mismatch().is_none() {
            continue;
        }
        let p = match reg.read(&id) {
            Ok(p) => p,
            Err(e) if e.absent => {
                let _ = std::fs::remove_file(owner_path(home, &id));
                continue;
            }
            Err(_) => continue,
        };
        if !mine(&p) {
            continue;
        }
        let l = crate::runs::view::load(p);
        let d = l.digest();
        let reason = crash_reason(who, d.status);
        if let Some((state, why)) = &reason {
            let journal = l.files.journal();
            let run = crate::runs::marks::Run::new(home, &id);
            let mut wrote = Ok(());
            for t in l.task_ids() {
                if l.journal.state(&t).is_some_and(journal::is_terminal) {
                    continue;
                }
                let mut r = Record::task(actor, &t, state, None);
                r.detail = Some(why.clone());
                wrote = wrote.and_then(|_| journal::append(&run, &journal, &r));
            }
            let wrote = wrote.and_then(|_| journal::append(&run, &journal, &Record::run(actor, "finished")));
            crate::runs::marks::release(home, &id);
            if wrote.is_err() {
                // Kept: the next start tries again.
                continue;
            }
        }
        let _ = std::fs::remove_file(owner_path(home, &id));
        out.push(Recovered { run_id: id, reason: reason.map(|(_, why)| why) });
    }
    out
}

/// Longest a caller may take to send its whole request line, counted from
/// the accept (not per read: a caller that drips a byte now and then is cut
/// off all the same), and again to take its reply once it is written.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Callers served at once (each a thread and its connection); one more is
/// refused by the accepting thread at once ([`BUSY`]).
pub const MAX_CALLERS: usize = 64;
/// What a caller beyond [`Limits::callers`] is told.
pub const BUSY: &str = "the supervisor is serving as many calls as it takes at once; try again later";

/// What the socket gives its callers, whatever they do: so its threads and
/// descriptors stay bounded. [`serve`] keeps the defaults ([`serve_with`] takes others).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Callers served at once ([`MAX_CALLERS`]).
    pub callers: usize,
    /// The whole request line's time from the accept, and the reply's
    /// from its write ([`READ_TIMEOUT`]).
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { callers: MAX_CALLERS, deadline: READ_TIMEOUT }
    }
}

/// A request read off the socket, for the supervisor's loop, and where its reply goes.
pub struct Msg {
    pub req: Request,
    pub reply: mpsc::Sender<Reply>,
}

/// `$HARNESS_HOME/sock/<runId>.lock`: the lock a run's supervisor holds
/// for its life ([`Ownership`]).
pub fn lock_path(home: &Path, run_id: &str) -> PathBuf {
    home.join("sock").join(format!("{run_id}.lock"))
}

/// A supervisor's ownership of its run: an exclusive `flock` on
/// [`lock_path`], taken before anything of the run is written and held
/// until the supervisor has cleaned up (the kernel lets go of it when the
/// process dies, SIGKILL included; the descriptor is close-on-exec, so no
/// task process inherits it). Whoever holds it is the run's only
/// supervisor: a socket file found beside it is a dead one's. Dropped, it
/// removes the lock file while still holding it, so the file goes with
/// every supervisor that leaves cleanly, the refused one included.
pub struct Ownership {
    path: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Ownership {
    /// Takes the run's lock without waiting. Held by another process: that
    /// supervisor is live, and `Err` says so (nothing of the run written).
    /// Creates the 0700 `sock/` directory, and the lock file (0600) when absent.
    pub fn take(home: &Path, run_id: &str) -> Result<Ownership, String> {
        use nix::fcntl::{Flock, FlockArg, OFlag};
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let path = lock_path(home, run_id);
        let io = |e: std::io::Error| format!("{}: {e}", path.display());
        private_dir(path.parent().unwrap_or(Path::new(".")))?;
        loop {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
                .open(&path)
                .map_err(io)?;
            let lock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Ok(l) => l,
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    return Err(format!(
                        "{}: another supervisor of this run is live (it holds {})",
                        sock_path(home, run_id).display(),
                        path.display()
                    ))
                }
                Err((_, e)) => return Err(io(e.into())),
            };
            // The file its last holder removed between the open and the
            // lock guards nothing: take the one at the path now.
            let held = lock.metadata().map_err(io)?;
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino()) {
                sweep_torn_owner_writes(home, run_id);
                return Ok(Ownership { path, _lock: lock });
            }
        }
    }
}

/// Removes the temp files of owner records of `run_id` that a supervisor
/// killed mid-write left (`runs::write_atomic`'s `.<name>.<pid>.tmp`): only
/// the run's owner writes its record, and the caller is it now.
fn sweep_torn_owner_writes(home: &Path, run_id: &str) {
    let prefix = format!(".{run_id}.owner.json.");
    let Ok(dir) = std::fs::read_dir(home.join("sock")) else { return };
    for e in dir.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        // Removed while held; the lock goes after, with the descriptor.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Creates `dir` (and its parents) and makes it 0700.
fn private_dir(dir: &Path) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

/// Binds the private socket: directory 0700, socket 0600. Called with the
/// run's [`Ownership`]: a socket file already there is a dead
/// supervisor's (a live one would hold the lock) and is replaced. One that
/// still answers is a supervisor holding no lock (an older runwire's):
/// refused, as another live supervisor of the run.
pub fn bind(sock: &Path, _owned: &Ownership) -> Result<UnixListener, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    private_dir(sock.parent().unwrap_or(Path::new(".")))?;
    if std::fs::symlink_metadata(sock).is_ok() {
        if UnixStream::connect(sock).is_ok() {
            return Err(format!("{}: another supervisor of this run is live", sock.display()));
        }
        std::fs::remove_file(sock).map_err(|e| io(sock, e))?;
    }
    let l = UnixListener::bind(sock).map_err(|e| io(sock, e))?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600)).map_err(|e| io(sock, e))?;
    Ok(l)
}

/// Accepts connections forever; each request goes to the loop through `to`
/// (a keyed one only the first time: the socket's keys are this supervisor's).
pub fn serve<T: Send + 'static>(listener: UnixListener, tx: mpsc::Sender<T>, to: fn(Msg) -> T) {
    serve_with(listener, tx, to, Limits::default())
}

/// [`serve`] under `limits`: at most `limits.callers` callers served at
/// once (a thread and one descriptor each), each given `limits.deadline`
/// from its accept to send its request line; a caller beyond them is
/// refused at once by the accepting thread, unread.
pub fn serve_with<T: Send + 'static>(listener: UnixListener, tx: mpsc::Sender<T>, to: fn(Msg) -> T, limits: Limits) {
    let keys: Arc<Keys<Reply>> = Arc::default();
    let serving = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let until = Instant::now() + limits.deadline;
        if serving.load(Ordering::SeqCst) >= limits.callers {
            refuse_busy(conn);
            continue;
        }
        // Counted until the caller's thread ends (or its closure is dropped unrun).
        let slot = Slot::take(&serving);
        // Kept to answer with when no thread can be had (a spawn that
        // panicked here would end the socket for every later caller).
        let spare = conn.try_clone().ok();
        let tx = tx.clone();
        let keys = keys.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            answer(&conn, until, limits.deadline, &keys, move |m| tx.send(to(m)).is_ok());
            // The place is free before the caller sees its connection close.
            drop(slot);
        });
        if let Err(e) = spawned {
            crate::util::cli::report(
                super::waves::ACTOR,
                format!("control socket: no thread for a caller ({e}); refused"),
            );
            if let Some(s) = spare {
                refuse_unthreaded(s);
            }
        }
    }
}

/// One caller being served, counted in `serving` while it lives.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(serving: &Arc<AtomicUsize>) -> Slot {
        serving.fetch_add(1, Ordering::SeqCst);
        Slot(serving.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A caller beyond [`Limits::callers`]: told [`BUSY`] at once by the
/// accepting thread, which neither waits for nor reads its request (what it
/// already sent is dropped unread, so its close is not a reset that could
/// destroy the reply in flight), and closed.
fn refuse_busy(mut conn: UnixStream) {
    let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
    write_reply(&mut conn, &Reply::busy(BUSY));
    let _ = conn.shutdown(std::net::Shutdown::Write);
    if conn.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 8192];
        let mut left = MAX_LINE + 1;
        while left > 0 {
            match conn.read(&mut sink) {
                Ok(n) if n > 0 => left = left.saturating_sub(n),
                _ => break,
            }
        }
    }
}

/// A reader and writer of one connection under a deadline for all its
/// reads (and another for all its writes): each call waits only for what
/// is left of it, and none once it has passed.
struct Deadline<'a> {
    conn: &'a UnixStream,
    read_until: Instant,
    write_until: Instant,
}

/// The time left before `until`, or `TimedOut` once it has passed.
fn left(until: Instant) -> std::io::Result<Duration> {
    let d = until.saturating_duration_since(Instant::now());
    if d.is_zero() {
        return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the caller's time is up"));
    }
    Ok(d)
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.conn.set_read_timeout(Some(left(self.read_until)?))?;
        let mut c = self.conn;
        c.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.conn.set_write_timeout(Some(left(self.write_until)?))?;
        let mut c = self.conn;
        c.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A caller no thread could be started for: its request read (briefly:
/// this is the accepting thread) and refused, so it hears why.
fn refuse_unthreaded(conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let _ = conn.set_write_timeout(Some(std::time::Duration::from_millis(200)));
    let Ok(mut w) = conn.try_clone() else { return };
    let mut buf = Vec::new();
    let _ = read_capped(&mut BufReader::new(conn), &mut buf, MAX_LINE, Rest::Leave);
    write_reply(&mut w, &Reply::busy("the supervisor has no thread for this call; try again later"));
}

/// One reply line.
fn write_reply(w: &mut impl Write, reply: &Reply) {
    let mut line = serde_json::to_vec(reply).unwrap_or_default();
    line.push(b'\n');
    let _ = w.write_all(&line);
}

/// Replies still to be written: the run waits for them before it exits (a
/// kill that ends the last task is answered after the loop has finished).
static REPLYING: AtomicUsize = AtomicUsize::new(0);

struct Replying;

impl Replying {
    fn new() -> Replying {
        REPLYING.fetch_add(1, Ordering::SeqCst);
        Replying
    }
}

impl Drop for Replying {
    fn drop(&mut self) {
        REPLYING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits up to `limit` for the replies still being written.
pub fn drain_replies(limit: Duration) {
    let until = Instant::now() + limit;
    while REPLYING.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One connection: its request line (at most [`MAX_LINE`] bytes, never read
/// past, all of it by `until`: a caller not done by then is closed
/// unanswered), handed over with `give` (under its key's rule, [`keyed`]),
/// and the reply written back within `write` of its first byte. One
/// descriptor: the connection is read and written through one reference.
fn answer(conn: &UnixStream, until: Instant, write: Duration, keys: &Keys<Reply>, give: impl Fn(Msg) -> bool) {
    let _replying = Replying::new();
    let mut io = Deadline { conn, read_until: until, write_until: until };
    let mut buf = Vec::new();
    let read = read_capped(&mut BufReader::new(&mut io), &mut buf, MAX_LINE, Rest::Leave);
    let reply = match read {
        Err(_) | Ok(Capped::End) => return,
        Ok(Capped::TooLong) => Reply::bad(format!("request longer than {MAX_LINE} bytes")),
        Ok(Capped::Line | Capped::Last) => match serde_json::from_slice::<Request>(&buf)
            .map_err(|e| e.to_string())
            .and_then(|r| crate::util::lenient::unique_keys(&buf).map(|()| r))
        {
            Err(e) => Reply::bad(format!("bad request: {e}")),
            Ok(req) => match keyed(keys, req, &give) {
                Some(r) => r,
                None => return,
            },
        },
    };
    io.write_until = Instant::now() + write;
    write_reply(&mut io, &reply);
}

/// One request to the loop and its reply. The loop gone before it took the
/// request (the supervisor is ending): said, since nothing ran. `None`: the
/// loop took it and gave no reply (it ended mid-command, or took longer
/// than any command): the connection closes with none, which the caller
/// reads as "may have run" (HTTP 502), never as a run not live.
fn run(req: Request, give: &impl Fn(Msg) -> bool) -> Option<Reply> {
    let (rtx, rrx) = mpsc::channel();
    if !give(Msg { req, reply: rtx }) {
        return Some(Reply::refuse(format!("{NOT_LIVE}: the supervisor is ending; nothing was done"), None));
    }
    // A kill answers once the group is gone, so wait past any grace.
    rrx.recv_timeout(Duration::from_secs(120)).ok()
}

/// A request under its idempotency key (the one rule, [`crate::control::keys`]):
/// the first runs and its reply is kept; the same request again gets that
/// reply, marked `replayed`, and nothing runs; another request under the key
/// is refused ([`crate::control::KEY_CONFLICT`]), as is a retry while the
/// first still runs ([`crate::control::KEY_RUNNING`]). A reply that says
/// nothing ran ([`crate::control::NOT_READING`], [`LATE`]), or none, frees
/// the key.
fn keyed(keys: &Keys<Reply>, mut req: Request, give: &impl Fn(Msg) -> bool) -> Option<Reply> {
    use crate::control::{keys as rule, KEY_CONFLICT, KEY_RUNNING, NOT_READING};
    let Some(key) = req.idempotency_key.take() else { return run(req, give) };
    if !rule::valid(&key) {
        return Some(Reply::bad(rule::invalid_text()));
    }
    // The request as it is without its key and its deadline (each retry
    // has its own): every other field names the command.
    let named = Request { deadline: None, ..req.clone() };
    let fingerprint = rule::fingerprint(&[&serde_json::to_vec(&named).unwrap_or_default()]);
    // The key is its caller's, as at the HTTP doors: two actors who pick
    // one key never refuse or replay each other's commands.
    let held = rule::held_as(req.actor.as_deref().unwrap_or_default(), &key);
    match keys.claim(&held, fingerprint, false) {
        Claim::Conflict => {
            Some(Reply { code: Some(KEY_CONFLICT.into()), ..Reply::refuse(rule::conflict_text(&key), None) })
        }
        Claim::Running => {
            Some(Reply { code: Some(KEY_RUNNING.into()), ..Reply::refuse(rule::running_text(&key), None) })
        }
        Claim::Replay(first) => Some(Reply { replayed: Some(true), ..first }),
        Claim::Run => {
            let reply = run(req, give);
            match &reply {
                Some(r) if !matches!(r.code.as_deref(), Some(NOT_READING | LATE)) => {
                    let size = serde_json::to_vec(r).map_or(0, |v| v.len());
                    keys.done(&held, r.clone(), size);
                }
                _ => keys.forget(&held),
            }
            reply
        }
    }
}

/// Why a call got no reply.
#[derive(Debug)]
pub enum CallError {
    /// Nobody listens (no socket file, refused, or a stale socket).
    NotLive(String),
    /// Someone listens but the exchange failed (timeout, bad reply).
    Broken(String),
    /// Someone listens who is not the supervisor registered for the run:
    /// nothing was sent.
    Untrusted(String),
}

/// Sends one request to the supervisor registered for `run_id` under
/// `home`, and waits up to `timeout` for its reply. The peer must be the
/// process the run's [`Owner`] record names.
pub fn call(home: &Path, run_id: &str, req: &Request, timeout: Duration) -> Result<Reply, CallError> {
    let sock = sock_path(home, run_id);
    let s = UnixStream::connect(&sock).map_err(|e| CallError::NotLive(format!("{}: {e}", sock.display())))?;
    let pid = crate::util::procid::peer_pid(&s)
        .map_err(|e| CallError::Broken(format!("{}: SO_PEERCRED: {e}", sock.display())))?;
    let Some(owner) = Owner::read(home, run_id) else {
        return Err(CallError::Untrusted(format!(
            "{}: no supervisor is registered for run {run_id} ({} is missing or unreadable)",
            sock.display(),
            owner_path(home, run_id).display()
        )));
    };
    if owner.supervisor.pid != pid {
        return Err(CallError::Untrusted(format!(
            "{}: answered by process {pid}, not the registered supervisor {}",
            sock.display(),
            owner.supervisor.pid
        )));
    }
    if let Some(why) = owner.supervisor.mismatch() {
        return Err(CallError::Untrusted(format!("{}: not the registered supervisor: {why}", sock.display())));
    }
    // A request with no deadline gets this call's: it never starts once
    // this caller has given up on it.
    let mut req = req.clone();
    req.deadline.get_or_insert(monotonic_ms().saturating_add(start_budget(timeout).as_millis() as u64));
    exchange(s, &sock, &req, timeout)
}

fn exchange(mut s: UnixStream, sock: &Path, req: &Request, timeout: Duration) -> Result<Reply, CallError> {
    let broken = |e: std::io::Error| CallError::Broken(format!("{}: {e}", sock.display()));
    s.set_read_timeout(Some(timeout)).map_err(broken)?;
    s.set_write_timeout(Some(timeout)).map_err(broken)?;
    let mut line = serde_json::to_vec(req).map_err(|e| CallError::Broken(e.to_string()))?;
    line.push(b'\n');
    // A supervisor that refused the call unread (too many callers) replied
    // and closed, maybe before the request was all written: its reply is
    // still there to read. No reply then: the write's error says why.
    let unsent = match s.write_all(&line) {
        Ok(()) => None,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) => Some(e),
        Err(e) => return Err(broken(e)),
    };
    let mut r = BufReader::new(s);
    let mut buf = Vec::new();
    let read = read_capped(&mut r, &mut buf, MAX_LINE, Rest::Leave);
    if let (Some(e), Err(_) | Ok(Capped::End)) = (unsent, &read) {
        return Err(broken(e));
    }
    let read = read.map_err(|e| {
        if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            // A supervisor that is stopped (SIGSTOP) or stuck: the command
            // ran if it was taken before its deadline, and never starts
            // after (a request with a deadline; one without may still run).
            let when = if req.deadline.is_some() {
                "it may have run, and will not start now if it has not"
            } else {
                "the command may still be done"
            };
            CallError::Broken(format!(
                "{}: the supervisor took the request and did not answer within {} ms (stopped or busy): {when}",
                sock.display(),
                timeout.as_millis()
            ))
        } else {
            broken(e)
        }
    })?;
    match read {
        // The registered supervisor read the request and said nothing (it
        // died mid-call, or its loop never answered): what happened is
        // unknown, so neither "not live" nor a steer inbox (spec/SUPERVISOR.md).
        Capped::End => {
            return Err(CallError::Broken(format!(
                "{}: the supervisor closed without a reply: the command may have been done",
                sock.display()
            )))
        }
        Capped::TooLong => {
            return Err(CallError::Broken(format!("{}: bad reply: longer than {MAX_LINE} bytes", sock.display())))
        }
        Capped::Line | Capped::Last => {}
    }
    serde_json::from_slice(&buf).map_err(|e| CallError::Broken(format!("{}: bad reply: {e}", sock.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `request` to [`answer`] over a real socket pair (the write end
    /// then closed) and returns the reply; a request that parses is
    /// answered by `on_request`.
    fn ask(request: Vec<u8>, on_request: Reply) -> Reply {
        let (conn, client) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel::<Msg>();
        let until = Instant::now() + READ_TIMEOUT;
        std::thread::spawn(move || answer(&conn, until, READ_TIMEOUT, &Keys::default(), move |m| tx.send(m).is_ok()));
        std::thread::spawn(move || {
            if let Ok(m) = rx.recv_timeout(Duration::from_secs(10)) {
                let _ = m.reply.send(on_request);
            }
        });
        let mut w = client.try_clone().unwrap();
        // Written apart: the supervisor stops reading one byte past the cap.
        std::thread::spawn(move || {
            let _ = w.write_all(&request);
            let _ = w.shutdown(std::net::Shutdown::Write);
        });
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // As the client reads it: one line (a reset for the unread rest comes after it).
        let mut reply = Vec::new();
        let got = read_capped(&mut BufReader::new(client), &mut reply, MAX_LINE, Rest::Leave).unwrap();
        assert_eq!(got, Capped::Line);
        serde_json::from_slice(&reply).unwrap()
    }

    #[test]
    fn a_request_over_the_line_cap_is_refused_without_being_read_whole() {
        let mut big = br#"{"verb":"steer","msg":""#.to_vec();
        big.resize(MAX_LINE * 4, b'x');
        big.extend_from_slice(b"\"}\n");
        let r = ask(big, Reply::ok("taken", None));
        assert!(!r.ok && r.detail.contains("request longer than"), "{r:?}");
        // Wrong in itself: said as every door says it (HTTP 400 through a server).
        assert_eq!(r.code.as_deref(), Some(crate::control::BAD_REQUEST), "{r:?}");
        // At the cap, with CR LF, or ended by the end of input: read and answered.
        let mut at_cap = br#"{"verb":"status"}"#.to_vec();
        at_cap.resize(MAX_LINE, b' ');
        for end in [&b"\r\n"[..], b"\n", b""] {
            let r = ask([&at_cap[..], end].concat(), Reply::ok("taken", None));
            assert!(r.ok && r.detail == "taken", "{r:?}");
        }
        let r = ask(b"not json\n".to_vec(), Reply::ok("taken", None));
        assert!(!r.ok && r.detail.starts_with("bad request") && r.http_status() == 400, "{r:?}");
        // A key given twice reads one way and acts another: refused, as on every door.
        let twice = br#"{"verb":"answer","task":"a","answer":{"id":"rw-0123456789abcdef","decision":"deny","decision":"allow"}}"#;
        let r = ask([&twice[..], b"\n"].concat(), Reply::ok("taken", None));
        assert!(!r.ok && r.detail.contains("appears twice"), "{r:?}");
        // An answer whose edited input fills a whole session input line (what
        // an HTTP route or the session itself takes) is taken here too.
        let edited = "x".repeat(crate::control::MAX_LINE - 200);
        let answer = serde_json::json!({"verb": "answer", "task": "a", "actor": "ana", "door": "task-route",
            "answer": {"id": "rw-0123", "decision": "allow", "updated_input": {"content": edited}}});
        let r = ask(format!("{answer}\n").into_bytes(), Reply::ok("taken", None));
        assert!(r.ok && r.detail == "taken", "{:?}", r.detail.get(..100));
    }

    /// A keyed request runs once: the retry gets the first reply marked
    /// `replayed`, another request under the key is refused naming it, and a
    /// reply that says nothing ran frees the key.
    #[test]
    fn a_keyed_request_runs_once() {
        let keys = Keys::default();
        let runs = std::cell::Cell::new(0);
        let give = |m: Msg| {
            runs.set(runs.get() + 1);
            let not_reading = m.req.msg.as_deref() == Some("busy");
            let r = Reply::ok(format!("run {}", runs.get()), None);
            let r = if not_reading { Reply { code: Some(crate::control::NOT_READING.into()), ..r } } else { r };
            m.reply.send(r).is_ok()
        };
        let steer = |msg: &str, key: Option<&str>| Request {
            verb: "steer".into(),
            task: Some("a".into()),
            msg: Some(msg.into()),
            idempotency_key: key.map(str::to_string),
            ..Default::default()
        };
        let first = keyed(&keys, steer("hi", Some("k1")), &give).unwrap();
        assert_eq!((first.detail.as_str(), first.replayed), ("run 1", None));
        let again = keyed(&keys, steer("hi", Some("k1")), &give).unwrap();
        assert_eq!((again.detail.as_str(), again.replayed), ("run 1", Some(true)));
        let other = keyed(&keys, steer("ho", Some("k1")), &give).unwrap();
        assert!(!other.ok && other.detail.contains("\"k1\"") && other.http_status() == 422, "{other:?}");
        assert_eq!(runs.get(), 1);
        // Not run: the retry runs.
        keyed(&keys, steer("busy", Some("k2")), &give).unwrap();
        keyed(&keys, steer("busy", Some("k2")), &give).unwrap();
        assert_eq!(runs.get(), 3);
        // No key: every request runs; a bad key runs nothing.
        keyed(&keys, steer("hi", None), &give).unwrap();
        assert_eq!(runs.get(), 4);
        let bad = keyed(&keys, steer("hi", Some("a b")), &give).unwrap();
        assert!(!bad.ok && bad.code.as_deref() == Some(crate::control::BAD_REQUEST), "{bad:?}");
        assert_eq!(runs.get(), 4);
    }

    /// Under small limits: a caller beyond them is refused at once, through
    /// the client too; an idle caller is closed at the deadline, which frees
    /// its place for the next.
    #[test]
    fn callers_beyond_the_limit_are_refused_and_idle_ones_closed_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("runwire-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("s.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let (tx, rx) = mpsc::channel::<Msg>();
        let limits = Limits { callers: 1, deadline: Duration::from_millis(400) };
        std::thread::spawn(move || serve_with(listener, tx, |m| m, limits));
        std::thread::spawn(move || {
            for m in rx {
                let _ = m.reply.send(Reply::ok("served", None));
            }
        });
        let status = Request { verb: "status".into(), ..Default::default() };
        let ask = || exchange(UnixStream::connect(&sock).unwrap(), &sock, &status, Duration::from_secs(2));
        let idle = UnixStream::connect(&sock).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let r = ask().unwrap();
        assert!(!r.ok && r.detail == BUSY && t.elapsed() < Duration::from_millis(300), "{r:?}");
        // The idle caller closed at its deadline, unanswered.
        idle.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut out = Vec::new();
        let _ = (&idle).read_to_end(&mut out);
        assert!(out.is_empty() && t.elapsed() < Duration::from_millis(800), "{:?}", t.elapsed());
        let r = ask().unwrap();
        assert!(r.ok && r.detail == "served", "{r:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A supervisor whose loop is gone says so (nothing ran); one whose loop
    /// took the request and never answered says nothing (it may have run).
    #[test]
    fn a_loop_gone_is_said_and_a_loop_silent_is_not() {
        let req = Request { verb: "pause".into(), ..Default::default() };
        let r = run(req.clone(), &|_| false).expect("said");
        assert!(!r.ok && r.detail.starts_with(NOT_LIVE), "{r:?}");
        // Taken, and its reply channel dropped unanswered (the loop ended mid-command).
        assert_eq!(
            run(req, &|m: Msg| {
                drop(m);
                true
            }),
            None
        );
    }

    #[test]
    fn requests_round_trip_and_refuse_unknown_keys() {
        let r: Request = serde_json::from_str(r#"{"verb":"steer","task":"a","msg":"hi","interrupt":true}"#).unwrap();
        assert_eq!(r.interrupt, Some(true));
        assert!(serde_json::from_str::<Request>(r#"{"verb":"kill","bogus":1}"#).is_err());
        let e = call(Path::new("/nonexistent"), "x", &r, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, CallError::NotLive(_)));
    }

    /// The client reads one reply line, at most [`MAX_LINE`] bytes: a longer
    /// one is a broken reply, not read whole; none at all, once the request
    /// was read, is broken too (it may have been done: HTTP 502), never "not
    /// live" (which sends a route on to a steer inbox).
    #[test]
    fn a_reply_over_the_line_cap_is_broken_and_so_is_no_reply() {
        let req = Request { verb: "status".into(), ..Default::default() };
        let reply_with = |reply: Vec<u8>| {
            let (client, server) = UnixStream::pair().unwrap();
            std::thread::spawn(move || {
                let mut line = Vec::new();
                let _ = read_capped(&mut BufReader::new(&server), &mut line, MAX_LINE, Rest::Leave);
                let _ = (&server).write_all(&reply);
            });
            exchange(client, Path::new("test.sock"), &req, Duration::from_secs(10))
        };
        let mut big = b"{\"ok\":true,\"detail\":\"".to_vec();
        big.resize(MAX_LINE * 3, b'x');
        big.extend_from_slice(b"\"}\n");
        let e = reply_with(big).unwrap_err();
        assert!(matches!(&e, CallError::Broken(m) if m.contains("longer than")), "{e:?}");
        let e = reply_with(Vec::new()).unwrap_err();
        assert!(matches!(&e, CallError::Broken(m) if m.contains("may have been done")), "{e:?}");
        assert!(reply_with(b"{\"ok\":true,\"detail\":\"halted\"}\r\n".to_vec()).unwrap().ok);
    }

    /// A supervisor SIGKILLed while it rewrote its owner record left the
    /// write's temp file: the run's next owner removes it (no other run's).
    #[test]
    fn taking_a_run_sweeps_its_torn_owner_writes_only() {
        let home = std::env::temp_dir().join(format!("runwire-sweep-{}", std::process::id()));
        std::fs::create_dir_all(home.join("sock")).unwrap();
        let torn = home.join("sock/.r.owner.json.4242.tmp");
        let others = home.join("sock/.r2.owner.json.4242.tmp");
        std::fs::write(&torn, "{").unwrap();
        std::fs::write(&others, "{").unwrap();
        let owned = Ownership::take(&home, "r").unwrap();
        assert!(!torn.exists() && others.exists());
        assert!(Ownership::take(&home, "r").is_err(), "held");
        drop(owned);
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn only_the_registered_supervisor_is_sent_a_request() {
        let home = std::env::temp_dir().join(format!("runwire-owner-{}", std::process::id()));
        std::fs::create_dir_all(home.join("sock")).unwrap();
        let l = std::os::unix::net::UnixListener::bind(sock_path(&home, "r")).unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(0));
        let got2 = got.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let mut line = Vec::new();
                let mut r = BufReader::new(c.try_clone().unwrap());
                if read_capped(&mut r, &mut line, MAX_LINE, Rest::Leave).is_ok_and(|c| c != Capped::End) {
                    *got2.lock().unwrap() += 1;
                    let _ = (&c).write_all(b"{\"ok\":true,\"detail\":\"halted\"}\n");
                }
            }
        });
        let req = Request { verb: "kill".into(), task: Some("a".into()), ..Default::default() };
        let t = Duration::from_secs(5);
        // No record: refused, nothing sent.
        assert!(matches!(call(&home, "r", &req, t), Err(CallError::Untrusted(_))));
        // A record of another process (the same pid, started at another time).
        let mut o = Owner::me().unwrap();
        o.supervisor.start += 1;
        o.write(&home, "r").unwrap();
        let e = call(&home, "r", &req, t).unwrap_err();
        assert!(matches!(&e, CallError::Untrusted(m) if m.contains("another process")), "{e:?}");
        assert_eq!(*got.lock().unwrap(), 0);
        Owner::me().unwrap().write(&home, "r").unwrap();
        assert!(call(&home, "r", &req, t).unwrap().ok);
        assert_eq!(*got.lock().unwrap(), 1);
        let _ = std::fs::remove_dir_all(&home);
    }
}
