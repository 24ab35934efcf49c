//! Cost and tokens journaled when a turn ends (`spec/runstate.schema.json`,
//! `totals`; `spec/LAYOUT.md`, "The run index"): the writers (runwire-serve's
//! recorder, runwire-supervise) put each task's totals in the record they
//! write as its turn ends, and listings, through the index or from files,
//! take them from there; a journal of an older writer (no `totals`) still
//! gets them from the task log.

use crate::support;

use runwire::pipeline::normalize::Adapter;
use runwire::runs::index;
use runwire::runs::list::{self, Options, Query};
use runwire::runs::registry::{NewRun, Registry};
use runwire::runs::view;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/","session_id":"s","model":"m","tools":[]}"#;

fn result_line(cost: f64, tin: u64, tout: u64) -> String {
    format!(
        r#"{{"type":"result","subtype":"success","is_error":false,"session_id":"s","total_cost_usd":{cost},"usage":{{"input_tokens":{tin},"output_tokens":{tout}}}}}"#
    )
}

/// Through the index, trusting rows as soon as they are made, appending nothing.
fn by_index() -> Options {
    Options { use_index: true, repair: false, racy_ns: 0, check_every_ns: 0 }
}

/// Through the index, appending the rows read from files (the listings keep the index).
fn repairing() -> Options {
    Options { use_index: true, repair: true, racy_ns: 0, check_every_ns: 0 }
}

fn by_files() -> Options {
    Options { use_index: false, repair: false, racy_ns: 0, check_every_ns: 0 }
}

/// The listing's only run, and how many runs it read from files.
fn only(home: &Path, o: Options) -> (Value, usize) {
    let page = list::page_with(&Registry::at(home), &Query::default(), o);
    assert_eq!(page.items.len(), 1, "{}", page.json());
    (serde_json::from_str(&page.items[0]).unwrap(), page.from_files)
}

/// `(costUsd, tokens)` of a summary.
fn money(v: &Value) -> (Value, Value) {
    (v["costUsd"].clone(), v["tokens"].clone())
}

/// What the log's `turn_end`s add up to, as `(costUsd, tokens)` JSON.
fn log_money(log: &Path) -> (Value, Value) {
    let t = view::log_totals(std::fs::File::open(log).unwrap(), Adapter::Claude);
    let tokens = match (t.input_tokens, t.output_tokens) {
        (None, None) => Value::Null,
        (i, o) => serde_json::json!({"input": i.unwrap_or(0), "output": o.unwrap_or(0)}),
    };
    (serde_json::json!(t.cost_usd), tokens)
}

