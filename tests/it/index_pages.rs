//! Pages read through the run index (`spec/LAYOUT.md`, "The run index"):
//! every page, walked by cursor and filtered by status, is the same build's
//! listing read from every run's files, after `runs reindex`, after journal
//! writes (which leave the index alone), rows a listing appended, new and
//! re-registered runs, removed ones, a damaged row, and compaction.

use crate::support;

use proptest::prelude::*;
use runwire::runs::index;
use runwire::runs::list::{self, Options, Query};
use runwire::runs::registry::{NewRun, Registry};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

/// Through the index, trusting rows as soon as they are made, appending nothing.
fn by_index() -> Options {
    Options { use_index: true, repair: false, racy_ns: 0, check_every_ns: 0 }
}

/// The same, appending the rows of runs read from files (as every listing does).
fn repairing() -> Options {
    Options { use_index: true, repair: true, racy_ns: 0, check_every_ns: 0 }
}

fn by_files() -> Options {
    Options { use_index: false, repair: false, racy_ns: 0, check_every_ns: 0 }
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
/// and the spec's journal; gives its id and journal. `fresh`: the pointer's
/// time and the directory left as registration made them, else aged and
/// (when the spec says so) the runstate directory removed.
fn make(home: &Path, i: usize, s: &Spec, fresh: bool) -> (String, PathBuf) {
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
    if fresh {
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
    fn pages_through_the_index_are_the_file_listing(
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
        let gone = specs.iter().filter(|s| s.gone).count();
        // Only the runs left out (a problem: read from files each time) are read.
        prop_assert_eq!(list::page_with(&reg, &q("1", None), by_index()).from_files, gone);
        check_same(&reg, "after reindex")?;

        // Records, as the writers write them (the index is not told).
        for (i, kind, x, at) in &later {
            let (_, journal) = &runs[i % runs.len()];
            if journal.is_file() {
                let mut text = std::fs::read_to_string(journal).unwrap();
                text.push_str(&record(*kind, *x));
                text.push('\n');
                std::fs::write(journal, text).unwrap();
                set_mtime(journal, BASE + 3 + u64::from(*at));
            }
        }
        check_same(&reg, "after records")?;
        // A listing appends the rows of the runs it read from files.
        list::page_with(&reg, &q("1", None), repairing());
        check_same(&reg, "after appended rows")?;
        // Runs registered since (rows after the head only), and one registered again (a new pointer).
        for (k, s) in added.iter().enumerate() {
            runs.push(make(&home, 100 + k, s, true));
        }
        make(&home, 0, &specs[0], true);
        // A registration renames a pointer into the registry: a new inode, the old row unused.
        check_same(&reg, "after registrations")?;
        list::page_with(&reg, &q("1", None), repairing());
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
        index::compact(&home).unwrap();
        check_same(&reg, "after compaction")?;
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// Damage at any byte of a small log changes no page: a damaged newer row
/// must not let an older row of the same run place or filter it (a
/// run registered again, its `running` row damaged, must not be filtered
/// out of a `status=running` page by its older row).
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
    list::page_with(&reg, &q("1", None), repairing());
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
