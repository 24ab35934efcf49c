//! The run index (`$HARNESS_HOME/index/runs.jsonl`, spec/LAYOUT.md "The run
//! index"): a listing read through it is the same build's listing read
//! from every run's files, on generated registries, after journal writes
//! (which never touch the index), a torn row, damage, compaction, and
//! writers and listings at once.

use crate::support;

use proptest::prelude::*;
use runwire::runs::index::{self, Index};
use runwire::runs::list::{self, Options, Query};
use runwire::runs::registry::{NewRun, Registry};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/","session_id":"s","model":"m","tools":[]}"#;

fn result_line(cost: f64, tin: u64, tout: u64) -> String {
    format!(
        r#"{{"type":"result","subtype":"success","is_error":false,"session_id":"s","total_cost_usd":{cost},"usage":{{"input_tokens":{tin},"output_tokens":{tout}}}}}"#
    )
}

/// Through the index, trusting rows as soon as they are made (the 2 s
/// window is tested on its own), appending nothing.
fn by_index() -> Options {
    Options { use_index: true, repair: false, racy_ns: 0, check_every_ns: 0 }
}

fn by_files() -> Options {
    Options { use_index: false, repair: false, racy_ns: 0, check_every_ns: 0 }
}

fn q(limit: Option<&str>, cursor: Option<&str>, status: Option<&str>, repo: Option<&str>) -> Query {
    Query::parse(limit, cursor, status, repo).unwrap()
}

fn set_mtime(p: &Path, secs: u64) {
    std::fs::File::options()
        .append(true)
        .open(p)
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// One generated run.
#[derive(Debug, Clone)]
struct Spec {
    repo: u8,
    /// 0: no plan; 1..=3: that many tasks; 4: a plan that does not parse.
    plan: u8,
    /// Journal lines, by kind (see `record`).
    journal: Vec<(u8, u8, u8)>,
    /// Task a's log: a turn's cost and tokens.
    log: Option<(u8, u8)>,
    /// 0: fine; 1: its runstate directory gone; 2: its journal a directory.
    problem: u8,
    journal_at: u16,
    pointer_at: u16,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..2u8,
        0..5u8,
        proptest::collection::vec((0..6u8, 0..3u8, 0..7u8), 0..6),
        proptest::option::of((0..9u8, 0..9u8)),
        prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        0..50u16,
        0..50u16,
    )
        .prop_map(|(repo, plan, journal, log, problem, journal_at, pointer_at)| Spec {
            repo,
            plan,
            journal,
            log,
            problem,
            journal_at,
            pointer_at,
        })
}

