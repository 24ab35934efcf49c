//! The run index, `$HARNESS_HOME/index/runs.log`: what a listing shows of
//! each run, kept up to date by the writers (as git keeps its index), so
//! `runs list` and `GET /runs` read one file instead of every run's.
//!
//! A cache, never the truth (`spec/LAYOUT.md`, "The run index"): the
//! journals, plans, pointers and task logs are. Append-only lines, the last
//! one about a thing wins:
//!
//! - `R` rows, written at registration ([`note_run`]): a run's pointer's
//!   inode and mtime, its journal's device, inode and path, its `repo` and
//!   `repoRoot`, and the pointer's pieces of its summary;
//! - `J` rows, written after every journal append ([`note_journal`], called
//!   by [`super::journal::append`]): a journal's stamp (device, inode, size,
//!   mtime, ctime), when it was read, and the [`Digest`] its run's files
//!   gave (status, counts, needs-you, cost, tokens, wave, failure reason) as
//!   the journal's pieces of the summary ([`view::summary_pieces`]).
//!
//! A reader trusts a `J` row only while a `stat` of the journal gives the
//! same stamp and the stamp is older than [`RACY_NS`] before the row was
//! made; otherwise it reads the run's files. Each line ends with its
//! checksum; a damaged or torn line is skipped. Writers append under an
//! exclusive `flock` on `index/lock`, which compaction (a rewrite to a temp
//! file, renamed over the log) also holds.

use super::registry::{Pointer, Registry};
use super::view::{self, Digest, STATUSES};
use nix::sys::stat::FileStat;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How recent a change must be for its stamp not to be trusted: covers the
/// coarse kernel clock behind file times and filesystems with 1 or 2 s times.
pub const RACY_NS: i64 = 2_000_000_000;
/// Largest index read; a larger one is ignored (every run read from files).
pub const MAX_INDEX: u64 = 256 * 1024 * 1024;
/// The log is compacted once it is past this size and twice its size after
/// the last compaction.
pub const COMPACT_MIN: u64 = 1024 * 1024;
/// The first line's tag.
const HEAD: &str = "runindex/v1";

/// What identifies a file's content without reading it. Journals only
/// grow; ctime cannot be set from user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Stamp {
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    pub fn of(st: &FileStat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as i64,
            mtime_ns: (st.st_mtime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec as i64),
            ctime_ns: (st.st_ctime as i64).saturating_mul(1_000_000_000).saturating_add(st.st_ctime_nsec as i64),
        }
    }

    pub fn of_meta(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size() as i64,
            mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
        }
    }

    /// Changed so shortly before `at_ns` (within `window_ns`) that another
    /// write in the same tick could go unseen.
    pub fn racy(&self, at_ns: i64, window_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) >= at_ns.saturating_sub(window_ns)
    }
}

pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `<home>/index/runs.log`.
pub fn path(home: &Path) -> PathBuf {
    home.join("index").join("runs.log")
}

fn lock_path(home: &Path) -> PathBuf {
    home.join("index").join("lock")
}

/// A row's checksum: 8 bytes at a time, each mixed in by a rotate, an xor
/// and a multiply (as FxHash does), the length last. It catches damage,
/// not an adversary (whoever can write the index can write the registry).
fn checksum(line: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut chunks = line.chunks_exact(8);
    let mut h = chunks.by_ref().fold(0u64, |h, c| mix(h, u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))));
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = mix(h, u64::from_le_bytes(tail));
    mix(h, line.len() as u64)
}

/// `line` (no tab-free guarantee needed: the checksum covers it all) with
/// its checksum and a newline.
fn sealed(line: &str) -> String {
    format!("{line}\t{:016x}\n", checksum(line.as_bytes()))
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A run's registration row: its pointer's stamp, its journal's device and
/// inode, the journal's path, `repo` and `repoRoot` (JSON strings, for the
/// filter), and the pointer's pieces of its summary ([`view::summary_pieces`]).
pub(crate) fn run_row(p: &Pointer, pointer: &Stamp, journal: (u64, u64)) -> String {
    let [a, _, b, _, c, _, d] = view::summary_pieces(p.fields(), true, &Digest::default());
    let path = super::RunFiles::new(&p.runstate_dir, &p.slug).journal();
    sealed(&format!(
        "R\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{a}\t{b}\t{c}\t{d}",
        p.run_id,
        pointer.ino,
        pointer.mtime_ns,
        journal.0,
        journal.1,
        json(&path.to_string_lossy()),
        json(&p.repo),
        json(&p.repo_root)
    ))
}

/// A journal's row: its stamp, when it was made, the status, and the
/// digest's pieces of the summary ([`view::summary_pieces`]).
pub(crate) fn journal_row(st: &Stamp, at_ns: i64, d: &Digest) -> String {
    let none = Pointer::default();
    let [_, e, _, f, _, g, _] = view::summary_pieces(none.fields(), true, d);
    sealed(&format!(
        "J\t{}\t{}\t{}\t{}\t{}\t{at_ns}\t{}\t{e}\t{f}\t{g}",
        st.dev, st.ino, st.size, st.mtime_ns, st.ctime_ns, d.status
    ))
}

/// A JSON string's text: as is when it has no escape, else decoded.
fn unjson(s: &str) -> Option<std::borrow::Cow<'_, str>> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(s).ok().map(Into::into)
    } else {
        Some(inner.into())
    }
}

