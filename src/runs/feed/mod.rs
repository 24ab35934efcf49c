//! The change feed: one durable, ordered log of what happened to every run
//! (`$HARNESS_HOME/feed/events.log`, `spec/LAYOUT.md`), for `runs watch` and
//! `GET /runs/events`.
//!
//! Journals are written by many processes and have no order in common, so
//! the feed keeps an order of its own: an append-only log of JSON lines whose
//! byte offsets are the event ids (an event's id is the offset just past its
//! line, so "resume after id N" is "read from offset N"). The log is
//! written only by an [`Extender`]: any reader (the server, `runs watch`)
//! becomes one, takes an exclusive `flock` on `feed/lock`, reads each
//! journal from the offset the feed has reached in it, and appends one event
//! per new journal record in one `write`. Each event carries where in its
//! journal it came from (`src`: the journal's inode and the offset past the
//! record), so the per-journal offsets are a function of the log: a
//! checkpoint (`feed/state.json`) only saves replaying the whole log, and a
//! writer that dies between its append and its checkpoint loses nothing and
//! duplicates nothing (the next one replays the lines past the checkpoint).
//!
//! [`Watcher`] turns inotify events on the registry, the runstate
//! directories and the feed directory into the runs to look at, so nobody
//! polls.

use super::journal::{Journal, VERSION as JOURNAL_VERSION};
use super::link_prefixes::LinkPrefixes;
use super::registry::{Pointer, Registry};
use super::safe::{Splitter, MAX_TOTALS_LINE};
use super::view::{self, Loaded, Totals};
use super::RunFiles;

mod paths;
mod read;
mod watcher;
use crate::pipeline::normalize::{Adapter, Normalizer, Options};
use paths::{open_log, regular};
pub use paths::{Paths, MAX_EVENT, TYPES};
pub use read::{too_long, Cursor, Filter, Line};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
pub use watcher::{Changes, Watcher};

/// Statuses that end a run (an `ended` event is a move into one of them).
fn is_end(status: &str) -> bool {
    matches!(status, "done" | "failed")
}

/// In a reference event, the most bytes (as JSON) a field's value keeps;
/// longer values are left out and named in `omitted`.
const MAX_FIELD: usize = 1024;

const STATE_VERSION: &str = "runwire-feed-state/v1";
/// How much log may follow the checkpoint before it is written again.
const CHECKPOINT_EVERY: u64 = 256 * 1024;
/// Most task logs whose cost and token tallies are kept between events.
const MAX_TALLIES: usize = 512;

/// How far the feed has read one run's journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Track {
    /// The journal's inode (0: no journal yet).
    ino: u64,
    /// Offset past the last record turned into events.
    off: u64,
}

/// The checkpoint: the tracks as of `log_len` bytes of log.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    v: String,
    log_len: u64,
    runs: BTreeMap<String, Track>,
}

/// Which runs an extension looks at.
pub enum Scope<'a> {
    /// Every registered run (at start, and after an inotify queue overflow).
    All,
    /// These runs only (what the watcher saw change).
    Runs(&'a BTreeSet<String>),
}

/// A task log's running cost and token tally, read incrementally.
struct Tally {
    ino: u64,
    off: u64,
    /// Lines over the totals' bound are skipped.
    split: Splitter,
    norm: Normalizer,
    totals: Totals,
}

impl Tally {
    fn new(adapter: Adapter, ino: u64) -> Tally {
        Tally {
            ino,
            off: 0,
            split: Splitter::default(),
            norm: Normalizer::new(adapter, Options::default()),
            totals: Totals::default(),
        }
    }

    /// Takes in the log's next bytes.
    fn read(&mut self, chunk: &[u8]) {
        let Tally { split, norm, totals, .. } = self;
        split.push(chunk, MAX_TOTALS_LINE, |line| {
            for ev in norm.push(line) {
                if let crate::pipeline::events::Data::TurnEnd(te) = ev.data {
                    totals.add_turn(&te);
                }
            }
        });
    }
}

/// The one writer of the feed log (per process; processes serialize on the lock).
pub struct Extender {
    reg: Registry,
    paths: Paths,
    /// Tracks as of `state.log_len`; replaced from the checkpoint on first use.
    state: State,
    loaded: bool,
    checkpointed: u64,
    tallies: HashMap<PathBuf, Tally>,
    /// Runs whose journal could not be read, and why (said once).
    noted: HashMap<String, String>,
    reports: Vec<String>,
    /// A hub's home (`super::nodes::is_hub_home`, looked at each
    /// extension): its runs' events name their `node`, as the hub's server's do.
    hub: bool,
    home: PathBuf,
    /// The home's approval link prefixes (read each extension): a record's
    /// `links` pass only under them (`super::link_prefixes`).
    prefixes: LinkPrefixes,
}

fn lock(paths: &Paths) -> io::Result<nix::fcntl::Flock<std::fs::File>> {
    std::fs::create_dir_all(&paths.dir)?;
    super::lock_exclusive(&paths.lock)
}

/// The complete lines of `bytes` from `from`: `(start, end past the newline)`.
fn lines(bytes: &[u8], from: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = from;
    memchr::memchr_iter(b'\n', bytes.get(from..).unwrap_or_default()).map(move |i| {
        let s = start;
        start = from + i + 1;
        (s, start)
    })
}

