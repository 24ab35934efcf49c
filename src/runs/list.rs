//! Listing registered runs (`runs list`, `GET /runs`): pages sorted by most
//! recent activity, filtered by status and repository, read from the run
//! index ([`super::index`]), which the listings themselves keep.
//!
//! A listing reads the index (one file), the registry's directory (the
//! registered run ids and each pointer's inode, no pointer read), and
//! `stat`s each run's journal through its link (`journals/<runId>.jsonl`,
//! one directory). A run whose row is for the same pointer and whose
//! journal still has the row's stamp (made long enough after the journal's
//! last change) is placed, filtered, counted and shown by its row; any
//! other (unknown to the index, or written since: every journal append
//! changes the stamp) is read from its files ([`super::view`]), and its new
//! row appended to the index for the next listing. So every run, shown or
//! not, is placed and filtered as its files say (`spec/LAYOUT.md`, "The
//! run index"), however the index was left.

use super::index::{self, Index, Row, Stamp};
use super::marks;
use super::registry::Registry;
use super::view::{self, STATUSES};
use std::collections::HashSet;
use std::os::fd::AsRawFd;
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
        if !super::valid_run_id(id) {
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
    /// Append to the index what was read from files (and compact it).
    pub repair: bool,
    /// A row is trusted only if its journal had not changed for this long
    /// when the row was made ([`index::RACY_NS`]).
    pub racy_ns: i64,
    /// How long after a listing that checked every run's stamps the row of
    /// a run without a mark is trusted with no `stat` (`super::marks`):
    /// what no writer announced (a file written by hand) shows within it.
    /// 0: every listing checks every run.
    pub check_every_ns: i64,
}

/// [`Options::check_every_ns`] by default: 10 s.
pub const CHECK_EVERY_NS: i64 = 10_000_000_000;

impl Options {
    /// With `RUNWIRE_INDEX_CHECK_MS` (the binaries' setting of
    /// [`Options::check_every_ns`], in ms), when it is a number.
    pub fn with_env(self) -> Options {
        match std::env::var("RUNWIRE_INDEX_CHECK_MS").ok().and_then(|v| v.parse::<i64>().ok()) {
            Some(ms) => Options { check_every_ns: ms.max(0).saturating_mul(1_000_000), ..self },
            None => self,
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options { use_index: true, repair: true, racy_ns: index::RACY_NS, check_every_ns: CHECK_EVERY_NS }
    }
}

/// One page of the listing: the runs matching `q`'s filters, newest
/// activity first (then by run id), after `q.cursor`, at most `q.limit`.
pub fn page(reg: &Registry, q: &Query) -> Page {
    page_with(reg, q, Options::default())
}

/// Where a listed run's summary comes from.
enum Src<'a> {
    /// Its index row (its journal's stamp confirmed, or its run unmarked).
    Row(Row<'a>),
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

/// What reading a run's files gave: the candidate, and its index line
/// (empty when the run has a problem or its files changed too recently to
/// be trusted by a row). `None`: the run is gone.
fn from_files<'a>(reg: &Registry, id: &str, q: &Query, now_ns: i64, o: &Options) -> Option<(Cand<'a>, String)> {
    let pst = match std::fs::symlink_metadata(reg.path(id)) {
        Ok(m) => Some(Stamp::of_meta(&m)),
        // Removed since the directory was read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => None,
    };
    let pointer_ns = pst.map_or(0, |s| s.mtime_ns);
    let (l, ok) = match reg.read(id) {
        Ok(p) => (view::load(p), true),
        Err(e) if e.absent => return None,
        Err(e) => (view::unreadable_pointer(id, e.to_string()), false),
    };
    let activity_ns = pointer_ns.max(l.journal_stamp.map_or(0, |s| s.mtime_ns)).max(0);
    let d = l.digest();
    let mut text = Vec::with_capacity(640);
    view::write_summary(&mut text, l.pointer.fields(), ok, &d, Some(activity_ns / 1_000_000));
    let mut line = String::new();
    if let (true, false, Some(pst), Some(jst)) = (o.repair, d.problem, pst, l.journal_stamp) {
        if !pst.racy(now_ns, o.racy_ns) && !jst.racy(now_ns, o.racy_ns) {
            line = index::row_line(&l.pointer, &pst, &jst, now_ns, &d).unwrap_or_default();
        }
    }
    let summary = String::from_utf8(text).unwrap_or_default().into_boxed_str();
    let p = &l.pointer;
    let in_repo = q.repo.as_ref().is_none_or(|r| ok && (p.repo == *r || p.repo_root == *r));
    let id = id.to_string();
    Some((Cand { id, activity_ns, status: d.status, in_repo, src: Src::Files(summary) }, line))
}

/// The stamp of the journal linked as `journals/<id>.jsonl` (a hard link
/// is the journal's own inode; a symlink is followed), `stat`ed beneath
/// the links' directory.
fn linked_stamp(links: Option<&std::fs::File>, id: &str) -> Option<Stamp> {
    let name = super::registry::link_name(id);
    let st = nix::sys::stat::fstatat(Some(links?.as_raw_fd()), name.as_str(), nix::fcntl::AtFlags::empty());
    st.ok().map(|st| Stamp::of(&st))
}

/// The run's row, when it may stand for the run's files: made for the
/// pointer the registry lists (`ino`), long enough after its journal's last
/// change, and the journal still has its stamp (same device, inode, size,
/// mtime and ctime: a journal only grows, so every record changes it).
fn current<'i>(ix: &Index<'i>, links: Option<&std::fs::File>, id: &str, ino: u64, racy_ns: i64) -> Option<Row<'i>> {
    let r = ix.get(id)?;
    (r.pointer.ino == ino && !r.journal.racy(r.made_ns, racy_ns) && linked_stamp(links, id) == Some(r.journal))
        .then(|| r.clone())
}