/// The journal's records.
fn records(journal: &Path) -> Vec<Value> {
    std::fs::read_to_string(journal).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Replaces `log` by a FIFO: a listing that opened it would list the run `unreadable`.
fn fifo(log: &Path) {
    let _ = std::fs::remove_file(log);
    nix::unistd::mkfifo(log, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

#[test]
fn a_recorded_run_journals_its_totals_and_lists_them_without_its_log() {
    let base = support::scratch("totals-serve");
    let home = base.join("home");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.env("HARNESS_HOME", &home).env("RUNWIRE_REPLAY_DELAY_MS", "0").stderr(Stdio::null());
    let srv = support::Server::spawn(cmd);
    let body = r#"{"threadId":"t1","runId":"r1","messages":[{"role":"user","content":"hi"}]}"#;
    let (code, _) = srv.post("/agui", body);
    assert_eq!(code, 200);
    let dir = home.join("serve/runstate");
    let (journal, log) = (dir.join("agui-r1.jsonl"), dir.join("agui-r1.agent.log"));
    let want = log_money(&log);
    assert!(want.0.is_number() && want.1.is_object(), "the replayed run has a cost: {want:?}");
    // The record of the turn's end carries the log's totals.
    let recs = records(&journal);
    let end = recs.iter().find(|r| r["state"] == "committed").unwrap_or_else(|| panic!("{recs:?}"));
    let t = &end["totals"]["agent"];
    assert_eq!((t["costUsd"].clone(), t["tokens"].clone()), want, "{end}");
    assert!(recs.iter().filter(|r| r["state"] == "leased").all(|r| r.get("totals").is_none()));
    // Listed with them, through the index (the first listing reads the run's
    // files: the server's writes leave the index alone) and from files.
    let (v, from_files) = only(&home, repairing());
    assert_eq!((money(&v), from_files), (want.clone(), 1));
    let (v, from_files) = only(&home, by_index());
    assert_eq!((money(&v), from_files), (want.clone(), 0));
    assert_eq!(money(&only(&home, by_files()).0), want);
    // The log gone after the turn: the index and the files still say what it cost.
    std::fs::remove_file(&log).unwrap();
    let (v, from_files) = only(&home, by_index());
    assert_eq!((money(&v), from_files, v["status"].as_str()), (want.clone(), 0, Some("done")));
    let (v, _) = only(&home, by_files());
    assert_eq!((money(&v), v["status"].as_str()), (want.clone(), Some("done")));
    // Unreadable (a FIFO): never opened, so the run is not `unreadable` for it.
    fifo(&log);
    let (v, _) = only(&home, by_files());
    assert_eq!((money(&v), v["status"].as_str()), (want.clone(), Some("done")));
    // `runs reindex` rebuilds the row from the journal, not the log.
    index::reindex(&home).unwrap();
    let (v, from_files) = only(&home, by_index());
    assert_eq!((money(&v), from_files), (want.clone(), 0));
    // And the server's own listing.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    use std::io::{Read, Write};
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(c, "GET /runs HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let page: Value = serde_json::from_str(raw.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(money(&page["runs"][0]), want);
    drop(srv);
    let _ = std::fs::remove_dir_all(&base);
}

/// A run with a plan of one claude task `a`, registered in `home`, its
/// journal and task log written as given (a journal of an older writer has
/// no `totals`).
fn run_with(home: &Path, journal: &str, log: Option<&str>) -> (PathBuf, PathBuf) {
    let root = home.parent().unwrap().join("repo");
    let new = NewRun { slug: "s".into(), repo_root: root.display().to_string(), ..Default::default() };
    let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
    Registry::at(home).register(&p).unwrap();
    let rs = PathBuf::from(&p.runstate_dir);
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#;
    std::fs::write(rs.join("s.plan.json"), plan).unwrap();
    std::fs::write(rs.join("s.jsonl"), journal).unwrap();
    if let Some(l) = log {
        std::fs::write(rs.join("s.a.log"), l).unwrap();
    }
    (rs.join("s.jsonl"), rs.join("s.a.log"))
}

const HEAD: &str = r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner""#;

#[test]
fn an_old_style_journal_takes_cost_and_tokens_from_the_task_log() {
    let base = support::scratch("totals-old");
    let home = base.join("home");
    let old =
        format!("{HEAD},\"task\":\"a\",\"state\":\"leased\"}}\n{HEAD},\"task\":\"a\",\"state\":\"implemented\"}}\n");
    let log = format!("{INIT}\n{}\n{INIT}\n{}\n", result_line(0.5, 10, 20), result_line(0.25, 1, 2));
    let (journal, log_path) = run_with(&home, &old, Some(&log));
    let want = (serde_json::json!(0.75), serde_json::json!({"input": 11, "output": 22}));
    assert_eq!(log_money(&log_path), want);
    assert_eq!(money(&only(&home, by_files()).0), want);
    index::reindex(&home).unwrap();
    let (v, from_files) = only(&home, by_index());
    assert_eq!((money(&v), from_files), (want, 0));
    // Such a log refused (a FIFO) makes the run unreadable, as before.
    fifo(&log_path);
    assert_eq!(only(&home, by_files()).0["status"], "unreadable");
    std::fs::remove_file(&log_path).unwrap();
    assert_eq!(money(&only(&home, by_files()).0), (Value::Null, Value::Null));

    // Once a record carries the task's totals, they are the task's: the last such record's.
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str(&format!(
        "{HEAD},\"task\":\"a\",\"state\":\"gated\",\"totals\":{{\"a\":{{\"costUsd\":1.5,\"tokens\":{{\"input\":3,\"output\":4}}}}}}}}\n"
    ));
    text.push_str(&format!("{HEAD},\"run\":\"idle\",\"totals\":{{\"a\":{{\"costUsd\":2.5,\"tokens\":null}}}}}}\n"));
    text.push_str(&format!("{HEAD},\"task\":\"a\",\"state\":\"committed\"}}\n"));
    std::fs::write(&journal, text).unwrap();
    std::fs::write(&log_path, format!("{INIT}\n{}\n", result_line(9.0, 9, 9))).unwrap();
    let want = (serde_json::json!(2.5), Value::Null);
    assert_eq!(money(&only(&home, by_files()).0), want);
    let (v, from_files) = only(&home, repairing());
    assert_eq!((money(&v), from_files, v["status"].as_str()), (want.clone(), 1, Some("done")));
    let (v, from_files) = only(&home, by_index());
    assert_eq!((money(&v), from_files, v["status"].as_str()), (want, 0, Some("done")));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_supervisor_journals_each_turns_totals() {
    let dir = support::scratch("totals-sup");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"do a","gate":"true"}]}"#;
    std::fs::write(dir.join("p.plan.json"), plan).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path =
        format!("{}:{}", root.join("fixtures/stub-engines").display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
    cmd.current_dir(&dir).env("PATH", path).env("HARNESS_HOME", dir.join("home")).env("STUB_MODE", "ok").args([
        "--plan",
        "p.plan.json",
        "--kill-grace",
        "2",
    ]);
    let mut sup = support::Supervised::spawn(dir.clone(), cmd);
    assert_eq!(sup.wait(Duration::from_secs(60), |s| s.stderr()), 0);
    let want = log_money(&dir.join("runstate/p.a.log"));
    assert!(want.0.is_number(), "the stub's turn has a cost: {want:?}");
    let recs = sup.journal();
    let with: Vec<&Value> = recs.iter().filter(|r| r.get("totals").is_some()).collect();
    // The turn's end (`implemented`) and nothing else: the gate is no turn.
    assert_eq!(with.len(), 1, "{recs:?}");
    assert_eq!(with[0]["state"], "implemented");
    let t = &with[0]["totals"]["a"];
    assert_eq!((t["costUsd"].clone(), t["tokens"].clone()), want);
    // `runs list` with the log gone: the journal's totals.
    std::fs::remove_file(dir.join("runstate/p.a.log")).unwrap();
    let t0 = Instant::now();
    for from_files in [false, true] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runs"));
        c.arg("list").arg("--json").env("HARNESS_HOME", dir.join("home"));
        if from_files {
            c.arg("--from-files");
        }
        let out = c.output().unwrap();
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert_eq!((money(&v), v["status"].as_str()), (want.clone(), Some("done")), "from_files {from_files}");
    }
    assert!(t0.elapsed() < Duration::from_secs(30));
}

/// A held interactive session (`runwire-serve --interactive`): each `idle`
/// record (a turn has ended) carries the task's totals so far; the listing
/// has them with the log gone. The agent says its cost as Claude Code does,
/// a running total of the session: the task's cost is that total (it was
/// the sum of the totals, 0.375 after two turns of 0.125).
#[test]
fn a_held_sessions_idle_records_carry_its_totals_so_far() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let dir = support::scratch("totals-idle");
    let home = dir.join("home");
    let agent = dir.join("turns.sh");
    let body = r#"#!/bin/sh
read -r opening
echo '{"type":"system","subtype":"init","session_id":"s-turns","tools":[],"model":"m"}'
n=0
while read -r l; do
  case "$l" in
    *'"type":"user"'*)
      # As Claude Code does: usage is the turn's, total_cost_usd the session's running total.
      n=$((n + 1))
      case $n in 1) total=0.125 ;; 2) total=0.25 ;; *) total=0.375 ;; esac
      echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"done"}]},"session_id":"s-turns"}'
      echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-turns","num_turns":1,"total_cost_usd":'$total',"usage":{"input_tokens":3,"output_tokens":5}}'
      ;;
  esac