impl Extender {
    pub fn new(home: &Path) -> Extender {
        Extender {
            reg: Registry::at(home),
            paths: Paths::at(home),
            state: State::default(),
            loaded: false,
            checkpointed: 0,
            tallies: HashMap::new(),
            noted: HashMap::new(),
            reports: Vec::new(),
            hub: false,
            home: home.to_path_buf(),
            prefixes: LinkPrefixes::default(),
        }
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// Brings the log up to date with the journals in `scope`; returns the
    /// log's length (the id of its last event, and where a reader that has
    /// everything resumes).
    pub fn extend(&mut self, scope: Scope) -> io::Result<u64> {
        self.extend_with(scope, &[])
    }

    /// Appends `events` (a hub's `node` events: a node lost or up again,
    /// judged by its cluster sidecar, spec/CLUSTER.md "Nodes") after what
    /// the journals bring meanwhile; returns the log's length. They are the
    /// log's own, not a journal's: they carry no `src`, and a replay passes
    /// over them.
    pub fn append(&mut self, events: &[Value]) -> io::Result<u64> {
        self.extend_with(Scope::Runs(&BTreeSet::new()), events)
    }

    fn extend_with(&mut self, scope: Scope, extra: &[Value]) -> io::Result<u64> {
        let _lock = lock(&self.paths)?;
        self.hub = super::nodes::is_hub_home(&self.home);
        self.prefixes = LinkPrefixes::read(&self.home);
        let mut log = {
            use std::os::unix::fs::OpenOptionsExt;
            let mut o = std::fs::OpenOptions::new();
            o.create(true).read(true).append(true).custom_flags(nix::libc::O_NONBLOCK);
            regular(o.open(&self.paths.log)?)?
        };
        let mut len = log.metadata()?.len();
        let fresh = !self.loaded && !self.paths.state.exists() && len == 0;
        if !self.loaded {
            self.loaded = true;
            let saved = std::fs::read(&self.paths.state).ok().and_then(|b| serde_json::from_slice::<State>(&b).ok());
            self.state = saved.filter(|s| s.v == STATE_VERSION).unwrap_or_default();
            self.checkpointed = self.state.log_len;
            self.sweep_checkpoint_temps();
        }
        if len < self.state.log_len {
            // The log was cut or replaced under us: its own lines are the truth.
            self.state = State::default();
        }
        if len > self.state.log_len {
            len = self.replay(&log, len)?;
        }
        let ids: Vec<String> = match scope {
            // A fresh feed starts with every run's `created`, whatever woke it.
            _ if fresh => self.reg.ids(),
            Scope::All => self.reg.ids(),
            Scope::Runs(ids) => ids.iter().cloned().collect(),
        };
        let mut out = Vec::new();
        for id in &ids {
            let Some(p) = self.reg.read(id).ok() else { continue };
            if fresh {
                // The first feed of this home starts from now: what the journals
                // already hold is history, not news. But every run already
                // registered gets its `created`, so `--since 0` lists them all.
                self.created_now(p, &mut out);
                continue;
            }
            self.run_events(p, &mut out);
        }
        for ev in extra {
            // Small by construction (a node's name, its state, two times).
            if serde_json::to_writer(&mut out, ev).is_ok() {
                out.push(b'\n');
            }
        }
        if !out.is_empty() {
            // One write: readers see whole events or none (they stop at the last newline).
            log.write_all(&out)?;
            len += out.len() as u64;
        }
        self.state.log_len = len;
        if fresh || len.saturating_sub(self.checkpointed) >= CHECKPOINT_EVERY {
            self.checkpoint();
        }
        Ok(len)
    }

    /// Applies the `src` of every event in the log past the checkpoint
    /// (written by another process, or by one that died before its
    /// checkpoint); cuts a torn last line (a writer that died mid-write: no
    /// reader has taken it, they stop at the last newline). Returns the
    /// log's length after.
    fn replay(&mut self, log: &std::fs::File, len: u64) -> io::Result<u64> {
        // Read as any reader does: a buffer at a time, lines over the bound skipped.
        let mut cursor = Cursor::on(log.try_clone()?, self.state.log_len);
        let runs = &mut self.state.runs;
        while cursor.read_some(|_, line| {
            let Line::Event(line) = line else { return };
            let Ok(v) = serde_json::from_slice::<Value>(line) else { return };
            let (Some(id), Some(src)) =
                (v.get("runId").and_then(Value::as_str), v.get("src").and_then(Value::as_array))
            else {
                return;
            };
            if let (Some(ino), Some(off)) = (src.first().and_then(Value::as_u64), src.get(1).and_then(Value::as_u64)) {
                runs.insert(id.to_string(), Track { ino, off });
            }
        })? {}
        let whole = cursor.pos;
        if whole < len {
            log.set_len(whole)?;
        }
        Ok(whole)
    }

    /// Removes checkpoints half written by a writer that died mid-way
    /// (`.state.json.<pid>.tmp`, [`super::write_atomic`]'s temp name): every
    /// checkpoint is written under the feed's lock, which the caller holds,
    /// so no such file is anyone's now. One left per killed writer piled up
    /// in a hub's home.
    fn sweep_checkpoint_temps(&self) {
        let Some(name) = self.paths.state.file_name().map(|n| n.to_string_lossy().into_owned()) else { return };
        let prefix = format!(".{name}.");
        let Ok(rd) = std::fs::read_dir(&self.paths.dir) else { return };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&prefix) && n.ends_with(".tmp") && e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Writes the checkpoint (temp file + rename). Best effort: a missing
    /// or stale checkpoint only costs a longer replay.
    pub fn checkpoint(&mut self) {
        self.state.v = STATE_VERSION.into();
        if let Ok(bytes) = serde_json::to_vec(&self.state) {
            if super::write_atomic(&self.paths.state, &bytes).is_ok() {
                self.checkpointed = self.state.log_len;
            }
        }
    }

    /// A run registered before the feed began: one `created` event with
    /// its summary as of now, its journal's records so far taken as read.
    fn created_now(&mut self, p: Pointer, out: &mut Vec<u8>) {
        let (ino, size) = journal_stat(&RunFiles::new(&p.runstate_dir, &p.slug).journal());
        let (mut loaded, bytes) = view::load_raw(p);
        self.note(&loaded);
        // Up to its last whole line: a line being written becomes news once complete.
        let off = match &loaded.problem {
            Some(_) => size as usize,
            None => memchr::memrchr(b'\n', &bytes).map_or(0, |i| i + 1),
        };
        loaded.journal = Journal::parse(&bytes[..off.min(bytes.len())]);
        let summary = self.summary(&loaded);
        push_event(out, "created", &loaded.pointer.created, summary, None, None, [ino, off as u64], None);
        self.state.runs.insert(loaded.pointer.run_id.clone(), Track { ino, off: off as u64 });
    }

    /// The events of one run's new journal records, appended to `out`.
    fn run_events(&mut self, p: Pointer, out: &mut Vec<u8>) {
        let files = RunFiles::new(&p.runstate_dir, &p.slug);
        let (ino, size) = journal_stat(&files.journal());
        let known = self.state.runs.get(&p.run_id).copied();
        let mut track = known.unwrap_or(Track { ino, off: 0 });
        // Replaced (another inode) or rewritten from scratch (shorter than
        // what was read): a new run under the same id, read from its start.
        let replaced = known.is_some_and(|t| (t.ino != 0 && ino != 0 && t.ino != ino) || size < t.off);
        if replaced {
            track = Track { ino, off: 0 };
        }
        track.ino = ino;
        let news = known.is_none() || replaced;
        if !news && size == track.off {
            return;
        }
        // Read like every reader of a run (`super::safe`): inside the run's directory, regular files, bounded.
        let (mut loaded, bytes) = view::load_raw(p);
        self.note(&loaded);
        let off = (track.off as usize).min(bytes.len());
        if news {
            let summary = self.summary(&loaded);
            push_event(out, "created", &loaded.pointer.created, summary, None, None, [ino, 0], None);
        }
        loaded.journal = Journal::parse(&bytes[..off]);
        let mut previous = loaded.status();
        for (s, e) in lines(&bytes, off) {
            track.off = e as u64;
            // Folded line by line: a long journal read at once costs its length, not its square.
            loaded.journal.push(&bytes[s..e - 1]);
            let Ok(Value::Object(mut rec)) = serde_json::from_slice::<Value>(&bytes[s..e]) else { continue };
            if rec.get("v").and_then(Value::as_str) != Some(JOURNAL_VERSION) {
                continue;
            }
            let status = loaded.status();
            let ty = match rec.get("input").and_then(Value::as_str) {
                Some("requested") => "needs_input",
                Some("answered") => "input_answered",
                Some(_) => continue,
                None if is_end(status) && !is_end(previous) => "ended",
                None if rec.get("task").is_some() => "task",
                None if rec.get("run").is_some() => "run",
                None => continue,
            };
            // Only links runwire minted leave the journal, which the agent can write.
            if let Some(links) = rec.remove("links") {
                if let Some(kept) = self.prefixes.keep(&links) {
                    rec.insert("links".into(), kept);
                }
            }
            let summary = self.summary(&loaded);
            let ts = rec.get("ts").and_then(Value::as_str).unwrap_or_default().to_string();
            let span = (s as u64, (e - s - 1) as u64);
            push_event(out, ty, &ts, summary, Some(rec), Some(previous), [ino, e as u64], Some(span));
            previous = status;
        }
        self.state.runs.insert(loaded.pointer.run_id.clone(), track);
    }

    /// Keeps a report of a journal that could not be read (not a regular
    /// file, over its bound): skipped, and said once per run and reason.
    fn note(&mut self, l: &Loaded) {
        let id = &l.pointer.run_id;
        match &l.problem {
            Some(view::Problem::Unreadable(why)) => {
                if self.noted.get(id) != Some(why) {
                    if self.noted.len() >= MAX_TALLIES {
                        self.noted.clear();
                    }
                    self.noted.insert(id.clone(), why.clone());
                    self.reports.push(format!("run {id}: {why} (its records are skipped)"));
                }
            }
            _ => {
                self.noted.remove(id);
            }
        }
    }

    /// What went wrong since the last call, for the caller to report.
    pub fn take_reports(&mut self) -> Vec<String> {
        std::mem::take(&mut self.reports)
    }

    /// The run's summary (as `GET /runs` gives it) with the cost and tokens
    /// of its logs so far, each log read only past what was tallied before.
    fn summary(&mut self, l: &Loaded) -> Map<String, Value> {
        if self.tallies.len() > MAX_TALLIES {
            self.tallies.clear();
        }
        let tallies = &mut self.tallies;
        let dir = l.dir.as_ref().map(std::os::fd::AsFd::as_fd);
        let s = l.summary_string_with(None, |task, adapter| {
            let path = l.files.log(task);
            let Some(dir) = dir else { return Ok(None) };
            // Opened safely (inside the run's directory, a regular file, never blocking).
            let (mut f, st) = match super::safe::open_beneath(dir, Path::new(&format!("{}.{task}.log", l.pointer.slug)))
            {
                Ok(x) => x,
                Err(e) if e.absent => return Ok(None),
                Err(e) => return Err(e),
            };
            #[allow(clippy::unnecessary_cast)] // the field types differ between targets
            let (ino, len) = (st.st_ino as u64, st.st_size.max(0) as u64);
            let t = tallies.entry(path.clone()).or_insert_with(|| Tally::new(adapter, ino));
            if t.ino != ino || len < t.off {
                *t = Tally::new(adapter, ino);
            }
            if len > t.off && f.seek(SeekFrom::Start(t.off)).is_ok() {
                // In chunks, with lines over the totals' bound skipped: bounded memory whatever the log.
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = f.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    t.off += n as u64;
                    t.read(&buf[..n]);
                }
            }
            Ok(Some(t.totals.clone()))
        });
        let mut m = match serde_json::from_str(&s) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        // At a hub, a run's id is `<node>.<run>`: its events name the node.
        if let Some(node) = self.hub.then(|| super::node_of(&l.pointer.run_id)).flatten() {
            m.insert("node".into(), node.into());
        }
        m
    }
}

