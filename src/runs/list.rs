//! Listing registered runs (`runs list`, `GET /runs`): pages sorted by most
//! recent activity, filtered by status and repository, read from the run
//! index ([`super::index`]) kept by the writers.
//!
//! A listing reads the index (one file) and the registry's directory (the
//! registered run ids and each pointer's inode, no pointer read). A run the
//! index knows (its pointer's inode and its journal's row, made long enough
//! after the journal's last change) is placed, filtered and counted by its
//! row; before it is shown, one `stat` of its journal must give the row's
//! stamp. Any other run (unknown to the index, or changed behind its back:
//! an older writer, a hand edit) is read from its files ([`super::view`]),
//! and what was read is appended to the index for the next listing. A run
//! shown is thus always as its files say; `spec/LAYOUT.md` ("The run
//! index") says what a run not shown may miss.
//!
//! A page with a limit (and no repository filter) reads only the index's
//! head ([`index::Head`]: a small row a run) and the rows appended since it
//! was written, selects its runs instead of sorting every run, and reads
//! the two rows of each run it shows at the offsets the head gives.

use super::index::{self, Head, HeadRef, Index, JournalRef, Read, RunRef, Stamp};
use super::registry::Registry;
use super::view::{self, STATUSES};
use std::sync::Arc;

/// Most runs one page may ask for.
pub const MAX_LIMIT: usize = 10_000;

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
    /// Only runs whose id starts with this (a hub's `?node=NAME`: `NAME.`).
    pub id_prefix: Option<String>,
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
                        view::status(one).ok_or_else(|| format!("status {one:?} is not one of {}", STATUSES.join(", ")))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        if repo.is_some_and(|r| r.is_empty()) {
            return Err("repo: expected a repository name or root".into());
        }
        Ok(Query { limit, cursor, statuses, repo: repo.map(str::to_string), id_prefix: None })
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
    /// How many runs were read from their files, not the index.
    pub from_files: usize,
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

/// How a listing reads.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Read the run index (`false`: every run from its files, as
    /// `runs list --from-files`).
    pub use_index: bool,
    /// Append to the index what was read from files.
    pub repair: bool,
    /// A row is trusted only if its journal had not changed for this long
    /// when the row was made ([`index::RACY_NS`]).
    pub racy_ns: i64,
}

impl Default for Options {
    fn default() -> Options {
        Options { use_index: true, repair: true, racy_ns: index::RACY_NS }
    }
}

/// One page of the listing: the runs matching `q`'s filters, newest
/// activity first (then by run id), after `q.cursor`, at most `q.limit`.
pub fn page(reg: &Registry, q: &Query) -> Page {
    page_with(reg, q, Options::default())
}

/// Where a listed run's summary comes from.
enum Src<'a> {
    /// Its index rows; `checked` once a `stat` of its journal confirmed them.
    Index { run: &'a RunRef<'a>, journal: &'a JournalRef<'a>, checked: bool },
    /// Its head row (a page reads its rows only when it shows it), with
    /// whichever of its rows was appended since the head was written.
    Head { head: &'a HeadRef<'a>, run: Option<&'a RunRef<'a>>, journal: Option<&'a JournalRef<'a>> },
    /// Its rows' bodies, read for the page; `checked` as for `Index`.
    Rows { run: Box<str>, journal: Box<str>, checked: bool },
    /// Its files: the summary, made.
    Files(Box<str>),
}

/// A registered run, as the listing places it.
struct Cand<'a> {
    id: String,
    activity_ns: i64,
    status: &'static str,
    /// Its `repo` or `repoRoot` is the query's (or the query has none).
    in_repo: bool,
    src: Src<'a>,
}

impl Cand<'_> {
    fn checked(&self) -> bool {
        matches!(self.src, Src::Files(_) | Src::Index { checked: true, .. } | Src::Rows { checked: true, .. })
    }
}

/// A head run's rows, read at the offsets its head row gives (those
/// appended since are given), as `Src::Rows`; `None` when they cannot be
/// read, are damaged, or are not what the head row says.
fn rows_of_head<'a>(read: &Read, h: &HeadRef, run: Option<&RunRef>, journal: Option<&JournalRef>) -> Option<Src<'a>> {
    let r = run.map_or_else(|| read.row_at(h.run_at), |r| Some(r.body().to_string()))?;
    let j = journal.map_or_else(|| read.row_at(h.journal_at), |j| Some(j.body().to_string()))?;
    let (id, rr, jj) = index::parse_pair(&r, &j)?;
    let run_ok = run.is_some()
        || (id == h.id
            && rr.pointer_ino == h.pointer_ino
            && rr.pointer_mtime_ns == h.pointer_mtime_ns
            && rr.journal == h.journal);
    let settled = jj.at_ns.saturating_sub(jj.stamp.mtime_ns.max(jj.stamp.ctime_ns));
    let journal_ok = journal.is_some()
        || ((jj.stamp.dev, jj.stamp.ino) == h.journal
            && jj.stamp.mtime_ns == h.journal_mtime_ns
            && jj.status == h.status
            && settled == h.settled_ns);
    (id == h.id && run_ok && journal_ok).then(|| Src::Rows { run: r.into(), journal: j.into(), checked: false })
}