/// A registration row, as read.
#[derive(Debug, Clone, Copy)]
pub struct RunRef<'a> {
    pub pointer_ino: u64,
    pub pointer_mtime_ns: i64,
    pub journal: (u64, u64),
    /// The journal's path, `repo`, `repoRoot` and the four pieces, split
    /// when asked for: a first page needs them for the runs it shows only.
    rest: &'a str,
    body: &'a str,
}

impl<'a> RunRef<'a> {
    /// The journal's path, `repo`, `repoRoot` (JSON strings) and the pieces.
    fn split(&self) -> Option<(&'a str, &'a str, &'a str, [&'a str; 4])> {
        let mut it = self.rest.split('\t');
        let mut f = || it.next();
        let got = (f()?, f()?, f()?, [f()?, f()?, f()?, f()?]);
        f().is_none().then_some(got)
    }

    /// The journal's path (`<runstateDir>/<slug>.jsonl`).
    pub fn journal_path(&self) -> Option<std::borrow::Cow<'a, str>> {
        unjson(self.split()?.0)
    }

    /// Whether its `repo` or `repoRoot` is `r` given as a JSON string.
    pub fn in_repo(&self, r_json: &str) -> bool {
        self.split().is_some_and(|(_, repo, root, _)| repo == r_json || root == r_json)
    }
}

/// A journal row, as read.
#[derive(Debug, Clone, Copy)]
pub struct JournalRef<'a> {
    pub stamp: Stamp,
    pub at_ns: i64,
    pub status: &'static str,
    pieces: [&'a str; 3],
    body: &'a str,
}

/// A run's summary from its two rows, appended to `out`; `None` (nothing
/// appended) when the registration row is damaged.
pub fn summary(out: &mut Vec<u8>, run: &RunRef, journal: &JournalRef, activity_ms: i64) -> Option<()> {
    let (r, j) = (run.split()?.3, journal.pieces);
    view::join_summary(out, [r[0], j[0], r[1], j[1], r[2], j[2], r[3]], activity_ms);
    Some(())
}

/// The index as read: the last row of each run and of each journal.
#[derive(Default)]
pub struct Index<'a> {
    pub(crate) runs: HashMap<&'a str, RunRef<'a>, super::FastHash>,
    pub(crate) journals: HashMap<(u64, u64), JournalRef<'a>, super::FastHash>,
    /// The size of the rows after the last compaction (the first line's number).
    pub compacted: u64,
    /// Lines skipped: damaged (checksum), torn, or not rows.
    pub skipped: usize,
}

/// Reads the log whole (empty when absent, unreadable or over [`MAX_INDEX`]).
pub fn read(home: &Path) -> Vec<u8> {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path(home)) else { return Vec::new() };
    // Sized once: no regrowth (a copy and fresh pages each time) on the way.
    let size = f.metadata().map_or(0, |m| m.len().min(MAX_INDEX + 1));
    let mut buf = Vec::with_capacity(size as usize + 1);
    match f.take(MAX_INDEX + 1).read_to_end(&mut buf) {
        Ok(n) if n as u64 <= MAX_INDEX => buf,
        _ => Vec::new(),
    }
}

fn field<'a>(it: &mut impl Iterator<Item = &'a str>) -> Option<&'a str> {
    it.next()
}

fn num<'a, T: std::str::FromStr>(it: &mut impl Iterator<Item = &'a str>) -> Option<T> {
    it.next()?.parse().ok()
}

