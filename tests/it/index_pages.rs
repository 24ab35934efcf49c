//! Pages read through the run index's head (`spec/LAYOUT.md`, "The run
//! index": a compacted log starts with a `P` row and one `H` row a run; a
//! page with a limit reads them and the rows appended since, and the rows
//! of the runs it shows only): every page, walked by cursor and filtered by
//! status, is the same build's listing read from every run's files, after
//! `runs reindex`, after writes through the writers' hooks (rows appended
//! after the head), new and re-registered runs, removed ones, a damaged
//! head or row, and compaction.

use crate::support;

use proptest::prelude::*;
use runwire::runs::index;
use runwire::runs::list::{self, Options, Query};
use runwire::runs::registry::{NewRun, Registry};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

/// Through the index, trusting rows as soon as they are made, appending nothing.
fn by_index() -> Options {
    Options { use_index: true, repair: false, racy_ns: 0 }
}

fn by_files() -> Options {
    Options { use_index: false, repair: false, racy_ns: 0 }
}

fn q(limit: &str, status: Option<&str>) -> Query {
    Query::parse(Some(limit), None, status, None).unwrap()
}

fn set_mtime(p: &Path, secs: u64) {
    std::fs::File::options()
        .append(true)
        .open(p)
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

const BASE: u64 = 1_700_000_000;
const HEAD: &str = r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"r""#;

/// A journal line: a task state, a run record, an input request, or junk.
fn record(kind: u8, x: u8) -> String {
    let task = ["a", "b"][usize::from(x % 2)];
    let state = runwire::runs::journal::TASK_STATES[usize::from(x) % 7];
    match kind % 4 {
        0 => format!(r#"{HEAD},"task":"{task}","state":"{state}"}}"#),
        1 => format!(r#"{HEAD},"run":"{}"}}"#, ["started", "paused", "idle"][usize::from(x) % 3]),
        2 => format!(r#"{HEAD},"task":"{task}","input":"requested","request":"q{x}","kind":"question"}}"#),
        _ => "{torn".to_string(),
    }
}

/// One generated run: its journal, its journal's and pointer's times (few
/// values: ties are ordered by run id), and whether its runstate directory is gone.
#[derive(Debug, Clone)]
struct Spec {
    journal: Vec<(u8, u8)>,
    journal_at: u8,
    pointer_at: u8,
    gone: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (proptest::collection::vec((0..4u8, 0..7u8), 0..4), 0..6u8, 0..6u8, prop::bool::weighted(0.1))
        .prop_map(|(journal, journal_at, pointer_at, gone)| Spec { journal, journal_at, pointer_at, gone })
}

/// Registers run `i` (slug `s<i>` in its own repository) with a two-task plan
/// and the spec's journal; gives its id and journal. `hooked`: written as the
/// writers write (the journal's row after it; the pointer's time and the
/// directory left as registration made them), else behind the index's back
/// (for `runs reindex` to read).
fn make(home: &Path, i: usize, s: &Spec, hooked: bool) -> (String, PathBuf) {
    let reg = Registry::at(home);
    let root = home.parent().unwrap().join(format!("repo{i}"));
    let slug = format!("s{i}");
    let new = NewRun { slug: slug.clone(), repo_root: root.display().to_string(), ..Default::default() };
    let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
    reg.register(&p).unwrap();
    let rs = PathBuf::from(&p.runstate_dir);
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"},{"id":"b","adapter":"claude","prompt":"q","deps":["a"]}]}"#;
    std::fs::write(rs.join(format!("{slug}.plan.json")), plan).unwrap();
    let journal = rs.join(format!("{slug}.jsonl"));
    let text: String = s.journal.iter().map(|(k, x)| record(*k, *x) + "\n").collect();
    std::fs::write(&journal, text).unwrap();
    set_mtime(&journal, BASE + u64::from(s.journal_at));
    if hooked {
        index::note_journal_in(home, &journal);
        return (p.run_id, journal);
    }
    set_mtime(&reg.path(&p.run_id), BASE + u64::from(s.pointer_at));
    if s.gone {
        std::fs::remove_dir_all(&rs).unwrap();
    }
    (p.run_id, journal)
}

/// Every page query: first pages of several sizes and status filters.
fn queries() -> Vec<Query> {
    let mut v = vec![q("1", None), q("2", None), q("3", None), q("50", None)];
    for s in ["running", "registered", "done,failed", "needs_input,paused,idle", "missing"] {
        v.push(q("2", Some(s)));
    }
    v
}

/// Every page of `q`, walked by cursor, as JSON.
fn walk(reg: &Registry, q: &Query, o: Options) -> Vec<String> {
    let mut q = q.clone();
    let mut pages = Vec::new();
    loop {
        let p = list::page_with(reg, &q, o);
        pages.push(p.json());
        match p.next {
            Some(c) => q.cursor = Some(c),
            None => return pages,
        }
    }
}

fn check_same(reg: &Registry, when: &str) -> Result<(), TestCaseError> {
    for q in queries() {
        prop_assert_eq!(walk(reg, &q, by_index()), walk(reg, &q, by_files()), "{}: {:?}", when, q);
    }
    Ok(())
}

/// Flips one byte of the log at `at` (a digit to another digit, else a letter).
fn damage(home: &Path, at: usize) {
    let p = index::path(home);
    let mut b = std::fs::read(&p).unwrap();
    b[at] = if b[at].is_ascii_digit() { b'0' + (b[at] - b'0' + 1) % 10 } else { b'#' };
    std::fs::write(&p, b).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn pages_through_the_head_are_the_file_listing(
        specs in proptest::collection::vec(spec(), 1..10),
        later in proptest::collection::vec((0..10usize, 0..4u8, 0..7u8, 0..8u8), 0..5),
        added in proptest::collection::vec(spec(), 0..3),
        removed in proptest::option::of(0..10usize),
        damaged in 0..1000usize,
    ) {
        let base = support::scratch("index-pages");
        let home = base.join("home");
        let reg = Registry::at(&home);
        let mut runs: Vec<(String, PathBuf)> = specs.iter().enumerate().map(|(i, s)| make(&home, i, s, false)).collect();
        index::reindex(&home).unwrap();
        // The head is written, and a page reads it with no row after it.
        let read = index::read_for(&home, true);
        prop_assert!(read.has_head() && read.rows.is_empty());
        let gone = specs.iter().filter(|s| s.gone).count();
        // The registry's names are the head's runs unless some run was left out (read from files).
        prop_assert_eq!(read.registry_unchanged(&reg.dir, 0), gone == 0);
        prop_assert_eq!(list::page_with(&reg, &q("1", None), by_index()).from_files, gone);
        check_same(&reg, "after reindex")?;

        // Records through the writers' hook: their rows follow the head.
        for (i, kind, x, at) in &later {
            let (_, journal) = &runs[i % runs.len()];
            if journal.is_file() {
                let mut text = std::fs::read_to_string(journal).unwrap();
                text.push_str(&record(*kind, *x));
                text.push('\n');
                std::fs::write(journal, text).unwrap();
                set_mtime(journal, BASE + 3 + u64::from(*at));
                index::note_journal_in(&home, journal);
            }
        }
        check_same(&reg, "after appended rows")?;
        // Runs registered since (rows after the head only), and one registered again (a new pointer).
        for (k, s) in added.iter().enumerate() {
            runs.push(make(&home, 100 + k, s, true));
        }
        make(&home, 0, &specs[0], true);
        // A registration renames a pointer into the registry: its names are read again.
        prop_assert!(!index::read_for(&home, true).registry_unchanged(&reg.dir, 0));
        check_same(&reg, "after registrations")?;
        // A run removed (its pointer): not counted, not shown.
        if let Some(r) = removed {
            let (id, _) = &runs[r % runs.len()];
            let _ = std::fs::remove_file(reg.path(id));
        }
        check_same(&reg, "after a removal")?;
        // Damage anywhere in the log (the head, a row a head row points to, the rows after).
        let len = std::fs::metadata(index::path(&home)).unwrap().len() as usize;
        damage(&home, damaged % len);
        check_same(&reg, "after damage")?;
        // Compaction writes a new head.
        index::compact(&home).unwrap();
        prop_assert!(index::read_for(&home, true).has_head());
        check_same(&reg, "after compaction")?;
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// A log written by an older version (no head: `runindex/v1` and rows) is
/// read whole, and a page through it is the file listing.
#[test]
fn a_log_without_a_head_is_read_whole() {
    let base = support::scratch("index-nohead");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let specs: Vec<Spec> = (0..6u8)
        .map(|i| Spec { journal: vec![(0, i), (1, i)], journal_at: i % 3, pointer_at: 0, gone: false })
        .collect();
    for (i, s) in specs.iter().enumerate() {
        make(&home, i, s, false);
    }
    index::reindex(&home).unwrap();
    // Drop the head (`P` and `H` rows) and fix the first line's number, as an older compaction writes it.
    let text = std::fs::read_to_string(index::path(&home)).unwrap();
    let rows: String = text
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("P\t") && !l.starts_with("H\t"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(index::path(&home), format!("runindex/v1 {}\n{rows}", rows.len())).unwrap();
    assert!(!index::read_for(&home, true).has_head());
    for q in queries() {
        assert_eq!(walk(&reg, &q, by_index()), walk(&reg, &q, by_files()), "{q:?}");
    }
    let page = list::page_with(&reg, &q("2", None), by_index());
    assert_eq!((page.items.len(), page.total, page.from_files), (2, 6, 0));
    let _ = std::fs::remove_dir_all(&base);
}

/// The first line's number (the compacted rows' bytes) has no checksum of
/// its own: damaged, it must not move where the rows appended since the
/// head are read from (the `P` row says what it should be). Found by the
/// property test above: a run's `running` row appended since, hidden by a
/// flipped digit, left a `status=running` page empty.
#[test]
fn a_damaged_first_line_hides_no_row_appended_since_the_head() {
    for digit in 0..3 {
        let base = support::scratch(&format!("index-first-line-{digit}"));
        let home = base.join("home");
        let reg = Registry::at(&home);
        let empty = Spec { journal: vec![], journal_at: 0, pointer_at: 0, gone: false };
        let runs: Vec<_> = (0..2).map(|i| make(&home, i, &empty, false)).collect();
        index::reindex(&home).unwrap();
        let journal = &runs[1].1;
        std::fs::write(journal, record(0, 0) + "\n").unwrap();
        set_mtime(journal, BASE + 3);
        index::note_journal_in(&home, journal);
        // A digit of `runindex/v1 <bytes>`, made another.
        damage(&home, "runindex/v1 ".len() + digit);
        for q in queries() {
            assert_eq!(walk(&reg, &q, by_index()), walk(&reg, &q, by_files()), "digit {digit}: {q:?}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// Damage at any byte of a small log changes no page: a damaged newer row
/// must not let an older row of the same journal place or filter its run
/// (found by the property test above: a run registered after the head,
/// its `running` row damaged, was filtered out of a `status=running` page
/// by its registration row).
#[test]
fn damage_at_any_byte_of_the_log_changes_no_page() {
    let base = support::scratch("index-every-byte");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let gone = Spec { journal: vec![], journal_at: 0, pointer_at: 0, gone: true };
    make(&home, 0, &gone, false);
    index::reindex(&home).unwrap();
    let added = Spec { journal: vec![(0, 0)], journal_at: 0, pointer_at: 0, gone: false };
    make(&home, 100, &added, true);
    make(&home, 0, &gone, true);
    let log = std::fs::read(index::path(&home)).unwrap();
    let pages = [q("2", Some("running")), q("1", None)];
    let want: Vec<_> = pages.iter().map(|q| walk(&reg, q, by_files())).collect();
    for at in 0..log.len() {
        std::fs::write(index::path(&home), &log).unwrap();
        damage(&home, at);
        let got: Vec<_> = pages.iter().map(|q| walk(&reg, q, by_index())).collect();
        assert_eq!(got, want, "byte {at} damaged");
        // Nor does a compaction of the damaged log (it keeps no row the damage made stale).
        index::compact(&home).unwrap();
        let got: Vec<_> = pages.iter().map(|q| walk(&reg, q, by_index())).collect();
        assert_eq!(got, want, "byte {at} damaged, then compacted");
    }
    let _ = std::fs::remove_dir_all(&base);
}