impl Drop for Extender {
    fn drop(&mut self) {
        if self.loaded && self.state.log_len != self.checkpointed {
            if let Ok(_l) = lock(&self.paths) {
                // Only when nobody wrote since: otherwise our tracks are behind the log.
                if std::fs::metadata(&self.paths.log).is_ok_and(|m| m.len() == self.state.log_len) {
                    self.checkpoint();
                }
            }
        }
    }
}

fn journal_stat(path: &Path) -> (u64, u64) {
    std::fs::metadata(path).map(|m| (m.ino(), m.len())).unwrap_or((0, 0))
}

/// Record fields copied into an event (beside the run's summary).
const RECORD_FIELDS: [&str; 17] = [
    "actor",
    "task",
    "state",
    "rc",
    "detail",
    "run",
    "input",
    "request",
    "kind",
    "tool",
    "decision",
    "by",
    "expires_at",
    "at",
    "interrupt",
    "door",
    "links",
];

/// Appends one event line. An event over [`MAX_EVENT`] becomes a reference:
/// each field whose value is over [`MAX_FIELD`] is left out and named in
/// `omitted`, and `ref` (`offset`, `length`) says where its record lies in
/// the run's journal, for whoever needs the whole of it. What is left is a
/// few dozen fields of at most 1 KiB each: under the bound whatever the record.
#[allow(clippy::too_many_arguments)] // one event's parts, each needed once
fn push_event(
    out: &mut Vec<u8>,
    ty: &str,
    ts: &str,
    summary: Map<String, Value>,
    rec: Option<Map<String, Value>>,
    previous: Option<&str>,
    src: [u64; 2],
    span: Option<(u64, u64)>,
) {
    let mut ev = summary;
    if let Some(rec) = rec {
        for (k, v) in rec {
            if RECORD_FIELDS.contains(&k.as_str()) {
                // `run` is the record's run event; the run's id stays `runId`.
                let key = if k == "run" { "record".to_string() } else { k };
                ev.insert(key, v);
            }
        }
    }
    ev.insert("type".into(), ty.into());
    ev.insert("ts".into(), ts.into());
    if let Some(p) = previous {
        ev.insert("previous".into(), p.into());
    }
    ev.insert("src".into(), Value::from(src.to_vec()));
    let at = out.len();
    if serde_json::to_writer(&mut *out, &ev).is_err() {
        out.truncate(at);
        return;
    }
    if out.len() - at < MAX_EVENT {
        out.push(b'\n');
        return;
    }
    out.truncate(at);
    let mut omitted = Vec::new();
    ev.retain(|k, v| {
        let keep = serde_json::to_vec(v).map_or(0, |b| b.len()) <= MAX_FIELD;
        if !keep {
            omitted.push(Value::from(k.as_str()));
        }
        keep
    });
    ev.insert("omitted".into(), Value::from(omitted));
    if let Some((offset, length)) = span {
        ev.insert("ref".into(), serde_json::json!({"offset": offset, "length": length}));
    }
    if serde_json::to_writer(&mut *out, &ev).is_ok() {
        out.push(b'\n');
    } else {
        out.truncate(at);
    }
}

