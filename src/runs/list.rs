//! Listing registered runs (`runs list`, `GET /runs`): pages sorted by most
//! recent activity, filtered by status and repository, fast.
//!
//! A listing is syscall-bound, so it does only what the answer needs, in
//! two passes over the runs:
//!
//! 1. the head of every run: when a page is cut before the runs are read,
//!    its pointer's `stat` and its journal's, through the journal link
//!    (`$HARNESS_HOME/journals/<runId>.jsonl`, see [`super::registry`]): two
//!    `stat`s, no read. Without a link, or to filter by repository, the
//!    pointer is read (unless the cache holds it unchanged) and the journal
//!    `stat`ed in the directory it names;
//! 2. the summary (journal, plan and task logs read) of only the runs the
//!    answer shows, or of every candidate for a full listing. A status
//!    filter needs every candidate's status: journal and plan read, task
//!    logs only opened; the page's own runs are then read whole. A shown
//!    run whose link did not lead to the journal read (another inode: stale
//!    or hostile) is placed by its files and the page cut again.
//!
//! Every file is opened relative to its directory's descriptor through
//! [`super::safe`] (regular files inside the run's directory only, never
//! blocking, size-bounded); a run whose files cannot be read is listed as
//! `unreadable` with the reason, one whose runstate directory is gone as
//! `missing`, and nothing is ever deleted.
//!
//! [`ListCache`] keeps each run's summary with the identity of every file it
//! was computed from (device, inode, size, mtime and ctime in ns): the
//! pointer, the journal, the plan and each task log. A summary is served
//! again only when a `stat` of each of them gives the same identity, so the
//! listing stays an exact function of the files; dropping the cache costs
//! only speed. A file changed within [`RACY`] of its stamp is not trusted
//! (a second write in the same timestamp tick could keep size and times), as
//! git does for its index: such a run is read again on every listing.
//!
//! The cache's lock is held only to take a snapshot and to queue what a
//! listing learnt (merged once the answer is out): no listing ever waits on
//! another's reads.

use super::journal::Brief;
use super::plan::{self, Plan};
use super::registry::{link_name, parse_packed, Packed, Registry};
use super::safe;
use super::view::{self, Parts, Problem, STATUSES};
use super::FastHash;
use nix::fcntl::AtFlags;
use nix::sys::stat::FileStat;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// How recent a change must be for its stamp not to be trusted: covers the
/// coarse kernel clock behind file times and filesystems with 1 or 2 s times.
pub const RACY_NS: i64 = 2_000_000_000;
/// [`RACY_NS`], for the docs.
pub const RACY: std::time::Duration = std::time::Duration::from_nanos(RACY_NS as u64);
/// Most runs one page may ask for.
pub const MAX_LIMIT: usize = 10_000;

/// What identifies a file's content without reading it. Journals and logs
/// only grow and the other files are replaced by rename (a new inode); ctime
/// cannot be set from user space, so `touch -d` or `cp -p` cannot fake it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    fn of(st: &FileStat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as i64,
            mtime_ns: (st.st_mtime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec as i64),
            ctime_ns: (st.st_ctime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_ctime_nsec as i64),
        }
    }

    /// Changed so recently (relative to `now_ns`, read before the stat)
    /// that another write in the same tick could go unseen.
    fn racy(&self, now_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) >= now_ns.saturating_sub(RACY_NS)
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn stat_at(dir: &OwnedFd, name: &str) -> nix::Result<Stamp> {
    nix::sys::stat::fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW).map(|s| Stamp::of(&s))
}

/// What one listing asks for (`GET /runs?…`, `runs list …`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// At most this many runs (`None`: all).
    pub limit: Option<usize>,
    /// Only runs after this one in the listing's order.
    pub cursor: Option<Cursor>,
    /// Only runs with one of these statuses (from [`STATUSES`]).
    pub statuses: Option<Vec<&'static str>>,
    /// Only runs whose `repo` or `repoRoot` is exactly this.
    pub repo: Option<String>,
}

/// A place in the listing's order (activity, newest first, then run id):
/// the last run of a page. Written `<activity ns>-<runId>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub activity_ns: i64,
    pub run_id: String,
}

impl Cursor {
    pub fn parse(s: &str) -> Result<Cursor, String> {
        let bad = || format!("cursor {s:?} is not one this listing gave (ACTIVITY-RUNID)");
        let (ns, id) = s.split_once('-').ok_or_else(bad)?;
        let activity_ns = ns.parse::<i64>().map_err(|_| bad())?;
        if !super::valid_id(id) {
            return Err(bad());
        }
        Ok(Cursor { activity_ns, run_id: id.to_string() })
    }

    /// Whether a run sorts after this cursor.
    fn before(&self, activity_ns: i64, run_id: &str) -> bool {
        activity_ns < self.activity_ns || (activity_ns == self.activity_ns && run_id > self.run_id.as_str())
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}-{}", self.activity_ns, self.run_id)
    }
}

impl Query {
    /// Parses `limit`, `cursor`, `status` (comma-separated) and `repo`
    /// values (already percent-decoded).
    pub fn parse(
        limit: Option<&str>,
        cursor: Option<&str>,
        status: Option<&str>,
        repo: Option<&str>,
    ) -> Result<Query, String> {
        let limit = match limit {
            None => None,
            Some(l) => match l.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => Some(n),
                _ => return Err(format!("limit {l:?}: expected 1 to {MAX_LIMIT}")),
            },
        };
        let cursor = cursor.map(Cursor::parse).transpose()?;
        let statuses = match status {
            None => None,
            Some(s) => Some(
                s.split(',')
                    .map(|one| {
                        STATUSES
                            .iter()
                            .copied()
                            .find(|k| *k == one)
                            .ok_or_else(|| format!("status {one:?} is not one of {}", STATUSES.join(", ")))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        if repo.is_some_and(|r| r.is_empty()) {
            return Err("repo: expected a repository name or root".into());
        }
        Ok(Query { limit, cursor, statuses, repo: repo.map(str::to_string) })
    }
}

/// One page of the listing.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Each run's summary (JSON text), in the listing's order.
    pub items: Vec<Arc<str>>,
    /// How many runs match the filters (all pages).
    pub total: usize,
    /// The cursor of the next page, when there are more.
    pub next: Option<Cursor>,
}

impl Page {
    /// `{"runs":[...],"total":N,"next":"CURSOR"|null}`, as `GET /runs` answers.
    pub fn json(&self) -> String {
        self.pieces(&mut String::new()).concat()
    }

    /// [`Page::json`] in pieces that borrow the summaries (a full listing's
    /// body is megabytes: written from them, never copied into one);
    /// `tail` holds what follows the summaries.
    pub fn pieces<'a>(&'a self, tail: &'a mut String) -> Vec<&'a str> {
        tail.clear();
        tail.push_str("],\"total\":");
        tail.push_str(&self.total.to_string());
        tail.push_str(",\"next\":");
        match &self.next {
            Some(c) => tail.push_str(&serde_json::to_string(&c.to_string()).unwrap_or_default()),
            None => tail.push_str("null"),
        }
        tail.push('}');
        let mut out = Vec::with_capacity(2 * self.items.len() + 2);
        out.push("{\"runs\":[");
        for (i, s) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(",");
            }
            out.push(&**s);
        }
        out.push(tail);
        out
    }
}

/// A runstate directory as one worker opened it: its own descriptor (see
/// [`Worker::dir`]) and, when asked for, the directory's file names (so
/// absent task logs are never probed), shared by the workers that opened
/// the same directory and read once by whichever asks first.
struct Dir {
    fd: OwnedFd,
    names: Arc<Names>,
}

/// Hashes of a directory's names (32-bit: a collision only costs an
/// `openat` that finds nothing, which is handled as an absent file), sorted,
/// looked up by binary search; one allocation of the exact size, under 1 KiB
/// for a directory of up to 256 names (glibc tidies its whole free lists
/// before each larger one: thousands of small frees, a listing's worth).
type Names = std::sync::OnceLock<Box<[u32]>>;

/// The names of the directories a listing's workers opened, by path, with
/// the device and inode each was found at.
type Listed = HashMap<String, ((u64, u64), Arc<Names>), FastHash>;

