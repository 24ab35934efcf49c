//! Listing every registered run (`runs list`, `GET /runs`) fast.
//!
//! A listing reads three small files per run (pointer, journal, plan), so
//! over thousands of runs it is bound by syscalls: every file is opened
//! relative to its directory's descriptor (no path walk), read once into a
//! reused buffer, and files a directory listing says are absent are never
//! probed (each runstate directory is listed once per listing).
//!
//! [`ListCache`] keeps each run's summary with the identity of every file it
//! was computed from (device, inode, size, mtime and ctime in ns): the
//! pointer, the journal, the plan and each task log. A summary is served
//! again only when a `stat` of each of them gives the same identity, so the
//! listing stays an exact function of the files; dropping the cache costs
//! only speed. A file changed within [`RACY`] of its stamp is not trusted
//! (a second write in the same timestamp tick could keep size and times), as
//! git does for its index: such a run is read again on every listing.

use super::journal::Journal;
use super::plan::Plan;
use super::registry::{Pointer, Reaped, Registry};
use super::view::Loaded;
use super::{FastHash, RunFiles};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// How recent a change must be for its stamp not to be trusted: covers the
/// coarse kernel clock behind file times and filesystems with 1 or 2 s times.
pub const RACY_NS: i64 = 2_000_000_000;
/// [`RACY_NS`], for the docs.
pub const RACY: std::time::Duration = std::time::Duration::from_nanos(RACY_NS as u64);

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

fn open_dir(path: &Path) -> Option<OwnedFd> {
    let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
    // SAFETY: `open` just returned this descriptor and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A directory opened once per listing: its descriptor and its file names.
struct Dir {
    fd: OwnedFd,
    names: HashSet<OsString, FastHash>,
}

impl Dir {
    fn open(path: &Path) -> Option<Dir> {
        let fd = open_dir(path)?;
        let names = std::fs::read_dir(path).ok()?.flatten().map(|e| e.file_name()).collect();
        Some(Dir { fd, names })
    }

    fn has(&self, name: &str) -> bool {
        self.names.contains(std::ffi::OsStr::new(name))
    }

    /// The stamp of `name`, `None` when absent.
    fn stamp(&self, name: &str) -> Option<Stamp> {
        if !self.has(name) {
            return None;
        }
        nix::sys::stat::fstatat(Some(self.fd.as_raw_fd()), name, AtFlags::empty()).ok().map(|s| Stamp::of(&s))
    }
}

/// Opens `name` under `dir` and reads it whole into `buf`, with its stamp
/// taken before the read (so a write after it shows as a change).
///
/// `noatime`: open with `O_NOATIME` (a listing is no use of the file, and
/// the first read of a fresh file would otherwise dirty its inode: about a
/// tenth of a first listing's time); cleared for good on `EPERM` (files of
/// another user).
fn read_at(dir: &OwnedFd, name: &str, buf: &mut Vec<u8>, noatime: &mut bool) -> Option<(usize, Stamp)> {
    let open = |extra: OFlag| {
        nix::fcntl::openat(Some(dir.as_raw_fd()), name, OFlag::O_RDONLY | OFlag::O_CLOEXEC | extra, Mode::empty())
    };
    let fd = match *noatime {
        true => match open(OFlag::O_NOATIME) {
            Err(nix::errno::Errno::EPERM) => {
                *noatime = false;
                open(OFlag::empty())
            }
            r => r,
        },
        false => open(OFlag::empty()),
    }
    .ok()?;
    // SAFETY: `openat` just returned this descriptor and nothing else owns it.
    let mut f = unsafe { File::from_raw_fd(fd) };
    let st = Stamp::of(&nix::sys::stat::fstat(f.as_raw_fd()).ok()?);
    if buf.len() < 64 * 1024 {
        buf.resize(64 * 1024, 0);
    }
    let len = super::read_whole(&mut f, buf).ok()?;
    Some((len, st))
}

/// One cached summary and what it was computed from.
#[derive(Clone)]
struct Cached {
    /// The pointer file's stamp; the pointer names the runstate directory.
    pointer: Stamp,
    runstate_dir: String,
    /// File names in the runstate directory and their stamps when computed:
    /// journal, plan, then each task log counted for cost and tokens.
    inputs: Vec<(String, Option<Stamp>)>,
    summary: String,
}

/// Cached summaries by run id.
type Runs = HashMap<String, Cached, FastHash>;

/// `parts` joined: file names are built per run, and `format!` costs more
/// than the copy.
fn cat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    parts.iter().for_each(|p| s.push_str(p));
    s
}

