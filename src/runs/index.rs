//! The run index, `<home>/index/runs.jsonl`: what a listing shows of each
//! run, so that `runs list` and `GET /runs` read one file and `stat` one
//! link a run instead of reading every run's files (as git's index keeps a
//! stamp of each file and `git status` compares it with a `stat`).
//!
//! A cache, never the truth (`spec/LAYOUT.md`, "The run index"): the
//! journals, plans, pointers and task logs are. One row format ([`Row`]),
//! one JSON line a row, the last row of a run winning. Each row holds the
//! stamps of the run's pointer and journal when its files were read, the
//! status and repository a listing filters by, and the run's summary.
//!
//! Nobody writes the index on the write path: a journal append is only an
//! append (`super::journal::append`), and registration writes no row. The
//! listings keep it: a run whose row is missing, for another pointer, or
//! whose journal no longer has the row's stamp is read from its files, and
//! its new row appended ([`append`]) for the next listing. So a failed or
//! lost index write (a full disk, a crash, two compactions at once) costs
//! the next listing a read of the run's files, never a wrong answer.

use super::registry::{Pointer, Registry};
pub use super::stamp::{now_ns, Stamp, RACY_NS};
use super::view::{self, Digest};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest index read; a larger one is ignored (every run read from files).
pub const MAX_INDEX: u64 = 256 * 1024 * 1024;
/// A listing rewrites the log when it is past this size and holds more
/// than twice the bytes of the rows it uses (one a registered run).
pub const COMPACT_MIN: u64 = 1024 * 1024;

/// `<home>/index/runs.jsonl`.
pub fn path(home: &Path) -> PathBuf {
    home.join("index").join("runs.jsonl")
}

/// A pointer file's stamp as a row keeps it: a pointer is replaced by a
/// rename (a new inode), which the registry directory's listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PointerStamp {
    pub ino: u64,
    pub mtime_ns: i64,
}

/// One row: a run as its files were when `made_ns` was taken (before they
/// were read).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Row<'a> {
    /// The run id (a valid id: never escaped in JSON).
    pub run: &'a str,
    pub pointer: PointerStamp,
    /// The journal's stamp as it was opened.
    pub journal: Stamp,
    pub made_ns: i64,
    /// One of [`view::STATUSES`].
    pub status: &'a str,
    #[serde(borrow)]
    pub repo: Cow<'a, str>,
    #[serde(borrow)]
    pub repo_root: Cow<'a, str>,
    /// The summary as `runs list` prints it, without `activityMs`.
    #[serde(borrow)]
    pub summary: &'a RawValue,
}

impl Row<'_> {
    /// The run's latest activity: the later of its pointer's and journal's mtime.
    pub fn activity_ns(&self) -> i64 {
        self.pointer.mtime_ns.max(self.journal.mtime_ns).max(0)
    }

    /// Whether its `repo` or `repoRoot` is `r`.
    pub fn in_repo(&self, r: &str) -> bool {
        self.repo == r || self.repo_root == r
    }

    /// The summary with its activity (`activityMs` first, as keys sort),
    /// appended to `out`.
    pub fn summary_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"activityMs\":");
        out.extend_from_slice((self.activity_ns() / 1_000_000).to_string().as_bytes());
        out.push(b',');
        out.extend_from_slice(&self.summary.get().as_bytes()[1..]);
    }

    /// Whether the row can be used: a valid run id, a status from the one
    /// list, a summary that is a non-empty object.
    fn valid(&self) -> bool {
        let s = self.summary.get();
        super::valid_run_id(self.run) && view::status(self.status).is_some() && s.starts_with("{\"") && s.ends_with('}')
    }
}

/// A line as read: `{"row":ROW,"sum":"<16 hex digits>"}`, `sum` the
/// [`checksum`] of the line's bytes before `,"sum":` (a flipped byte in a
/// row that still parses must not be shown). One parse: the checksum's
/// range is the line less its fixed-width tail.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(borrow)]
    row: Row<'a>,
    sum: &'a str,
}

/// The tail of a line after the bytes its checksum covers: `,"sum":"`,
/// 16 hex digits, `"}`.
const TAIL: usize = 26;

/// A row's checksum: 8 bytes at a time, each mixed in by a rotate, an xor
/// and a multiply (as FxHash does), the length last. It catches damage,
/// not an adversary (whoever can write the index can write the registry).
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    let mut h = chunks.by_ref().fold(0u64, |h, c| mix(h, u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))));
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = mix(h, u64::from_le_bytes(tail));
    mix(h, bytes.len() as u64)
}