/// What reading a run's files gave: the candidate, and the index rows to
/// append (when the run had no problem and its files had settled).
fn from_files<'a>(reg: &Registry, id: String, q: &Query, now_ns: i64, o: &Options) -> Option<(Cand<'a>, String)> {
    let pst = match std::fs::symlink_metadata(reg.path(&id)) {
        Ok(m) => Some(Stamp::of_meta(&m)),
        // Removed since the directory was read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => None,
    };
    let pointer_ns = pst.map_or(0, |s| s.mtime_ns);
    let (l, ok) = match reg.read(&id) {
        Ok(p) => (view::load(p), true),
        Err(e) if e.absent => return None,
        Err(e) => (view::unreadable_pointer(&id, e.to_string()), false),
    };
    let activity_ns = pointer_ns.max(l.journal_stamp.map_or(0, |s| s.mtime_ns)).max(0);
    let d = l.digest();
    let mut text = Vec::with_capacity(640);
    view::write_summary(&mut text, l.pointer.fields(), ok, &d, Some(activity_ns / 1_000_000));
    let mut rows = String::new();
    if let (true, false, Some(pst), Some(jst)) = (o.repair, d.problem, pst, l.journal_stamp) {
        if !pst.racy(now_ns, o.racy_ns) && !jst.racy(now_ns, o.racy_ns) {
            rows = index::run_row(&l.pointer, &pst, (jst.dev, jst.ino));
            rows.push_str(&index::journal_row(&jst, now_ns, &d));
        }
    }
    let summary = String::from_utf8(text).unwrap_or_default().into_boxed_str();
    let p = &l.pointer;
    let in_repo = q.repo.as_ref().is_none_or(|r| ok && (p.repo == *r || p.repo_root == *r));
    Some((Cand { id, activity_ns, status: d.status, in_repo, src: Src::Files(summary) }, rows))
}

/// The directories a thread `stat`s journals beneath, each opened once
/// (walking a journal's whole path was most of its `stat`'s cost).
#[derive(Default)]
struct Dirs(std::collections::HashMap<String, Option<std::fs::File>>);

/// Most directories one thread keeps open (a listing's threads together
/// stay far below the default limit of 1,024 descriptors, which the
/// server's connections share); past them, whole paths.
const MAX_DIRS: usize = 64;

impl Dirs {
    /// The stamp of the file at `path`, as `stat` gives it.
    fn stamp(&mut self, path: &str) -> Option<Stamp> {
        use std::os::fd::AsRawFd;
        if let Some((dir, name)) = path.rsplit_once('/').filter(|(d, n)| !d.is_empty() && !n.is_empty()) {
            if self.0.len() < MAX_DIRS && !self.0.contains_key(dir) {
                self.0.insert(dir.to_string(), std::fs::File::open(dir).ok());
            }
            if let Some(Some(d)) = self.0.get(dir) {
                let st = nix::sys::stat::fstatat(Some(d.as_raw_fd()), name, nix::fcntl::AtFlags::empty());
                return st.ok().map(|st| Stamp::of(&st));
            }
        }
        std::fs::metadata(path).ok().map(|m| Stamp::of_meta(&m))
    }
}

/// Whether a `stat` of the run's journal gives the row's stamp.
fn fresh(dirs: &mut Dirs, run: &RunRef, j: &JournalRef) -> bool {
    run.journal_path().is_some_and(|p| dirs.stamp(&p) == Some(j.stamp))
}

/// Where a registered run's rows (appended since the head, else the
/// head's) place it: its activity, status, whether it is in the query's
/// repository (`repo_json`), and where its summary comes from; `None` when
/// its files must be read (rows missing, for another pointer, or made too
/// soon after the journal's last change).
fn place<'i>(
    ix: &'i Index,
    id: &str,
    ino: u64,
    h: Option<&'i HeadRef>,
    racy_ns: i64,
    repo_json: Option<&str>,
) -> Option<(i64, &'static str, bool, Src<'i>)> {
    let run = ix.runs.get(id);
    let (pointer_ino, pointer_ns, key) = match (run, h) {
        (Some(r), _) => (r.pointer_ino, r.pointer_mtime_ns, r.journal),
        (None, Some(h)) => (h.pointer_ino, h.pointer_mtime_ns, h.journal),
        (None, None) => return None,
    };
    if pointer_ino != ino {
        return None;
    }
    let (j, journal_ns, status) = match ix.journals.get(&key) {
        Some(j) => (!j.stamp.racy(j.at_ns, racy_ns)).then_some((Some(j), j.stamp.mtime_ns, j.status))?,
        None => {
            h.filter(|h| h.journal == key && h.settled_ns > racy_ns).map(|h| (None, h.journal_mtime_ns, h.status))?
        }
    };
    let src = match (run, j, h) {
        (Some(run), Some(journal), _) => Src::Index { run, journal, checked: false },
        (_, _, Some(head)) => Src::Head { head, run, journal: j },
        // Not reached: a part not appended since is the head's.
        (_, _, None) => return None,
    };
    let in_repo = repo_json.is_none_or(|r| run.is_some_and(|run| run.in_repo(r)));
    Some((pointer_ns.max(journal_ns).max(0), status, in_repo, src))
}