/// Summaries kept between listings by a long-lived reader (the server);
/// `runs list` uses an empty one, so both list through the same code.
#[derive(Default)]
pub struct ListCache {
    runs: Runs,
    /// The persisted index was read (once, on first use).
    index_loaded: bool,
    /// Entries changed since the index was read or written.
    dirty: bool,
}

/// Per-thread state of one listing.
struct Worker<'a> {
    reg: &'a Registry,
    reg_dir: Option<&'a OwnedFd>,
    dirs: HashMap<String, Option<Dir>, FastHash>,
    buf: Vec<u8>,
    /// Whether `O_NOATIME` is still worth trying (see [`read_at`]).
    noatime: bool,
    now_ns: i64,
}

enum Outcome {
    /// The cached summary still holds.
    Same,
    /// A fresh summary; `Some` when it may be kept.
    Fresh(String, Option<Cached>),
    /// The pointer was reaped (its runstate directory is gone) or unreadable.
    Gone(Option<Reaped>),
}

impl Worker<'_> {
    fn dir(&mut self, path: &str) -> Option<&Dir> {
        // Looked up before inserting: most calls find it, and need no owned key.
        if !self.dirs.contains_key(path) {
            self.dirs.insert(path.to_string(), Dir::open(Path::new(path)));
        }
        self.dirs.get(path).and_then(Option::as_ref)
    }

    fn pointer_stamp(&self, id: &str) -> Option<Stamp> {
        let fd = self.reg_dir?;
        nix::sys::stat::fstatat(Some(fd.as_raw_fd()), cat(&[id, ".json"]).as_str(), AtFlags::empty())
            .ok()
            .map(|s| Stamp::of(&s))
    }

    fn still_valid(&mut self, id: &str, c: &Cached) -> bool {
        if self.pointer_stamp(id) != Some(c.pointer) {
            return false;
        }
        let Some(dir) = self.dir(&c.runstate_dir) else { return false };
        c.inputs.iter().all(|(name, st)| dir.stamp(name) == *st)
    }

    fn run(&mut self, id: &str, cached: Option<&Cached>) -> Outcome {
        if let Some(c) = cached {
            if self.still_valid(id, c) {
                return Outcome::Same;
            }
        }
        self.fresh(id)
    }

    fn fresh(&mut self, id: &str) -> Outcome {
        let mut buf = std::mem::take(&mut self.buf);
        let read = match self.reg_dir {
            Some(fd) => read_at(fd, &cat(&[id, ".json"]), &mut buf, &mut self.noatime),
            None => None,
        };
        let parsed = read.and_then(|(n, st)| {
            serde_json::from_slice::<Pointer>(&buf[..n]).ok().filter(|p| p.run_id == id).map(|p| (p, st))
        });
        let Some((pointer, pointer_stamp)) = parsed else {
            self.buf = buf;
            return Outcome::Gone(None);
        };
        let rs_dir = pointer.runstate_dir.clone();
        let files = RunFiles::new(&rs_dir, &pointer.slug);
        let (journal_name, plan_name) = (cat(&[&pointer.slug, ".jsonl"]), cat(&[&pointer.slug, ".plan.json"]));
        let mut inputs = Vec::with_capacity(4);
        let mut noatime = self.noatime;
        let (journal, plan) = {
            let Some(dir) = self.dir(&rs_dir) else {
                self.buf = buf;
                return match self.reg.keep_or_reap(pointer) {
                    // It exists but cannot be opened: shown with what can be read, and never kept.
                    (Some(p), _) => Outcome::Fresh(super::view::load(p).summary_string(), None),
                    (None, r) => Outcome::Gone(r),
                };
            };
            let read_one =
                |name: &str, buf: &mut Vec<u8>, inputs: &mut Vec<(String, Option<Stamp>)>, noatime: &mut bool| {
                    if !dir.has(name) {
                        inputs.push((name.to_string(), None));
                        return None;
                    }
                    let r = read_at(&dir.fd, name, buf, noatime);
                    // Listed but unreadable (removed meanwhile, no permission): no stamp, so never kept.
                    inputs.push((name.to_string(), r.map(|(_, st)| st)));
                    r.map(|(n, _)| n)
                };
            let journal = read_one(&journal_name, &mut buf, &mut inputs, &mut noatime)
                .map(|n| Journal::parse(&buf[..n]))
                .unwrap_or_default();
            let plan =
                read_one(&plan_name, &mut buf, &mut inputs, &mut noatime).and_then(|n| Plan::parse(&buf[..n]).ok());
            (journal, plan)
        };
        self.buf = buf;
        self.noatime = noatime;
        let loaded = Loaded { pointer, files, journal, plan };
        let mut logs_ok = true;
        let summary = {
            let dir = self.dirs.get(&rs_dir).and_then(Option::as_ref);
            loaded.summary_string_with(|task, adapter| {
                let name = cat(&[&loaded.pointer.slug, ".", task, ".log"]);
                let present = dir.is_some_and(|d| d.has(&name));
                // Stamped before reading, as the others; a log that shrank or vanished in between only costs a re-read.
                let st = if present { dir.and_then(|d| d.stamp(&name)) } else { None };
                if present && st.is_none() {
                    logs_ok = false;
                }
                inputs.push((name, st));
                present.then(|| super::view::log_totals(&loaded.files.log(task), adapter))
            })
        };
        let keep = logs_ok
            && !pointer_stamp.racy(self.now_ns)
            && inputs.iter().all(|(name, st)| match st {
                Some(s) => !s.racy(self.now_ns),
                // An absent file is absent as of the directory listing; a listed one must have a stamp.
                None => !self.dirs.get(&rs_dir).and_then(Option::as_ref).is_some_and(|d| d.has(name)),
            });
        let cached =
            keep.then(|| Cached { pointer: pointer_stamp, runstate_dir: rs_dir, inputs, summary: summary.clone() });
        Outcome::Fresh(summary, cached)
    }
}