/// `row` as a line of the log (with its checksum and a newline).
pub fn line_of(row: &Row) -> Option<String> {
    let mut s = String::from("{\"row\":");
    s.push_str(&serde_json::to_string(row).ok()?);
    let sum = checksum(s.as_bytes());
    s.push_str(&format!(",\"sum\":\"{sum:016x}\"}}\n"));
    Some(s)
}

/// A line's row: `None` when the line is torn (no newline), does not
/// parse, fails its checksum, or holds what no row may.
pub fn parse_line(line: &[u8]) -> Option<Row<'_>> {
    let line = line.strip_suffix(b"\n")?;
    let l: Line = serde_json::from_slice(line).ok()?;
    let (covered, tail) = line.split_at(line.len().checked_sub(TAIL)?);
    // The tail must be exactly `,"sum":"<the sum field>"}` with the sum in
    // 16 lowercase hex digits, as `line_of` writes it (compared in place:
    // no text is made per row, 10,000 rows a listing).
    let hex = l.sum.as_bytes();
    let exact = tail.strip_prefix(b",\"sum\":\"").and_then(|t| t.strip_suffix(b"\"}")) == Some(hex)
        && hex.len() == 16
        && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let sum_ok = exact && u64::from_str_radix(l.sum, 16) == Ok(checksum(covered));
    (sum_ok && l.row.valid()).then_some(l.row)
}

/// The line of a run, from its pointer (its stamp `pointer`) and what its
/// files gave (`journal`: the journal's stamp as opened; `d`: the digest).
pub fn row_line(p: &Pointer, pointer: &Stamp, journal: &Stamp, made_ns: i64, d: &Digest) -> Option<String> {
    let mut text = Vec::with_capacity(640);
    view::write_summary(&mut text, p.fields(), true, d, None);
    let summary = RawValue::from_string(String::from_utf8(text).ok()?).ok()?;
    line_of(&Row {
        run: &p.run_id,
        pointer: PointerStamp { ino: pointer.ino, mtime_ns: pointer.mtime_ns },
        journal: *journal,
        made_ns,
        status: d.status,
        repo: Cow::Borrowed(&p.repo),
        repo_root: Cow::Borrowed(&p.repo_root),
        summary: &summary,
    })
}

/// The index as read: the last row of each run, with its line.
#[derive(Default)]
pub struct Index<'a> {
    rows: HashMap<&'a str, (Row<'a>, &'a [u8]), super::FastHash>,
    /// Lines skipped: damaged, torn, or not rows.
    pub skipped: usize,
}

impl<'a> Index<'a> {
    /// Parses the log's lines (a big log on a few threads, each a part of
    /// the lines; the parts are taken in order, so the last row still wins).
    pub fn parse(bytes: &'a [u8]) -> Index<'a> {
        let lines = lines_of(bytes);
        let rows = super::par_map(&lines, |_: &mut (), line| parse_line(line));
        let mut ix =
            Index { rows: HashMap::with_capacity_and_hasher(lines.len(), Default::default()), ..Index::default() };
        for (line, row) in lines.into_iter().zip(rows) {
            match row {
                Some(r) => {
                    ix.rows.insert(r.run, (r, line));
                }
                None => ix.skipped += 1,
            }
        }
        ix
    }

    /// The last row of `run_id`.
    pub fn get(&self, run_id: &str) -> Option<&Row<'a>> {
        self.rows.get(run_id).map(|(r, _)| r)
    }

    /// The last line of `run_id`, as read.
    pub fn line(&self, run_id: &str) -> Option<&'a [u8]> {
        self.rows.get(run_id).map(|(_, l)| *l)
    }

    /// Each run's last row.
    pub fn rows(&self) -> impl Iterator<Item = (&'a str, &Row<'a>)> {
        self.rows.iter().map(|(id, (r, _))| (*id, r))
    }

    /// How many runs have a row.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The log's lines, each with its newline (the last one without, when
/// torn), found with `memchr` (a byte-at-a-time split was a tenth of a
/// first page's CPU over 6 MB of rows).
fn lines_of(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(bytes.len() / 512 + 1);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        out.push(&bytes[start..=end]);
        start = end + 1;
    }
    if start < bytes.len() {
        out.push(&bytes[start..]);
    }
    out
}

