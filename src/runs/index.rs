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
//!
//! A compacted log starts with its head ([`Head`]): a `P` row, then one
//! small `H` row a run (sorted by run id) with what placing and counting
//! it on a page needs (its ids, stamps, status) and where its `R` and `J`
//! rows are. A page with a limit reads the head and the rows appended
//! since the compaction, and only the rows of the runs it shows.

use super::registry::{Pointer, Registry};
use super::view::{self, status, Digest};
use nix::sys::stat::FileStat;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How recent a change must be for its stamp not to be trusted: covers the
/// coarse kernel clock behind file times and filesystems with 1 or 2 s times.
pub const RACY_NS: i64 = 2_000_000_000;
/// Largest index read; a larger one is ignored (every run read from files).
pub const MAX_INDEX: u64 = 256 * 1024 * 1024;
/// The log is compacted once the rows appended since the last compaction
/// are past this size and a quarter of the compacted rows: a page reads
/// the head and those rows.
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
        // The first field only: a full listing asks this of every run, and
        // the pieces after it are most of the row.
        unjson(self.rest.split_once('\t')?.0)
    }

    /// The row as written (without its checksum).
    pub fn body(&self) -> &'a str {
        self.body
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

impl<'a> JournalRef<'a> {
    /// The row as written (without its checksum).
    pub fn body(&self) -> &'a str {
        self.body
    }
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

/// A run's head row (`H`), as read: what placing, filtering by status and
/// counting the run on a page needs, and where its `R` and `J` rows are.
#[derive(Debug, Clone, Copy)]
pub struct HeadRef<'a> {
    pub id: &'a str,
    pub pointer_ino: u64,
    pub pointer_mtime_ns: i64,
    /// The journal's device and inode.
    pub journal: (u64, u64),
    pub journal_mtime_ns: i64,
    /// How long the journal had not changed when its `J` row was made (the
    /// row's time less the later of the journal's mtime and ctime): the row
    /// is trusted when this exceeds the racy window.
    pub settled_ns: i64,
    pub status: &'static str,
    /// The `R` and `J` rows' offsets from the end of the head.
    pub run_at: u64,
    pub journal_at: u64,
}

/// What a compaction writes first: its `P` row (the number of `H` rows and
/// their bytes) and the `H` rows.
#[derive(Default)]
pub struct Head<'a> {
    /// Sorted by run id.
    pub runs: Vec<HeadRef<'a>>,
    /// Each row's index by its pointer's inode (a listing has each
    /// registered run's from the registry's directory).
    by_ino: HashMap<u64, u32, super::FastHash>,
}

impl<'a> Head<'a> {
    /// Parses the `H` rows (their bytes, as the `P` row delimits them); a
    /// damaged row, or rows out of order, make the whole head unusable (`None`).
    pub fn parse(bytes: &'a [u8], n: usize) -> Option<Head<'a>> {
        let mut runs = Vec::with_capacity(n);
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            match unseal(line).and_then(parse_row)? {
                Row::Head(h) => runs.push(h),
                _ => return None,
            }
        }
        let sorted = runs.windows(2).all(|w: &[HeadRef]| w[0].id < w[1].id);
        if runs.len() != n || !sorted || u32::try_from(n).is_err() {
            return None;
        }
        let mut by_ino = HashMap::with_capacity_and_hasher(n, Default::default());
        for (i, h) in runs.iter().enumerate() {
            by_ino.insert(h.pointer_ino, i as u32);
        }
        Some(Head { runs, by_ino })
    }

    /// The head row of `run_id`.
    pub fn get(&self, run_id: &str) -> Option<&HeadRef<'a>> {
        self.runs.binary_search_by(|h| h.id.cmp(run_id)).ok().map(|i| &self.runs[i])
    }

    /// The head row of `run_id` whose pointer has inode `ino`: found by the
    /// inode (one hash, one comparison of ids), else by the id.
    pub fn get_at(&self, run_id: &str, ino: u64) -> Option<&HeadRef<'a>> {
        match self.by_ino.get(&ino).map(|&i| &self.runs[i as usize]) {
            Some(h) if h.id == run_id => Some(h),
            _ => self.get(run_id),
        }
    }
}