impl ListCache {
    /// Every registered run's summary (JSON text, sorted by run id) and the
    /// pointers reaped; entries of runs no longer registered are dropped.
    pub fn list(&mut self, reg: &Registry) -> (Vec<String>, Vec<Reaped>) {
        let now_ns = now_ns();
        if !self.index_loaded {
            self.index_loaded = true;
            self.runs = index::load(&index::path(reg));
        }
        let ids = reg.ids();
        let reg_dir = open_dir(&reg.dir);
        let registered: HashSet<&String, FastHash> = ids.iter().collect();
        let before = self.runs.len();
        self.runs.retain(|id, _| registered.contains(id));
        self.dirty |= self.runs.len() != before;
        // Syscall-bound: the runs are split over the cores in chunks taken
        // from a shared counter, so a thread the scheduler holds back (a
        // loaded machine) does not hold up the listing while the other cores
        // idle. Chunks are contiguous: runs of one repo sort together, so a
        // chunk lists few directories.
        const CHUNK: usize = 256;
        let chunks: Vec<&[String]> = ids.chunks(CHUNK).collect();
        let slots: Vec<std::sync::OnceLock<Vec<Outcome>>> = chunks.iter().map(|_| std::sync::OnceLock::new()).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8).min(chunks.len());
        let this = &*self;
        let reg_dir = reg_dir.as_ref();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        let mut w =
                            Worker { reg, reg_dir, dirs: HashMap::default(), buf: Vec::new(), noatime: true, now_ns };
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(chunk) = chunks.get(i) else { break };
                            let _ = slots[i].set(chunk.iter().map(|id| w.run(id, this.runs.get(id))).collect());
                        }
                    })
                })
                .collect();
            // A worker that panicked loses the chunk it was on, never the others'.
            handles.into_iter().for_each(|h| drop(h.join()));
        });
        let parts: Vec<Option<Vec<Outcome>>> = slots.into_iter().map(std::sync::OnceLock::into_inner).collect();
        let mut out = Vec::with_capacity(ids.len());
        let mut reaped = Vec::new();
        // Paired chunk by chunk, so a lost chunk never shifts the others' runs.
        let pairs = chunks.iter().zip(parts).filter_map(|(c, p)| p.map(|p| c.iter().zip(p))).flatten();
        for (id, r) in pairs {
            match r {
                Outcome::Same => {
                    if let Some(c) = self.runs.get(id) {
                        out.push(c.summary.clone());
                    }
                }
                Outcome::Fresh(s, c) => {
                    let changed = match c {
                        Some(c) => {
                            self.runs.insert(id.clone(), c);
                            true
                        }
                        None => self.runs.remove(id).is_some(),
                    };
                    self.dirty |= changed;
                    out.push(s);
                }
                Outcome::Gone(r) => {
                    self.dirty |= self.runs.remove(id).is_some();
                    reaped.extend(r);
                }
            }
        }
        (out, reaped)
    }

    /// `{"runs":[...]}`, as `GET /runs` answers, and the pointers reaped.
    pub fn list_json(&mut self, reg: &Registry) -> (String, Vec<Reaped>) {
        let (items, reaped) = self.list(reg);
        let mut body = String::with_capacity(items.iter().map(|s| s.len() + 1).sum::<usize>() + 16);
        body.push_str("{\"runs\":[");
        for (i, s) in items.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(s);
        }
        body.push_str("]}");
        (body, reaped)
    }

    /// Writes the persisted index when the listing changed it: after the
    /// answer is out, as it is not part of it. A cache: failing to write it
    /// only costs the next reader time.
    pub fn save_index(&mut self, reg: &Registry) -> Option<std::thread::JoinHandle<()>> {
        use std::sync::atomic::{AtomicBool, Ordering};
        // One writer at a time per process; a listing that finds one busy
        // stays dirty and writes next time.
        static SAVING: AtomicBool = AtomicBool::new(false);
        if !self.index_loaded || !self.dirty || SAVING.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.dirty = false;
        // Written by a thread from a copy, so the caller (a connection that
        // closes when the route returns) does not wait for it.
        let snapshot = self.runs.clone();
        let path = index::path(reg);
        let h = std::thread::Builder::new().name("list-index".into()).spawn(move || {
            let _ = index::save(&path, &snapshot);
            SAVING.store(false, Ordering::Release);
        });
        match h {
            Ok(h) => Some(h),
            Err(_) => {
                SAVING.store(false, Ordering::Release);
                self.dirty = true;
                None
            }
        }
    }

    /// How many summaries are kept (for tests).
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// The persisted index, `$HARNESS_HOME/cache/runs-list.index` (not in
/// `runs/`, which holds one pointer per run and nothing else): the cache's
/// entries, one JSON line each with an FNV-1a checksum, so a restarted
/// server or the next `runs list` only stats what the last one read. Never
/// the truth: every entry is checked by its stamps like any cached one, and
/// a missing, foreign or damaged index (or line) is just not used.
mod index {
    use super::{Cached, Runs, Stamp};
    use crate::agui::fnv1a64 as fnv;
    use serde::{Deserialize, Serialize};
    use serde_json::value::RawValue;
    use std::io::Write;
    use std::path::{Path, PathBuf};