/// Reads the log whole (empty when absent, unreadable or over [`MAX_INDEX`]).
pub fn read(home: &Path) -> Vec<u8> {
    Log::open(home).map(|l| l.read(0, l.size)).unwrap_or_default()
}

/// Forgets the log's sorted part (listings check every run until the next
/// compaction): when a run that changed could get neither a row nor a mark.
pub fn forget_sorted(home: &Path) {
    let _ = std::fs::remove_file(sorted_path(home));
}

/// Appends `lines` (whole lines, from [`row_line`]) in one `write` with
/// `O_APPEND`, after a newline when the log ends in a torn line (as a
/// journal's line: under the log's own `flock`, which only listings take;
/// no writer of a journal waits on it). A torn or lost line costs a
/// listing a read of the run's files, nothing else.
pub fn append(home: &Path, lines: &str) -> std::io::Result<()> {
    let Some(body) = lines.strip_suffix('\n') else { return Ok(()) };
    std::fs::create_dir_all(home.join("index"))?;
    super::journal::append_line(&path(home), body.as_bytes())
}

/// Rewrites the log with only the last row of each registered run, sorted
/// ([`compact_sorted`]).
pub fn compact(home: &Path) -> std::io::Result<()> {
    let _held = lock(home)?;
    compact_sorted(home, &read(home), &registered(&Registry::at(home)), None)
}

/// `<home>/index/lock`: held by whoever appends rows or rewrites the log
/// (listings, `runs reindex`; never a journal's writer), so that no row is
/// lost to a rewrite made from the log as it was before.
pub fn lock(home: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    std::fs::create_dir_all(home.join("index"))?;
    super::lock_exclusive(&home.join("index").join("lock"))
}

/// `<home>/index/runs.sorted`: how much of the log a compaction wrote in
/// the listing's order (newest activity first, then run id), and which
/// log: `{"ino":N,"len":L,"sum":"<the last sorted line's sum>"}`.
fn sorted_path(home: &Path) -> PathBuf {
    home.join("index").join("runs.sorted")
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Sorted {
    ino: u64,
    len: usize,
    sum: String,
    /// When the last listing that checked every run's stamps began.
    checked_ns: i64,
}

/// The bytes that end a sorted part: its last line's `<sum>"}\n`.
const SORTED_END: usize = 19;

impl Sorted {
    /// `runs.sorted` as written (`None`: absent or not one).
    fn read(home: &Path) -> Option<Sorted> {
        serde_json::from_slice(&std::fs::read(sorted_path(home)).ok()?).ok()
    }

    /// Whether `end`, the log's bytes before `len`, are its last line's end.
    fn ends(&self, end: &[u8]) -> bool {
        end.len() == SORTED_END && end[..16] == *self.sum.as_bytes() && end[16..] == *b"\"}\n"
    }
}

/// The log, open: one file read in parts (a first page reads the rows
/// after the sorted part and the sorted part's start, not megabytes).
pub struct Log {
    file: std::fs::File,
    pub ino: u64,
    pub size: usize,
}

impl Log {
    /// The log (`None`: absent, unreadable or over [`MAX_INDEX`]).
    pub fn open(home: &Path) -> Option<Log> {
        use std::os::unix::fs::MetadataExt;
        let file = std::fs::File::open(path(home)).ok()?;
        let m = file.metadata().ok()?;
        (m.len() <= MAX_INDEX).then(|| Log { file, ino: m.ino(), size: m.len() as usize })
    }

    /// The bytes from `start` to `end` (fewer when the file is shorter).
    pub fn read(&self, start: usize, end: usize) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; end.saturating_sub(start)];
        let mut n = 0;
        while n < buf.len() {
            match self.file.read_at(&mut buf[n..], (start + n) as u64) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        buf.truncate(n);
        buf
    }

    /// What `runs.sorted` says of this log: the sorted part's length and
    /// when every run was last checked; `None` when it describes another.
    pub fn sorted(&self, home: &Path) -> Option<(usize, i64)> {
        let s = Sorted::read(home)?;
        if s.ino != self.ino || s.len > self.size {
            return None;
        }
        if s.len == 0 {
            return s.sum.is_empty().then_some((0, s.checked_ns));
        }
        let end = self.read(s.len.checked_sub(SORTED_END)?, s.len);
        s.ends(&end).then_some((s.len, s.checked_ns))
    }
}