/// The index as a listing reads it ([`read_for`]).
#[derive(Default)]
pub struct Read {
    /// The rows to parse with [`Index::parse_rows`]: every row after the
    /// head, or, when the head was read, only those appended since.
    pub rows: Vec<u8>,
    /// The `H` rows (empty when not read) and how many there are.
    pub head: Vec<u8>,
    pub head_n: usize,
    /// The log as opened (the shown runs' rows are read from it, [`Read::row_at`]:
    /// a compaction meanwhile renames a new file over it, this one stays).
    file: Option<std::fs::File>,
    /// Where the rows after the head start in the file.
    rows_base: u64,
    /// The registry directory's stamp the head was written with.
    registry: RegistryStamp,
}

/// The registry directory's stamp (device, inode, mtime, ctime) when a head
/// was written, if its names then were exactly the head's runs (ids and
/// pointer inodes), and how long it had not changed then (`settled_ns`; 0:
/// no stamp). A directory's mtime and ctime change with every name created,
/// renamed or removed in it: while they are the same, and were settled when
/// taken, its names are still the head's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryStamp {
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub settled_ns: i64,
}

impl Read {
    /// Whether the registry directory's names are still exactly the head's
    /// runs: its stamp is the one the head was written with, and that stamp
    /// was settled (older than `racy_ns`) then.
    pub fn registry_unchanged(&self, dir: &Path, racy_ns: i64) -> bool {
        let r = &self.registry;
        self.has_head()
            && r.settled_ns > racy_ns
            && std::fs::metadata(dir).is_ok_and(|m| {
                let st = Stamp::of_meta(&m);
                (st.dev, st.ino, st.mtime_ns, st.ctime_ns) == (r.dev, r.ino, r.mtime_ns, r.ctime_ns)
            })
    }

    /// Whether the head was read (and the rows are those appended since).
    pub fn has_head(&self) -> bool {
        self.file.is_some()
    }

    /// The body of the row at `at` (from the end of the head), whole and
    /// sealed; `None` when it cannot be read or is damaged.
    pub fn row_at(&self, at: u64) -> Option<String> {
        let (f, at) = (self.file.as_ref()?, self.rows_base.checked_add(at)?);
        // Most rows are a few hundred bytes: a longer one is read again, twice as far.
        let mut len = 1024;
        loop {
            let buf = read_range(f, at, len)?;
            if let Some(end) = memchr::memchr(b'\n', &buf) {
                return unseal(&buf[..=end]).map(str::to_string);
            }
            if buf.len() < len as usize || len >= MAX_ROW {
                return None;
            }
            len *= 2;
        }
    }
}

/// From this many bytes on, a range of the log is read, and its rows are
/// parsed ([`Index::parse_rows`]), on two threads.
const PAR_PARSE_MIN: usize = 1 << 20;

/// Longest row [`Read::row_at`] reads.
const MAX_ROW: u64 = 1 << 20;