    const HEADER: &str = "runwire-list-index/v1";

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
        d: String,
        i: Vec<(String, Option<Arr>)>,
        #[serde(borrow)]
        s: &'a RawValue,
    }

    pub fn load(path: &Path) -> Runs {
        let mut out = Runs::default();
        let Ok(text) = std::fs::read_to_string(path) else { return out };
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
            if !super::super::valid_id(e.id) {
                continue;
            }
            let inputs = e.i.into_iter().map(|(n, a)| (n, a.as_ref().map(stamp))).collect();
            out.insert(
                e.id.to_string(),
                Cached { pointer: stamp(&e.p), runstate_dir: e.d, inputs, summary: e.s.get().to_string() },
            );
        }
        out
    }

    pub fn save(path: &Path, runs: &Runs) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(runs.len() * 400 + 32);
        buf.extend_from_slice(HEADER.as_bytes());
        for (id, c) in runs {
            let Ok(s) = serde_json::from_str::<&RawValue>(&c.summary) else { continue };
            let line = Line {
                id,
                p: arr(&c.pointer),
                d: c.runstate_dir.clone(),
                i: c.inputs.iter().map(|(n, st)| (n.clone(), st.as_ref().map(arr))).collect(),
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
        reg.register(&new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap()).unwrap();
        std::fs::write(
            rs.join("s.plan.json"),
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#,
        )
        .unwrap();
        let mut c = ListCache::default();
        let (items, _) = c.list(&reg);
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
        m.insert(
            "x".to_string(),
            Cached { pointer: stamp, runstate_dir: "/d".into(), inputs: vec![], summary: "{\"a\":1}".into() },
        );
        index::save(&index::path(&reg), &m).unwrap();
        assert_eq!(index::load(&index::path(&reg)).len(), 1);
        let text = std::fs::read_to_string(index::path(&reg)).unwrap();
        std::fs::write(index::path(&reg), text.replace("{\"a\":1}", "{\"a\":2}")).unwrap();
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
}