/// [`page`], read as `o` says.
pub fn page_with(reg: &Registry, q: &Query, o: Options) -> Page {
    let now_ns = index::now_ns();
    let home = reg.home();
    let log = o.use_index.then(|| index::Log::open(home)).flatten();
    let sorted = log.as_ref().and_then(|l| l.sorted(home));
    // Rows are trusted for a while after a listing checked every run: what
    // no writer announced (a file written by hand) is seen within that. A
    // check stamped in the future (the clock stepped back since) is no
    // recent check: trusting it would hide such files until the clock
    // caught up.
    let recent = |at: i64| (0..o.check_every_ns).contains(&now_ns.saturating_sub(at));
    if let (Some(l), Some((n, _))) = (&log, sorted.filter(|(_, at)| recent(*at))) {
        let tail = l.read(n, l.size);
        // An unfiltered page reads the sorted part's start only: the rest
        // when that start does not hold the page.
        if q.limit.is_some() && unfiltered(q) && n > HEAD_READ {
            match trusted(reg, q, &o, &l.read(0, HEAD_READ), false, &tail, now_ns) {
                Trusted::Page(p) => return p,
                Trusted::More => {}
                Trusted::Check => return checked(reg, q, o, &index::read(home), Some(n), now_ns),
            }
        }
        if let Trusted::Page(p) = trusted(reg, q, &o, &l.read(0, n), true, &tail, now_ns) {
            return p;
        }
    }
    let bytes = log.map(|l| l.read(0, l.size)).unwrap_or_default();
    checked(reg, q, o, &bytes, sorted.map(|(n, _)| n), now_ns)
}

/// How much of the sorted part an unfiltered page reads first: about 190
/// rows (a page of 50 and the rows it skips).
const HEAD_READ: usize = 128 * 1024;

fn unfiltered(q: &Query) -> bool {
    q.statuses.is_none() && q.repo.is_none() && q.id_prefix.is_none()
}

/// What a listing that trusts rows gave.
enum Trusted {
    Page(Page),
    /// The sorted part read was a start that did not hold the page.
    More,
    /// A damaged or out-of-order sorted part, or a damaged row after it:
    /// the listing checks every run instead.
    Check,
}

/// A log's sorted part past which a listing compacts the log (its rows
/// after the sorted part are all parsed by every listing).
pub const TAIL_MAX: usize = 512 * 1024;

/// The marked runs (`super::marks`): `ids`, and of those the marks no
/// writer held, `taken` (a repairing listing's: their runs' rows are made
/// from files, and the marks removed once those rows are durable). Marks
/// of runs no longer registered are removed when no one holds them.
struct Marked {
    ids: HashSet<String, super::FastHash>,
    taken: Vec<marks::Taken>,
}