/// Reads the log whole (empty when absent, unreadable or over [`MAX_INDEX`]).
pub fn read(home: &Path) -> Vec<u8> {
    let Ok(f) = std::fs::File::open(path(home)) else { return Vec::new() };
    match f.metadata() {
        Ok(m) if m.len() <= MAX_INDEX => read_range(&f, 0, m.len()).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `len` bytes of `f` from `at` (fewer at its end). A big range (a full
/// listing's) is read in two halves at once: most of a read's time is the
/// kernel faulting in and filling the buffer's fresh pages.
fn read_range(f: &std::fs::File, at: u64, len: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    let got = if buf.len() >= PAR_PARSE_MIN {
        let mid = buf.len() / 2;
        let (a, b) = buf.split_at_mut(mid);
        let (got_a, got_b) = std::thread::scope(|s| {
            let later = s.spawn(|| read_into(f, b, at + mid as u64));
            (read_into(f, a, at), later.join().unwrap_or(None))
        });
        // A short first half (the file shrank) ends the range there.
        match (got_a?, got_b?) {
            (n, m) if n == mid => n + m,
            (n, _) => n,
        }
    } else {
        read_into(f, &mut buf, at)?
    };
    buf.truncate(got);
    Some(buf)
}

/// Fills `buf` from `f` at `at`, up to the file's end; how much it read.
fn read_into(f: &std::fs::File, buf: &mut [u8], at: u64) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(got)
}

/// Where the log's parts are, from its first bytes.
struct Layout {
    /// The first line's length, and its number (the bytes after it at the
    /// last compaction).
    first: u64,
    compacted: u64,
    /// The `P` row's length, and its numbers (`H` rows, their bytes).
    page: Option<(u64, usize, u64, RegistryStamp)>,
}

fn layout(start: &[u8]) -> Option<Layout> {
    let end = memchr::memchr(b'\n', start)?;
    let first = std::str::from_utf8(&start[..end]).ok()?;
    let (tag, n) = first.split_once(' ')?;
    if tag != HEAD {
        return None;
    }
    let compacted = n.parse().ok()?;
    let rest = &start[end + 1..];
    // The first line has no checksum: its number is trusted (and the head
    // used) only when it is what the sealed `P` row says of the parts.
    let page = memchr::memchr(b'\n', rest).and_then(|e| match unseal(&rest[..=e]).and_then(parse_row) {
        Some(Row::Page(n, bytes, reg, rows))
            if Some(compacted) == (e as u64 + 1).checked_add(bytes)?.checked_add(rows) =>
        {
            Some((e as u64 + 1, n, bytes, reg))
        }
        _ => None,
    });
    Some(Layout { first: end as u64 + 1, compacted, page })
}

/// Reads what a listing needs: with `head`, the head and the rows appended
/// since the compaction that wrote it (when the log has a head); else every
/// row after the head. Empty when the log is absent, unreadable or over
/// [`MAX_INDEX`].
pub fn read_for(home: &Path, head: bool) -> Read {
    let Ok(f) = std::fs::File::open(path(home)) else { return Read::default() };
    let size = match f.metadata() {
        Ok(m) if m.len() <= MAX_INDEX => m.len(),
        _ => return Read::default(),
    };
    let Some(start) = read_range(&f, 0, size.min(4096)) else { return Read::default() };
    let Some(Layout { first, compacted, page }) = layout(&start) else { return Read::default() };
    match page {
        Some((p_len, n, h_len, registry)) if head && compacted >= p_len + h_len => {
            let head_at = first + p_len;
            let (Some(h), Some(rows)) = (
                read_range(&f, head_at, h_len),
                read_range(&f, first + compacted, size.saturating_sub(first + compacted)),
            ) else {
                return Read::default();
            };
            Read { rows, head: h, head_n: n, rows_base: head_at + h_len, file: Some(f), registry }
        }
        _ => {
            let from = first + page.map_or(0, |(p, _, h, _)| p + h);
            let rows = read_range(&f, from, size.saturating_sub(from)).unwrap_or_default();
            Read { rows, ..Read::default() }
        }
    }
}

fn num<'a, T: std::str::FromStr>(it: &mut impl Iterator<Item = &'a str>) -> Option<T> {
    it.next()?.parse().ok()
}

/// A line's body when its checksum holds and it ends in a newline.
fn unseal(line: &[u8]) -> Option<&str> {
    let (body, sum) = std::str::from_utf8(line.strip_suffix(b"\n")?).ok()?.rsplit_once('\t')?;
    (u64::from_str_radix(sum, 16).ok() == Some(checksum(body.as_bytes()))).then_some(body)
}

/// One row, parsed.
enum Row<'a> {
    Run(&'a str, RunRef<'a>),
    Journal(JournalRef<'a>),
    Head(HeadRef<'a>),
    /// The `P` row: how many `H` rows follow, their bytes, the registry
    /// directory's stamp when the head was written ([`Registry`]), and the
    /// bytes of the compacted rows after the head.
    Page(usize, u64, RegistryStamp, u64),
}

fn parse_row(body: &str) -> Option<Row<'_>> {
    let mut it = body.split('\t');
    let row = match it.next()? {
        "R" => {
            let mut it = body.splitn(7, '\t').skip(1);
            let id = it.next()?;
            let run = RunRef {
                pointer_ino: num(&mut it)?,
                pointer_mtime_ns: num(&mut it)?,
                journal: (num(&mut it)?, num(&mut it)?),
                rest: it.next()?,
                body,
            };
            return Some(Row::Run(id, run));
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
            // Statuses from the one list; a row with another is not used.
            let status = status(it.next()?)?;
            let pieces = [it.next()?, it.next()?, it.next()?];
            Row::Journal(JournalRef { stamp, at_ns, status, pieces, body })
        }
        "H" => Row::Head(HeadRef {
            id: it.next().filter(|id| super::valid_id(id))?,
            pointer_ino: num(&mut it)?,
            pointer_mtime_ns: num(&mut it)?,
            journal: (num(&mut it)?, num(&mut it)?),
            journal_mtime_ns: num(&mut it)?,
            settled_ns: num(&mut it)?,
            status: status(it.next()?)?,
            run_at: num(&mut it)?,
            journal_at: num(&mut it)?,
        }),
        "P" => Row::Page(
            num(&mut it)?,
            num(&mut it)?,
            RegistryStamp {
                dev: num(&mut it)?,
                ino: num(&mut it)?,
                mtime_ns: num(&mut it)?,
                ctime_ns: num(&mut it)?,
                settled_ns: num(&mut it)?,
            },
            num(&mut it)?,
        ),
        _ => return None,
    };
    it.next().is_none().then_some(row)
}

/// The rows of one run, parsed from their bodies (as [`Read::row_at`] gives them).
pub fn parse_pair<'a>(run: &'a str, journal: &'a str) -> Option<(&'a str, RunRef<'a>, JournalRef<'a>)> {
    match (parse_row(run)?, parse_row(journal)?) {
        (Row::Run(id, r), Row::Journal(j)) => Some((id, r, j)),
        _ => None,
    }
}