/// An event line (without its newline) as readers get it: `{"id":ID,…}`.
pub fn with_id(line: &[u8], id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(line.len() + 24);
    v.extend_from_slice(format!("{{\"id\":{id}").as_bytes());
    match line.strip_prefix(b"{") {
        Some(rest) if rest.first() != Some(&b'}') => {
            v.push(b',');
            v.extend_from_slice(rest);
        }
        _ => v.push(b'}'),
    }
    v
}

/// The log's end as of now: the id past its last whole event (0 without a log).
pub fn end(paths: &Paths) -> u64 {
    let Ok(mut f) = open_log(&paths.log) else { return 0 };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut at = len;
    // Whole events are written in one write; a torn tail is at most one event long.
    while at > 0 {
        let from = at.saturating_sub(64 * 1024);
        let mut buf = vec![0u8; (at - from) as usize];
        if f.seek(SeekFrom::Start(from)).and_then(|_| f.read_exact(&mut buf)).is_err() {
            return 0;
        }
        if let Some(i) = memchr::memrchr(b'\n', &buf) {
            return from + i as u64 + 1;
        }
        at = from;
    }
    0
}

/// Why an id cannot be resumed from. At a hub's home the message says
/// which ids this log takes: its own offsets, not the stream sequences of
/// the hub's `GET /runs/events` (spec/CLUSTER.md, "Two feeds, two id
/// spaces").
pub fn check_since(paths: &Paths, since: u64) -> Result<(), String> {
    if since == 0 {
        return Ok(());
    }
    let hub = paths.dir.parent().is_some_and(super::nodes::is_hub_home);
    let bad = |why: &str| {
        let mut m = format!("{since} is not an event id of this feed ({why})");
        if hub {
            m.push_str(HUB_HOME_IDS);
        }
        m
    };
    let mut f = open_log(&paths.log).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => bad("the feed log does not exist"),
        _ => bad(&e.to_string()),
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if since > len {
        return Err(bad(&format!("the log is {len} bytes")));
    }
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(since - 1)).and_then(|_| f.read_exact(&mut b)).map_err(|e| bad(&e.to_string()))?;
    if b[0] != b'\n' {
        return Err(bad("not at the end of an event"));
    }
    Ok(())
}