impl<'a> Index<'a> {
    /// Parses the log's bytes: lines that fail their checksum, do not
    /// parse, or are torn (no newline) are skipped; without its first line
    /// the whole log is.
    pub fn parse(bytes: &'a [u8]) -> Index<'a> {
        // Two rows a run, each of a few hundred bytes.
        let n = bytes.len() / 256;
        let mut ix = Index {
            runs: HashMap::with_capacity_and_hasher(n, Default::default()),
            journals: HashMap::with_capacity_and_hasher(n, Default::default()),
            ..Index::default()
        };
        let mut lines = bytes.split_inclusive(|&b| b == b'\n');
        let Some(head) = lines.next().and_then(|l| std::str::from_utf8(l).ok()) else { return ix };
        match head.trim_end().split_once(' ') {
            Some((HEAD, n)) => ix.compacted = n.parse().unwrap_or(0),
            _ => return ix,
        }
        for line in lines {
            let sealed = line
                .strip_suffix(b"\n")
                .and_then(|l| std::str::from_utf8(l).ok())
                .and_then(|l| l.rsplit_once('\t'))
                .filter(|(body, sum)| u64::from_str_radix(sum, 16).ok() == Some(checksum(body.as_bytes())));
            if sealed.and_then(|(body, _)| ix.row(body)).is_none() {
                ix.skipped += 1;
            }
        }
        ix
    }

    /// The last registration row of `run_id`.
    pub fn run(&self, run_id: &str) -> Option<&RunRef<'a>> {
        self.runs.get(run_id)
    }

    /// The last row of the journal with this device and inode.
    pub fn journal(&self, dev: u64, ino: u64) -> Option<&JournalRef<'a>> {
        self.journals.get(&(dev, ino))
    }

    fn row(&mut self, body: &'a str) -> Option<()> {
        let mut it = body.split('\t');
        match field(&mut it)? {
            "R" => {
                let mut it = body.splitn(7, '\t').skip(1);
                let id = field(&mut it)?;
                let run = RunRef {
                    pointer_ino: num(&mut it)?,
                    pointer_mtime_ns: num(&mut it)?,
                    journal: (num(&mut it)?, num(&mut it)?),
                    rest: field(&mut it)?,
                    body,
                };
                self.runs.insert(id, run);
            }
            "J" => {
                let stamp = Stamp {
                    dev: num(&mut it)?,
                    ino: num(&mut it)?,
                    size: num(&mut it)?,
                    mtime_ns: num(&mut it)?,
                    ctime_ns: num(&mut it)?,
                };
                let at_ns = num(&mut it)?;
                let status = field(&mut it)?;
                // Statuses from the one list; a row with another is not used.
                let status = STATUSES.iter().copied().find(|s| *s == status)?;
                let pieces = [field(&mut it)?, field(&mut it)?, field(&mut it)?];
                if it.next().is_some() {
                    return None;
                }
                self.journals.insert((stamp.dev, stamp.ino), JournalRef { stamp, at_ns, status, pieces, body });
            }
            _ => return None,
        }
        Some(())
    }
}

/// Holds the index's lock (an exclusive `flock` on `index/lock`) while alive.
struct Locked(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

fn lock(home: &Path) -> std::io::Result<Locked> {
    use nix::fcntl::{Flock, FlockArg};
    std::fs::create_dir_all(home.join("index"))?;
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(lock_path(home))?;
    Flock::lock(f, FlockArg::LockExclusive).map(Locked).map_err(|(_, e)| std::io::Error::from(e))
}

/// Appends `rows` (sealed lines) in one `write`, under the lock: after a
/// newline when the log ends in a torn line, after the first line when it
/// is new. Compacts the log when it has grown past its bound.
pub fn append(home: &Path, rows: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if rows.is_empty() {
        return Ok(());
    }
    let _lock = lock(home)?;
    let f = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path(home))?;
    let len = f.metadata()?.len();
    let mut out = String::with_capacity(rows.len() + 32);
    let mut compacted = 0;
    if len == 0 {
        out.push_str(HEAD);
        out.push_str(" 0\n");
    } else {
        let mut last = [b'\n'];
        f.read_exact_at(&mut last, len - 1)?;
        if last[0] != b'\n' {
            out.push('\n');
        }
        let mut head = [0u8; 64];
        let n = f.read_at(&mut head, 0)?;
        let head = String::from_utf8_lossy(&head[..n]);
        compacted = head.lines().next().and_then(|l| l.strip_prefix(HEAD)?.trim().parse().ok()).unwrap_or(0u64);
    }
    out.push_str(rows);
    (&f).write_all(out.as_bytes())?;
    let size = len + out.len() as u64;
    if size > COMPACT_MIN.max(2 * compacted) {
        compact_locked(home)?;
    }
    Ok(())
}