fn name_hash(name: &[u8]) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = FastHash::default().build_hasher();
    h.write(name);
    h.finish() as u32
}

thread_local! {
    /// Where a directory's name hashes are gathered before they are kept.
    static SCRATCH: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Dir {
    fn has(&self, name: &str) -> bool {
        let names = self.names.get_or_init(|| {
            SCRATCH.with_borrow_mut(|v| {
                v.clear();
                safe::each_name(self.fd.as_fd(), |n| v.push(name_hash(n)));
                v.sort_unstable();
                v.as_slice().into()
            })
        });
        names.binary_search(&name_hash(name.as_bytes())).is_ok()
    }

    /// The stamp of `name`, `None` when absent.
    fn stamp(&self, name: &str) -> Option<Stamp> {
        if !self.has(name) {
            return None;
        }
        stat_at(&self.fd, name).ok()
    }
}

enum DirState {
    Open(Dir),
    Missing,
    Unreadable(String),
}

/// One cached summary and what it was computed from.
#[derive(Clone)]
struct Cached {
    /// The pointer file's stamp and what it says.
    pointer_stamp: Stamp,
    pointer: Packed,
    /// File names in the runstate directory and their stamps when computed:
    /// journal, plan, then each task log counted for cost and tokens.
    inputs: Inputs,
    activity_ns: i64,
    status: &'static str,
    /// `None` for a run a status-filtered page counted but did not show:
    /// its status is known, its summary is made when a listing shows it.
    summary: Option<Arc<str>>,
}

/// File names and their stamps (`None`: absent), the names in one string:
/// a listing keeps these for every run, so two allocations, not one a name.
#[derive(Clone, Default)]
struct Inputs {
    names: String,
    /// Where each name ends in `names`, and its stamp.
    ends: Vec<(u32, Option<Stamp>)>,
}

impl Inputs {
    /// Starts a name made of `parts`; the name so far.
    fn start(&mut self, parts: &[&str]) -> &str {
        let from = self.names.len();
        parts.iter().for_each(|p| self.names.push_str(p));
        &self.names[from..]
    }

    /// Keeps the name started, with its stamp.
    fn keep(&mut self, st: Option<Stamp>) {
        self.ends.push((self.names.len() as u32, st));
    }

    /// Drops the name started.
    fn drop_started(&mut self) {
        let end = self.ends.last().map_or(0, |e| e.0 as usize);
        self.names.truncate(end);
    }

    fn iter(&self) -> impl Iterator<Item = (&str, Option<Stamp>)> {
        self.range(0..self.ends.len())
    }

    /// The names and stamps kept `from..to` (in the order kept).
    fn range(&self, r: std::ops::Range<usize>) -> impl Iterator<Item = (&str, Option<Stamp>)> {
        let mut from = r.start.checked_sub(1).map_or(0, |i| self.ends[i].0 as usize);
        self.ends[r].iter().map(move |&(end, st)| {
            let name = &self.names[from..end as usize];
            from = end as usize;
            (name, st)
        })
    }

    /// The names and stamps kept `r`, in an `Inputs` of their own (of
    /// the exact size: a cache keeps one for every run).
    fn copy(&self, r: std::ops::Range<usize>) -> Inputs {
        let start = r.start.checked_sub(1).map_or(0, |i| self.ends[i].0);
        let end = r.end.checked_sub(1).map_or(0, |i| self.ends[i].0);
        let mut names = String::with_capacity((end - start) as usize);
        names.push_str(&self.names[start as usize..end as usize]);
        let ends = self.ends[r].iter().map(|&(e, st)| (e - start, st)).collect();
        Inputs { names, ends }
    }

    /// Forgets what was kept from the `n`th name on.
    fn truncate(&mut self, n: usize) {
        self.ends.truncate(n);
        self.names.truncate(self.ends.last().map_or(0, |e| e.0 as usize));
    }
}

impl FromIterator<(String, Option<Stamp>)> for Inputs {
    fn from_iter<I: IntoIterator<Item = (String, Option<Stamp>)>>(it: I) -> Inputs {
        let mut i = Inputs::default();
        for (name, st) in it {
            i.start(&[&name]);
            i.keep(st);
        }
        i
    }
}

/// A run id, shared by the listing's tables (one allocation a run).
type Id = Arc<str>;

/// Cached summaries by run id. Each entry in an allocation of its own:
/// made once by a worker, then moved as a pointer, not copied (a listing of
/// 10,000 runs wrote megabytes of fresh memory moving them, and each fresh
/// page costs a fault of several microseconds).
type Runs = HashMap<Id, Arc<Cached>, FastHash>;

/// `parts` joined: file names are built per run, and `format!` costs more
/// than the copy.
fn cat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    parts.iter().for_each(|p| s.push_str(p));
    s
}

/// What a listing learnt: per run id, an entry to keep (`Some`) or to drop.
type Updates = Vec<(Id, Option<Later>)>;

/// A cache entry to make once the answer is out ([`State::settle`]): the
/// `row`th of what worker `worker` learnt. Made during the listing, the
/// entries of 10,000 runs were 5 MB of fresh memory and 30,000 allocations
/// of the listing's own time; waiting, they are 4 MB in a few vectors.
#[derive(Clone, Copy)]
struct Later {
    worker: u32,
    row: u32,
}

/// What one worker learnt for the cache: its runs' entries but for their
/// file names and stamps, and those, one run after another.
#[derive(Default)]
struct Learnt {
    rows: Vec<Row>,
    inputs: Inputs,
}

/// A cache entry but for its inputs: those are `inputs` of its [`Learnt`].
/// Not a [`Cached`] with no inputs: such an entry would be trusted whatever
/// its files did.
struct Row {
    pointer_stamp: Stamp,
    pointer: Packed,
    activity_ns: i64,
    status: &'static str,
    summary: Option<Arc<str>>,
    inputs: std::ops::Range<usize>,
}

impl Learnt {
    /// The entry `row` makes.
    fn entry(&self, row: u32) -> Option<Cached> {
        let r = self.rows.get(row as usize)?;
        Some(Cached {
            pointer_stamp: r.pointer_stamp,
            pointer: r.pointer.clone(),
            inputs: self.inputs.copy(r.inputs.clone()),
            activity_ns: r.activity_ns,
            status: r.status,
            summary: r.summary.clone(),
        })
    }
}

#[derive(Default)]
struct State {
    runs: Arc<Runs>,
    /// The persisted index was read (once, on first use).
    index_loaded: bool,
    /// Entries changed since the index was read or written.
    dirty: bool,
    /// What listings learnt and have not merged yet: the entries to keep or
    /// drop, and the run ids registered then. Merged after the
    /// answer is out ([`ListCache::save_index`]) or by the next listing.
    pending: Vec<(Updates, Vec<Id>, Vec<Learnt>)>,
}

impl State {
    /// Applies what listings learnt; entries of runs no longer registered
    /// are dropped.
    fn settle(&mut self) {
        for (updates, mut ids, learnt) in std::mem::take(&mut self.pending) {
            // Sorted here, once the answer is out.
            ids.sort_unstable();
            let registered = |id: &str| ids.binary_search_by(|x| (**x).cmp(id)).is_ok();
            let stale = self.runs.keys().any(|id| !registered(id));
            if updates.is_empty() && !stale {
                continue;
            }
            // Copied only when another listing still holds the snapshot.
            let runs = Arc::make_mut(&mut self.runs);
            let before = runs.len();
            runs.retain(|id, _| registered(id));
            let mut changed = runs.len() != before;
            runs.reserve(updates.len());
            for (id, k) in updates {
                changed |= match k {
                    // Its worker's inputs are always there; were they not, no entry
                    // (one without its inputs would outlive changes to its files).
                    Some(l) => match learnt.get(l.worker as usize).and_then(|w| w.entry(l.row)) {
                        Some(c) => {
                            runs.insert(id, Arc::new(c));
                            true
                        }
                        None => runs.remove(&*id).is_some(),
                    },
                    None => runs.remove(&*id).is_some(),
                };
            }
            self.dirty |= changed;
        }
    }
}