/// What a refused id at a hub's home adds: the two feeds' ids differ.
pub const HUB_HOME_IDS: &str = ": at a hub's home, this feed's ids are its own log's offsets (`runs watch`, \
     `runs notify`), not the cluster feed's stream sequences (the hub's GET /runs/events)";

/// Why [`follow`] stopped.
#[derive(Debug)]
pub enum FollowError {
    /// A bad `since` id or filter (exit 2).
    Usage(String),
    Io(io::Error),
}

impl From<io::Error> for FollowError {
    fn from(e: io::Error) -> FollowError {
        FollowError::Io(e)
    }
}

/// `runs watch`: brings the feed up to date, hands `emit` every event past
/// `since` (default: the end, so only what happens from now) that passes
/// `filter`, as `{"id":ID,…}` without a newline; with `keep_on`, then
/// waits (inotify, no polling) and goes on for as long as `emit` succeeds.
/// Needs no server: this process extends the feed itself, and sees what any
/// other writer (a server, another `runs watch`) appends.
pub fn follow(
    home: &Path,
    since: Option<u64>,
    filter: &Filter,
    keep_on: bool,
    mut emit: impl FnMut(&[u8]) -> io::Result<()>,
) -> Result<(), FollowError> {
    filter.validate().map_err(FollowError::Usage)?;
    // Watching starts before the first extension, so no change falls between.
    let mut watcher = if keep_on { Some(Watcher::new(home)?) } else { None };
    let mut x = Extender::new(home);
    let end = x.extend(Scope::All)?;
    let since = since.unwrap_or(end);
    check_since(x.paths(), since).map_err(FollowError::Usage)?;
    let mut cursor = Cursor::new(x.paths(), since);
    let log = x.paths().log.clone();
    let mut pass = |cursor: &mut Cursor, x: &mut Extender| -> io::Result<()> {
        for r in x.take_reports() {
            crate::util::cli::report("runs", format!("feed: {r}"));
        }
        let mut failed = None;
        cursor.read(|id, line| match line {
            Line::Event(line) => {
                if failed.is_none() && filter.matches(line) {
                    if let Err(e) = emit(&with_id(line, id)) {
                        failed = Some(e);
                    }
                }
            }
            Line::TooLong(n) => crate::util::cli::report("runs", too_long(&log, id, n)),
        })?;
        failed.map_or(Ok(()), Err)
    };
    pass(&mut cursor, &mut x)?;
    let Some(w) = watcher.as_mut() else { return Ok(()) };
    loop {
        let ch = w.wait(None)?;
        if ch.all {
            x.extend(Scope::All)?;
        } else if !ch.runs.is_empty() {
            x.extend(Scope::Runs(&ch.runs))?;
        }
        pass(&mut cursor, &mut x)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::journal::{append, Record};
    use crate::runs::registry::NewRun;

    fn home(name: &str) -> PathBuf {
        let h = std::env::temp_dir().join(format!("runwire-feed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&h);
        std::fs::create_dir_all(&h).unwrap();
        h
    }

    fn register(home: &Path, slug: &str) -> (String, RunFiles) {
        let new =
            NewRun { slug: slug.into(), repo_root: home.join("repo").display().to_string(), ..Default::default() };
        let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        std::fs::create_dir_all(&p.runstate_dir).unwrap();
        Registry::at(home).register(&p).unwrap();
        (p.run_id.clone(), RunFiles::new(&p.runstate_dir, slug))
    }

    fn events(home: &Path, since: u64) -> Vec<(u64, Value)> {
        let mut c = Cursor::new(&Paths::at(home), since);
        let mut v = Vec::new();
        c.read(|id, l| {
            if let Line::Event(l) = l {
                v.push((id, serde_json::from_slice(l).unwrap()))
            }
        })
        .unwrap();
        v
    }

    #[test]
    fn records_become_events_in_order_and_a_second_writer_or_a_crash_duplicates_nothing() {
        let h = home("order");
        // History before the first feed is not news: the run already there gets
        // only its `created`, with its state as of now.
        let (old, old_files) = register(&h, "old");
        append(&crate::runs::marks::test_run(), &old_files.journal(), &Record::task("runner", "a", "leased", None))
            .unwrap();
        let mut x = Extender::new(&h);
        let end0 = x.extend(Scope::All).unwrap();
        let evs = events(&h, 0);
        assert_eq!(evs.len(), 1, "{evs:?}");
        assert_eq!((evs[0].1["type"].as_str(), evs[0].1["runId"].as_str()), (Some("created"), Some(old.as_str())));
        assert_eq!((evs[0].1["status"].as_str(), evs[0].0), (Some("running"), end0));
        let (id, files) = register(&h, "s");
        std::fs::write(files.plan(), r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#)
            .unwrap();
        append(&crate::runs::marks::test_run(), &files.journal(), &Record::task("runner", "a", "leased", None))
            .unwrap();
        let end1 = x.extend(Scope::All).unwrap();
        let evs = events(&h, end0);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].1["type"], "created");
        assert_eq!(evs[0].1["runId"], id.as_str());
        assert_eq!(evs[1].1["type"], "task");
        assert_eq!((evs[1].1["task"].as_str(), evs[1].1["state"].as_str()), (Some("a"), Some("leased")));
        assert_eq!(evs[1].1["status"], "running");
        assert_eq!(evs[1].0, end1);

        // A second process's extender (its own memory) appends only what is new.
        append(
            &crate::runs::marks::test_run(),
            &old_files.journal(),
            &Record::task("runner", "a", "committed", Some(0)),
        )
        .unwrap();
        append(&crate::runs::marks::test_run(), &files.journal(), &Record::task("runner", "a", "committed", Some(0)))
            .unwrap();
        let mut y = Extender::new(&h);
        let end2 = y.extend(Scope::All).unwrap();
        assert_eq!(x.extend(Scope::All).unwrap(), end2);
        let evs = events(&h, end1);
        assert_eq!(evs.len(), 2, "{evs:?}");
        let ended = evs.iter().find(|e| e.1["runId"] == id.as_str()).unwrap();
        assert_eq!((ended.1["type"].as_str(), ended.1["status"].as_str()), (Some("ended"), Some("done")));
        assert_eq!(ended.1["previous"], "running");
        assert!(evs.iter().any(|e| e.1["runId"] == old.as_str() && e.1["type"] == "ended"));

        // A writer that died after appending, before its checkpoint, with a torn last line.
        let mut f = std::fs::OpenOptions::new().append(true).open(Paths::at(&h).log).unwrap();
        f.write_all(b"{\"type\":\"task\",\"runId\":\"x").unwrap();
        drop(f);
        append(&crate::runs::marks::test_run(), &files.journal(), &Record::run("user", "paused")).unwrap();
        drop(x);
        drop(y);
        let mut z = Extender::new(&h);
        let end3 = z.extend(Scope::All).unwrap();
        let evs = events(&h, end2);
        assert_eq!(evs.len(), 1, "{evs:?}");
        assert_eq!(evs[0].1["record"], "paused");
        assert_eq!(evs[0].0, end3);
        assert_eq!(std::fs::metadata(Paths::at(&h).log).unwrap().len(), end3);
        // Ids resume only at event boundaries.
        assert!(check_since(&Paths::at(&h), end2).is_ok());
        assert!(check_since(&Paths::at(&h), end2 + 1).is_err());
        assert!(check_since(&Paths::at(&h), end3 + 100).is_err());
        // At a hub's home, a refused id is told which ids this log takes.
        let e = check_since(&Paths::at(&h), end2 + 1).unwrap_err();
        assert!(!e.contains("stream sequences"), "{e}");
        std::fs::create_dir_all(h.join("cluster/nodes")).unwrap();
        let e = check_since(&Paths::at(&h), end2 + 1).unwrap_err();
        assert!(e.contains("not an event id of this feed") && e.ends_with(HUB_HOME_IDS), "{e}");
        assert!(check_since(&Paths::at(&h), end2).is_ok());
        drop(z); // its checkpoint, written on drop, would make the feed directory again
        let _ = std::fs::remove_dir_all(&h);
    }

    /// A hub's home: its sidecar's `node` events join the log, in order
    /// with the mirrored journals' events, and its runs' events name their node.
    #[test]
    fn a_hubs_node_events_join_its_feed_and_its_runs_events_name_their_node() {
        let h = home("hub");
        std::fs::create_dir_all(h.join("cluster/nodes/alpha")).unwrap();
        let new = NewRun { slug: "s".into(), repo_root: h.join("repo").display().to_string(), ..Default::default() };
        let mut p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        p.run_id = format!("alpha.{}", p.run_id);
        std::fs::create_dir_all(&p.runstate_dir).unwrap();
        Registry::at(&h).register(&p).unwrap();
        let files = RunFiles::new(&p.runstate_dir, "s");
        let node =
            |state: &str| serde_json::json!({"type": "node", "node": "alpha", "state": state, "since": 5, "ts": "t"});
        // The sidecar's first append starts the feed: the run's `created` first.
        let end0 = Extender::new(&h).append(&[node("lost")]).unwrap();
        let evs = events(&h, 0);
        let seen: Vec<(&str, &str)> =
            evs.iter().map(|(_, e)| (e["type"].as_str().unwrap(), e["node"].as_str().unwrap())).collect();
        assert_eq!(seen, [("created", "alpha"), ("node", "alpha")], "{evs:?}");
        assert_eq!((evs[1].0, evs[1].1["state"].as_str(), evs[1].1.get("src")), (end0, Some("lost"), None));
        // Another process's record and the next judgement, each once, in order.
        append(&crate::runs::marks::test_run(), &files.journal(), &Record::task("runner", "a", "leased", None))
            .unwrap();
        let mut x = Extender::new(&h);
        let end1 = x.extend(Scope::All).unwrap();
        let end2 = Extender::new(&h).append(&[node("up")]).unwrap();
        assert_eq!(x.extend(Scope::All).unwrap(), end2, "a replay past a node event duplicates nothing");
        let evs = events(&h, end0);
        assert_eq!(evs.len(), 2, "{evs:?}");
        assert_eq!(
            (evs[0].0, evs[0].1["type"].as_str(), evs[0].1["node"].as_str()),
            (end1, Some("task"), Some("alpha"))
        );
        assert_eq!((evs[1].0, evs[1].1["type"].as_str(), evs[1].1["state"].as_str()), (end2, Some("node"), Some("up")));
        // Not a hub's home: a run id with a dot names no node.
        drop(x);
        std::fs::remove_dir_all(h.join("cluster")).unwrap();
        append(&crate::runs::marks::test_run(), &files.journal(), &Record::task("runner", "a", "committed", Some(0)))
            .unwrap();
        Extender::new(&h).extend(Scope::All).unwrap();
        let evs = events(&h, end2);
        assert_eq!((evs.len(), evs[0].1.get("node")), (1, None), "{evs:?}");
        let _ = std::fs::remove_dir_all(&h);
    }

    /// A checkpoint half written by a writer that died (its temp file) is
    /// swept by the next writer, under the lock; the checkpoint stays.
    #[test]
    fn a_dead_writers_half_written_checkpoint_is_swept() {
        let h = home("sweep");
        Extender::new(&h).extend(Scope::All).unwrap();
        let feed = h.join("feed");
        std::fs::write(feed.join(".state.json.999999.tmp"), "{\"v\":").unwrap();
        std::fs::write(feed.join("other.tmp"), "kept").unwrap();
        Extender::new(&h).extend(Scope::All).unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(&feed).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert!(!names.iter().any(|n| n.starts_with(".state.json.")), "{names:?}");
        assert!(names.contains(&"state.json".to_string()) && names.contains(&"other.tmp".to_string()), "{names:?}");
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn input_records_become_needs_input_and_input_answered() {
        let h = home("input");
        Extender::new(&h).extend(Scope::All).unwrap();
        let (id, files) = register(&h, "i");
        let lines = [
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:01.000Z","actor":"runner","task":"a","state":"leased"}"#,
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:02.000Z","actor":"claude","task":"a","input":"requested","request":"r1","kind":"tool_approval","tool":"Bash","detail":"rm -rf build"}"#,
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:03.000Z","actor":"studio","task":"a","input":"answered","request":"r1","decision":"allow","by":"ana"}"#,
        ];
        std::fs::write(files.journal(), lines.join("\n") + "\n").unwrap();
        let mut x = Extender::new(&h);
        x.extend(Scope::All).unwrap();
        let evs: Vec<Value> = events(&h, 0).into_iter().map(|e| e.1).collect();
        let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["created", "task", "needs_input", "input_answered"]);
        assert_eq!(evs[2]["request"], "r1");
        assert_eq!(evs[2]["tool"], "Bash");
        assert_eq!(evs[2]["kind"], "tool_approval");
        assert_eq!(evs[3]["decision"], "allow");
        assert!(evs.iter().all(|e| e["runId"] == id.as_str()));
        let f = Filter { types: vec!["needs_input".into()], ..Default::default() };
        let mut c = Cursor::new(&Paths::at(&h), 0);
        let mut n = 0;
        c.read(|_, l| n += usize::from(matches!(l, Line::Event(l) if f.matches(l)))).unwrap();
        assert_eq!(n, 1);
        drop(x); // its checkpoint, written on drop, would make the feed directory again
        let _ = std::fs::remove_dir_all(&h);
    }

    /// A hub's `node` event passes a run filter for a run of that node (its
    /// state changed with it), and no other run filter.
    #[test]
    fn a_node_event_passes_the_filter_of_its_nodes_runs() {
        let ev = br#"{"id":7,"node":"alpha","since":1,"state":"lost","ts":"2026-01-01T00:00:00.000Z","type":"node"}"#;
        let runs = |r: &[&str]| Filter { runs: r.iter().map(|s| s.to_string()).collect(), ..Default::default() };
        assert!(runs(&["alpha.abc--x"]).matches(ev));
        assert!(runs(&["beta.abc--x", "alpha.abc--y"]).matches(ev));
        assert!(!runs(&["beta.abc--x"]).matches(ev));
        assert!(!runs(&["alphabet.abc--x", "abc--x"]).matches(ev));
        let typed = Filter { types: vec!["ended".into()], ..runs(&["alpha.abc--x"]) };
        assert!(!typed.matches(ev), "a type filter still applies");
        // A run event of another run is not let through by its node.
        let other = br#"{"id":8,"runId":"alpha.abc--z","status":"done","type":"ended"}"#;
        assert!(!runs(&["alpha.abc--x"]).matches(other));
    }

    #[test]
    fn a_record_too_big_for_an_event_becomes_a_reference_to_it() {
        let h = home("big");
        Extender::new(&h).extend(Scope::All).unwrap();
        let (id, files) = register(&h, "b");
        let small =
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:01.000Z","actor":"runner","task":"a","state":"leased"}"#;
        let big = format!(
            r#"{{"v":"runstate/v1","ts":"2026-01-01T00:00:02.000Z","actor":"claude","task":"a","input":"requested","request":"r1","kind":"question","detail":"{}"}}"#,
            "y".repeat(MAX_EVENT)
        );
        std::fs::write(files.journal(), format!("{small}\n{big}\n")).unwrap();
        Extender::new(&h).extend(Scope::All).unwrap();
        let log = std::fs::read(Paths::at(&h).log).unwrap();
        assert!(log.split(|b| *b == b'\n').all(|l| l.len() < MAX_EVENT), "every line under the bound");
        let evs: Vec<Value> = events(&h, 0).into_iter().map(|e| e.1).collect();
        assert_eq!(evs.len(), 3);
        assert!(evs[1].get("ref").is_none() && evs[1].get("omitted").is_none(), "a small record is copied whole");
        let r = &evs[2];
        assert_eq!((r["type"].as_str(), r["runId"].as_str()), (Some("needs_input"), Some(id.as_str())));
        assert_eq!(
            (r["request"].as_str(), r["kind"].as_str(), r["status"].as_str()),
            (Some("r1"), Some("question"), Some("needs_input"))
        );
        assert_eq!(r["omitted"], serde_json::json!(["detail"]));
        let (off, len) = (r["ref"]["offset"].as_u64().unwrap() as usize, r["ref"]["length"].as_u64().unwrap() as usize);
        let journal = std::fs::read(files.journal()).unwrap();
        assert_eq!(&journal[off..off + len], big.as_bytes());
        assert_eq!(r["src"][1].as_u64(), Some((off + len + 1) as u64));
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn a_line_over_the_bound_is_skipped_and_a_log_that_is_not_a_file_refused() {
        let h = home("long");
        let paths = Paths::at(&h);
        std::fs::create_dir_all(&paths.dir).unwrap();
        let ev = r#"{"type":"run","runId":"r"}"#;
        // Over the bound by a little and by many buffers, then one torn at the end.
        let long1 = "z".repeat(MAX_EVENT);
        let long2 = "z".repeat(5 * MAX_EVENT + 7);
        std::fs::write(&paths.log, format!("{ev}\n{long1}\n{ev}\n{long2}\n{ev}\n{long1}")).unwrap();
        let mut got = Vec::new();
        let mut c = Cursor::new(&paths, 0);
        c.read(|id, l| {
            got.push(match l {
                Line::Event(l) => (id, Ok(l.to_vec())),
                Line::TooLong(n) => (id, Err(n)),
            })
        })
        .unwrap();
        let e = ev.len() as u64 + 1;
        let (l1, l2) = (long1.len() as u64, long2.len() as u64);
        let at2 = e + l1 + 1 + e;
        assert_eq!(
            got,
            [
                (e, Ok(ev.as_bytes().to_vec())),
                (e + l1 + 1, Err(l1)),
                (at2, Ok(ev.as_bytes().to_vec())),
                (at2 + l2 + 1, Err(l2)),
                (at2 + l2 + 1 + e, Ok(ev.as_bytes().to_vec())),
            ]
        );
        assert_eq!(c.pos, at2 + l2 + 1 + e, "the torn tail is not passed");
        // A writer cuts the torn tail (and replays through the long lines).
        let cut = Extender::new(&h).extend(Scope::All).unwrap();
        assert_eq!(cut, at2 + l2 + 1 + e);

        std::fs::remove_file(&paths.log).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &paths.log).unwrap();
        let e = Cursor::new(&paths, 0).read(|_, _| panic!("nothing is read")).unwrap_err();
        assert!(e.to_string().contains("not a regular file (a character device)"), "{e}");
        assert!(Extender::new(&h).extend(Scope::All).unwrap_err().to_string().contains("not a regular file"));
        assert_eq!(end(&paths), 0);
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn a_journal_that_is_not_a_file_is_reported_once() {
        let h = home("devzero");
        Extender::new(&h).extend(Scope::All).unwrap();
        let (id, files) = register(&h, "z");
        std::fs::remove_file(files.journal()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", files.journal()).unwrap();
        let mut x = Extender::new(&h);
        x.extend(Scope::All).unwrap();
        let reports = x.take_reports();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(
            reports[0].starts_with(&format!("run {id}: z.jsonl: ")) && reports[0].contains("refused"),
            "{reports:?}"
        );
        x.extend(Scope::All).unwrap();
        assert!(x.take_reports().is_empty(), "said once");
        // A FIFO: another reason, said again; opening it never waits for a writer.
        std::fs::remove_file(files.journal()).unwrap();
        nix::unistd::mkfifo(&files.journal(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        x.extend(Scope::All).unwrap();
        let reports = x.take_reports();
        assert!(reports.len() == 1 && reports[0].contains("regular file"), "{reports:?}");
        drop(x); // its checkpoint, written on drop, would make the feed directory again
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn with_id_puts_the_id_first() {
        assert_eq!(with_id(br#"{"a":1}"#, 42), br#"{"id":42,"a":1}"#);
        assert_eq!(with_id(b"{}", 7), br#"{"id":7}"#);
    }
}