fn marked(home: &std::path::Path, registered: &HashSet<&str, super::FastHash>, repair: bool) -> Marked {
    let mut m = Marked { ids: HashSet::default(), taken: Vec::new() };
    for id in marks::scan(home) {
        match repair.then(|| marks::take(home, &id)).flatten() {
            Some(t) if !registered.contains(id.as_str()) => t.remove(),
            Some(t) => {
                m.taken.push(t);
                m.ids.insert(id);
            }
            None => {
                m.ids.insert(id);
            }
        }
    }
    m
}

impl Marked {
    /// The marked runs among `names`: a held one by its row in `ix` while
    /// its journal still has the row's stamp (a writer holding a run it no
    /// longer writes), else from its files; a taken one from its files
    /// (no writer can change them until the mark is let go). Returns their
    /// candidates, the rows to append, and how many were read from files
    /// and were gone.
    fn read<'a>(
        &self,
        reg: &Registry,
        ix: &Index<'a>,
        names: &[(String, u64)],
        q: &Query,
        now_ns: i64,
        o: &Options,
    ) -> (Vec<Cand<'a>>, Vec<(String, String)>, usize, usize) {
        let taken: HashSet<&str, super::FastHash> = self.taken.iter().map(|t| t.id.as_str()).collect();
        let marked: Vec<&(String, u64)> = names.iter().filter(|(id, _)| self.ids.contains(id)).collect();
        let links = std::fs::File::open(reg.links_dir()).ok();
        let mut cands = Vec::with_capacity(marked.len());
        let mut ids = Vec::new();
        for (id, ino) in marked {
            match (!taken.contains(id.as_str())).then(|| current(ix, links.as_ref(), id, *ino, o.racy_ns)).flatten() {
                Some(r) => cands.push(row_cand(q, &r)),
                None => ids.push(id.as_str()),
            }
        }
        // A taken run's row is made as any other: not within 2 s of a
        // change to its files (then the mark stays, and the run is read
        // from its files until a later listing can make its row).
        let read = super::par_map(&ids, |_: &mut (), id| from_files(reg, id, q, now_ns, o));
        let gone = read.iter().filter(|r| r.is_none()).count();
        let mut lines = Vec::new();
        for (c, line) in read.into_iter().flatten() {
            if !line.is_empty() {
                lines.push((c.id.clone(), line));
            }
            cands.push(c);
        }
        (cands, lines, ids.len(), gone)
    }
}

/// A run's candidate from its row.
fn row_cand<'a>(q: &Query, r: &Row<'a>) -> Cand<'a> {
    let in_repo = q.repo.as_deref().is_none_or(|repo| r.in_repo(repo));
    let status = view::status(r.status).unwrap_or("unreadable");
    Cand { id: r.run.to_string(), activity_ns: r.activity_ns(), status, in_repo, src: Src::Row(r.clone()) }
}