/// Summaries kept between listings by a long-lived reader (the server);
/// `runs list` uses an empty one, so both list through the same code.
#[derive(Default)]
pub struct ListCache {
    state: Mutex<State>,
}

/// The directories one worker opened, by path.
type Dirs = HashMap<String, Arc<DirState>, FastHash>;

/// What every worker of a listing shares: where the directories are (each
/// worker opens its own, see [`Worker::dir`]) and what it gives back.
#[derive(Clone, Copy)]
struct Shared<'a> {
    /// `$HARNESS_HOME/runs`.
    reg: &'a Path,
    /// `$HARNESS_HOME/journals`, when it exists.
    links: Option<&'a Path>,
    /// The names of the runstate directories listed so far.
    listed: &'a Mutex<Listed>,
    /// The workers' inputs (see [`Later`]).
    learnt: &'a Mutex<Vec<Learnt>>,
}

/// Pass 1: what is known of a run before its files are read.
struct Head {
    id: Id,
    /// The pointer read (or why it cannot be) and its stamp; `None` when
    /// not read yet (the journal's time came through the journal link).
    /// Boxed: a first page keeps a head for every run, most with nothing
    /// here, and a smaller head is less fresh memory to fill (see [`Runs`]).
    read: Option<Box<Read>>,
    /// The newest mtime of the pointer and (when looked at) the journal.
    activity_ns: i64,
    /// The journal's time came through the journal link: checked against
    /// the pointer when the run is shown.
    linked: bool,
    /// The device and inode the link led to (`None`: to nothing yet).
    link_id: Option<(u64, u64)>,
}

/// Pass 2: a run's summary.
struct Full {
    /// `None` when not asked for (see [`Cached::summary`]).
    summary: Option<Arc<str>>,
    status: &'static str,
    activity_ns: i64,
    /// What to keep in the cache: `Some(Some)` a fresh keepable entry,
    /// `Some(None)` drop any, `None` the cached one still holds.
    keep: Option<Option<Later>>,
    /// The run's activity as its files say, when its head's came through a
    /// journal link that does not lead to the pointer's journal (stale or
    /// hostile) and differs.
    corrected_ns: Option<i64>,
    /// The device and inode of the journal read (`None`: none, or cached).
    journal_id: Option<(u64, u64)>,
}

/// A pointer read: what it says (or why it cannot be read), and its stamp.
type Read = (Result<Packed, String>, Option<Stamp>);

/// Per-thread state of one listing. Its descriptors are its own, and
/// dropped with it, in its thread.
struct Worker<'a> {
    reg_dir: Option<OwnedFd>,
    /// `$HARNESS_HOME/journals`, when it exists.
    links: Option<OwnedFd>,
    /// The runstate directories this worker opened.
    dirs: Dirs,
    listed: &'a Mutex<Listed>,
    /// Its thread has a descriptor table of its own.
    private: bool,
    /// The files it read, closed together.
    closer: safe::Closer,
    buf: Vec<u8>,
    /// The journal read, while the plan is read into `buf`.
    jbuf: Vec<u8>,
    /// File names are built here.
    name: String,
    /// Summaries are written here, then copied into their own allocation.
    text: Vec<u8>,
    /// The inputs of the runs this worker read (see [`Later`]), given to
    /// the listing's [`Learnt`], at `worker`, when the worker is done.
    learnt: Learnt,
    worker: u32,
    learnt_by: &'a Mutex<Vec<Learnt>>,
    now_ns: i64,
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        let mut all = self.learnt_by.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = all.get_mut(self.worker as usize) {
            *slot = std::mem::take(&mut self.learnt);
        }
        drop(all);
        if self.private {
            // Left open in the thread's own table: the kernel closes them as the
            // thread ends, once the listing's thread has been told it is done
            // (closing a hundred directories took 1 to 2 ms of a listing).
            let dirs = std::mem::take(&mut self.dirs).into_values().filter_map(Arc::into_inner);
            let fds = dirs.filter_map(|d| match d {
                DirState::Open(d) => Some(d.fd),
                _ => None,
            });
            fds.chain(self.reg_dir.take()).chain(self.links.take()).for_each(|fd| {
                let _ = fd.into_raw_fd();
            });
        }
    }
}

