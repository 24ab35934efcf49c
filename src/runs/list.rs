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
use super::registry::Registry;
use super::view::{self, STATUSES};
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
    /// Append to the index what was read from files (and compact it).
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
    /// Its index row, its journal's stamp confirmed.
    Row(&'a Row<'a>),
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
fn current<'i>(ix: &'i Index, links: Option<&std::fs::File>, id: &str, ino: u64, racy_ns: i64) -> Option<&'i Row<'i>> {
    let r = ix.get(id)?;
    (r.pointer.ino == ino && !r.journal.racy(r.made_ns, racy_ns) && linked_stamp(links, id) == Some(r.journal))
        .then_some(r)
}

/// [`page`], read as `o` says.
pub fn page_with(reg: &Registry, q: &Query, o: Options) -> Page {
    let now_ns = index::now_ns();
    let home = reg.home();
    // The registry's directory is listed while the index is read and
    // parsed (each a few ms of a 10,000-run listing, one mostly the
    // kernel's, the other ours).
    let bytes = if o.use_index { index::read(home) } else { Vec::new() };
    let (ix, names) = std::thread::scope(|s| {
        let names = s.spawn(|| index::registered(reg));
        let ix = Index::parse(&bytes);
        (ix, names.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let links = std::fs::File::open(reg.links_dir()).ok();
    // Each run by its row, when its journal's stamp confirms it (on a few
    // threads for many runs); the others from their files.
    let rows = super::par_map(&names, |_: &mut (), (id, ino)| current(&ix, links.as_ref(), id, *ino, o.racy_ns));
    let stale: Vec<&str> = names.iter().zip(&rows).filter(|(_, r)| r.is_none()).map(|((id, _), _)| &**id).collect();
    let read = super::par_map(&stale, |_: &mut (), id| from_files(reg, id, q, now_ns, &o));
    let from_files_n = stale.len();
    let mut cands: Vec<Cand> = Vec::with_capacity(names.len());
    let mut lines = String::new();
    for ((id, _), row) in names.iter().zip(&rows) {
        if let Some(r) = row {
            let in_repo = q.repo.as_deref().is_none_or(|repo| r.in_repo(repo));
            let status = view::status(r.status).unwrap_or("unreadable");
            cands.push(Cand { id: id.clone(), activity_ns: r.activity_ns(), status, in_repo, src: Src::Row(r) });
        }
    }
    let mut repaired: std::collections::HashMap<String, String, super::FastHash> = Default::default();
    for (c, line) in read.into_iter().flatten() {
        if !line.is_empty() {
            lines.push_str(&line);
            repaired.insert(c.id.clone(), line);
        }
        cands.push(c);
    }
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
    let total = cands.len();
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
    if o.use_index && o.repair && !lines.is_empty() {
        keep(home, &ix, &names, &repaired, bytes.len() + lines.len(), &lines);
    }
    Page { items, total, next, from_files: from_files_n }
}

/// Appends the rows a listing made from files, or, once the log is past
/// [`index::COMPACT_MIN`] and more than twice what the registered runs'
/// last rows take, rewrites it with those rows only. A failure is ignored:
/// the runs are read from their files again next time.
fn keep(
    home: &std::path::Path,
    ix: &Index,
    names: &[(String, u64)],
    repaired: &std::collections::HashMap<String, String, super::FastHash>,
    size: usize,
    lines: &str,
) {
    let line = |id: &str| repaired.get(id).map(|l| l.as_bytes()).or_else(|| ix.line(id));
    let live: usize = names.iter().filter_map(|(id, _)| line(id)).map(<[u8]>::len).sum();
    if size as u64 > index::COMPACT_MIN && size > 2 * live {
        let mut text = Vec::with_capacity(live);
        names.iter().filter_map(|(id, _)| line(id)).for_each(|l| text.extend_from_slice(l));
        let _ = index::write(home, &String::from_utf8_lossy(&text));
    } else {
        let _ = index::append(home, lines);
    }
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