done
"#;
    std::fs::write(&agent, body).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.args(["--listen", "127.0.0.1:0", "--interactive", "--agent", "claude", "--agent-cmd"])
        .arg(&agent)
        .env("HARNESS_HOME", &home)
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    // Kept open while the server runs (it may print more).
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let port: u16 = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
    let turn = |run: &str| {
        let body = serde_json::json!({"threadId": "t1", "runId": run, "messages": [{"id": run, "role": "user", "content": "hi"}]})
            .to_string();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(s, "POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        assert!(String::from_utf8_lossy(&raw).contains("RUN_FINISHED"), "{}", String::from_utf8_lossy(&raw));
    };
    // The idle records' totals, in order, once `n` are written.
    let idle_totals = |n: usize| {
        let t = Instant::now();
        loop {
            let mut out = Vec::new();
            for e in std::fs::read_dir(home.join("serve/runstate")).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().ends_with(".jsonl") {
                    for r in records(&e.path()).into_iter().filter(|r| r["run"] == "idle") {
                        out.push(r["totals"]["agent"].clone());
                    }
                }
            }
            if out.len() >= n {
                return out;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{n} idle records: {out:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    turn("r-1");
    let one = serde_json::json!({"costUsd": 0.125, "tokens": {"input": 3, "output": 5}});
    assert_eq!(idle_totals(1), std::slice::from_ref(&one));
    turn("r-2");
    let two = serde_json::json!({"costUsd": 0.25, "tokens": {"input": 6, "output": 10}});
    assert_eq!(idle_totals(2), [one, two]);
    // The log gone: the listing still has what the last turn's end said.
    for e in std::fs::read_dir(home.join("serve/runstate")).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with(".agent.log") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let (v, _) = only(&home, by_files());
    assert_eq!(
        (money(&v), v["status"].as_str()),
        ((serde_json::json!(0.25), serde_json::json!({"input": 6, "output": 10})), Some("idle"))
    );
    let _ = child.kill();
    let _ = child.wait();
    drop(out);
    let _ = std::fs::remove_dir_all(&dir);
}