/// Below this many runs, one thread does the work.
const PAR_MIN: usize = 512;

/// `f` of each item, in order, on a few threads for many items; each
/// thread's calls share one `S`.
fn par_map<T: Sync, R: Send, S: Default>(items: &[T], f: impl Fn(&mut S, &T) -> R + Sync) -> Vec<R> {
    let threads = match items.len() {
        n if n < PAR_MIN => 1,
        _ => std::thread::available_parallelism().map_or(1, |t| t.get()).clamp(1, 4),
    };
    let chunk = items.len().div_ceil(threads).max(1);
    let run = |part: &[T]| {
        let mut s = S::default();
        part.iter().map(|t| f(&mut s, t)).collect::<Vec<R>>()
    };
    std::thread::scope(|s| {
        let mut parts = items.chunks(chunk);
        let first = parts.next();
        let run = &run;
        let rest: Vec<_> = parts.map(|part| s.spawn(move || run(part))).collect();
        let mut out: Vec<R> = first.map(run).unwrap_or_default();
        for h in rest {
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

/// [`page`], read as `o` says.
pub fn page_with(reg: &Registry, q: &Query, o: Options) -> Page {
    let now_ns = index::now_ns();
    let home = reg.home();
    // A page with a limit places, filters by status and counts runs by the
    // index's head and the rows appended since it was written (the head has
    // no repositories: a repository filter reads every row).
    let want_head = q.limit.is_some() && q.repo.is_none();
    // Without the head, the registry directory is read on a thread of its
    // own while the index is read and parsed.
    let names = (!want_head).then(|| {
        let reg = reg.clone();
        std::thread::Builder::new().spawn(move || index::registered(&reg)).ok()
    });
    let read = if o.use_index { index::read_for(home, want_head) } else { Read::default() };
    let head = read.has_head().then(|| Head::parse(&read.head, read.head_n));
    // A damaged head: every row instead.
    let whole = matches!(head, Some(None)).then(|| index::read_for(home, false));
    let head = head.flatten().unwrap_or_default();
    let ix = Index::parse_rows(whole.as_ref().map_or(&read.rows, |w| &w.rows));
    let mut repairs = String::new();
    let mut from_files_n = 0;
    let mut read_files = |id: String, repairs: &mut String| {
        from_files_n += 1;
        let (c, rows) = from_files(reg, id, q, now_ns, &o)?;
        repairs.push_str(&rows);
        Some(c)
    };
    // The repository asked for, as the index writes it (a JSON string).
    let repo_json = q.repo.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default());
    let mut cands: Vec<Cand> = Vec::new();
    // The registered runs: the head's, while the registry directory is as it
    // was when the head was written (no name read); else its names, each
    // found in the head by its pointer's inode.
    let listed: Vec<(String, u64, Option<&HeadRef>)> =
        if read.registry_unchanged(&reg.dir, o.racy_ns) && whole.is_none() {
            head.runs.iter().map(|h| (h.id.to_string(), h.pointer_ino, Some(h))).collect()
        } else {
            let names = names.flatten().and_then(|t| t.join().ok()).unwrap_or_else(|| index::registered(reg));
            names
                .into_iter()
                .map(|(id, ino)| {
                    let h = head.get_at(&id, ino);
                    (id, ino, h)
                })
                .collect()
        };
    // Each run placed by its rows, on a few threads for many runs.
    let placed = par_map(&listed, |_: &mut (), (id, ino, h)| place(&ix, id, *ino, *h, o.racy_ns, repo_json.as_deref()));
    for ((id, ..), p) in listed.into_iter().zip(placed) {
        match p {
            Some((activity_ns, status, in_repo, src)) => cands.push(Cand { id, activity_ns, status, in_repo, src }),
            None => cands.extend(read_files(id, &mut repairs)),
        }
    }
    let wanted = |c: &Cand| {
        c.in_repo
            && q.statuses.as_ref().is_none_or(|s| s.contains(&c.status))
            && q.id_prefix.as_ref().is_none_or(|p| c.id.starts_with(p.as_str()))
    };
    let after = |c: &Cand| q.cursor.as_ref().is_none_or(|cur| cur.before(c.activity_ns, &c.id));
    let limit = q.limit.unwrap_or(usize::MAX);
    // The listing's order, the runs after the cursor first.
    let order = |a: &Cand, b: &Cand| {
        after(b).cmp(&after(a)).then(b.activity_ns.cmp(&a.activity_ns)).then_with(|| a.id.cmp(&b.id))
    };
    // Damaged rows (a torn or corrupted line) may have left a run's older
    // row in place of its newer one: then every run is checked, as a full
    // listing checks them, before any is filtered or placed by its rows.
    let damaged = ix.skipped > 0;
    // A full listing with a status filter checks every run before filtering,
    // as the same listing without the filter checks every run it shows: a
    // row older than its journal (a writer that could not update the index)
    // never hides a run whose files have the status asked for.
    let check_every = damaged || (q.limit.is_none() && q.statuses.is_some());
    loop {
        let check_all = check_every && cands.iter().any(|c| !c.checked());
        if !check_all {
            cands.retain(|c| wanted(c));
            // A page needs its runs and the next one in order: those are
            // selected, and only they sorted.
            match limit.checked_add(1).filter(|n| *n < cands.len()) {
                Some(n) => {
                    cands.select_nth_unstable_by(n, order);
                    cands[..n].sort_unstable_by(order);
                }
                None => cands.sort_unstable_by(order),
            }
        }
        // The runs this page shows must be as their files say: a head run's
        // rows are read, and each known run's journal is `stat`ed; one that
        // changed (or whose rows are not what its head row says) is read
        // from its files and the page cut again.
        let mut todo: Vec<&mut Cand> = if check_all {
            cands.iter_mut().filter(|c| !c.checked()).collect()
        } else {
            cands.iter_mut().filter(|c| after(c)).take(limit).filter(|c| !c.checked()).collect()
        };
        for c in todo.iter_mut() {
            if let Src::Head { head, run, journal } = c.src {
                if let Some(rows) = rows_of_head(&read, head, run, journal) {
                    c.src = rows;
                }
            }
        }
        let checks = par_map(&todo, |dirs: &mut Dirs, c| match &c.src {
            Src::Index { run, journal, .. } => fresh(dirs, run, journal),
            Src::Rows { run, journal, .. } => {
                index::parse_pair(run, journal).is_some_and(|(_, r, j)| fresh(dirs, &r, &j))
            }
            _ => false,
        });
        for (c, ok) in todo.iter_mut().zip(checks) {
            if let Src::Index { checked, .. } | Src::Rows { checked, .. } = &mut c.src {
                *checked = ok;
            }
        }
        let mut stale = false;
        for c in todo.into_iter().filter(|c| !c.checked()) {
            stale = true;
            let id = std::mem::take(&mut c.id);
            match read_files(id, &mut repairs) {
                Some(f) => *c = f,
                // Gone since: dropped below.
                None => c.status = "",
            }
        }
        cands.retain(|c| !c.status.is_empty());
        if !stale && !check_all {
            break;
        }
    }
    let total = cands.len();
    let shown: Vec<&Cand> = cands.iter().filter(|c| after(c)).take(limit).collect();
    let texts = par_map(&shown, |_: &mut (), c| {
        let mut text = Vec::with_capacity(640);
        match &c.src {
            Src::Files(s) => return Some(Arc::<str>::from(&**s)),
            Src::Index { run, journal, .. } => index::summary(&mut text, run, journal, c.activity_ns / 1_000_000)?,
            Src::Rows { run, journal, .. } => {
                let (_, run, journal) = index::parse_pair(run, journal)?;
                index::summary(&mut text, &run, &journal, c.activity_ns / 1_000_000)?
            }
            Src::Head { .. } => return None,
        }
        String::from_utf8(text).ok().map(Arc::from)
    });
    let mut items: Vec<Arc<str>> = Vec::with_capacity(shown.len());
    let mut last = None;
    for (c, text) in shown.into_iter().zip(texts) {
        let text = match text {
            Some(t) => t,
            // A damaged row: read from files instead.
            None => match read_files(c.id.clone(), &mut repairs) {
                Some(Cand { src: Src::Files(s), .. }) => (*s).into(),
                _ => continue,
            },
        };
        items.push(text);
        last = Some(c);
    }
    let more = cands.iter().filter(|c| after(c)).nth(limit).is_some();
    let next = last.filter(|_| more).map(|c| Cursor { activity_ns: c.activity_ns, run_id: c.id.clone() });
    if !repairs.is_empty() {
        let _ = index::append(home, &repairs);
    }
    Page { items, total, next, from_files: from_files_n }
}

#[cfg(test)]
mod tests {
    use super::*;

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