impl<'a> Index<'a> {
    /// Parses the log's bytes: lines that fail their checksum, do not
    /// parse, or are torn (no newline) are skipped; without its first line
    /// the whole log is.
    pub fn parse(bytes: &'a [u8]) -> Index<'a> {
        let Some(end) = memchr::memchr(b'\n', bytes) else { return Index::default() };
        let Some((HEAD, n)) = std::str::from_utf8(&bytes[..end]).ok().and_then(|l| l.split_once(' ')) else {
            return Index::default();
        };
        let mut ix = Index::parse_rows(&bytes[end + 1..]);
        ix.compacted = n.parse().unwrap_or(0);
        ix
    }

    /// Parses rows (no first line), as [`Index::parse`] does; the head's
    /// rows are passed over.
    pub fn parse_rows(bytes: &'a [u8]) -> Index<'a> {
        // A big index (a full listing of thousands of runs) is parsed in two
        // halves at once, cut at a row's end; the later half's rows win, as
        // later rows do.
        let mid = bytes.len() / 2;
        match memchr::memchr(b'\n', &bytes[mid..]) {
            Some(cut) if bytes.len() >= PAR_PARSE_MIN => {
                let (a, b) = bytes.split_at(mid + cut + 1);
                let (mut ix, later) = std::thread::scope(|s| {
                    let later = s.spawn(|| Index::parse_part(b));
                    (Index::parse_part(a), later.join())
                });
                let later = later.unwrap_or_else(|e| std::panic::resume_unwind(e));
                ix.runs.extend(later.runs);
                ix.journals.extend(later.journals);
                ix.skipped += later.skipped;
                ix
            }
            _ => Index::parse_part(bytes),
        }
    }

    fn parse_part(bytes: &'a [u8]) -> Index<'a> {
        // Two rows a run, each of a few hundred bytes.
        let n = bytes.len() / 256;
        let mut ix = Index {
            runs: HashMap::with_capacity_and_hasher(n, Default::default()),
            journals: HashMap::with_capacity_and_hasher(n, Default::default()),
            ..Index::default()
        };
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            match unseal(line).and_then(parse_row) {
                Some(Row::Run(id, run)) => {
                    ix.runs.insert(id, run);
                }
                Some(Row::Journal(j)) => {
                    ix.journals.insert((j.stamp.dev, j.stamp.ino), j);
                }
                Some(Row::Head(_) | Row::Page(..)) => {}
                None => ix.skipped += 1,
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
}

/// Holds the index's lock (an exclusive `flock` on `index/lock`) while alive.
struct Locked(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

fn lock(home: &Path) -> std::io::Result<Locked> {
    std::fs::create_dir_all(home.join("index"))?;
    super::lock_exclusive(&home.join("index").join("lock")).map(Locked)
}

/// Appends `rows` (sealed lines) in one `write`, under the lock: after a
/// newline when the log ends in a torn line, after the first line when it
/// is new. Compacts the log when the rows appended since the last
/// compaction are past [`COMPACT_MIN`] and a quarter of the compacted ones.
pub fn append(home: &Path, rows: &str) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    append_held(home, rows, &lock(home)?)
}

/// [`append`] of rows (not empty) with the lock already held (by a writer
/// that made its rows under it).
fn append_held(home: &Path, rows: &str, _lock: &Locked) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path(home))?;
    let len = f.metadata()?.len();
    let mut out = String::with_capacity(rows.len() + 32);
    let (mut first, mut compacted) = (0, 0);
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
        if let Some(l) = layout(&head[..n]) {
            (first, compacted) = (l.first, l.compacted);
        }
    }
    out.push_str(rows);
    (&f).write_all(out.as_bytes())?;
    let since = (len + out.len() as u64).saturating_sub(first + compacted);
    if since > COMPACT_MIN.max(compacted / 4) {
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
    let ids: std::collections::HashSet<String> = registered(&reg).into_iter().map(|(id, _)| id).collect();
    let mut rows = String::new();
    let mut runs: Vec<_> = ix.runs.iter().filter(|(id, _)| ids.contains(**id)).collect();
    runs.sort_by_key(|(id, _)| **id);
    // A damaged line may have left a journal's older row standing for its
    // newer one: then a run's rows are kept only if its journal still has
    // the row's stamp (else listings read it from its files, and repair it).
    let damaged = ix.skipped > 0;
    let current = |r: &RunRef, j: &JournalRef| {
        r.journal_path().is_some_and(|p| std::fs::metadata(&*p).is_ok_and(|m| Stamp::of_meta(&m) == j.stamp))
    };
    for (_, r) in runs {
        let j = ix.journals.get(&r.journal);
        if damaged && !j.is_some_and(|j| current(r, j)) {
            continue;
        }
        rows.push_str(&sealed(r.body));
        if let Some(j) = j {
            rows.push_str(&sealed(j.body));
        }
    }
    write_whole(home, &rows)
}

/// The registered run ids and each pointer file's inode, as the registry
/// directory lists them.
pub fn registered(reg: &Registry) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    Registry::scan(&reg.dir, |id, ino| out.push((id.to_string(), ino)));
    out
}

/// The head of `rows` (sealed `R` and `J` rows): its `P` row and an `H`
/// row for each run whose last `R` row names a journal with a `J` row,
/// sorted by run id, each with its rows' offsets in `rows`. The `P` row
/// has the registry directory's stamp (taken before its names were read)
/// when those names are exactly the `H` rows' runs.
fn head_of(home: &Path, rows: &str) -> String {
    let reg = Registry::at(home);
    let at_ns = now_ns();
    let dir = std::fs::metadata(&reg.dir).ok().map(|m| Stamp::of_meta(&m));
    let mut names = registered(&reg);
    names.sort_unstable();
    let mut runs: HashMap<&str, (RunRef, u64), super::FastHash> = HashMap::default();
    let mut journals: HashMap<(u64, u64), (JournalRef, u64), super::FastHash> = HashMap::default();
    let mut at = 0u64;
    for line in rows.split_inclusive('\n') {
        match unseal(line.as_bytes()).and_then(parse_row) {
            Some(Row::Run(id, r)) => {
                runs.insert(id, (r, at));
            }
            Some(Row::Journal(j)) => {
                journals.insert((j.stamp.dev, j.stamp.ino), (j, at));
            }
            _ => {}
        }
        at += line.len() as u64;
    }
    let mut ids: Vec<&str> = runs.keys().copied().filter(|id| super::valid_id(id)).collect();
    ids.sort_unstable();
    let mut h = String::with_capacity(ids.len() * 160);
    let mut n = 0;
    let mut same = true;
    let mut names = names.iter();
    for id in ids {
        let (r, r_at) = runs[id];
        let Some((j, j_at)) = journals.get(&r.journal) else { continue };
        same &= names.next().is_some_and(|(name, ino)| name == id && *ino == r.pointer_ino);
        let settled = j.at_ns.saturating_sub(j.stamp.mtime_ns.max(j.stamp.ctime_ns));
        h.push_str(&sealed(&format!(
            "H\t{id}\t{}\t{}\t{}\t{}\t{}\t{settled}\t{}\t{r_at}\t{j_at}",
            r.pointer_ino, r.pointer_mtime_ns, r.journal.0, r.journal.1, j.stamp.mtime_ns, j.status
        )));
        n += 1;
    }
    let st = match dir {
        Some(d) if same && names.next().is_none() => RegistryStamp {
            dev: d.dev,
            ino: d.ino,
            mtime_ns: d.mtime_ns,
            ctime_ns: d.ctime_ns,
            settled_ns: at_ns.saturating_sub(d.mtime_ns.max(d.ctime_ns)).max(0),
        },
        _ => RegistryStamp::default(),
    };
    let p = format!(
        "P\t{n}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        h.len(),
        st.dev,
        st.ino,
        st.mtime_ns,
        st.ctime_ns,
        st.settled_ns,
        rows.len()
    );
    format!("{}{h}", sealed(&p))
}

/// Replaces the log by its first line (which gives the size of what
/// follows: the log's size after this compaction), the head of `rows`
/// ([`head_of`]) and `rows`, atomically.
fn write_whole(home: &Path, rows: &str) -> std::io::Result<()> {
    let head = head_of(home, rows);
    let text = format!("{HEAD} {}\n{head}{rows}", head.len() + rows.len());
    std::fs::create_dir_all(home.join("index"))?;
    super::write_atomic(&path(home), text.as_bytes())
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
    let p = Pointer { slug: slug.to_string(), runstate_dir: dir.to_string(), ..Pointer::default() };
    let l = view::load(p);
    let jst = l.journal_stamp?;
    let d = l.digest();
    (!d.problem).then(|| journal_row(&jst, at_ns, &d))
}

/// Registration's hook ([`Registry::register`]): indexes the run. Errors
/// are the index's only (it is a cache): never the registration's.
pub fn note_run(reg: &Registry, p: &Pointer) {
    // The rows are made under the lock: two writers of one run append
    // their rows in the order they read its files, so the last row is never
    // older than the files it describes.
    let Ok(lock) = lock(reg.home()) else { return stale(reg.home()) };
    if let Some(rows) = rows_of(reg, p) {
        if append_held(reg.home(), &rows, &lock).is_err() {
            stale(reg.home());
        }
    }
}

/// A write of the index failed (a full disk): its last rows may be older
/// than the files they describe, and a filter would trust them. The log is
/// removed (an unlink needs no space), so listings read every run from its
/// files until they rebuild it: never wrong, only slower for a while.
fn stale(home: &Path) {
    match std::fs::remove_file(path(home)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => crate::util::cli::report(
            "runs",
            format!("{}: cannot drop the run index after a failed write: {e}", path(home).display()),
        ),
        Ok(()) => {}
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
    // Made under the lock, as in [`note_run`]: two writers of one journal
    // (a supervisor and a server) leave the fresher row last.
    let Ok(lock) = lock(home) else { return stale(home) };
    if let Some(rows) = journal_rows(journal) {
        if append_held(home, &rows, &lock).is_err() {
            stale(home);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_range_read_in_halves_is_the_file() {
        let path = std::env::temp_dir().join(format!("runwire-index-range-{}", std::process::id()));
        let bytes: Vec<u8> = (0..3_000_003u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert_eq!(read_range(&f, 0, bytes.len() as u64).unwrap(), bytes);
        // Past the end: what there is, from either half.
        assert_eq!(read_range(&f, 0, 4_000_000).unwrap(), bytes);
        assert_eq!(read_range(&f, 7, 2 * bytes.len() as u64).unwrap(), &bytes[7..]);
        assert_eq!(read_range(&f, 2_500_000, 2_000_000).unwrap(), &bytes[2_500_000..]);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_big_index_parsed_in_halves_is_parsed_as_in_one() {
        // Each run's and journal's rows twice, the later with other numbers,
        // so the halves' cut falls between a run's two rows; one damaged line.
        let status = super::super::view::STATUSES[0];
        let mut rows = String::new();
        for pass in 0..2u64 {
            for i in 0..3_000u64 {
                let id = format!("run{i:05}--{}", "s".repeat(120));
                rows.push_str(&sealed(&format!(
                    "R\t{id}\t{}\t5\t1\t{i}\t\"/j\"\t\"r\"\t\"/r\"\ta\tb\tc\td",
                    10 * pass + 1
                )));
                rows.push_str(&sealed(&format!("J\t1\t{i}\t{pass}\t7\t7\t9\t{status}\te\tf\tg")));
            }
            if pass == 0 {
                rows.push_str("damaged\n");
            }
        }
        assert!(rows.len() >= PAR_PARSE_MIN, "past the two-thread size");
        let (halves, one) = (Index::parse_rows(rows.as_bytes()), Index::parse_part(rows.as_bytes()));
        assert_eq!((halves.runs.len(), halves.journals.len(), halves.skipped), (3_000, 3_000, 1));
        assert_eq!(one.skipped, 1);
        for (id, r) in &one.runs {
            assert_eq!(r.pointer_ino, 11, "the later row wins");
            assert_eq!(halves.runs[id].body, r.body);
        }
        for (key, j) in &one.journals {
            assert_eq!(j.stamp.size, 1);
            assert_eq!(halves.journals[key].body, j.body);
        }
    }
}