impl<'a> Worker<'a> {
    /// A worker; `spawned`: on a thread spawned for it, which ends with it,
    /// and gets a descriptor table of its own ([`safe::private_fd_table`]).
    fn new(shared: Shared<'a>, now_ns: i64, spawned: bool) -> Worker<'a> {
        // First: what it opens goes in its own table.
        let private = spawned && safe::private_fd_table();
        let reg_dir = safe::open_dir(shared.reg).ok();
        let links = shared.links.and_then(|p| safe::open_dir(p).ok());
        // A slot for its inputs, taken now: its runs' entries name it.
        let worker = {
            let mut all = shared.learnt.lock().unwrap_or_else(|e| e.into_inner());
            all.push(Learnt::default());
            (all.len() - 1) as u32
        };
        Worker {
            reg_dir,
            links,
            dirs: Dirs::default(),
            listed: shared.listed,
            private,
            closer: safe::Closer::default(),
            buf: Vec::new(),
            jbuf: Vec::new(),
            name: String::new(),
            text: Vec::new(),
            learnt: Learnt::default(),
            worker,
            learnt_by: shared.learnt,
            now_ns,
        }
    }

    /// The directory at `path`, opened once by this worker: a worker's
    /// descriptors are its own (in a table of its own when it can: opens and
    /// closes in a shared one contend for its lock). Its names are shared
    /// with the workers that found the same directory there.
    fn dir(&mut self, path: &str) -> Arc<DirState> {
        // Looked up before inserting: most calls find it, and need no owned key.
        if let Some(d) = self.dirs.get(path) {
            return d.clone();
        }
        let st = match safe::open_dir(Path::new(path)) {
            Ok(fd) => {
                // Out of the way of the files it reads: see [`safe::moved_high`].
                let fd = if self.private { safe::moved_high(fd) } else { fd };
                DirState::Open(Dir { names: self.names_of(path, &fd), fd })
            }
            Err(nix::errno::Errno::ENOENT) => DirState::Missing,
            Err(e) => DirState::Unreadable(format!("runstateDir {path}: {}", e.desc().to_lowercase())),
        };
        let d = Arc::new(st);
        self.dirs.insert(path.to_string(), d.clone());
        d
    }

    /// The names of the directory `fd`, opened at `path`: those of another
    /// worker's when it found the same directory (device and inode) there.
    fn names_of(&self, path: &str, fd: &OwnedFd) -> Arc<Names> {
        let Ok(st) = nix::sys::stat::fstat(fd.as_raw_fd()) else { return Arc::default() };
        let s = Stamp::of(&st);
        let mut all = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        match all.get(path) {
            Some((id, names)) if *id == (s.dev, s.ino) => names.clone(),
            // Another directory there now: its names are not those.
            Some(_) => Arc::default(),
            None => {
                let names = Arc::<Names>::default();
                all.insert(path.to_string(), ((s.dev, s.ino), names.clone()));
                names
            }
        }
    }

    /// Reads and checks the pointer of `id`; `None` when it is gone. Its
    /// stamp comes from the `fstat` that comes with the open.
    fn read_pointer(&mut self, id: &str) -> Option<Read> {
        let reg_dir = self.reg_dir.as_ref()?;
        self.name.clear();
        self.name.push_str(id);
        self.name.push_str(".json");
        let name = &self.name;
        let mut buf = std::mem::take(&mut self.buf);
        let mut pointer_stamp = None;
        let closer = &mut self.closer;
        let read = safe::open_beneath(reg_dir.as_fd(), Path::new(name)).and_then(|(mut f, st)| {
            pointer_stamp = Some(Stamp::of(&st));
            let n = safe::read_capped(&mut f, &st, &mut buf, safe::MAX_POINTER, name);
            closer.close(f);
            n
        });
        let pointer = match read {
            Ok(n) => parse_packed(&buf[..n], id).map_err(|why| format!("{name}: {why}")),
            Err(e) if e.absent => {
                self.buf = buf;
                return None;
            }
            Err(e) => Err(e.to_string()),
        };
        self.buf = buf;
        Some((pointer, pointer_stamp))
    }

    /// Pass 1 for one run; `None` when its pointer is gone. With
    /// `stat_journal`, the journal's time is taken too: through the journal
    /// link when `use_link` and the run has one (two `stat`s, no read),
    /// else from the pointer's runstate directory.
    fn head(&mut self, id: &Id, cached: Option<&Cached>, stat_journal: bool, use_link: bool) -> Option<Head> {
        let reg_dir = self.reg_dir.as_ref()?;
        // A cached pointer costs one stat.
        if let Some(c) = cached {
            match stat_at(reg_dir, &cat(&[id, ".json"])) {
                Ok(s) if s == c.pointer_stamp => {
                    return Some(self.head_of(id, Ok(c.pointer.clone()), Some(s), stat_journal));
                }
                Err(nix::errno::Errno::ENOENT) => return None,
                _ => {}
            }
        }
        if let (true, true, Some(links)) = (stat_journal, use_link, &self.links) {
            match linked_head(reg_dir, links, id, &mut self.name) {
                Linked::Head(h) => return Some(h),
                Linked::Gone => return None,
                Linked::NoLink => {}
            }
        }
        let (pointer, pointer_stamp) = self.read_pointer(id)?;
        Some(self.head_of(id, pointer, pointer_stamp, stat_journal))
    }

    fn head_of(
        &mut self,
        id: &Id,
        pointer: Result<Packed, String>,
        pointer_stamp: Option<Stamp>,
        stat_journal: bool,
    ) -> Head {
        let mut activity_ns = pointer_stamp.map_or(0, |s| s.mtime_ns);
        if let (true, Ok(p)) = (stat_journal, &pointer) {
            let p = p.fields();
            if let DirState::Open(d) = &*self.dir(p.runstate_dir) {
                if let Ok(s) = stat_at(&d.fd, &cat(&[p.slug, ".jsonl"])) {
                    activity_ns = activity_ns.max(s.mtime_ns);
                }
            }
        }
        Head {
            id: id.clone(),
            read: Some(Box::new((pointer, pointer_stamp))),
            activity_ns: activity_ns.max(0),
            linked: false,
            link_id: None,
        }
    }

    fn still_valid(&mut self, pointer_stamp: Option<Stamp>, c: &Cached) -> bool {
        if pointer_stamp != Some(c.pointer_stamp) {
            return false;
        }
        let DirState::Open(dir) = &*self.dir(c.pointer.fields().runstate_dir) else { return false };
        c.inputs.iter().all(|(name, st)| dir.stamp(name) == st)
    }

    /// Pass 2 for one run; `None` when its pointer is gone. A head whose
    /// journal time came through the link has its pointer read now, and
    /// the link checked: when it does not name the pointer's journal, the
    /// run's activity is what its files say.
    fn full(&mut self, head: &Head, cached: Option<&Cached>, want_summary: bool) -> Option<Full> {
        let fresh;
        let (pointer, pointer_stamp) = match &head.read {
            Some(r) => (&r.0, r.1),
            None => {
                fresh = self.read_pointer(&head.id)?;
                (&fresh.0, fresh.1)
            }
        };
        let pointer_ns = pointer_stamp.map_or(0, |s| s.mtime_ns).max(0);
        let fallback_ns = if head.linked { pointer_ns } else { head.activity_ns };
        let mut f = self.full_of(&head.id, pointer, pointer_stamp, fallback_ns, cached, want_summary);
        // The link is trusted for a shown run only when it led to the very journal read
        // (same device and inode, or both absent).
        let trusted = pointer.is_ok() && head.link_id == f.journal_id;
        if head.linked && !trusted && f.activity_ns != head.activity_ns {
            f.corrected_ns = Some(f.activity_ns);
        }
        Some(f)
    }

    /// A run's summary (or, without `want_summary`, only its status) from
    /// its pointer; `fallback_ns` is its activity when its files cannot be
    /// read.
    fn full_of(
        &mut self,
        id: &str,
        pointer: &Result<Packed, String>,
        pointer_stamp: Option<Stamp>,
        fallback_ns: i64,
        cached: Option<&Cached>,
        want_summary: bool,
    ) -> Full {
        if let Some(c) = cached.filter(|c| !want_summary || c.summary.is_some()) {
            if self.still_valid(pointer_stamp, c) {
                return Full {
                    summary: c.summary.clone(),
                    status: c.status,
                    activity_ns: c.activity_ns,
                    keep: None,
                    corrected_ns: None,
                    journal_id: None,
                };
            }
        }
        let p = match pointer {
            Ok(p) => p.clone(),
            Err(why) => {
                let l = view::unreadable_pointer(id, why.clone());
                return unkept(&l.parts(), fallback_ns);
            }
        };
        let none = Brief::default();
        let f = p.fields();
        let mut parts = Parts { pointer: f, pointer_ok: true, journal: &none, plan: None, problem: None };
        let now_ns = self.now_ns;
        let dir_state = self.dir(f.runstate_dir);
        let dir = match &*dir_state {
            DirState::Open(d) => d,
            DirState::Missing => {
                parts.problem = Some(&Problem::Missing);
                return unkept(&parts, fallback_ns);
            }
            DirState::Unreadable(why) => {
                let problem = Problem::Unreadable(why.clone());
                parts.problem = Some(&problem);
                return unkept(&parts, fallback_ns);
            }
        };
        // Two buffers: the journal is folded borrowing its bytes while the plan is read.
        let (mut buf, mut jbuf) = (std::mem::take(&mut self.buf), std::mem::take(&mut self.jbuf));
        // This run's inputs follow those of the runs this worker read before.
        let mut inputs = std::mem::take(&mut self.learnt.inputs);
        let first = inputs.ends.len();
        let mut activity_ns = pointer_stamp.map_or(0, |s| s.mtime_ns);
        let closer = &mut self.closer;
        let mut read = |suffix: &str, cap: u64, buf: &mut Vec<u8>, inputs: &mut Inputs| {
            let name = inputs.start(&[f.slug, suffix]);
            let r = match safe::open_beneath(dir.fd.as_fd(), Path::new(name)) {
                Ok((mut f, st)) => {
                    let n = safe::read_capped(&mut f, &st, buf, cap, name);
                    closer.close(f);
                    n.map(|n| Some((n, Stamp::of(&st))))
                }
                Err(e) if e.absent => Ok(None),
                Err(e) => Err(e),
            };
            match &r {
                Ok(Some((_, st))) => inputs.keep(Some(*st)),
                Ok(None) => inputs.keep(None),
                Err(_) => inputs.drop_started(),
            }
            r
        };
        let mut journal_id = None;
        let mut problem = None;
        let mut journal_len = 0;
        match read(".jsonl", safe::MAX_JOURNAL, &mut jbuf, &mut inputs) {
            Ok(Some((n, st))) => {
                journal_len = n;
                activity_ns = activity_ns.max(st.mtime_ns);
                journal_id = Some((st.dev, st.ino));
            }
            Ok(None) => {}
            Err(e) => problem = Some(Problem::Unreadable(e.to_string())),
        }
        let plan_len = match read(".plan.json", safe::MAX_PLAN, &mut buf, &mut inputs) {
            Ok(Some((n, _))) => Some(n),
            Ok(None) => None,
            Err(e) => {
                problem.get_or_insert(Problem::Unreadable(e.to_string()));
                None
            }
        };
        // A plain plan is read in place (no copy of its prompts); another as before.
        let plain = plan_len.and_then(|n| Plan::parse_plain(&buf[..n]));
        let owned = if plain.is_none() { plan_len.and_then(|n| Plan::parse(&buf[..n]).ok()) } else { None };
        let plan: Option<&dyn plan::View> = match (&plain, &owned) {
            (Some(p), _) => Some(p),
            (_, Some(p)) => Some(p),
            _ => None,
        };
        let journal = Brief::parse(&jbuf[..journal_len]);
        let parts = Parts { journal: &journal, plan, problem: problem.as_ref(), ..parts };
        let activity_ns = activity_ns.max(0);
        // A task's log, opened (and stamped) but not read.
        let mut open_log = |task: &str| {
            let name = inputs.start(&[f.slug, ".", task, ".log"]);
            if !dir.has(name) {
                inputs.keep(None);
                return Ok(None);
            }
            match safe::open_beneath(dir.fd.as_fd(), Path::new(name)) {
                Ok((f, st)) => {
                    inputs.keep(Some(Stamp::of(&st)));
                    Ok(Some(f))
                }
                // Listed, then removed: absent as of now; not kept (no stamp for a listed name).
                Err(e) if e.absent => {
                    inputs.drop_started();
                    Ok(None)
                }
                Err(e) => {
                    inputs.drop_started();
                    Err(e)
                }
            }
        };
        let (summary, status) = if want_summary {
            let mut text = std::mem::take(&mut self.text);
            text.clear();
            let status = parts.summary_into(&mut text, Some(activity_ns / 1_000_000), |task, adapter| {
                Ok(open_log(task)?.map(|f| view::log_totals(f, adapter)))
            });
            let summary = Arc::<str>::from(super::flat::utf8(&text).unwrap_or_default());
            self.text = text;
            (Some(summary), status)
        } else {
            // Only the status: no log is read for its cost and tokens.
            (None, parts.status_with(|task| open_log(task).map(drop)))
        };
        drop((journal, plain, owned));
        for b in [&mut buf, &mut jbuf] {
            if b.len() > 1024 * 1024 {
                // One big file does not keep its buffer for the rest of the listing.
                *b = Vec::new();
            }
        }
        (self.buf, self.jbuf) = (buf, jbuf);
        let mine = first..inputs.ends.len();
        let keep = !matches!(status, "missing" | "unreadable")
            && pointer_stamp.is_some_and(|s| !s.racy(now_ns))
            && inputs.range(mine.clone()).all(|(name, st)| match st {
                Some(s) => !s.racy(now_ns),
                // An absent file is absent as of the directory listing; a listed one must have a stamp.
                None => !dir.has(name),
            });
        let later = match pointer_stamp {
            Some(pointer_stamp) if keep => {
                let row = Row {
                    pointer_stamp,
                    pointer: p.clone(),
                    activity_ns,
                    status,
                    summary: summary.clone(),
                    inputs: mine,
                };
                self.learnt.rows.push(row);
                Some(Later { worker: self.worker, row: (self.learnt.rows.len() - 1) as u32 })
            }
            _ => {
                inputs.truncate(first);
                None
            }
        };
        self.learnt.inputs = inputs;
        Full { summary, status, activity_ns, keep: Some(later), corrected_ns: None, journal_id }
    }
}

/// The summary of a run that is `missing` or `unreadable`: never kept.
fn unkept(parts: &Parts, activity_ns: i64) -> Full {
    let (summary, status) = parts.summary(Some(activity_ns / 1_000_000), |_, _| Ok(None));
    Full { summary: Some(summary.into()), status, activity_ns, keep: Some(None), corrected_ns: None, journal_id: None }
}

/// What [`linked_head`] found.
enum Linked {
    Head(Head),
    /// The pointer is gone.
    Gone,
    /// No usable link: the pointer is read instead.
    NoLink,
}

/// A run's head from two `stat`s and no read: its pointer's (not followed)
/// and its journal's, through the journal link. A link whose journal does
/// not exist yet (dangling) gives the pointer's time alone.
fn linked_head(reg_dir: &OwnedFd, links: &OwnedFd, id: &Id, name: &mut String) -> Linked {
    // File names built in one buffer: no allocation per run.
    name.clear();
    name.push_str(id);
    name.push_str(".json");
    let pointer_stamp = match stat_at(reg_dir, name) {
        Ok(s) => s,
        Err(nix::errno::Errno::ENOENT) => return Linked::Gone,
        // The read says why.
        Err(_) => return Linked::NoLink,
    };
    name.push('l');
    debug_assert_eq!(*name, link_name(id));
    // Followed: a hard link is the journal itself, a symlink leads to it.
    let (journal_ns, link_id) = match nix::sys::stat::fstatat(Some(links.as_raw_fd()), name.as_str(), AtFlags::empty())
    {
        Ok(st) => {
            let s = Stamp::of(&st);
            (s.mtime_ns, Some((s.dev, s.ino)))
        }
        Err(nix::errno::Errno::ENOENT) => match stat_at(links, name) {
            Ok(_) => (0, None),
            Err(_) => return Linked::NoLink,
        },
        Err(_) => return Linked::NoLink,
    };
    Linked::Head(Head {
        id: id.clone(),
        read: None,
        activity_ns: pointer_stamp.mtime_ns.max(journal_ns).max(0),
        linked: true,
        link_id,
    })
}

/// Pass 1 over a registry still being read: its directory is read here, and
/// the run ids go in batches, as they come, to one worker per core (at most
/// 8) that runs `f` on each. Returns what `f` gave, a vector a worker (not
/// copied into one: fresh memory is dear, see [`Runs`]). A worker that
/// panics loses its results, never the others'.
fn streamed<R: Send>(shared: Shared, now_ns: i64, f: impl Fn(&mut Worker, &Id) -> Option<R> + Sync) -> Vec<Vec<R>> {
    // 60 ids: a batch's vector stays under 1 KiB (see `Dir::names`).
    const BATCH: usize = 60;
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Id>>();
    let rx = Mutex::new(rx);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    std::thread::scope(|s| {
        let work = || {
            let mut w = Worker::new(shared, now_ns, true);
            let mut out = Vec::new();
            // The lock is held only to take a batch.
            loop {
                let Ok(batch) = rx.lock().unwrap_or_else(|e| e.into_inner()).recv() else { break };
                out.extend(batch.iter().filter_map(|id| f(&mut w, id)));
            }
            out
        };
        let handles: Vec<_> = (0..workers).map(|_| s.spawn(work)).collect();
        let mut batch = Vec::with_capacity(BATCH);
        Registry::scan(shared.reg, |id| {
            batch.push(Id::from(id));
            if batch.len() == BATCH {
                let _ = tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
            }
        });
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        drop(tx);
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    })
}

/// Sorts `rows` newest first, then by run id (`key` gives both), as
/// comparing them would, but on integers: the activity and the id's first
/// 24 bytes (a run id is 12 hex digits, `--` and the slug) make one key;
/// the rare rows whose keys are equal are ordered by their whole ids; then
/// each row is moved once. A full listing sorts every run after its reads,
/// and comparing rows (a string behind each) was most of that.
fn sort_by_activity<T>(rows: &mut [T], key: impl Fn(&T) -> (i64, &str)) {
    type Key = (u64, u64, u64, u64);
    let packed = |(activity, id): (i64, &str)| -> Key {
        let mut prefix = [0u8; 24];
        let n = id.len().min(24);
        prefix[..n].copy_from_slice(&id.as_bytes()[..n]);
        let word = |i: usize| u64::from_be_bytes(prefix[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        // Newest first: the activity, made unsigned in order, inverted.
        (!((activity as u64) ^ (1 << 63)), word(0), word(1), word(2))
    };
    let mut keys: Vec<(Key, u32)> = rows.iter().enumerate().map(|(i, r)| (packed(key(r)), i as u32)).collect();
    keys.sort_unstable();
    let mut i = 0;
    while i < keys.len() {
        let j = i + keys[i..].iter().take_while(|k| k.0 == keys[i].0).count();
        if j - i > 1 {
            keys[i..j].sort_unstable_by(|a, b| key(&rows[a.1 as usize]).1.cmp(key(&rows[b.1 as usize]).1));
        }
        i = j;
    }
    // In place, a cycle at a time: position `k` takes the row at `keys[k].1`.
    const PLACED: u32 = u32::MAX;
    for start in 0..keys.len() {
        let mut k = start;
        while keys[k].1 != PLACED {
            let from = keys[k].1 as usize;
            keys[k].1 = PLACED;
            if from != start {
                rows.swap(k, from);
            }
            k = from;
        }
    }
}

/// Runs `f` over `items` on up to one thread per core (at most 8), each with
/// its own [`Worker`]. Syscall-bound: the items are split in chunks taken
/// from a shared counter, so a thread the scheduler holds back (a loaded
/// machine) does not hold up the listing while the other cores idle. Chunks
/// are contiguous: runs of one repo sort together, so a chunk lists few
/// directories. A worker that panics loses its chunk (`None`s), never the
/// others'.
fn par_map<T: Sync, R: Send + Sync>(
    items: &[T],
    shared: Shared,
    now_ns: i64,
    f: impl Fn(&mut Worker, &T) -> R + Sync,
) -> Vec<Option<R>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    // A page's few runs are spread over the cores too (each reads three files).
    let chunk = (items.len() / (cores * 4)).clamp(8, 256);
    let chunks: Vec<&[T]> = items.chunks(chunk).collect();
    let slots: Vec<std::sync::OnceLock<Vec<R>>> = chunks.iter().map(|_| std::sync::OnceLock::new()).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = cores.min(chunks.len());
    let work = |w: &mut Worker| loop {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(chunk) = chunks.get(i) else { break };
        let _ = slots[i].set(chunk.iter().map(|t| f(w, t)).collect());
    };
    if workers <= 1 {
        // One chunk (or one core): no thread to start.
        let _ =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut Worker::new(shared, now_ns, false))));
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..workers).map(|_| s.spawn(|| work(&mut Worker::new(shared, now_ns, true)))).collect();
            handles.into_iter().for_each(|h| drop(h.join()));
        });
    }
    let mut out = Vec::with_capacity(items.len());
    for (c, slot) in chunks.iter().zip(slots) {
        match slot.into_inner() {
            Some(v) => out.extend(v.into_iter().map(Some)),
            None => out.extend(c.iter().map(|_| None)),
        }
    }
    out
}