/// Records that a listing that began at `at_ns` checked every run's
/// stamps (the sorted part's description kept, when it still describes
/// the log). Call with [`lock`] held.
pub fn note_checked(home: &Path, at_ns: i64) {
    use std::os::unix::fs::MetadataExt;
    let Some(mut s) = Sorted::read(home) else { return };
    if std::fs::metadata(path(home)).is_ok_and(|m| m.ino() == s.ino) && at_ns > s.checked_ns {
        s.checked_ns = at_ns;
        if let Ok(b) = serde_json::to_vec(&s) {
            let _ = super::write_atomic(&sorted_path(home), &b);
        }
    }
}

/// The last row of each of `names` (the registered runs) in `bytes` (the
/// log as read under the lock, or rows just made), in the listing's order,
/// written over the log with its `runs.sorted`; the runs without a row get
/// a mark, so that listings that trust rows read them from their files.
/// Call with [`lock`] held.
pub fn compact_sorted(
    home: &Path,
    bytes: &[u8],
    names: &[(String, u64)],
    checked_ns: Option<i64>,
) -> std::io::Result<()> {
    // A compaction that follows no check keeps the last check's time.
    let checked_ns = checked_ns.unwrap_or_else(|| Sorted::read(home).map_or(0, |s| s.checked_ns));
    let ix = Index::parse(bytes);
    let mut rows: Vec<(&Row, &[u8])> = Vec::with_capacity(names.len());
    for (id, _) in names {
        match ix.rows.get(id.as_str()) {
            Some((r, l)) => rows.push((r, l)),
            None => super::marks::put(home, id)?,
        }
    }
    rows.sort_unstable_by(|(a, _), (b, _)| b.activity_ns().cmp(&a.activity_ns()).then_with(|| a.run.cmp(b.run)));
    let mut text = Vec::with_capacity(bytes.len());
    rows.iter().for_each(|(_, l)| text.extend_from_slice(l));
    let sum = rows.last().map(|(_, l)| String::from_utf8_lossy(&l[l.len() - SORTED_END..l.len() - 3]).into_owned());
    std::fs::create_dir_all(home.join("index"))?;
    // The description first, for the file about to be renamed in (a crash
    // between the two leaves one that names another inode: ignored).
    let p = path(home);
    let tmp = home.join("index").join(format!(".runs.jsonl.{}.sorting", std::process::id()));
    let r = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        let ino = std::os::unix::fs::MetadataExt::ino(&f.metadata()?);
        let s = Sorted { ino, len: text.len(), sum: sum.unwrap_or_default(), checked_ns };
        super::write_atomic(&sorted_path(home), &serde_json::to_vec(&s).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, &p)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Appends rows a listing made from files, under [`lock`], each only while
/// its run's pointer and journal still have the row's stamps (a row made
/// before a writer's change must not land after a newer row of the run),
/// then makes them durable, then removes the `taken` marks whose runs got
/// their row. Returns the runs whose rows landed.
pub(crate) fn append_rows(
    reg: &Registry,
    lines: &[(String, String)],
    taken: Vec<super::marks::Taken>,
) -> std::collections::HashSet<String, super::FastHash> {
    use std::collections::HashSet;
    let home = reg.home();
    let mut landed: HashSet<String, super::FastHash> = HashSet::default();
    let Ok(_held) = lock(home) else { return landed };
    let links = reg.links_dir();
    let mut text = String::new();
    for (id, line) in lines {
        let Some(row) = parse_line(line.as_bytes()) else { continue };
        let pointer = std::fs::symlink_metadata(reg.path(id)).ok().map(|m| Stamp::of_meta(&m));
        let journal = std::fs::metadata(links.join(super::registry::link_name(id))).ok().map(|m| Stamp::of_meta(&m));
        let same_pointer = pointer.is_some_and(|p| p.ino == row.pointer.ino && p.mtime_ns == row.pointer.mtime_ns);
        if same_pointer && journal == Some(row.journal) {
            text.push_str(line);
            landed.insert(id.clone());
        }
    }
    let durable = !text.is_empty() && append(home, &text).and_then(|()| sync(home)).is_ok();
    if !durable {
        landed.clear();
    }
    for t in taken {
        if landed.contains(&t.id) {
            t.remove();
        }
    }
    landed
}

/// Flushes the log to disk (before a mark is removed on its strength).
fn sync(home: &Path) -> std::io::Result<()> {
    std::fs::File::open(path(home))?.sync_data()
}

/// The registered run ids and each pointer file's inode, as the registry
/// directory lists them (no pointer read).
pub fn registered(reg: &Registry) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    Registry::scan(&reg.dir, |id, ino| out.push((id.to_string(), ino)));
    out
}