/// Rewrites the log with only the last row of each registered run and of
/// each journal such a row names: a temp file, renamed over the log, under
/// the lock (writers wait; readers see the old log or the new one).
pub fn compact(home: &Path) -> std::io::Result<()> {
    let _lock = lock(home)?;
    compact_locked(home)
}

fn compact_locked(home: &Path) -> std::io::Result<()> {
    let bytes = read(home);
    let ix = Index::parse(&bytes);
    let reg = Registry::at(home);
    let mut registered = std::collections::HashSet::new();
    Registry::scan(&reg.dir, |id| {
        registered.insert(id.to_string());
    });
    let mut rows = String::new();
    let mut runs: Vec<_> = ix.runs.iter().filter(|(id, _)| registered.contains(**id)).collect();
    runs.sort_by_key(|(id, _)| **id);
    for (_, r) in runs {
        rows.push_str(&sealed(r.body));
        if let Some(j) = ix.journals.get(&r.journal) {
            rows.push_str(&sealed(j.body));
        }
    }
    write_whole(home, &rows)
}

/// Replaces the log by `rows` after its first line (which gives their
/// size, the log's size after this compaction), atomically.
fn write_whole(home: &Path, rows: &str) -> std::io::Result<()> {
    let text = format!("{HEAD} {}\n{rows}", rows.len());
    let p = path(home);
    std::fs::create_dir_all(home.join("index"))?;
    let tmp = p.with_file_name(format!(".runs.log.{}.tmp", std::process::id()));
    let r = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, &p));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// The rows of one run, from its files: its `R` row and its journal's `J`
/// row; `None` when the run has a problem (`missing`, `unreadable`) or
/// its pointer cannot be stamped. `at_ns` is taken before anything is read.
pub fn rows_of(reg: &Registry, p: &Pointer) -> Option<String> {
    let at_ns = now_ns();
    let pst = Stamp::of_meta(&std::fs::symlink_metadata(reg.path(&p.run_id)).ok()?);
    let l = view::load(p.clone());
    let jst = l.journal_stamp?;
    let d = l.digest();
    if d.problem {
        return None;
    }
    let mut s = run_row(p, &pst, (jst.dev, jst.ino));
    s.push_str(&journal_row(&jst, at_ns, &d));
    Some(s)
}

/// The `J` row of the journal at `journal` (`<dir>/<slug>.jsonl`), from
/// the run's files; `None` when they have a problem.
fn journal_rows(journal: &Path) -> Option<String> {
    let at_ns = now_ns();
    let dir = journal.parent()?.to_str()?;
    let slug = journal.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let p = Pointer {
        run_id: String::new(),
        slug: slug.to_string(),
        repo_root: String::new(),
        project: String::new(),
        repo: String::new(),
        branch: None,
        worktree: String::new(),
        runstate_dir: dir.to_string(),
        created: String::new(),
    };
    let l = view::load(p);
    let jst = l.journal_stamp?;
    let d = l.digest();
    (!d.problem).then(|| journal_row(&jst, at_ns, &d))
}

/// Registration's hook ([`Registry::register`]): indexes the run. Errors
/// are the index's only (it is a cache): never the registration's.
pub fn note_run(reg: &Registry, p: &Pointer) {
    if let Some(rows) = rows_of(reg, p) {
        let _ = append(reg.home(), &rows);
    }
}

/// The journal writers' hook ([`super::journal::append`]): the journal's
/// new row in the index of `$HARNESS_HOME` (see [`super::harness_home`]),
/// when that index exists (registration creates it). Errors are ignored:
/// a journal the index does not follow is read from its files.
pub fn note_journal(journal: &Path) {
    note_journal_in(&super::harness_home(), journal)
}

/// [`note_journal`] for the index of `home`.
pub fn note_journal_in(home: &Path, journal: &Path) {
    if !path(home).exists() {
        return;
    }
    if let Some(rows) = journal_rows(journal) {
        let _ = append(home, &rows);
    }
}

/// `runs reindex`: the index rebuilt from every registered run's files
/// (runs with a problem are left out: listings read them from files).
/// Returns how many runs it holds.
pub fn reindex(home: &Path) -> std::io::Result<usize> {
    let reg = Registry::at(home);
    let _lock = lock(home)?;
    let mut rows = String::new();
    let mut n = 0;
    for id in reg.ids() {
        let Ok(p) = reg.read(&id) else { continue };
        if let Some(r) = rows_of(&reg, &p) {
            rows.push_str(&r);
            n += 1;
        }
    }
    write_whole(home, &rows)?;
    Ok(n)
}