impl ListCache {
    /// Every registered run's summary (JSON text), newest activity first.
    pub fn list(&self, reg: &Registry) -> Vec<String> {
        self.page(reg, &Query::default()).items.iter().map(|s| s.to_string()).collect()
    }

    /// One page of the listing: the runs matching `q`'s filters, newest
    /// activity first (then by run id), after `q.cursor`, at most `q.limit`.
    pub fn page(&self, reg: &Registry, q: &Query) -> Page {
        let now_ns = now_ns();
        let snapshot = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !st.index_loaded {
                st.index_loaded = true;
                st.runs = Arc::new(index::load(&index::path(reg)));
            }
            st.settle();
            st.runs.clone()
        };
        let cached = |id: &str| snapshot.get(id).map(|c| &**c);
        // No journal links (a registry written before them): every head reads its pointer.
        let links = reg.links_dir();
        let links = links.is_dir().then_some(links.as_path());
        let listed = Mutex::new(Listed::default());
        let learnt = Mutex::new(Vec::new());
        let shared = Shared { reg: &reg.dir, links, listed: &listed, learnt: &learnt };
        // Every run is read anyway when a status filter needs its status or
        // no limit cuts the page: then the journal's stamp comes with its read.
        let read_all = q.statuses.is_some() || q.limit.is_none();
        let repo_ok = |h: &Head| match (&q.repo, h.read.as_deref()) {
            (None, _) => true,
            (Some(r), Some((Ok(p), _))) => p.fields().repo == r || p.fields().repo_root == r,
            (Some(_), _) => false,
        };
        let limit = q.limit.unwrap_or(usize::MAX);
        let mut updates: Updates = Vec::new();
        let mut rows: Vec<(i64, Id, Arc<str>)>;
        let total;
        let more;
        let mut ids;
        if read_all {
            // One pass, while the registry is read: each run's pointer, then at once its
            // files (while its directory is at hand). `Err`: a run of another repository.
            // A page of a filtered listing needs every run's status but only its own
            // runs' summaries: those are made once the page is cut.
            let want_summary = q.limit.is_none();
            let runs = streamed(shared, now_ns, |w, id| {
                let h = w.head(id, cached(id), false, false)?;
                if !repo_ok(&h) {
                    return Some(Err(h.id));
                }
                let f = w.full(&h, cached(id), want_summary)?;
                // The head is done with: not kept for every run until the end.
                Some(Ok((h.id, f)))
            });
            let n = runs.iter().map(Vec::len).sum();
            ids = Vec::with_capacity(n);
            let mut found: Vec<(i64, Id, Option<Arc<str>>)> = Vec::with_capacity(n);
            for r in runs.into_iter().flatten() {
                let (id, f) = match r {
                    Ok(r) => r,
                    Err(id) => {
                        ids.push(id);
                        continue;
                    }
                };
                ids.push(id.clone());
                if let Some(k) = f.keep {
                    updates.push((id.clone(), k));
                }
                if q.statuses.as_ref().map_or(true, |s| s.contains(&f.status)) {
                    found.push((f.activity_ns, id, f.summary));
                }
            }
            total = found.len();
            if let Some(c) = &q.cursor {
                found.retain(|r| c.before(r.0, &r.1));
            }
            more = found.len() > limit;
            let by_activity = |a: &(i64, Id, Option<Arc<str>>), b: &(i64, Id, Option<Arc<str>>)| {
                b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1))
            };
            // Only the page is sorted: the rest is just cut off.
            if more {
                found.select_nth_unstable_by(limit, by_activity);
                found.truncate(limit);
                found.sort_unstable_by(by_activity);
            } else {
                sort_by_activity(&mut found, |r| (r.0, &r.1));
            }
            // The page's runs counted without their summary are read again, now whole
            // (a few files each), and placed where they were counted.
            let todo: Vec<usize> = (0..found.len()).filter(|&i| found[i].2.is_none()).collect();
            let got = par_map(&todo, shared, now_ns, |w, &i| {
                let h = w.head(&found[i].1, None, false, false)?;
                w.full(&h, None, true)
            });
            for (&i, f) in todo.iter().zip(got) {
                if let Some(f) = f.flatten() {
                    if let Some(k) = f.keep {
                        updates.push((found[i].1.clone(), k));
                    }
                    found[i].2 = f.summary;
                }
            }
            // A run gone since it was counted is not shown.
            rows = found.into_iter().filter_map(|(a, id, s)| Some((a, id, s?))).collect();
        } else {
            // The pointers are needed to filter by repository: then they are read.
            let use_link = q.repo.is_none();
            let head = |w: &mut Worker, id: &Id| w.head(id, cached(id), true, use_link);
            let mut heads: Vec<Head>;
            if use_link && shared.links.is_some() {
                // Two stats a run: reading the registry is a good part of the
                // work, so the stats start while it goes on.
                let parts = streamed(shared, now_ns, head);
                heads = Vec::with_capacity(parts.iter().map(Vec::len).sum());
                parts.into_iter().for_each(|p| heads.extend(p));
                // Taken from the heads at the end (see below).
                ids = Vec::new();
            } else {
                ids = reg.ids().into_iter().map(Id::from).collect();
                heads = par_map(&ids, shared, now_ns, |w, id| head(w, id)).into_iter().flatten().flatten().collect();
            }
            heads.retain(|h| repo_ok(h));
            // Only the runs read: a page's few (not a slot for each of thousands).
            let mut fulls: HashMap<usize, Full, FastHash> = HashMap::default();
            let mut gone = vec![false; heads.len()];
            // The page is cut by the heads' activity; a run shown whose link
            // turned out not to name its journal is placed by what its files
            // say, and the page cut again, until it holds only checked runs.
            let page = loop {
                let mut order: Vec<usize> = (0..heads.len()).filter(|&i| !gone[i]).collect();
                let all = order.len();
                if let Some(c) = &q.cursor {
                    order.retain(|&i| c.before(heads[i].activity_ns, &heads[i].id));
                }
                let has_more = order.len() > limit;
                let by_activity = |a: &usize, b: &usize| {
                    let (a, b) = (&heads[*a], &heads[*b]);
                    b.activity_ns.cmp(&a.activity_ns).then_with(|| a.id.cmp(&b.id))
                };
                // Only the page is sorted: the rest is just cut off.
                if has_more {
                    order.select_nth_unstable_by(limit, by_activity);
                    order.truncate(limit);
                }
                order.sort_unstable_by(by_activity);
                let todo: Vec<usize> = order.iter().copied().filter(|i| !fulls.contains_key(i)).collect();
                if todo.is_empty() {
                    break (order, all, has_more);
                }
                let got = par_map(&todo, shared, now_ns, |w, &i| w.full(&heads[i], cached(&heads[i].id), true));
                let mut moved = false;
                for (&i, f) in todo.iter().zip(got) {
                    match f.flatten() {
                        Some(f) => {
                            if let Some(a) = f.corrected_ns {
                                heads[i].activity_ns = a;
                                moved = true;
                            }
                            fulls.insert(i, f);
                        }
                        // Gone since the first pass (or its worker failed): not listed.
                        None => {
                            gone[i] = true;
                            moved = true;
                        }
                    }
                }
                if !moved {
                    break (order, all, has_more);
                }
            };
            let (order, all, has_more) = page;
            total = all;
            more = has_more;
            rows = Vec::with_capacity(order.len());
            for &i in &order {
                let Some(f) = fulls.remove(&i) else { continue };
                if let Some(k) = f.keep {
                    updates.push((heads[i].id.clone(), k));
                }
                // Placed by the head's activity, so the page's order and its cursor agree.
                let Some(summary) = f.summary else { continue };
                rows.push((heads[i].activity_ns, heads[i].id.clone(), summary));
            }
            // Runs read and then cut from the page (a link corrected) are kept too: the
            // next listing places them by their files.
            for (i, f) in fulls {
                if let Full { keep: Some(k), .. } = f {
                    updates.push((heads[i].id.clone(), k));
                }
            }
            if ids.is_empty() {
                // Streamed: the registered runs are those with a head.
                ids = heads.into_iter().map(|h| h.id).collect();
            }
        }
        let next = rows.last().filter(|_| more).map(|r| Cursor { activity_ns: r.0, run_id: r.1.to_string() });
        let items = rows.into_iter().map(|r| r.2).collect();
        // Merged once the answer is out: a listing's own work ends here.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.pending.push((updates, ids, learnt.into_inner().unwrap_or_else(|e| e.into_inner())));
        drop(st);

        Page { items, total, next }
    }

    /// Writes the persisted index when a listing changed it: after the
    /// answer is out, as it is not part of it. A cache: failing to write it
    /// only costs the next reader time.
    pub fn save_index(&self, reg: &Registry) -> Option<std::thread::JoinHandle<()>> {
        use std::sync::atomic::{AtomicBool, Ordering};
        // One writer at a time per process; a listing that finds one busy
        // stays dirty and writes next time.
        static SAVING: AtomicBool = AtomicBool::new(false);
        let snapshot = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.settle();
            if !st.index_loaded || !st.dirty || SAVING.swap(true, Ordering::AcqRel) {
                return None;
            }
            st.dirty = false;
            st.runs.clone()
        };
        // Written by a thread, so the caller (a connection that closes when
        // the route returns) does not wait for it.
        let path = index::path(reg);
        let h = std::thread::Builder::new().name("list-index".into()).spawn(move || {
            let _ = index::save(&path, &snapshot);
            SAVING.store(false, Ordering::Release);
        });
        match h {
            Ok(h) => Some(h),
            Err(_) => {
                SAVING.store(false, Ordering::Release);
                self.state.lock().unwrap_or_else(|e| e.into_inner()).dirty = true;
                None
            }
        }
    }

    /// How many summaries are kept (for tests).
    pub fn len(&self) -> usize {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.settle();
        st.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The persisted index, `$HARNESS_HOME/cache/runs-list.index` (not in
/// `runs/`, which holds one pointer per run and nothing else): the cache's
/// entries, one JSON line each with an FNV-1a checksum, so a restarted
/// server or the next `runs list` only stats what the last one read. Never
/// the truth: every entry is checked by its stamps like any cached one, and
/// a missing, foreign or damaged index (or line) is just not used.
mod index {
    use super::{Cached, Runs, Stamp, STATUSES};
    use crate::hash::fnv1a64 as fnv;
    use crate::runs::registry::{check_pointer, Packed, Pointer};
    use serde::{Deserialize, Serialize};
    use serde_json::value::RawValue;
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    const HEADER: &str = "runwire-list-index/v3";
    /// Bound on the index read (about 100,000 runs).
    const MAX_INDEX: u64 = 256 * 1024 * 1024;

    pub fn path(reg: &super::Registry) -> PathBuf {
        reg.dir.with_file_name("cache").join("runs-list.index")
    }

    type Arr = [i64; 5];

    fn arr(s: &Stamp) -> Arr {
        [s.dev as i64, s.ino as i64, s.size, s.mtime_ns, s.ctime_ns]
    }

    fn stamp(a: &Arr) -> Stamp {
        Stamp { dev: a[0] as u64, ino: a[1] as u64, size: a[2], mtime_ns: a[3], ctime_ns: a[4] }
    }

    #[derive(Serialize, Deserialize)]
    struct Line<'a> {
        id: &'a str,
        p: Arr,
        ptr: Pointer,
        i: Vec<(String, Option<Arr>)>,
        a: i64,
        st: &'a str,
        #[serde(borrow)]
        s: &'a RawValue,
    }

    pub fn load(path: &Path) -> Runs {
        let mut out = Runs::default();
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // Read like any file: a FIFO or device put there is not read.
        let Ok(bytes) = crate::runs::safe::read_in(dir, name, MAX_INDEX) else { return out };
        let Ok(text) = std::str::from_utf8(&bytes) else { return out };
        let mut lines = text.split('\n');
        if lines.next() != Some(HEADER) {
            return out;
        }
        for l in lines {
            let Some((json, sum)) = l.rsplit_once('\t') else { continue };
            if u64::from_str_radix(sum, 16).ok() != Some(fnv(json.as_bytes())) {
                continue;
            }
            let Ok(e) = serde_json::from_str::<Line>(json) else { continue };
            // Checked like anything read from disk: ids, and input names that are plain file names.
            let names_ok = e.i.iter().all(|(n, _)| crate::runs::safe::plain_relative(Path::new(n)) && !n.contains('/'));
            let Some(status) = STATUSES.iter().copied().find(|s| *s == e.st) else { continue };
            if !super::super::valid_id(e.id) || check_pointer(e.ptr.fields(), e.id).is_err() || !names_ok {
                continue;
            }
            let inputs = e.i.into_iter().map(|(n, a)| (n, a.as_ref().map(stamp))).collect::<super::Inputs>();
            out.insert(
                e.id.into(),
                Arc::new(Cached {
                    pointer_stamp: stamp(&e.p),
                    pointer: Packed::of(e.ptr.fields()),
                    inputs,
                    activity_ns: e.a,
                    status,
                    summary: Some(e.s.get().into()),
                }),
            );
        }
        out
    }

    pub fn save(path: &Path, runs: &Runs) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(runs.len() * 700 + 32);
        buf.extend_from_slice(HEADER.as_bytes());
        for (id, c) in runs {
            // An entry counted but never shown has no summary: not worth a line.
            let Some(summary) = &c.summary else { continue };
            let Ok(s) = serde_json::from_str::<&RawValue>(summary) else { continue };
            let line = Line {
                id,
                p: arr(&c.pointer_stamp),
                ptr: c.pointer.fields().to_pointer(),
                i: c.inputs.iter().map(|(n, st)| (n.to_string(), st.as_ref().map(arr))).collect(),
                a: c.activity_ns,
                st: c.status,
                s,
            };
            let json = serde_json::to_string(&line).map_err(std::io::Error::other)?;
            write!(buf, "\n{json}\t{:x}", fnv(json.as_bytes()))?;
        }
        buf.push(b'\n');
        // Temp file + rename: readers see the old index or the new one. No
        // fsync: after a crash a lost or torn index only costs a re-read.
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_file_name(format!(".runs-list.index.{}.tmp", std::process::id()));
        let r = std::fs::write(&tmp, &buf).and_then(|_| std::fs::rename(&tmp, path));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        remove_orphans(path);
        r
    }

    /// Removes the temp files of writers that died mid-write (a server
    /// stopped while its index thread wrote): their pid is gone.
    fn remove_orphans(path: &Path) {
        let Some(dir) = path.parent() else { return };
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(".runs-list.index.")?.strip_suffix(".tmp"))
                .and_then(|p| p.parse::<i32>().ok())
                .filter(|&p| p > 0)
            else {
                continue;
            };
            let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
            if gone {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A worker's inputs, one run after another (a name started and
        /// dropped, a run not kept and forgotten, as a listing does), copy
        /// out to exactly what each kept run read, in order.
        #[test]
        fn a_workers_inputs_copy_out_run_by_run(
            runs in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        ("[a-z.]{0,12}", proptest::option::of(1i64..9), proptest::bool::weighted(0.2)),
                        0..5,
                    ),
                    proptest::bool::weighted(0.7),
                ),
                0..8,
            ),
        ) {
            let stamp = |t: i64| Stamp { dev: 1, ino: t as u64, size: t, mtime_ns: t, ctime_ns: t };
            let mut all = Inputs::default();
            let mut kept = Vec::new();
            for (files, keep) in &runs {
                let first = all.ends.len();
                let mut read = Vec::new();
                for (name, t, dropped) in files {
                    all.start(&[name]);
                    if *dropped {
                        all.drop_started();
                    } else {
                        all.keep(t.map(stamp));
                        read.push((name.as_str(), t.map(stamp)));
                    }
                }
                if *keep {
                    kept.push((first..all.ends.len(), read));
                } else {
                    all.truncate(first);
                }
            }
            for (r, read) in kept {
                proptest::prop_assert_eq!(all.range(r.clone()).collect::<Vec<_>>(), read.clone());
                let own = all.copy(r);
                proptest::prop_assert_eq!(own.iter().collect::<Vec<_>>(), read);
            }
        }
    }

    proptest::proptest! {
        /// The key sort orders rows as comparing them does: newest first,
        /// then by id; among ids that share their first 24 bytes or are
        /// shorter, equal activities, negative and extreme ones.
        #[test]
        fn sorting_by_keys_orders_as_comparing_does(
            rows in proptest::collection::vec(
                (
                    proptest::prop_oneof![proptest::strategy::Just(i64::MIN), proptest::strategy::Just(i64::MAX), proptest::strategy::Just(0i64), proptest::strategy::Just(-1i64), -3i64..3, proptest::num::i64::ANY],
                    proptest::prop_oneof!["[a-c]{0,10}", "abcdefgh[a-c]{0,3}", "[a-b]{22,26}"],
                ),
                0..60,
            ),
        ) {
            let mut want = rows.clone();
            want.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let mut got = rows;
            super::sort_by_activity(&mut got, |r| (r.0, r.1.as_str()));
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_listing_leaves_no_descriptor_open_in_its_callers_table() {
        let home = std::env::temp_dir().join(format!("runwire-list-fds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let reg = Registry::at(&home);
        // Runs in several repos, with plans and a task log: every kind of open.
        for i in 0..40 {
            let repo = home.join(format!("repo{}", i % 4));
            let rs = repo.join("runstate");
            std::fs::create_dir_all(&rs).unwrap();
            let slug = format!("s{i}");
            let new = super::super::registry::NewRun {
                slug: slug.clone(),
                repo_root: repo.display().to_string(),
                ..Default::default()
            };
            reg.register(&new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap()).unwrap();
            let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#;
            std::fs::write(rs.join(format!("{slug}.plan.json")), plan).unwrap();
            std::fs::write(rs.join(format!("{slug}.a.log")), "").unwrap();
            let leased =
                r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"leased"}"#;
            std::fs::write(rs.join(format!("{slug}.jsonl")), format!("{leased}\n")).unwrap();
        }
        // On a thread with a table of its own: the other tests' opens and closes
        // do not move its count. The listings' workers are spawned from it.
        let counts = std::thread::spawn(move || {
            assert!(safe::private_fd_table() || cfg!(not(target_os = "linux")));
            let open = || std::fs::read_dir("/proc/thread-self/fd").unwrap().count();
            let before = open();
            let c = ListCache::default();
            let mut after = Vec::new();
            // The full listing (streamed, spawned workers), a counted page and a
            // first page of one run (read on the calling thread).
            for q in [Query::default(), Query::parse(Some("5"), None, Some("running"), None).unwrap()] {
                assert!(!c.page(&reg, &q).items.is_empty());
                after.push(open());
            }
            let q = Query::parse(Some("1"), None, None, None).unwrap();
            assert_eq!(ListCache::default().page(&reg, &q).items.len(), 1);
            after.push(open());
            (before, after)
        })
        .join()
        .unwrap();
        assert_eq!(counts.1, vec![counts.0; 3], "descriptors left open");
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn files_changed_just_now_are_not_trusted_and_the_index_is_checked() {
        let home = std::env::temp_dir().join(format!("runwire-list-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let rs = home.join("repo/runstate");
        std::fs::create_dir_all(&rs).unwrap();
        let reg = Registry::at(&home);
        let new = super::super::registry::NewRun {
            slug: "s".into(),
            repo_root: home.join("repo").display().to_string(),
            ..Default::default()
        };
        let pointer = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        reg.register(&pointer).unwrap();
        std::fs::write(
            rs.join("s.plan.json"),
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#,
        )
        .unwrap();
        let c = ListCache::default();
        let items = c.list(&reg);
        if let Some(h) = c.save_index(&reg) {
            h.join().unwrap();
        }
        assert_eq!(items.len(), 1);
        // Written within the racy window: read again next time, not kept or persisted.
        assert!(c.is_empty());
        assert!(index::load(&index::path(&reg)).is_empty());
        // A damaged index line is skipped, never used.
        let stamp = Stamp { dev: 1, ino: 2, size: 3, mtime_ns: 4, ctime_ns: 5 };
        let mut m = Runs::default();
        let entry = Cached {
            pointer_stamp: stamp,
            pointer: Packed::of(pointer.fields()),
            inputs: Inputs::default(),
            activity_ns: 7,
            status: "running",
            summary: Some("{\"a\":1}".into()),
        };
        m.insert(pointer.run_id.as_str().into(), Arc::new(entry.clone()));
        index::save(&index::path(&reg), &m).unwrap();
        assert_eq!(index::load(&index::path(&reg)).len(), 1);
        let text = std::fs::read_to_string(index::path(&reg)).unwrap();
        std::fs::write(index::path(&reg), text.replace("{\"a\":1}", "{\"a\":2}")).unwrap();
        assert!(index::load(&index::path(&reg)).is_empty());
        // An entry naming a file outside the run's directory is not used, checksum or not.
        let mut bad = entry.clone();
        bad.inputs = [("../../etc/passwd".to_string(), None)].into_iter().collect();
        m.insert(pointer.run_id.as_str().into(), Arc::new(bad));
        index::save(&index::path(&reg), &m).unwrap();
        assert!(index::load(&index::path(&reg)).is_empty());
        // A dead writer's temp file is removed by the next save; a live one's is left alone.
        let cache = index::path(&reg).parent().unwrap().to_path_buf();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let orphan = cache.join(format!(".runs-list.index.{dead_pid}.tmp"));
        let live = cache.join(format!(".runs-list.index.{}.tmp", std::os::unix::process::parent_id()));
        std::fs::write(&orphan, "x").unwrap();
        std::fs::write(&live, "x").unwrap();
        index::save(&index::path(&reg), &m).unwrap();
        assert!(!orphan.exists() && live.exists());
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn cursors_and_queries_parse_strictly() {
        let c = Cursor::parse("1700000000000000000-abc123def456--my.slug").unwrap();
        assert_eq!(c.to_string(), "1700000000000000000-abc123def456--my.slug");
        for bad in ["", "x-a", "12", "12-..", "12-a/b"] {
            assert!(Cursor::parse(bad).is_err(), "{bad}");
        }
        let q = Query::parse(Some("50"), None, Some("running,needs_input"), Some("r")).unwrap();
        assert_eq!(q.limit, Some(50));
        assert_eq!(q.statuses, Some(vec!["running", "needs_input"]));
        assert!(Query::parse(Some("0"), None, None, None).is_err());
        assert!(Query::parse(None, None, Some("runing"), None).is_err());
    }
}