/// The line of one run, from its files; `None` when the run has a problem
/// (`missing`, `unreadable`) or its pointer cannot be stamped.
pub fn line_from_files(reg: &Registry, p: &Pointer) -> Option<String> {
    let made_ns = now_ns();
    let pst = Stamp::of_meta(&std::fs::symlink_metadata(reg.path(&p.run_id)).ok()?);
    let l = view::load(p.clone());
    let jst = l.journal_stamp?;
    let d = l.digest();
    if d.problem {
        return None;
    }
    row_line(p, &pst, &jst, made_ns, &d)
}

/// `runs reindex`: the index rebuilt from every registered run's files
/// (runs with a problem are left out: listings read them from files).
/// Returns how many runs it holds.
pub fn reindex(home: &Path) -> std::io::Result<usize> {
    let reg = Registry::at(home);
    let _held = lock(home)?;
    let checked_ns = now_ns();
    let names = registered(&reg);
    // The marks no writer holds, taken first: their runs' rows are made
    // from files no one changes meanwhile.
    let taken: Vec<super::marks::Taken> =
        super::marks::scan(home).iter().filter_map(|id| super::marks::take(home, id)).collect();
    let lines = super::par_map(&names, |_: &mut (), (id, _)| reg.read(id).ok().and_then(|p| line_from_files(&reg, &p)));
    let n = lines.iter().flatten().count();
    let text = lines.into_iter().flatten().collect::<String>();
    // Written sorted, and the runs without a row marked (read from their files).
    compact_sorted(home, text.as_bytes(), &names, Some(checked_ns))?;
    // A taken mark goes once its run has a row made 2 s after its files'
    // last change (as a listing's); a removed run's mark goes too.
    let ix = Index::parse(text.as_bytes());
    let registered: std::collections::HashSet<&str> = names.iter().map(|(id, _)| id.as_str()).collect();
    for t in taken {
        let settled = ix.get(&t.id).is_some_and(|r| {
            !r.journal.racy(r.made_ns, RACY_NS) && r.pointer.mtime_ns < r.made_ns.saturating_sub(RACY_NS)
        });
        if settled || !registered.contains(t.id.as_str()) {
            t.remove();
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_text(run: &str, ino: u64, status: &str) -> String {
        let summary = RawValue::from_string(format!(r#"{{"runId":"{run}","status":"{status}"}}"#)).unwrap();
        line_of(&Row {
            run,
            pointer: PointerStamp { ino, mtime_ns: 5 },
            journal: Stamp { dev: 1, ino: 2, size: 3, mtime_ns: 4, ctime_ns: 4 },
            made_ns: 9,
            status,
            repo: "r\"q".into(),
            repo_root: "/r".into(),
            summary: &summary,
        })
        .unwrap()
    }

    #[test]
    fn a_row_reads_back_and_the_last_row_of_a_run_wins() {
        let mut log = String::new();
        for pass in 0..2u64 {
            for i in 0..2_000u64 {
                log.push_str(&row_text(&format!("run{i:05}"), pass * 10 + 1, "done"));
            }
            log.push_str("damaged\n");
        }
        let ix = Index::parse(log.as_bytes());
        assert_eq!((ix.len(), ix.skipped), (2_000, 2));
        let r = ix.get("run00007").unwrap();
        assert_eq!((r.pointer.ino, r.repo.as_ref(), r.status), (11, "r\"q", "done"));
        let mut out = Vec::new();
        r.summary_into(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"activityMs":0,"runId":"run00007","status":"done"}"#);
    }

    #[test]
    fn a_damaged_torn_or_invalid_line_is_no_row() {
        let line = row_text("a", 1, "done");
        assert!(parse_line(line.as_bytes()).is_some());
        assert!(parse_line(line.trim_end().as_bytes()).is_none(), "torn");
        for at in 0..line.len() - 1 {
            let mut b = line.clone().into_bytes();
            b[at] = if b[at].is_ascii_digit() { b'0' + (b[at] - b'0' + 1) % 10 } else { b'#' };
            assert!(parse_line(&b).is_none(), "byte {at} of {line}");
        }
        assert!(parse_line(row_text("a", 1, "finished").as_bytes()).is_none(), "a status not in the list");
        assert!(parse_line(row_text("../a", 1, "done").as_bytes()).is_none(), "not an id");
    }
}