/// A journal line: a task state, a run record, an input request or answer, or junk.
fn record((kind, task, x): (u8, u8, u8)) -> String {
    let task = ["a", "b", "c"][usize::from(task)];
    let state = runwire::runs::journal::TASK_STATES[usize::from(x) % 7];
    let head = r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"r""#;
    match kind {
        0 | 1 => format!(r#"{head},"task":"{task}","state":"{state}","detail":"why {x}"}}"#),
        2 => format!(r#"{head},"run":"{}","detail":"d{x}"}}"#, ["started", "paused", "aborted"][usize::from(x) % 3]),
        3 => format!(r#"{head},"task":"{task}","input":"requested","request":"q{x}","kind":"question"}}"#),
        4 => format!(r#"{head},"task":"{task}","input":"answered","request":"q{x}","decision":"allow"}}"#),
        _ => "{not json".to_string(),
    }
}

const BASE: u64 = 1_700_000_000;

/// Writes the runs as a runner would, registered through `Registry::register`
/// (which indexes each run as it registers it); their files are then written
/// behind the index's back (as a runner of an older version would).
fn build(home: &Path, specs: &[Spec]) -> Vec<(String, PathBuf, String)> {
    let reg = Registry::at(home);
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let root = home.parent().unwrap().join(format!("repo{i}"));
        let slug = format!("s{}", i % 3);
        let new = NewRun {
            slug: slug.clone(),
            repo_root: root.display().to_string(),
            repo: Some(["alpha", "beta"][usize::from(s.repo)].into()),
            ..Default::default()
        };
        let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        reg.register(&p).unwrap();
        let rs = PathBuf::from(&p.runstate_dir);
        let tasks = ["a", "b", "c"];
        match s.plan {
            0 => {}
            4 => std::fs::write(rs.join(format!("{slug}.plan.json")), "{").unwrap(),
            n => {
                let ts: Vec<_> = tasks[..usize::from(n)]
                    .iter()
                    .enumerate()
                    .map(|(k, t)| {
                        let deps: Vec<&str> = tasks[..k].iter().copied().take(1).collect();
                        serde_json::json!({"id": t, "adapter": "claude", "prompt": "p", "deps": deps})
                    })
                    .collect();
                let plan = serde_json::json!({"v": "plan/v1", "tasks": ts});
                std::fs::write(rs.join(format!("{slug}.plan.json")), plan.to_string()).unwrap();
            }
        }
        let journal = rs.join(format!("{slug}.jsonl"));
        let text: String = s.journal.iter().map(|r| record(*r) + "\n").collect();
        std::fs::write(&journal, text).unwrap();
        if let Some((c, t)) = s.log {
            let log = format!("{INIT}\n{}\n", result_line(f64::from(c) * 0.125, u64::from(t), u64::from(c) * 3));
            std::fs::write(rs.join(format!("{slug}.a.log")), log).unwrap();
        }
        set_mtime(&journal, BASE + u64::from(s.journal_at) * 10);
        set_mtime(&reg.path(&p.run_id), BASE + u64::from(s.pointer_at) * 10);
        match s.problem {
            1 => std::fs::remove_dir_all(&rs).unwrap(),
            2 => {
                std::fs::remove_file(&journal).unwrap();
                std::fs::create_dir(&journal).unwrap();
            }
            _ => {}
        }
        out.push((p.run_id.clone(), journal, slug));
    }
    out
}

/// Every query the comparison asks: all runs, pages walked by cursor, status and repository filters.
fn queries() -> Vec<Query> {
    let mut v =
        vec![q(None, None, None, None), q(Some("2"), None, None, None), q(Some("3"), None, Some("running"), None)];
    for s in runwire::runs::view::STATUSES {
        v.push(q(None, None, Some(s), None));
    }
    v.push(q(None, None, None, Some("alpha")));
    v.push(q(Some("1"), None, Some("done,failed,registered"), Some("beta")));
    v
}

/// Walks every page of `q` (by cursor) and gives the pages' JSON.
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

fn problems(reg: &Registry) -> usize {
    list::page_with(reg, &Query::default(), by_files())
        .items
        .iter()
        .filter(|s| s.contains(r#""status":"missing""#) || s.contains(r#""status":"unreadable""#))
        .count()
}

fn check_same(reg: &Registry) -> Result<(), TestCaseError> {
    for q in queries() {
        prop_assert_eq!(walk(reg, &q, by_index()), walk(reg, &q, by_files()), "{:?}", q);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Read through the index, every query answers what reading every run's
    /// files answers: after `runs reindex`, after journal writes (the index
    /// is not told: every listing `stat`s every run's journal), and after a
    /// listing repaired the index.
    #[test]
    fn listing_through_the_index_is_the_file_listing(specs in proptest::collection::vec(spec(), 1..10), touched in proptest::collection::vec(any::<bool>(), 10)) {
        let base = support::scratch("index-prop");
        let home = base.join("home");
        let reg = Registry::at(&home);
        let runs = build(&home, &specs);
        let n = index::reindex(&home).unwrap();
        let bad = problems(&reg);
        prop_assert_eq!(n, specs.len() - bad);
        check_same(&reg)?;
        // Only the runs with a problem were read from files: the rest came from the index.
        prop_assert_eq!(list::page_with(&reg, &Query::default(), by_index()).from_files, bad);

        // Journals appended to (as every writer does: the index is not told), newer than any.
        let mut changed = 0;
        for ((id, journal, _), t) in runs.iter().zip(&touched) {
            if *t && journal.is_file() {
                let mut text = std::fs::read_to_string(journal).unwrap();
                text.push_str(&record((0, 2, 1)));
                text.push('\n');
                std::fs::write(journal, text).unwrap();
                set_mtime(journal, BASE + 1000 + id.len() as u64);
                changed += 1;
            }
        }
        let full = list::page_with(&reg, &Query::default(), by_index());
        prop_assert_eq!(full.json(), list::page_with(&reg, &Query::default(), by_files()).json());
        prop_assert_eq!(full.from_files, bad + changed);
        // Every page and filter too, shown runs or not: each run's journal is `stat`ed.
        check_same(&reg)?;
        // A listing that may repair the index does; then nothing changed is read from files.
        list::page_with(&reg, &Query::default(), Options { repair: true, ..by_index() });
        prop_assert_eq!(list::page_with(&reg, &Query::default(), by_index()).from_files, bad);
        check_same(&reg)?;
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// A run with a plan of one claude task, registered in `home`.
fn one_run(home: &Path, name: &str) -> (String, PathBuf) {
    let root = home.parent().unwrap().join(name);
    let new = NewRun { slug: name.into(), repo_root: root.display().to_string(), ..Default::default() };
    let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
    std::fs::create_dir_all(&p.runstate_dir).unwrap();
    let rs = PathBuf::from(&p.runstate_dir);
    std::fs::write(
        rs.join(format!("{name}.plan.json")),
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#,
    )
    .unwrap();
    Registry::at(home).register(&p).unwrap();
    (p.run_id, rs.join(format!("{name}.jsonl")))
}

/// A journal record, as every writer appends it (the index is not told).
fn append(journal: &Path, line: &str) {
    runwire::runs::journal::append_line(journal, line.as_bytes()).unwrap();
}

/// Through the index, appending the rows read from files, trusting rows at once.
fn repairing() -> Options {
    Options { use_index: true, repair: true, racy_ns: 0, check_every_ns: 0 }
}

fn leased(task: &str) -> String {
    format!(r#"{{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"r","task":"{task}","state":"leased"}}"#)
}

#[test]
fn journal_writes_leave_the_index_alone_and_a_listing_catches_up() {
    let base = support::scratch("index-crash");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let (id, journal) = one_run(&home, "c1");
    // Registration and journal writes write no row.
    append(&journal, &leased("a"));
    assert!(index::read(&home).is_empty());
    let files = || list::page_with(&reg, &Query::default(), by_files()).json();
    // A listing reads the run from its files and appends its row; the next one uses it.
    let page = list::page_with(&reg, &Query::default(), repairing());
    assert_eq!((page.from_files, page.json()), (1, files()));
    let bytes = index::read(&home);
    let ix = Index::parse(&bytes);
    let st = std::fs::metadata(&journal).unwrap();
    use std::os::unix::fs::MetadataExt;
    let row = ix.get(&id).expect("the run's row");
    assert_eq!((row.journal.size as u64, row.status), (st.size(), "running"));
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!((page.from_files, page.json()), (0, files()));

    // A record written (a writer killed right after, or any writer): the
    // row's stamp is no longer the journal's, so every page and filter reads the run.
    let before = index::read(&home);
    append(&journal, r#"{"v":"runstate/v1","ts":"t","actor":"r","task":"a","state":"committed"}"#);
    assert_eq!(index::read(&home), before, "the write path leaves the index alone");
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!(page.from_files, 1, "the stale row is not used");
    assert!(page.items[0].contains(r#""status":"done""#), "{}", page.items[0]);
    assert_eq!(page.json(), files());
    let done = list::page_with(&reg, &q(Some("1"), None, Some("done"), None), by_index());
    assert_eq!((done.total, done.items.len()), (1, 1));
    let running = list::page_with(&reg, &q(Some("1"), None, Some("running"), None), by_index());
    assert_eq!((running.total, running.items.len()), (0, 0));

    // A listing killed mid-row: a torn last line is skipped, and the next row starts on a line of its own.
    let mut f = std::fs::OpenOptions::new().append(true).open(index::path(&home)).unwrap();
    std::io::Write::write_all(&mut f, br#"{"row":{"run":"#).unwrap();
    drop(f);
    assert_eq!(Index::parse(&index::read(&home)).skipped, 1);
    append(&journal, &leased("b"));
    assert_eq!(list::page_with(&reg, &Query::default(), repairing()).from_files, 1);
    let ix_bytes = index::read(&home);
    let ix = Index::parse(&ix_bytes);
    assert_eq!(ix.skipped, 1, "only the torn line");
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!((page.from_files, page.json()), (0, files()));
    let _ = std::fs::remove_dir_all(&base);
}

/// A listing that checked every run is trusted for a while (what no writer
/// announced shows within that window), but a check stamped in the future,
/// a clock stepped back since, is no recent check: a journal written by
/// hand meanwhile shows at once, not once the clock catches up.
#[test]
fn a_check_stamped_after_now_is_not_trusted() {
    let base = support::scratch("index-clock");
    let home = base.join("home");
    let reg = Registry::at(&home);
    // Registered by another process, as a runner does: this one holds no mark of it.
    let (_, rs) = support::register_run(&home, "k1", &base.join("k1"), support::ONE_TASK_PLAN);
    let journal = rs.join("k1.jsonl");
    append(&journal, &leased("a"));
    let window = Options { use_index: true, repair: true, racy_ns: 0, check_every_ns: 10_000_000_000 };
    // Past the racy window of the journal's last change, a listing makes its
    // row durable and drops its mark: from then on the row stands for it.
    std::thread::sleep(Duration::from_millis(2100));
    let marks = || std::fs::read_dir(home.join("index/open")).map_or(0, |d| d.count());
    for _ in 0..3 {
        let page = list::page_with(&reg, &Query::default(), window);
        assert!(page.items[0].contains(r#""status":"running""#), "{}", page.items[0]);
        if marks() == 0 {
            break;
        }
    }
    assert_eq!(marks(), 0, "the run's mark is gone once its row is durable");
    // The clock steps back an hour: the last check now reads as an hour ahead.
    let sorted = home.join("index/runs.sorted");
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(&sorted).unwrap()).unwrap();
    let ahead = s["checkedNs"].as_i64().unwrap() + 3_600_000_000_000;
    s["checkedNs"] = ahead.into();
    std::fs::write(&sorted, s.to_string()).unwrap();
    // A record written by hand, with no mark (a script, an editor).
    append(&journal, r#"{"v":"runstate/v1","ts":"t","actor":"cron","task":"a","state":"failed","rc":1}"#);
    let page = list::page_with(&reg, &Query::default(), window);
    assert!(page.items[0].contains(r#""status":"failed""#), "{}", page.items[0]);
    let failed = list::page_with(&reg, &q(Some("5"), None, Some("failed"), None), window);
    assert_eq!(failed.total, 1);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_index_is_a_cache_damage_or_loss_changes_no_listing_and_reindex_rebuilds_it() {
    let base = support::scratch("index-damage");
    let home = base.join("home");
    let reg = Registry::at(&home);
    for name in ["d1", "d2", "d3"] {
        let (_, journal) = one_run(&home, name);
        append(&journal, &leased("a"));
    }
    let truth = list::page_with(&reg, &Query::default(), by_files()).json();
    list::page_with(&reg, &Query::default(), repairing());
    let text = std::fs::read_to_string(index::path(&home)).unwrap();
    // A byte changed inside a run's last row: its checksum fails and the run is read from files.
    let at = text.rfind(r#""needsInput":0"#).unwrap() + r#""needsInput":"#.len();
    let mut damaged = text.clone();
    damaged.replace_range(at..at + 1, "7");
    std::fs::write(index::path(&home), &damaged).unwrap();
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!(page.json(), truth);
    assert!(page.from_files >= 1);
    for junk in ["garbage\n", "", &text[..text.len() / 2]] {
        std::fs::write(index::path(&home), junk).unwrap();
        assert_eq!(list::page_with(&reg, &Query::default(), by_index()).json(), truth);
    }
    std::fs::remove_file(index::path(&home)).unwrap();
    assert_eq!(list::page_with(&reg, &Query::default(), by_index()).json(), truth);
    // `runs reindex` rebuilds it: every run from the index again.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
        .arg("reindex")
        .env("HARNESS_HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(said["runs"], 3);
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!((page.from_files, page.json()), (0, truth));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn rows_made_within_two_seconds_of_a_change_are_not_trusted() {
    let base = support::scratch("index-racy");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let (_, journal) = one_run(&home, "r1");
    append(&journal, &leased("a"));
    let o = Options { use_index: true, repair: true, racy_ns: index::RACY_NS, check_every_ns: 0 };
    // With the real window: the journal just changed, so no row is made.
    assert_eq!(list::page_with(&reg, &Query::default(), o).from_files, 1);
    assert_eq!(list::page_with(&reg, &Query::default(), o).from_files, 1);
    // A row made just after the change (no window) is not trusted with it.
    list::page_with(&reg, &Query::default(), repairing());
    assert_eq!(list::page_with(&reg, &Query::default(), by_index()).from_files, 0);
    assert_eq!(list::page_with(&reg, &Query::default(), o).from_files, 1);
    std::thread::sleep(Duration::from_millis(2100));
    // A listing after the window repairs it (its row is made long after the change), and then trusts it.
    assert_eq!(list::page_with(&reg, &Query::default(), o).from_files, 1);
    assert_eq!(list::page_with(&reg, &Query::default(), o).from_files, 0);
    let _ = std::fs::remove_dir_all(&base);
}

/// A stale row must be caught on every page, also at a size where the
/// listing parses rows, lists the registry and `stat`s journals on several
/// threads at once: 600 runs indexed, each older than the one before; then
/// the run with the oldest row gets a record (its row now stale: oldest by
/// the index, newest and `done` by its files). The first page of one, a
/// status page, the counts and a walk of pages of 64 are what its files
/// say, and the index's torn last line (a listing killed mid-row) changes
/// nothing.
#[test]
fn a_stale_row_of_the_oldest_run_still_heads_the_first_page() {
    let base = support::scratch("index-stale-first");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let runs: Vec<_> = (0..600).map(|i| one_run(&home, &format!("o{i:03}"))).collect();
    for (i, (id, journal)) in runs.iter().enumerate() {
        append(journal, &leased("a"));
        // Run 0 the oldest: activity is the later of pointer and journal mtime.
        set_mtime(journal, 1_000_000 + i as u64);
        set_mtime(&reg.path(id), 1_000_000 + i as u64);
    }
    let files = |q: &Query| list::page_with(&reg, q, by_files());
    assert_eq!(list::page_with(&reg, &Query::default(), repairing()).from_files, 600);
    assert_eq!(list::page_with(&reg, &Query::default(), by_index()).from_files, 0);
    let (oldest, journal) = &runs[0];
    let first = q(Some("1"), None, None, None);
    assert_ne!(&list::page_with(&reg, &first, by_index()).next.unwrap().run_id, oldest);

    append(journal, r#"{"v":"runstate/v1","ts":"t","actor":"r","task":"a","state":"committed"}"#);
    let mut f = std::fs::OpenOptions::new().append(true).open(index::path(&home)).unwrap();
    std::io::Write::write_all(&mut f, br#"{"row":{"run":"o"#).unwrap();
    drop(f);
    let page = list::page_with(&reg, &first, by_index());
    assert_eq!(page.from_files, 1, "only the stale run is read from its files");
    assert_eq!(&page.next.as_ref().unwrap().run_id, oldest, "the stale run heads the listing");
    assert_eq!(page.json(), files(&first).json());
    let done = q(Some("5"), None, Some("done"), None);
    let (got, want) = (list::page_with(&reg, &done, by_index()), files(&done));
    assert_eq!((got.total, got.json()), (1, want.json()));
    let running = q(Some("5"), None, Some("running"), None);
    assert_eq!(list::page_with(&reg, &running, by_index()).total, 599);
    assert_eq!(
        walk(&reg, &q(Some("64"), None, None, None), by_index()),
        walk(&reg, &q(Some("64"), None, None, None), by_files())
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_log_is_compacted_when_it_grows_and_keeps_only_what_listings_use() {
    let base = support::scratch("index-compact");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let (gone, _) = one_run(&home, "k0");
    let (_, journal) = one_run(&home, "k1");
    let path = index::path(&home);
    let mut grew = 0;
    let mut compacted = false;
    // Each record makes the next listing append the run's row again; past
    // the bound (rows after the log's sorted part) the listing rewrites the
    // log small. (The log is first filled near the bound with copies of a
    // row, as many listings would leave it.)
    list::page_with(&reg, &Query::default(), repairing());
    let row = String::from_utf8(Index::parse(&index::read(&home)).line(&gone).unwrap().to_vec()).unwrap();
    index::append(&home, &row.repeat((list::TAIL_MAX - 64 * 1024) / row.len())).unwrap();
    for i in 0..5_000 {
        append(&journal, &leased(&format!("t{i}")));
        let before = std::fs::metadata(&path).map_or(0, |m| m.len());
        list::page_with(&reg, &Query::default(), repairing());
        let after = std::fs::metadata(&path).unwrap().len();
        grew = grew.max(before);
        if after < before {
            compacted = true;
            break;
        }
    }
    assert!(compacted, "never compacted (grew to {grew} bytes)");
    assert!(grew as usize + 4096 > list::TAIL_MAX, "compacted at {grew} bytes");
    let ix_bytes = index::read(&home);
    let ix = Index::parse(&ix_bytes);
    assert_eq!((ix.skipped, ix.len()), (0, 2));
    assert!(ix_bytes.len() < 16 * 1024, "{} bytes after compaction", ix_bytes.len());
    assert_eq!(
        list::page_with(&reg, &Query::default(), by_index()).json(),
        list::page_with(&reg, &Query::default(), by_files()).json()
    );
    assert_eq!(list::page_with(&reg, &Query::default(), by_index()).from_files, 0);
    // A run no longer registered is dropped by the next compaction.
    std::fs::remove_file(reg.path(&gone)).unwrap();
    index::compact(&home).unwrap();
    let ix_bytes = index::read(&home);
    assert!(Index::parse(&ix_bytes).get(&gone).is_none());
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn concurrent_writers_and_listings_tear_no_row() {
    let base = support::scratch("index-concurrent");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let runs: Vec<_> = (0..4).map(|i| one_run(&home, &format!("w{i}"))).collect();
    // Eight writers, two a journal, 60 records each, while two listings keep the index.
    std::thread::scope(|s| {
        for w in 0..8 {
            let journal = &runs[w % 4].1;
            s.spawn(move || {
                for i in 0..60 {
                    append(journal, &leased(&format!("t{w}x{i}")));
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..30 {
                    list::page_with(&reg, &Query::default(), repairing());
                }
            });
        }
    });
    let bytes = index::read(&home);
    assert_eq!(Index::parse(&bytes).skipped, 0, "every line whole");
    for (_, journal) in &runs {
        let n = std::fs::read_to_string(journal).unwrap().lines().count();
        assert_eq!(n, 2 * 60, "{}", journal.display());
    }
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!(page.json(), list::page_with(&reg, &Query::default(), by_files()).json());
    // Processes too: `runs register` at once in eight processes, and listings.
    let mut kids = Vec::new();
    for i in 0..8 {
        let root = base.join(format!("proc{i}"));
        kids.push(
            std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
                .args(["register", "--slug", "p", "--repo-root"])
                .arg(&root)
                .env("HARNESS_HOME", &home)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        kids.push(
            std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
                .args(["list"])
                .env("HARNESS_HOME", &home)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    assert_eq!(Index::parse(&index::read(&home)).skipped, 0);
    list::page_with(&reg, &Query::default(), repairing());
    let page = list::page_with(&reg, &Query::default(), by_index());
    assert_eq!((page.total, page.from_files), (12, 0));
    assert_eq!(page.json(), list::page_with(&reg, &Query::default(), by_files()).json());
    let _ = std::fs::remove_dir_all(&base);
}

/// Trusting the rows of unmarked runs (`runwire::runs::marks`), never
/// checking every run, appending and consuming marks.
fn trusting() -> Options {
    Options { use_index: true, repair: true, racy_ns: 0, check_every_ns: i64::MAX }
}

fn check_trusted(reg: &Registry) -> Result<(), TestCaseError> {
    for q in queries() {
        prop_assert_eq!(walk(reg, &q, trusting()), walk(reg, &q, by_files()), "{:?}", q);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A listing that trusts the rows of runs without a mark answers what
    /// reading every run's files answers, as long as every change goes
    /// through a writer that holds the run's mark: journal records (the
    /// writer still holding its mark, or done), a run registered again, a
    /// run removed; before and after the listings consumed the marks.
    #[test]
    fn a_listing_trusting_unmarked_rows_is_the_file_listing(
        specs in proptest::collection::vec(spec(), 1..10),
        ops in proptest::collection::vec((0..10usize, 0..4u8), 0..12),
    ) {
        use runwire::runs::{journal, marks};
        let base = support::scratch("index-trust");
        let home = base.join("home");
        let reg = Registry::at(&home);
        let runs = build(&home, &specs);
        // The runner (this process) is done with its runs; the index is rebuilt.
        for (id, _, _) in &runs {
            marks::release(&home, id);
        }
        index::reindex(&home).unwrap();
        check_trusted(&reg)?;
        check_trusted(&reg)?;
        for (k, (i, op)) in ops.into_iter().enumerate() {
            let Some((id, journal_path, _)) = runs.get(i % runs.len()) else { continue };
            let run = marks::Run::new(&home, id);
            match op {
                // A record, newer than any; the writer holds the mark, or lets go.
                0 | 1 if journal_path.is_file() => {
                    let rec = journal::Record::task("r", "a", "committed", Some(0));
                    journal::append(&run, journal_path, &rec).unwrap();
                    set_mtime(journal_path, BASE + 2000 + k as u64);
                    if op == 1 {
                        marks::release(&home, id);
                    }
                }
                // Registered again (the pointer replaced, newer), then let go.
                2 => {
                    if let Ok(mut p) = reg.read(id) {
                        p.branch = Some(format!("b{k}"));
                        reg.register(&p).unwrap();
                        set_mtime(&reg.path(id), BASE + 3000 + k as u64);
                        marks::release(&home, id);
                    }
                }
                // Removed (`runs rm` takes the pointer and the link).
                3 => {
                    let _ = std::fs::remove_file(reg.path(id));
                    let _ = std::fs::remove_file(reg.link_path(id));
                }
                _ => {}
            }
            check_trusted(&reg)?;
        }
        for (id, _, _) in &runs {
            marks::release(&home, id);
        }
        check_trusted(&reg)?;
        check_trusted(&reg)?;
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// An unfiltered page reads the sorted part's start only; when the rows
/// there belong to marked runs (or were superseded), it reads on: the
/// first pages of 400 runs, the newest 300 of them written (marked) since
/// the index was sorted, are the file listing's.
#[test]
fn a_first_page_whose_rows_are_all_marked_reads_the_rest_of_the_sorted_part() {
    use runwire::runs::{journal, marks};
    let base = support::scratch("index-head");
    let home = base.join("home");
    let reg = Registry::at(&home);
    let specs: Vec<Spec> = (0..400u16)
        .map(|i| Spec {
            repo: 0,
            plan: 1,
            journal: vec![(0, 0, 0)],
            log: None,
            problem: 0,
            journal_at: i,
            pointer_at: 0,
        })
        .collect();
    let runs = build(&home, &specs);
    for (id, _, _) in &runs {
        marks::release(&home, id);
    }
    index::reindex(&home).unwrap();
    assert_eq!(
        walk(&reg, &q(Some("7"), None, None, None), trusting()),
        walk(&reg, &q(Some("7"), None, None, None), by_files())
    );
    // The newest 300 get a record each, their writer (this process) holding
    // some marks and letting others go; their rows head the sorted part.
    for (k, (id, journal_path, _)) in runs.iter().enumerate().skip(100) {
        let run = marks::Run::new(&home, id);
        journal::append(&run, journal_path, &journal::Record::task("r", "a", "committed", Some(0))).unwrap();
        set_mtime(journal_path, BASE - 100_000 + k as u64);
        if k % 2 == 0 {
            marks::release(&home, id);
        }
    }
    for limit in ["1", "7", "50"] {
        let q = q(Some(limit), None, None, None);
        assert_eq!(walk(&reg, &q, trusting()), walk(&reg, &q, by_files()), "limit {limit}");
    }
    for (id, _, _) in &runs {
        marks::release(&home, id);
    }
    let q = q(Some("50"), None, None, None);
    assert_eq!(walk(&reg, &q, trusting()), walk(&reg, &q, by_files()));
    assert_eq!(walk(&reg, &q, trusting()), walk(&reg, &q, by_files()));
    let _ = std::fs::remove_dir_all(&base);
}