/// The listing when the log has a sorted part: every registered run
/// without a mark is its last row, trusted without a `stat` (a run's
/// writers hold its mark from before they change it until its row is
/// made again: `super::marks`); the marked runs are read from their
/// files. An unfiltered page reads the rows after the sorted part, and the
/// sorted part only as far as the page needs ([`Trusted::More`] when the
/// start read does not hold the page; [`Trusted::Check`] when the sorted
/// part is damaged or out of order: the listing checks every run instead).
fn trusted(reg: &Registry, q: &Query, o: &Options, prefix: &[u8], whole: bool, tail: &[u8], now_ns: i64) -> Trusted {
    let home = reg.home();
    let (tail_ix, names) = std::thread::scope(|s| {
        let names = s.spawn(|| index::registered(reg));
        let ix = Index::parse(tail);
        (ix, names.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    // A damaged row after the sorted part: its run may be anywhere. (A
    // torn last line is a row whose writer died before it landed: its run
    // kept its mark.)
    if tail_ix.skipped > usize::from(!tail.is_empty() && !tail.ends_with(b"\n")) {
        return Trusted::Check;
    }
    let registered: HashSet<&str, super::FastHash> = names.iter().map(|(id, _)| id.as_str()).collect();
    let m = marked(home, &registered, o.repair);
    let (mut cands, lines, from_files_n, gone) = m.read(reg, &tail_ix, &names, q, now_ns, o);
    let skip = |id: &str| !registered.contains(id) || m.ids.contains(id);
    for (id, r) in tail_ix.rows() {
        if !skip(id) {
            cands.push(row_cand(q, r));
        }
    }
    let unfiltered = unfiltered(q);
    let after = |c: &Cand| q.cursor.as_ref().is_none_or(|cur| cur.before(c.activity_ns, &c.id));
    // An unfiltered page needs, of the sorted part, the runs up to the
    // page's end and the next one: no run further down can come before them.
    let need = q.limit.filter(|_| unfiltered).map(|l| l + 1);
    let (mut got, mut prev): (usize, Option<(i64, &str)>) = (0, None);
    let mut start = 0;
    let mut enough = false;
    for end in memchr::memchr_iter(b'\n', prefix) {
        let Some(r) = index::parse_line(&prefix[start..=end]) else { return Trusted::Check };
        start = end + 1;
        let key = (r.activity_ns(), r.run);
        if prev.is_some_and(|(a, id)| key.0 > a || (key.0 == a && key.1 <= id)) {
            return Trusted::Check;
        }
        prev = Some(key);
        if skip(r.run) || tail_ix.get(r.run).is_some() {
            continue;
        }
        let c = row_cand(q, &r);
        got += usize::from(after(&c));
        cands.push(c);
        if need.is_some_and(|n| got >= n) {
            enough = true;
            break;
        }
    }
    if !whole && !enough {
        return Trusted::More;
    }
    // Every registered run is a mark or a row (compaction marks those
    // without one): unfiltered, they are all counted, read or not.
    let total = unfiltered.then(|| names.len() - gone);
    let (items, total, next) = finish(cands, q, total);
    if o.repair && !(lines.is_empty() && m.taken.is_empty()) {
        index::append_rows(reg, &lines, m.taken);
    }
    if o.repair && tail.len() > TAIL_MAX {
        if let Ok(_held) = index::lock(home) {
            let _ = index::compact_sorted(home, &index::read(home), &names, None);
        }
    }
    Trusted::Page(Page { items, total, next, from_files: from_files_n })
}

/// The listing that checks every run: a run whose row is for the pointer
/// the registry lists and whose journal still has the row's stamp is its
/// row; any other, and every marked run, is read from its files. What it
/// read it keeps: rows appended (a run whose row could not be made or
/// land gets a mark), and the log compacted and sorted when it has no
/// sorted part or has grown.
fn checked(reg: &Registry, q: &Query, o: Options, bytes: &[u8], sorted: Option<usize>, now_ns: i64) -> Page {
    let home = reg.home();
    // The registry's directory is listed while the index is read and
    // parsed (each a few ms of a 10,000-run listing, one mostly the
    // kernel's, the other ours).
    let (ix, names) = std::thread::scope(|s| {
        let names = s.spawn(|| index::registered(reg));
        let ix = Index::parse(bytes);
        (ix, names.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let registered: HashSet<&str, super::FastHash> = names.iter().map(|(id, _)| id.as_str()).collect();
    let m = if o.use_index {
        marked(home, &registered, o.repair)
    } else {
        Marked { ids: HashSet::default(), taken: Vec::new() }
    };
    let (mut cands, mut lines, marked_read, _) = m.read(reg, &ix, &names, q, now_ns, &o);
    let links = std::fs::File::open(reg.links_dir()).ok();
    // Each run by its row, when its journal's stamp confirms it (on a few
    // threads for many runs); the others from their files.
    let unmarked: Vec<&(String, u64)> = names.iter().filter(|(id, _)| !m.ids.contains(id)).collect();
    let rows = super::par_map(&unmarked, |_: &mut (), (id, ino)| current(&ix, links.as_ref(), id, *ino, o.racy_ns));
    let stale: Vec<&str> = unmarked.iter().zip(&rows).filter(|(_, r)| r.is_none()).map(|((id, _), _)| &**id).collect();
    let read = super::par_map(&stale, |_: &mut (), id| from_files(reg, id, q, now_ns, &o));
    let from_files_n = stale.len() + marked_read;
    for r in rows.iter().flatten() {
        cands.push(row_cand(q, r));
    }
    let mut unlanded: Vec<String> = Vec::new();
    for (c, line) in read.into_iter().flatten() {
        if line.is_empty() {
            unlanded.push(c.id.clone());
        } else {
            lines.push((c.id.clone(), line));
        }
        cands.push(c);
    }
    let (items, total, next) = finish(cands, q, None);
    if o.use_index && o.repair {
        // A run that changed with no mark (its files written by hand, or
        // its row lost) is marked before its new row is appended, and the
        // mark removed once the row is durable: a listing that trusts rows
        // never sees it unmarked with its old row. One whose row cannot be
        // made keeps its mark (read from its files by every listing).
        let mut taken = m.taken;
        for id in unlanded.iter().chain(lines.iter().map(|(id, _)| id).filter(|id| !m.ids.contains(*id))) {
            if marks::put(home, id).is_err() {
                // Neither a row nor a mark: no listing may trust rows until
                // the next compaction has checked every run again.
                index::forget_sorted(home);
            }
        }
        taken.extend(lines.iter().filter(|(id, _)| !m.ids.contains(id)).filter_map(|(id, _)| marks::take(home, id)));
        if !lines.is_empty() || !taken.is_empty() {
            index::append_rows(reg, &lines, taken);
        }
        let live: usize = names.iter().filter_map(|(id, _)| ix.line(id)).map(<[u8]>::len).sum();
        let size = bytes.len() + lines.iter().map(|(_, l)| l.len()).sum::<usize>();
        let grown = size as u64 > index::COMPACT_MIN && size > 2 * live;
        if let Ok(_held) = index::lock(home) {
            if sorted.is_none() || grown || bytes.len() - sorted.unwrap_or(0) > TAIL_MAX {
                let _ = index::compact_sorted(home, &index::read(home), &names, Some(now_ns));
            } else {
                index::note_checked(home, now_ns);
            }
        }
    }
    Page { items, total, next, from_files: from_files_n }
}

/// Orders the candidates and cuts the page: its summaries, the total
/// (`total`, or the candidates that pass the filters), and the next cursor.
fn finish(mut cands: Vec<Cand>, q: &Query, total: Option<usize>) -> (Vec<Arc<str>>, usize, Option<Cursor>) {
    let wanted = |c: &Cand| {
        c.in_repo
            && q.statuses.as_ref().is_none_or(|s| s.contains(&c.status))
            && q.id_prefix.as_ref().is_none_or(|p| c.id.starts_with(p.as_str()))
    };
    cands.retain(|c| wanted(c));
    let after = |c: &Cand| q.cursor.as_ref().is_none_or(|cur| cur.before(c.activity_ns, &c.id));
    let limit = q.limit.unwrap_or(usize::MAX);
    // The listing's order, the runs after the cursor first; a page needs
    // its runs and the next one in order: only those are sorted.
    let order = |a: &Cand, b: &Cand| {
        after(b).cmp(&after(a)).then(b.activity_ns.cmp(&a.activity_ns)).then_with(|| a.id.cmp(&b.id))
    };
    match limit.checked_add(1).filter(|n| *n < cands.len()) {
        Some(n) => {
            cands.select_nth_unstable_by(n, order);
            cands[..n].sort_unstable_by(order);
        }
        None => cands.sort_unstable_by(order),
    }
    let total = total.unwrap_or(cands.len());
    let shown: Vec<&Cand> = cands.iter().filter(|c| after(c)).take(limit).collect();
    let items: Vec<Arc<str>> = super::par_map(&shown, |_: &mut (), c| match &c.src {
        Src::Files(s) => Arc::<str>::from(&**s),
        Src::Row(r) => {
            let mut text = Vec::with_capacity(r.summary.get().len() + 32);
            r.summary_into(&mut text);
            Arc::from(String::from_utf8(text).unwrap_or_default())
        }
    });
    let more = cands.iter().filter(|c| after(c)).nth(limit).is_some();
    let next = shown.last().filter(|_| more).map(|c| Cursor { activity_ns: c.activity_ns, run_id: c.id.clone() });
    (items, total, next)
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
