//! The durable tier end to end: fixture run directories in temp dirs, the
//! `runs` and `liveness` binaries, and `runwire-serve`'s `/runs` routes on
//! 127.0.0.1:0 spoken to over raw TCP. Every socket read has a timeout.

use crate::support;
use support::Server;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_secs(20);
const STATUS_OK: &str = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(name)
}

fn bin(name: &str, home: &Path) -> Command {
    let mut c = Command::new(match name {
        "runs" => env!("CARGO_BIN_EXE_runs"),
        _ => env!("CARGO_BIN_EXE_liveness"),
    });
    c.env("HARNESS_HOME", home);
    c
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A fixture: two live-looking runs, one with a truncated journal line, and
/// a pointer whose runstate directory is gone.
struct Fixture {
    home: PathBuf,
    run_a: String,
    run_b: String,
    gone: String,
}

fn fixture(name: &str) -> Fixture {
    let base = tmp(name);
    let home = base.join("home");
    let register = |slug: &str, repo: &Path, wt: Option<&Path>| -> String {
        let mut c = bin("runs", &home);
        c.args(["register", "--slug", slug, "--repo-root"]).arg(repo).args(["--branch", "main"]);
        if let Some(w) = wt {
            c.arg("--worktree").arg(w);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        lines(&o.stdout)[0]["runId"].as_str().unwrap().to_string()
    };
    let repo = base.join("repo");
    let rs = repo.join("runstate");
    std::fs::create_dir_all(&rs).unwrap();
    std::fs::write(
        rs.join("feat.plan.json"),
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"do a"},
            {"id":"b","adapter":"claude","prompt":"do b","deps":["a"],"gate":"make test","review":"codex"},
            {"id":"c","adapter":"claude","prompt":"do c","deps":["a"]}]}"#,
    )
    .unwrap();
    std::fs::write(
        rs.join("feat.jsonl"),
        concat!(
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"leased"}"#,
            "\n",
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:01:00.000Z","actor":"runner","task":"a","state":"committed","rc":0}"#,
            "\n",
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:02:00.000Z","actor":"runner","task":"b","state":"leased"}"#,
            "\n",
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:03:00.000Z","actor":"runner","task":"c","state":"fail"#
        ),
    )
    .unwrap();
    std::fs::copy(root().join("fixtures/claude/bb-turn-tools.partial.jsonl"), rs.join("feat.a.log")).unwrap();
    std::fs::write(rs.join("feat.b.log"), "").unwrap();
    let run_a = register("feat", &repo, None);
    // Same slug, another worktree of the same repo: another run.
    let wt = base.join("wt");
    std::fs::create_dir_all(wt.join("runstate")).unwrap();
    let run_b = register("feat", &repo, Some(&wt));
    let gone_repo = base.join("gone");
    std::fs::create_dir_all(gone_repo.join("runstate")).unwrap();
    let gone = register("old", &gone_repo, None);
    std::fs::remove_dir_all(&gone_repo).unwrap();
    let o = bin("liveness", &home)
        .arg("--runstate")
        .arg(&rs)
        .args(["set", "feat", "b", r#"{"pid":1,"session_id":"s-b","started_ts":"2026-01-01T00:02:00.000Z"}"#])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Fixture { home, run_a, run_b, gone }
}

#[test]
fn runs_list_show_task_over_fixture_dirs() {
    let f = fixture("views");
    assert_ne!(f.run_a, f.run_b, "equal slugs in two worktrees must not collide");
    let o = bin("runs", &f.home).arg("list").output().unwrap();
    assert!(o.status.success());
    let gone_pointer = f.home.join("runs").join(format!("{}.json", f.gone));
    assert!(gone_pointer.exists(), "a listing never deletes a pointer");
    let list = lines(&o.stdout);
    assert_eq!(list.len(), 3);
    let gone = list.iter().find(|r| r["runId"] == f.gone.as_str()).unwrap();
    assert_eq!(gone["status"], "missing");
    assert!(gone["reason"].as_str().unwrap().contains("runs reap"), "{gone}");
    assert_eq!(gone["slug"], "old");
    let a = list.iter().find(|r| r["runId"] == f.run_a.as_str()).unwrap();
    assert_eq!(a["status"], "running");
    assert_eq!(a["wave"], 2);
    assert_eq!(a["counts"], serde_json::json!({"committed": 1, "leased": 1, "pending": 1}));
    assert_eq!(a["tokens"]["output"], 258);
    assert!(a["costUsd"].as_f64().unwrap() > 0.06);
    let b = list.iter().find(|r| r["runId"] == f.run_b.as_str()).unwrap();
    assert_eq!(b["status"], "registered");

    let o = bin("runs", &f.home).args(["show", &f.run_a]).output().unwrap();
    let show = &lines(&o.stdout)[0];
    assert_eq!(show["plan"]["waves"], serde_json::json!([["a"], ["b", "c"]]));
    assert_eq!(show["tasks"]["a"]["state"], "committed");
    assert_eq!(show["tasks"]["c"]["state"], "pending", "the truncated last line is skipped");
    assert_eq!(show["journal"]["skipped"], 1);

    let o = bin("runs", &f.home).args(["task", &f.run_a, "b"]).output().unwrap();
    let t = &lines(&o.stdout)[0];
    assert_eq!(
        (t["adapter"].as_str(), t["sessionId"].as_str(), t["pid"].as_i64()),
        (Some("claude"), Some("s-b"), Some(1))
    );
    assert!(t["runtimeS"].as_f64().unwrap() > 0.0 && t["logfile"].as_str().unwrap().ends_with("feat.b.log"));

    for (args, code) in [
        (vec!["show", "nope"], 1),
        (vec!["show", "../x"], 2),
        (vec!["task", f.run_a.as_str(), "zz"], 1),
        (vec!["register", "--slug", "a/b", "--repo-root", "/r"], 2),
        (vec!["bogus"], 2),
    ] {
        let o = bin("runs", &f.home).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(o.stderr.starts_with(b"runs: ") || code == 2, "{args:?}");
    }
    let o = bin("runs", &f.home).arg("--help").output().unwrap();
    assert!(o.status.success() && !f.home.join("runs").join("x").exists());

    // `runs reap` removes the pointer of the gone run, on request only.
    let o = bin("runs", &f.home).args(["reap", "--dry-run"]).output().unwrap();
    assert!(o.status.success());
    let gone_dir = f.home.parent().unwrap().join("gone/runstate").display().to_string();
    let want = serde_json::json!({"runId": f.gone, "runstateDir": gone_dir, "removed": false});
    assert_eq!(lines(&o.stdout), vec![want]);
    assert!(gone_pointer.exists(), "a dry run removes nothing");
    let o = bin("runs", &f.home).arg("reap").output().unwrap();
    assert!(o.status.success());
    assert_eq!(lines(&o.stdout)[0]["runId"], f.gone.as_str());
    assert!(!gone_pointer.exists());
    let o = bin("runs", &f.home).arg("list").output().unwrap();
    assert_eq!(lines(&o.stdout).len(), 2);
    assert!(lines(&bin("runs", &f.home).arg("reap").output().unwrap().stdout).is_empty());
}

#[test]
fn many_processes_set_liveness_at_once_and_nothing_is_lost() {
    let dir = tmp("live");
    let n = 48;
    let children: Vec<Child> = (0..n)
        .map(|i| {
            bin("liveness", &dir)
                .args(["set", "run", &format!("t{i}"), &format!(r#"{{"pid":{},"state":"leased"}}"#, 100000 + i)])
                .arg("--runstate")
                .arg(&dir)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let o = bin("liveness", &dir).arg("--runstate").arg(&dir).args(["get", "run"]).output().unwrap();
    let live = &lines(&o.stdout)[0];
    assert_eq!(live["tasks"].as_object().unwrap().len(), n);
    assert_eq!(live["tasks"]["t7"]["pid"], 100007);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn reap_drops_a_dead_pid_and_reports_the_journals_last_state() {
    let dir = tmp("reap");
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let me = std::process::id();
    let set = |task: &str, json: String| {
        let o = bin("liveness", &dir).args(["--runstate"]).arg(&dir).args(["set", "r", task, &json]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    set("gone", format!(r#"{{"pid":{dead_pid}}}"#));
    set("alive", format!(r#"{{"pid":{me}}}"#));
    std::fs::write(
        dir.join("r.jsonl"),
        r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"gone","state":"halted","rc":137}
"#,
    )
    .unwrap();
    let o = bin("liveness", &dir).args(["reap", "r", "--runstate"]).arg(&dir).output().unwrap();
    assert!(o.status.success());
    let r = lines(&o.stdout);
    assert_eq!(r, vec![serde_json::json!({"task":"gone","pid":dead_pid,"last_state":"halted","rc":137})]);
    let o = bin("liveness", &dir).args(["--runstate"]).arg(&dir).args(["get", "r", "gone"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    for bad in [vec!["set", "r", "../x", "{}"], vec!["set", "r", "t", "{\"nope\":1}"], vec!["get", "a/b"]] {
        let o = bin("liveness", &dir).args(["--runstate"]).arg(&dir).args(&bad).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}

// ---- the server ----

fn serve(home: &Path, envs: &[(&str, &str)]) -> Server {
    serve_with(home, envs, &[])
}

fn serve_with(home: &Path, envs: &[(&str, &str)], args: &[&str]) -> Server {
    let mut cmd = Server::command();
    cmd.args(args).env("HARNESS_HOME", home).env("RUNWIRE_REPLAY_DELAY_MS", "0");
    cmd.envs(envs.iter().copied());
    Server::spawn(cmd)
}

fn without(mut v: Value, keys: &[&str]) -> Value {
    for k in keys {
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

#[test]
fn routes_give_the_same_views_as_the_runs_binary_and_refuse_bad_ids() {
    let f = fixture("routes");
    let srv = serve(&f.home, &[]);
    let (code, list) = srv.get("/runs");
    assert_eq!(code, 200);
    let cli = lines(&bin("runs", &f.home).arg("list").output().unwrap().stdout);
    assert_eq!(list["runs"].as_array().unwrap(), &cli);
    let (code, show) = srv.get(&format!("/runs/{}", f.run_a));
    assert_eq!(code, 200);
    assert_eq!(show, lines(&bin("runs", &f.home).args(["show", &f.run_a]).output().unwrap().stdout)[0]);
    let (_, task) = srv.get(&format!("/runs/{}/tasks/b", f.run_a));
    let cli_task = lines(&bin("runs", &f.home).args(["task", &f.run_a, "b"]).output().unwrap().stdout)[0].clone();
    let clocky = ["idleS", "runtimeS"];
    assert_eq!(without(task, &clocky), without(cli_task, &clocky));

    let a = &f.run_a;
    for (path, code) in [
        ("/runs/..".to_string(), 400),
        ("/runs/../etc/passwd".into(), 400),
        ("/runs/%2e%2e".into(), 400),
        ("/runs/a%00b".into(), 400),
        (format!("/runs/{}", "x".repeat(300)), 400),
        (format!("/runs/{a}/tasks/..%2fx"), 400),
        (format!("/runs/{a}/tasks/.hidden/stream"), 400),
        (format!("/runs/{a}//tasks"), 400),
        ("/runs/nope".into(), 404),
        (format!("/runs/{a}/tasks/zz"), 404),
        (format!("/runs/{a}/tasks/zz/stream"), 404),
        (format!("/runs/{a}/other"), 404),
        (format!("/runs/{a}/tasks/a/stream?after=x"), 400),
        (format!("/runs/{a}/tasks/a/stream?format=xml"), 400),
    ] {
        let (got, body) = srv.get(&path);
        assert_eq!(got, code, "{path}: {body}");
        assert!(body["error"].is_string(), "{path}: {body}");
    }
}

/// Reads SSE frames until `max` frames with an id, the end, or the exit event.
/// Returns the ids read, whether the exit was seen, and error frames.
fn read_frames(port: u16, path: &str, last_id: Option<&str>, max: usize) -> (Vec<String>, bool, Vec<String>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut req = format!("GET {path} HTTP/1.0\r\n");
    if let Some(id) = last_id {
        req.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut sse = support::sse::Reader::new(s);
    let head = sse.head();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (mut ids, mut errors) = (Vec::new(), Vec::new());
    while let Some(f) = sse.next_frame() {
        if f.kind() == "error" {
            errors.push(f.data);
            continue;
        }
        ids.extend(f.id.clone());
        if f.data.contains(r#""type":"exit""#) {
            return (ids, true, errors);
        }
        if ids.len() >= max {
            return (ids, false, errors);
        }
    }
    (ids, false, errors)
}

/// The seqs a whole log normalizes to, in order (what normalize-events prints).
fn expected_seqs(log: &[u8]) -> Vec<String> {
    let mut n = runwire::pipeline::normalize::Normalizer::new(
        runwire::pipeline::normalize::Adapter::Claude,
        Default::default(),
    );
    let mut out = Vec::new();
    for line in log.split(|&b| b == b'\n') {
        if line.is_empty() && out.is_empty() {
            continue;
        }
        for ev in n.push(line) {
            out.push(ev.seq.to_string());
        }
    }
    out
}

/// A live run: plan + journal + a log the test appends to while it reads.
fn live_run(name: &str) -> (PathBuf, String, PathBuf) {
    let base = tmp(name);
    let home = base.join("home");
    let rs = base.join("repo/runstate");
    std::fs::create_dir_all(&rs).unwrap();
    std::fs::write(
        rs.join("live.plan.json"),
        r#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#,
    )
    .unwrap();
    std::fs::write(rs.join("live.t.log"), "").unwrap();
    let o =
        bin("runs", &home).args(["register", "--slug", "live", "--repo-root"]).arg(base.join("repo")).output().unwrap();
    let id = lines(&o.stdout)[0]["runId"].as_str().unwrap().to_string();
    (home, id, rs.join("live.t.log"))
}

fn source_lines(reps: usize) -> Vec<String> {
    let fixture = std::fs::read_to_string(root().join("fixtures/claude/bb-turn-tools.partial.jsonl")).unwrap();
    let mut v: Vec<String> = Vec::new();
    for _ in 0..reps {
        v.extend(fixture.lines().map(str::to_string));
    }
    v.push(STATUS_OK.to_string());
    v
}

#[test]
fn resume_is_exact_with_random_disconnects_over_a_growing_log() {
    let (home, id, log) = live_run("resume");
    let srv = serve(&home, &[]);
    let src = source_lines(6);
    let writer = {
        let log = log.clone();
        let src = src.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            for (i, l) in src.iter().enumerate() {
                // Lines sometimes arrive in two writes, so a reader can see half a line.
                let (x, y) = l.split_at(l.len() / 2);
                f.write_all(x.as_bytes()).unwrap();
                if i % 3 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                f.write_all(y.as_bytes()).unwrap();
                f.write_all(b"\n").unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let path = format!("/runs/{id}/tasks/t/stream");
    let mut got: Vec<String> = Vec::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut connections = 0;
    loop {
        assert!(Instant::now() < deadline, "no exit event within 60 s; got {} ids", got.len());
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let max = 1 + (rng % 8) as usize;
        let (ids, exited, errors) = read_frames(srv.port, &path, got.last().map(String::as_str), max);
        assert!(errors.is_empty(), "{errors:?}");
        connections += 1;
        got.extend(ids);
        if exited {
            break;
        }
    }
    writer.join().unwrap();
    let want = expected_seqs(&std::fs::read(&log).unwrap());
    assert!(connections > 5, "the test should have reconnected many times ({connections})");
    assert!(got == want, "the union of what was received must be the whole sequence, no duplicate, no gap");
}

#[test]
fn a_too_slow_client_gets_one_error_naming_the_dropped_range() {
    let (home, id, log) = live_run("slow");
    let srv = serve(&home, &[("RUNWIRE_STREAM_BUFFER", "1024")]);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(s, "GET /runs/{id}/tasks/t/stream HTTP/1.0\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // Far more than the kernel's socket buffers hold for a client that does not read.
    let src = source_lines(300);
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    for l in &src {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    // Do not read for a while: the server must drop, not block or buffer without bound.
    std::thread::sleep(Duration::from_millis(1500));
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let frames = support::sse::frames(body);
    let errors: Vec<&support::sse::Frame> = frames.iter().filter(|f| f.kind() == "error").collect();
    assert!(!errors.is_empty(), "expected a dropped-range error event");
    let ids: Vec<String> = frames.iter().filter_map(|f| f.id.clone()).collect();
    let want = expected_seqs(&std::fs::read(&log).unwrap());
    // Every seq was either delivered or named in a dropped range.
    let mut covered = ids.clone();
    for e in &errors {
        let data = e.json();
        assert_eq!(data["data"]["code"], "dropped");
        let (from, to) = data["data"]["raw"].as_str().unwrap().split_once("..").unwrap();
        let a = want.iter().position(|s| s == from).unwrap();
        let b = want.iter().position(|s| s == to).unwrap();
        covered.extend(want[a..=b].iter().cloned());
    }
    let key = |s: &String| runwire::pipeline::events::Seq::parse(s).unwrap();
    covered.sort_by_key(key);
    covered.dedup();
    assert!(covered == want, "delivered + dropped ranges != all: {} vs {}", covered.len(), want.len());
}

#[test]
fn post_agui_runs_are_recorded_and_their_streams_re_read() {
    let home = tmp("agui").join("home");
    let srv = serve(&home, &[]);
    let body = r#"{"threadId":"t1","runId":"r1","messages":[{"role":"user","content":"hi"}]}"#;
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(s, "POST /agui HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    assert!(String::from_utf8_lossy(&raw).contains("RUN_FINISHED"));
    let (_, list) = srv.get("/runs");
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0]["slug"].as_str(), runs[0]["status"].as_str()), (Some("agui-r1"), Some("done")));
    // The server's journal writes leave the run index alone; a row a
    // listing made (none while the journal changed within 2 s) is of the
    // journal's final state.
    let journal = home.join("serve/runstate/agui-r1.jsonl");
    let st = std::fs::metadata(&journal).unwrap();
    let bytes = runwire::runs::index::read(&home);
    let ix = runwire::runs::index::Index::parse(&bytes);
    let id = runs[0]["runId"].as_str().unwrap();
    use std::os::unix::fs::MetadataExt;
    let row = ix.get(id).map(|r| (r.journal.size as u64, r.status));
    assert!(row.is_none_or(|r| r == (st.size(), "done")), "{}", String::from_utf8_lossy(&bytes));
    let (ids, _, _) = read_frames(srv.port, &format!("/runs/{id}/tasks/agent/stream"), None, usize::MAX);
    let log = home.join("serve/runstate/agui-r1.agent.log");
    assert_eq!(ids, expected_seqs(&std::fs::read(log).unwrap()));
    let (resumed, _, _) = read_frames(srv.port, &format!("/runs/{id}/tasks/agent/stream"), Some(&ids[3]), usize::MAX);
    assert_eq!(resumed, ids[4..]);
}

#[test]
fn a_post_agui_run_is_journaled_as_ended_by_the_time_its_response_ends() {
    // A browser reads the chunked response to its last chunk, not to EOF,
    // then may list runs at once: the run must already show as ended.
    let home = tmp("agui-end").join("home");
    let srv = serve(&home, &[]);
    for n in 0..5 {
        let body = format!(r#"{{"threadId":"t{n}","runId":"e{n}","messages":[{{"role":"user","content":"hi"}}]}}"#);
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        write!(
            s,
            "POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 65536];
        while !raw.ends_with(b"\r\n0\r\n\r\n") {
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0, "the response ended without its last chunk");
            raw.extend_from_slice(&buf[..k]);
        }
        assert!(String::from_utf8_lossy(&raw).contains("RUN_FINISHED"));
        let (_, list) = srv.get("/runs");
        let run = list["runs"].as_array().unwrap().iter().find(|r| r["slug"] == format!("agui-e{n}")).cloned();
        assert_eq!(run.as_ref().and_then(|r| r["status"].as_str()), Some("done"), "run e{n}: {run:?}");
    }
}

/// A batch run whose client left is journaled halted with why; the same
/// request retried is answered from that record and ends `RUN_ERROR`
/// `run_stopped`, not as an agent that exited with status 1 (the client
/// stopped it, the agent did not fail).
#[test]
fn a_retried_run_whose_client_left_says_it_was_stopped() {
    let home = tmp("agui-left").join("home");
    let srv = serve(&home, &[]);
    let body = r#"{"threadId":"tl","runId":"left-1","messages":[{"id":"m1","role":"user","content":"hi"}]}"#;
    let request = format!(
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = [0u8; 4096];
    let k = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..k]).starts_with("HTTP/1.1 200"));
    drop(s);
    let ended = Instant::now();
    let run = loop {
        let (_, list) = srv.get("/runs");
        let run = list["runs"].as_array().unwrap().iter().find(|r| r["slug"] == "agui-left-1").cloned();
        if run.as_ref().is_some_and(|r| r["status"] == "failed") {
            break run.unwrap();
        }
        assert!(ended.elapsed() < Duration::from_secs(20), "the run never ended: {run:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(run["reason"].as_str().unwrap_or_default().contains("its client left"), "{run}");
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let last = text.lines().rev().find_map(|l| l.strip_prefix("data: ")).unwrap_or_default();
    let last: Value = serde_json::from_str(last).unwrap_or_default();
    assert_eq!((last["type"].as_str(), last["code"].as_str()), (Some("RUN_ERROR"), Some("run_stopped")), "{text}");
    assert!(last["message"].as_str().unwrap_or_default().contains("its client left"), "{last}");
}

#[test]
fn runs_routes_pass_the_same_boundary_as_the_others() {
    let f = fixture("boundary");
    let token_file = f.home.parent().unwrap().join("token");
    std::fs::write(&token_file, "0123456789abcdef0123\n").unwrap();
    let srv = serve_with(&f.home, &[], &["--token-file", token_file.to_str().unwrap()]);
    let stream = format!("/runs/{}/tasks/a/stream", f.run_a);
    for path in ["/runs", stream.as_str()] {
        assert_eq!(srv.get(path).0, 401, "{path} without the token");
    }
    assert_eq!(srv.get("/runs?token=0123456789abcdef0123").0, 200);
    assert_eq!(srv.get_with("/runs", "Authorization: Bearer 0123456789abcdef0123\r\n").0, 200);
    let (code, _) = srv.get_with("/runs?token=0123456789abcdef0123", "Host: evil.example\r\n");
    assert_eq!(code, 403, "DNS rebinding is refused on /runs too");
    let (code, _) = srv.get_with("/runs?token=0123456789abcdef0123", "Origin: https://evil.example\r\n");
    assert_eq!(code, 403);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(s, "POST /runs HTTP/1.0\r\nAuthorization: Bearer 0123456789abcdef0123\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 405"), "{raw}");
}

#[test]
fn format_agui_serves_the_task_as_a_valid_ag_ui_stream() {
    let f = fixture("agui-format");
    let srv = serve(&f.home, &[]);
    // Task a is committed in the journal, so its stream ends at the end of its log.
    let agui = |query: &str, headers: &str| -> (u16, Vec<(String, Value)>) {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        write!(s, "GET /runs/{}/tasks/a/stream?format=agui{query} HTTP/1.0\r\n{headers}\r\n", f.run_a).unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        if code != 200 {
            return (code, Vec::new());
        }
        let frames = support::sse::frames(body)
            .iter()
            .map(|fr| (fr.id.clone().expect("every AG-UI frame has an id"), fr.json()))
            .collect();
        (code, frames)
    };
    let (code, all) = agui("", "");
    assert_eq!(code, 200);
    let events: Vec<Value> = all.iter().map(|(_, e)| e.clone()).collect();
    support::verify::verify(&events).unwrap();
    assert!(events.len() >= 5, "a real run, not a stub: {events:?}");
    assert_eq!(events[0]["type"], "RUN_STARTED");
    assert_eq!(events[0]["threadId"], f.run_a.as_str());
    // Ids are SEQ/K, strictly increasing in (seq, k) order.
    let key = |id: &str| -> (u64, u32, u32) {
        let (seq, k) = id.split_once('/').unwrap();
        let (line, sub) = seq.split_once('.').unwrap_or((seq, "0"));
        (line.parse().unwrap(), sub.parse().unwrap(), k.parse().unwrap())
    };
    assert!(all.windows(2).all(|w| key(&w[0].0) < key(&w[1].0)), "{:?}", all.iter().map(|f| &f.0).collect::<Vec<_>>());
    // Resuming after any frame gives exactly the frames after it (timestamps
    // of lines without one are read times, so they are left out).
    let strip = |frames: &[(String, Value)]| -> Vec<(String, Value)> {
        frames.iter().map(|(id, e)| (id.clone(), without(e.clone(), &["timestamp"]))).collect()
    };
    for (i, (id, _)) in all.iter().enumerate() {
        // `?after=` as URLSearchParams writes it (`/` as %2F) is the same id.
        let (code, rest) = match i % 3 {
            0 => agui(&format!("&after={id}"), ""),
            1 => agui(&format!("&after={}", id.replace('/', "%2F")), ""),
            _ => agui("", &format!("Last-Event-ID: {id}\r\n")),
        };
        assert_eq!(code, 200);
        assert_eq!(strip(&rest), strip(&all[i + 1..]), "resumed after {id}");
    }
    // A bare seq (an events/v1 id) resumes after every frame of that event.
    let (first_seq, _) = all[0].0.split_once('/').unwrap();
    let (_, rest) = agui(&format!("&after={first_seq}"), "");
    let n = all.iter().filter(|(id, _)| id.split_once('/').unwrap().0 == first_seq).count();
    assert_eq!(strip(&rest), strip(&all[n..]));
    for bad in ["x", "3/", "3/-1", "/1", "3.0/1"] {
        assert_eq!(agui(&format!("&after={bad}"), "").0, 400, "{bad}");
    }
    // The events/v1 stream does not take AG-UI ids.
    let (code, _) = srv.get(&format!("/runs/{}/tasks/a/stream?after=3/0", f.run_a));
    assert_eq!(code, 400);
}

/// Reads a response head (status line and headers) byte by byte, so nothing
/// of the body is consumed.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1, "connection closed in the head: {}", String::from_utf8_lossy(&head));
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Reads SSE frames from an open stream (past its head) until the exit
/// event or the end: the ids, the exit seen, and how many keep-alive
/// comments came.
fn ids_until_exit(s: TcpStream) -> (Vec<String>, bool, usize) {
    let mut sse = support::sse::Reader::new(s);
    let mut ids = Vec::new();
    while let Some(f) = sse.next_frame() {
        ids.extend(f.id.clone());
        if f.data.contains(r#""type":"exit""#) {
            return (ids, true, sse.comments());
        }
    }
    (ids, false, sse.comments())
}

#[test]
fn a_stream_waits_for_a_task_log_that_does_not_exist_yet() {
    let (home, id, log) = live_run("wait");
    std::fs::remove_file(&log).unwrap();
    let srv = serve(&home, &[("RUNWIRE_KEEPALIVE_MS", "50")]);
    let path = format!("/runs/{id}/tasks/t/stream");
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "a known task without a log yet is waited for: {head}");
    // Keep-alive comments while there is no log: read one before the log exists.
    let mut first = [0u8; 14];
    s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b": keep-alive\n\n");
    assert!(!log.exists());
    // The log appears (created, then written in pieces), as a wrapper's redirected stdout does.
    let src = source_lines(2);
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
    for l in &src {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    let (ids, exited, _) = ids_until_exit(s);
    assert!(exited, "the stream follows the log once it exists, to the exit event");
    let want = expected_seqs(&std::fs::read(&log).unwrap());
    assert_eq!(ids, want, "every event, with its id, from the first line on");
    // Resume is exact on the log that appeared.
    let (resumed, exited, _) = read_frames(srv.port, &path, Some(&ids[4]), usize::MAX);
    assert!(exited);
    assert_eq!(resumed, want[5..]);
    // Unknown task and unknown run stay 404.
    assert_eq!(srv.get(&format!("/runs/{id}/tasks/zz/stream")).0, 404);
    assert_eq!(srv.get("/runs/abcdef012345--nope/tasks/t/stream").0, 404);
}

#[test]
fn a_waiting_stream_ends_when_the_task_ends_without_a_log_and_moves_into_a_renamed_log() {
    let (home, id, log) = live_run("wait-end");
    std::fs::remove_file(&log).unwrap();
    let rs = log.parent().unwrap().to_path_buf();
    let srv = serve(&home, &[]);
    let open = |task: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        write!(s, "GET /runs/{id}/tasks/{task}/stream HTTP/1.0\r\n\r\n").unwrap();
        assert!(read_head(&mut s).starts_with("HTTP/1.1 200"));
        s
    };
    let mut s = open("t");
    // Halted before it wrote anything (its dependency failed): the stream ends, empty.
    let rec = runwire::runs::journal::Record::task("runner", "t", "halted", Some(1));
    let run = runwire::runs::marks::Run::new(&home, &id);
    runwire::runs::journal::append(&run, &rs.join("live.jsonl"), &rec).unwrap();
    let mut rest = String::new();
    s.read_to_string(&mut rest).unwrap();
    assert!(!rest.contains("data:"), "{rest}");

    // A log renamed into place (not created by an append) is found too.
    std::fs::write(
        rs.join("live.plan.json"),
        r#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"},{"id":"u","adapter":"claude","prompt":"q"}]}"#,
    )
    .unwrap();
    let s = open("u");
    let tmp_log = rs.join(".live.u.log.tmp");
    let src = source_lines(1);
    std::fs::write(&tmp_log, src.join("\n") + "\n").unwrap();
    std::fs::rename(&tmp_log, rs.join("live.u.log")).unwrap();
    let (ids, exited, _) = ids_until_exit(s);
    assert!(exited);
    assert_eq!(ids, expected_seqs(&std::fs::read(rs.join("live.u.log")).unwrap()));
}

#[test]
fn the_run_index_never_serves_a_stale_view() {
    let f = fixture("index");
    let index = f.home.join("index/runs.jsonl");
    let journal = f.home.parent().unwrap().join("repo/runstate/feat.jsonl");
    // Files written by hand (no writer's mark): every listing checks every
    // run's stamps (RUNWIRE_INDEX_CHECK_MS=0); with a window, see the end.
    let list = || {
        let o = bin("runs", &f.home).env("RUNWIRE_INDEX_CHECK_MS", "0").arg("list").output().unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    // The truth: a listing of every run's files, the index left aside.
    let truth = || {
        let o = bin("runs", &f.home).args(["list", "--from-files"]).output().unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    // Rows made within 2 s of a change are never trusted: let the files age,
    // then rebuild the index so that its rows are what is tested.
    let age = || std::thread::sleep(Duration::from_millis(2100));
    age();
    let o = bin("runs", &f.home).arg("reindex").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&index).unwrap().contains(&f.run_a), "the index holds the runs");
    let first = list();
    assert_eq!(list(), first);
    assert_eq!(truth(), first);

    // A journal line appended by a writer that does not keep the index.
    let mut j = std::fs::OpenOptions::new().append(true).open(&journal).unwrap();
    writeln!(j).unwrap();
    writeln!(
        j,
        r#"{{"v":"runstate/v1","ts":"2026-01-01T00:04:00.000Z","actor":"runner","task":"c","state":"leased"}}"#
    )
    .unwrap();
    drop(j);
    let appended = list();
    assert_ne!(appended, first);
    assert!(appended.contains(r#""counts":{"committed":1,"leased":2}"#), "{appended}");
    assert_eq!(truth(), appended);

    // Rewritten in place with the same size (same inode, same length): the
    // times differ, so the stamp does.
    age();
    assert_eq!(list(), appended);
    let text = std::fs::read_to_string(&journal).unwrap();
    let same_size = text.replacen(r#""task":"b","state":"leased""#, r#""task":"b","state":"halted""#, 1);
    assert_eq!(same_size.len(), text.len());
    std::fs::write(&journal, &same_size).unwrap();
    let rewritten = list();
    assert!(rewritten.contains(r#""halted":1"#), "{rewritten}");
    assert_eq!(truth(), rewritten);

    // A damaged index (a byte changed, then cut short, garbage) and a deleted one.
    age();
    assert_eq!(list(), rewritten);
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::write(&index, text.replace(r#""needsInput":0"#, r#""needsInput":7"#)).unwrap();
    assert_eq!(list(), rewritten);
    std::fs::write(&index, &text[..text.len() / 2]).unwrap();
    assert_eq!(list(), rewritten);
    std::fs::write(&index, "garbage\n").unwrap();
    assert_eq!(list(), rewritten);
    std::fs::remove_file(&index).unwrap();
    assert_eq!(list(), rewritten);

    // The server reads the same index and gives the same view, and sees a change too.
    let srv = serve(&f.home, &[("RUNWIRE_INDEX_CHECK_MS", "0")]);
    let from_server = |srv: &Server| {
        let (code, v) = srv.get("/runs");
        assert_eq!(code, 200);
        v["runs"].as_array().unwrap().clone()
    };
    assert_eq!(from_server(&srv), lines(rewritten.as_bytes()));
    std::fs::write(&journal, text_with_c_committed(&same_size)).unwrap();
    let changed = from_server(&srv);
    assert_eq!(changed, lines(truth().as_bytes()));
    assert_ne!(changed, lines(rewritten.as_bytes()));
    drop(srv);

    // With a window (10 s unless set), a listing trusts the rows of runs
    // no writer marked for that long after the last check of every run: a
    // file written by hand shows once the window has passed.
    let windowed = || {
        let o = bin("runs", &f.home).env("RUNWIRE_INDEX_CHECK_MS", "1000").arg("list").output().unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    age();
    let before = list();
    assert_eq!(windowed(), before);
    std::fs::write(&journal, text_with_c_committed(&text_with_c_committed(&same_size))).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let after = windowed();
    assert_ne!(after, before);
    assert_eq!(after, truth());
}

fn text_with_c_committed(journal: &str) -> String {
    journal.to_string()
        + r#"{"v":"runstate/v1","ts":"2026-01-01T00:05:00.000Z","actor":"runner","task":"c","state":"committed"}"#
        + "\n"
}

// ---- files a listing must survive ----

/// Runs `c` with a deadline: a listing that hangs fails the test instead of hanging it.
fn output_within(c: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{c:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Registers `slug` with its own runstate directory under `base` and a
/// one-task plan; returns (runId, runstate dir).
fn plain_run(base: &Path, home: &Path, slug: &str, journal: &str) -> (String, PathBuf) {
    let repo = base.join(slug);
    let o = bin("runs", home).args(["register", "--slug", slug, "--repo-root"]).arg(&repo).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rs = repo.join("runstate");
    std::fs::write(
        rs.join(format!("{slug}.plan.json")),
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#,
    )
    .unwrap();
    if !journal.is_empty() {
        std::fs::write(rs.join(format!("{slug}.jsonl")), journal).unwrap();
    }
    (lines(&o.stdout)[0]["runId"].as_str().unwrap().to_string(), rs)
}

const LEASED: &str = concat!(
    r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"leased"}"#,
    "\n"
);

fn by_id<'a>(list: &'a [Value], id: &str) -> &'a Value {
    list.iter().find(|r| r["runId"] == id).unwrap_or_else(|| panic!("{id} not listed: {list:?}"))
}

#[test]
fn odd_files_never_hang_a_listing_and_nothing_is_read_outside_a_run() {
    let base = tmp("odd");
    let home = base.join("home");
    let fixture_log = root().join("fixtures/claude/bb-turn-tools.partial.jsonl");
    // A FIFO as a task log: opening it for reading would block.
    let (fifo, rs) = plain_run(&base, &home, "fifo", LEASED);
    nix::unistd::mkfifo(&rs.join("fifo.a.log"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // A log symlinked to /dev/zero: endless.
    let (zero, rs) = plain_run(&base, &home, "zero", LEASED);
    std::os::unix::fs::symlink("/dev/zero", rs.join("zero.a.log")).unwrap();
    // A log symlinked out of the run's directory, to a log with costs.
    let (out, rs) = plain_run(&base, &home, "out", LEASED);
    std::fs::copy(&fixture_log, base.join("elsewhere.log")).unwrap();
    std::os::unix::fs::symlink(base.join("elsewhere.log"), rs.join("out.a.log")).unwrap();
    // A log symlinked to a file inside the run's directory: read.
    let (inside, rs_in) = plain_run(&base, &home, "in", LEASED);
    std::fs::copy(&fixture_log, rs_in.join("real.log")).unwrap();
    std::os::unix::fs::symlink("real.log", rs_in.join("in.a.log")).unwrap();
    // A FIFO as the journal.
    let (jfifo, rs) = plain_run(&base, &home, "jfifo", "");
    std::fs::remove_file(rs.join("jfifo.jsonl")).unwrap();
    nix::unistd::mkfifo(&rs.join("jfifo.jsonl"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // A pointer whose slug climbs out of its runstate directory.
    let trav = "abcdef012345--trav";
    std::fs::create_dir_all(base.join("trav/runstate")).unwrap();
    std::fs::write(
        home.join(format!("runs/{trav}.json")),
        serde_json::json!({"runId": trav, "slug": "../../../../tmp/x", "repoRoot": base.join("trav"), "project": "p",
            "repo": "p", "branch": null, "worktree": base.join("trav"), "runstateDir": base.join("trav/runstate"),
            "created": "2026-01-01T00:00:00.000Z"})
        .to_string(),
    )
    .unwrap();
    // A pointer that is a FIFO.
    let pfifo = "abcdef012345--pfifo";
    nix::unistd::mkfifo(&home.join(format!("runs/{pfifo}.json")), nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap();

    let o = output_within(bin("runs", &home).arg("list"), Duration::from_secs(20));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = lines(&o.stdout);
    assert_eq!(list.len(), 7);
    for (id, needle) in [
        (&fifo, "fifo.a.log: a FIFO"),
        (&zero, "zero.a.log: "),
        (&out, "out.a.log: "),
        (&jfifo, "jfifo.jsonl: a FIFO"),
        (&trav.to_string(), "slug \"../../../../tmp/x\" is not a valid id"),
        (&pfifo.to_string(), "a FIFO"),
    ] {
        let r = by_id(&list, id);
        assert_eq!(r["status"], "unreadable", "{r}");
        assert!(r["reason"].as_str().unwrap().contains(needle), "{needle}: {r}");
        assert!(r["costUsd"].is_null(), "nothing outside is counted: {r}");
    }
    let r = by_id(&list, &inside);
    assert_eq!((r["status"].as_str(), r["reason"].as_str()), (Some("running"), None), "{r}");
    assert!(r["costUsd"].as_f64().unwrap() > 0.06, "a symlink inside the run's directory is followed: {r}");

    // The server gives the same, twice (no request parks on a lock or a read).
    let srv = serve(&home, &[]);
    for _ in 0..2 {
        let (code, body) = srv.get("/runs");
        assert_eq!(code, 200);
        let runs = body["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 7);
        assert_eq!(by_id(runs, &fifo)["status"], "unreadable");
    }
    // Views and streams refuse, with the reason, instead of reading.
    let o = output_within(bin("runs", &home).args(["show", &jfifo]), Duration::from_secs(20));
    assert_eq!(lines(&o.stdout)[0]["run"]["status"], "unreadable");
    let (code, body) = srv.get(&format!("/runs/{fifo}/tasks/a/stream"));
    assert_eq!(code, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("FIFO"), "{body}");
    assert_eq!(srv.get(&format!("/runs/{out}/tasks/a/stream")).0, 409);
    assert_eq!(srv.get(&format!("/runs/{zero}/tasks/a/stream")).0, 409);
    // A refused log is not named as a path to read (a script reading
    // `logfile` would block on the FIFO or follow the link out): null, and
    // the reason says why. Before, `logfile` named the refused path.
    for (id, needle) in [(&fifo, "FIFO"), (&out, "")] {
        let o = output_within(bin("runs", &home).args(["task", id, "a"]), Duration::from_secs(20));
        let t = &lines(&o.stdout)[0];
        assert!(t["logfile"].is_null() && t["reason"].as_str().is_some_and(|r| r.contains(needle)), "{t}");
        let (code, body) = srv.get(&format!("/runs/{id}/tasks/a"));
        assert!(code == 200 && body["logfile"].is_null() && body["reason"].is_string(), "{code} {body}");
    }
    // A liveness logfile naming a path outside the run's directory is refused, visibly.
    let o = bin("liveness", &home)
        .arg("--runstate")
        .arg(&rs_in)
        .args(["set", "in", "a", &serde_json::json!({"logfile": base.join("elsewhere.log")}).to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = output_within(bin("runs", &home).args(["task", &inside, "a"]), Duration::from_secs(20));
    let t = &lines(&o.stdout)[0];
    assert!(t["logfile"].is_null() && t["costUsd"].is_null(), "{t}");
    assert!(t["reason"].as_str().unwrap().contains("outside the run's directory"), "{t}");
    let (code, body) = srv.get(&format!("/runs/{inside}/tasks/a/stream"));
    assert_eq!(code, 409, "{body}");
}

#[test]
fn registration_creates_its_directory_and_listings_never_delete() {
    let base = tmp("register");
    let home = base.join("home");
    let repo = base.join("repo");
    let o = bin("runs", &home).args(["register", "--slug", "s", "--repo-root"]).arg(&repo).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = lines(&o.stdout)[0]["runId"].as_str().unwrap().to_string();
    assert!(repo.join("runstate").is_dir(), "register creates the runstate directory it points to");
    let status = || {
        let o = bin("runs", &home).arg("list").output().unwrap();
        by_id(&lines(&o.stdout), &id)["status"].as_str().unwrap().to_string()
    };
    assert_eq!(status(), "registered");
    // A directory gone for a while (moved worktree, unmounted disk): listed as missing, kept.
    std::fs::rename(repo.join("runstate"), base.join("moved")).unwrap();
    let srv = serve(&home, &[]);
    for _ in 0..3 {
        assert_eq!(status(), "missing");
        assert_eq!(by_id(srv.get("/runs").1["runs"].as_array().unwrap(), &id)["status"], "missing");
    }
    let (code, show) = srv.get(&format!("/runs/{id}"));
    assert_eq!((code, show["run"]["status"].as_str()), (200, Some("missing")));
    std::fs::rename(base.join("moved"), repo.join("runstate")).unwrap();
    assert_eq!(status(), "registered", "the pointer survived every listing");

    // A relative repo root is made absolute: readers run in other directories.
    let o = bin("runs", &home)
        .current_dir(&base)
        .args(["register", "--slug", "rel", "--repo-root", "here"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = &lines(&o.stdout)[0];
    assert_eq!(p["runstateDir"], base.join("here/runstate").display().to_string());
    assert!(base.join("here/runstate").is_dir());
    let o = bin("runs", &home).arg("list").output().unwrap();
    assert_eq!(by_id(&lines(&o.stdout), p["runId"].as_str().unwrap())["status"], "registered");
}

/// A retried `runs register` of a run id is idempotent with the same
/// runstate directory (its journal kept, nothing truncated), and never
/// re-points the id at another journal: refused (exit 2), naming the
/// registered journal, with nothing written; `--repoint` does it on purpose.
#[test]
fn registering_a_run_again_never_re_points_it_at_another_journal() {
    let base = tmp("register-again");
    let home = base.join("home");
    let repo = base.join("repo");
    let register = |extra: &[&str]| {
        bin("runs", &home).args(["register", "--slug", "s", "--repo-root"]).arg(&repo).args(extra).output().unwrap()
    };
    let first = register(&[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let p = &lines(&first.stdout)[0];
    let id = p["runId"].as_str().unwrap().to_string();
    let journal = repo.join("runstate/s.jsonl");
    std::fs::write(&journal, LEASED).unwrap();
    let pointer = home.join(format!("runs/{id}.json"));
    let link = home.join(format!("journals/{id}.jsonl"));
    let status = || by_id(&lines(&bin("runs", &home).arg("list").output().unwrap().stdout), &id)["status"].clone();
    let before = status();
    assert_ne!(before, "registered", "the journal's record is read");

    // The same runstate directory again: ok, the journal kept.
    let again = register(&[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(lines(&again.stdout)[0]["runstateDir"], p["runstateDir"]);
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), LEASED);
    assert_eq!(status(), before);

    // Another one: refused, nothing written.
    let other = base.join("elsewhere");
    let pointer_was = std::fs::read(&pointer).unwrap();
    let o = register(&["--runstate-dir", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("runs: ") && err.contains(&id) && err.contains(&journal.display().to_string()), "{err}");
    assert!(err.contains("--repoint"), "{err}");
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read(&pointer).unwrap(), pointer_was, "the pointer is as it was");
    assert!(!other.exists(), "no runstate directory made");
    assert_eq!(std::fs::read_to_string(&link).unwrap(), LEASED, "the journal link is the run's journal still");
    assert_eq!(status(), before);

    // On purpose: re-pointed, the old journal left where it is.
    let o = register(&["--runstate-dir", other.to_str().unwrap(), "--repoint"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&o.stdout)[0]["runstateDir"], other.display().to_string());
    assert_eq!(status(), "registered");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), LEASED);
}

#[test]
fn an_open_input_request_shows_as_needs_input() {
    let base = tmp("needs");
    let home = base.join("home");
    let rec = |extra: &str| {
        format!(r#"{{"v":"runstate/v1","ts":"2026-01-01T00:01:00.000Z","actor":"claude-session","task":"a",{extra}}}"#)
            + "\n"
    };
    let asked =
        rec(r#""input":"requested","request":"r1","kind":"tool_approval","tool":"Bash","detail":"rm -rf build""#);
    let (id, rs) = plain_run(&base, &home, "ask", &(LEASED.to_string() + &asked));
    let journal = rs.join("ask.jsonl");
    let srv = serve(&home, &[]);
    let check = |want: &str, waiting: bool, state: &str| {
        let o = bin("runs", &home).arg("list").output().unwrap();
        let r = by_id(&lines(&o.stdout), &id).clone();
        assert_eq!(r["status"], want, "{r}");
        assert_eq!(r["needsInput"], u64::from(waiting));
        assert_eq!(by_id(srv.get("/runs").1["runs"].as_array().unwrap(), &id), &r);
        let show = &lines(&bin("runs", &home).args(["show", &id]).output().unwrap().stdout)[0];
        assert_eq!(show["run"]["status"], want);
        assert_eq!(show["tasks"]["a"]["needsInput"], waiting);
        assert_eq!(show["tasks"]["a"]["state"], state, "an input record is not a task state");
        show["inputRequests"].clone()
    };
    let reqs = check("needs_input", true, "leased");
    assert_eq!(reqs[0]["request"], "r1");
    assert_eq!(reqs[0]["tool"], "Bash");
    let t = &lines(&bin("runs", &home).args(["task", &id, "a"]).output().unwrap().stdout)[0];
    assert_eq!(
        (t["needsInput"].as_bool(), t["inputRequests"][0]["kind"].as_str()),
        (Some(true), Some("tool_approval"))
    );
    // The answer for another request id closes nothing.
    let append = |line: String| {
        std::fs::OpenOptions::new().append(true).open(&journal).unwrap().write_all(line.as_bytes()).unwrap()
    };
    append(rec(r#""input":"answered","request":"r0","decision":"allow""#));
    check("needs_input", true, "leased");
    append(rec(r#""input":"answered","request":"r1","decision":"allow","by":"ana""#));
    assert_eq!(check("running", false, "leased"), serde_json::json!([]));
    // Asked again, then the task ends: a finished task waits for no one.
    append(rec(r#""input":"requested","request":"r2","kind":"question""#));
    check("needs_input", true, "leased");
    append(rec(r#""state":"committed""#));
    check("done", false, "committed");
    // The status filter uses it.
    let o = bin("runs", &home).args(["list", "--status", "needs_input"]).output().unwrap();
    assert!(lines(&o.stdout).is_empty());
}

#[test]
fn pages_and_filters_walk_every_run_once_newest_activity_first() {
    let base = tmp("pages");
    let home = base.join("home");
    let done = concat!(
        r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"committed"}"#,
        "\n"
    );
    // 7 runs in two repos; activity (the journal's mtime) decides the order, not the id.
    let mut runs = Vec::new();
    for i in 0..7u64 {
        let (repo, slug) = (if i % 3 == 0 { "beta" } else { "alpha" }, format!("s{}", (i * 5) % 7));
        let root = base.join(format!("r{i}"));
        let o = bin("runs", &home)
            .args(["register", "--slug", &slug, "--repo", repo, "--repo-root"])
            .arg(&root)
            .output()
            .unwrap();
        assert!(o.status.success());
        let id = lines(&o.stdout)[0]["runId"].as_str().unwrap().to_string();
        let rs = root.join("runstate");
        std::fs::write(
            rs.join(format!("{slug}.plan.json")),
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#,
        )
        .unwrap();
        let journal = rs.join(format!("{slug}.jsonl"));
        std::fs::write(&journal, if i % 2 == 0 { done } else { LEASED }).unwrap();
        let at = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
        // Activity order differs from id order and from registration order.
        let t = 1_700_000_000 + ((i * 3) % 7) * 100;
        std::fs::File::options().append(true).open(&journal).unwrap().set_modified(at(t)).unwrap();
        std::fs::File::options()
            .append(true)
            .open(home.join(format!("runs/{id}.json")))
            .unwrap()
            .set_modified(at(1_600_000_000))
            .unwrap();
        runs.push((t, id, repo, if i % 2 == 0 { "done" } else { "running" }));
    }
    runs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let srv = serve(&home, &[]);
    let cli_page = |args: &[&str]| -> Value {
        let o = bin("runs", &home).args(["list", "--page"]).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        lines(&o.stdout).remove(0)
    };
    // Walks every page of a query over HTTP and with `runs list --page`, which must agree page by page.
    let walk = |query: &str, args: &[&str]| -> (Vec<String>, u64) {
        let (mut ids, mut cursor, mut total) = (Vec::new(), None::<String>, None);
        loop {
            let mut path = format!("/runs?limit=2{query}");
            let mut cli: Vec<&str> = vec!["--limit", "2"];
            cli.extend_from_slice(args);
            if let Some(c) = &cursor {
                path += &format!("&cursor={c}");
                cli.extend_from_slice(&["--cursor", c]);
            }
            let (code, page) = srv.get(&path);
            assert_eq!(code, 200, "{path}: {page}");
            let mut from_cli = cli_page(&cli);
            let strip = |v: &mut Value| {
                v["runs"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .for_each(|r| drop(r.as_object_mut().unwrap().remove("activityMs")))
            };
            let mut from_srv = page.clone();
            strip(&mut from_cli);
            strip(&mut from_srv);
            assert_eq!(from_srv, from_cli, "{path}");
            let n = page["total"].as_u64().unwrap();
            assert_eq!(*total.get_or_insert(n), n, "the total is the same on every page");
            let got = page["runs"].as_array().unwrap();
            assert!(got.len() <= 2);
            ids.extend(got.iter().map(|r| r["runId"].as_str().unwrap().to_string()));
            match page["next"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return (ids, total.unwrap()),
            }
        }
    };
    type Row<'a> = (u64, String, &'a str, &'a str);
    let want =
        |f: &dyn Fn(&Row) -> bool| -> Vec<String> { runs.iter().filter(|r| f(r)).map(|r| r.1.clone()).collect() };
    assert_eq!(walk("", &[]), (want(&|_| true), 7));
    assert_eq!(walk("&status=done", &["--status", "done"]), (want(&|r| r.3 == "done"), 4));
    assert_eq!(walk("&repo=beta", &["--repo", "beta"]), (want(&|r| r.2 == "beta"), 3));
    assert_eq!(
        walk("&repo=alpha&status=running,needs_input", &["--repo", "alpha", "--status", "running,needs_input"]),
        (want(&|r| r.2 == "alpha" && r.3 == "running"), 2)
    );
    // No limit: everything, in the same order, as before plus total and next.
    let (_, all) = srv.get("/runs");
    assert_eq!(all["total"], 7);
    assert!(all["next"].is_null());
    let order: Vec<&str> = all["runs"].as_array().unwrap().iter().map(|r| r["runId"].as_str().unwrap()).collect();
    assert_eq!(order, want(&|_| true));
    assert_eq!(all["runs"][0]["activityMs"], runs[0].0 * 1000);
    // The filtered pages before kept only the status of the runs they did not show: the
    // full listing after them is whole, the same as a new reader's.
    let fresh = bin("runs", &home).arg("list").output().unwrap();
    assert_eq!(all["runs"].as_array().unwrap(), &lines(&fresh.stdout));
    // Bad queries are refused, over HTTP and on the command line.
    for q in ["limit=0", "limit=x", "limit=10001", "status=bogus", "status=", "cursor=nope", "repo="] {
        let (code, body) = srv.get(&format!("/runs?{q}"));
        assert_eq!(code, 400, "{q}: {body}");
    }
    let o = bin("runs", &home).args(["list", "--status", "runing"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs_input"), "the error lists the statuses");
}

/// Polls `/healthz` until it answers 200 (not the 503 of a full server); how long that took.
fn wait_for_a_free_slot(port: u16, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let _ = write!(s, "GET /healthz HTTP/1.0\r\n\r\n");
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        if raw.starts_with(b"HTTP/1.1 200 ") {
            return t.elapsed();
        }
        assert!(t.elapsed() < limit, "the slot is still held after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_task_stream_client_that_reads_nothing_is_dropped_while_the_task_is_live() {
    for format in ["", "?format=agui"] {
        let (home, id, log) = live_run(&format!("stall{}", format.len()));
        // One slot: while the silent client holds it, every other request gets 503.
        let srv = serve_with(
            &home,
            &[("RUNWIRE_WRITE_TIMEOUT_MS", "1000"), ("RUNWIRE_STREAM_BUFFER", "65536")],
            &["--max-connections", "1"],
        );
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The task stays live (no exit) and keeps writing: far more than the socket buffers hold.
        let writer = {
            let (log, stop) = (log.clone(), stop.clone());
            let lines: Vec<String> = source_lines(20).into_iter().filter(|l| !l.contains("runwire.status")).collect();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
                let t = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && t.elapsed() < Duration::from_secs(20) {
                    for l in &lines {
                        writeln!(f, "{l}").unwrap();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        write!(s, "GET /runs/{id}/tasks/t/stream{format} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // Never read: the server must let this client go about a second after it stopped taking bytes.
        let took = wait_for_a_free_slot(srv.port, Duration::from_secs(10));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        assert!(took >= Duration::from_millis(500), "{format}: dropped before the write timeout: {took:?}");
        drop(s);
        drop(srv);
        // The writer grows the log by hundreds of MB: leave nothing behind.
        let _ = std::fs::remove_dir_all(home.parent().unwrap());
    }
}

#[test]
fn a_line_over_the_cap_becomes_one_error_event_and_the_stream_goes_on() {
    let (home, id, log) = live_run("too-long");
    let srv = serve(&home, &[]);
    let src = source_lines(1);
    let (before, after) = src.split_at(5);
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    for l in before {
        writeln!(f, "{l}").unwrap();
    }
    // 20 MB in one line, over the 8 MiB cap, written in pieces as an agent would.
    let size = 20 * 1024 * 1024;
    f.write_all(b"{\"type\":\"assistant\",\"x\":\"").unwrap();
    let piece = vec![b'a'; 1024 * 1024];
    for _ in 0..20 {
        f.write_all(&piece).unwrap();
    }
    f.write_all(b"\"}\n").unwrap();
    for l in after {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(s, "GET /runs/{id}/tasks/t/stream HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let datas: Vec<Value> = support::sse::events(body);
    let too_long: Vec<&Value> = datas.iter().filter(|e| e["data"]["code"] == "line_too_long").collect();
    assert_eq!(too_long.len(), 1, "one error event for the long line");
    let line_size = (size + "{\"type\":\"assistant\",\"x\":\"\"}".len()).to_string();
    assert!(too_long[0]["data"]["reason"].as_str().unwrap().contains(&line_size), "{}", too_long[0]);
    assert_eq!(too_long[0]["seq"], 6, "it keeps its line number");
    assert!(body.len() < 1024 * 1024, "the line's bytes are not sent: {} bytes", body.len());
    // The stream went on to the end.
    assert_eq!(datas.last().unwrap()["type"], "exit");
    let seqs: Vec<String> = datas.iter().map(|e| e["seq"].to_string().trim_matches('"').to_string()).collect();
    assert_eq!(seqs.len(), expected_seqs(&std::fs::read(&log).unwrap()).len());
}

/// The names of files opened in `dir` since the last call (inotify
/// `IN_OPEN`: an honest count of what a listing read there; `stat` opens nothing).
fn opened(ino: &nix::sys::inotify::Inotify) -> Vec<String> {
    let mut names = Vec::new();
    while let Ok(evs) = ino.read_events() {
        if evs.is_empty() {
            break;
        }
        names.extend(evs.into_iter().filter_map(|e| e.name).map(|n| n.to_string_lossy().into_owned()));
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn a_first_page_reads_the_index_and_checks_only_the_runs_it_shows() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let base = tmp("first-page");
    let home = base.join("home");
    let at = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
    let touch = |p: &Path, s: u64| std::fs::File::options().append(true).open(p).unwrap().set_modified(at(s)).unwrap();
    // Five runs; run i's journal was last written at T + 100 i, every pointer long before.
    let mut runs = Vec::new();
    let ino = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    for i in 0..5u64 {
        let slug = format!("l{i}");
        let (id, rs) = plain_run(&base, &home, &slug, LEASED);
        touch(&rs.join(format!("{slug}.jsonl")), 1_700_000_000 + 100 * i);
        touch(&home.join(format!("runs/{id}.json")), 1_600_000_000);
        ino.add_watch(&rs, AddWatchFlags::IN_OPEN).unwrap();
        runs.push((id, rs, slug));
    }
    ino.add_watch(&home.join("runs"), AddWatchFlags::IN_OPEN).unwrap();
    let newest: Vec<String> = vec![runs[4].0.clone(), runs[3].0.clone()];
    let page = |args: &[&str]| -> Value {
        let o = bin("runs", &home).args(["list", "--page"]).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        lines(&o.stdout).remove(0)
    };
    let ids = |p: &Value| -> Vec<String> {
        p["runs"].as_array().unwrap().iter().map(|r| r["runId"].as_str().unwrap().to_string()).collect()
    };
    // Written behind the index's back (the plans, the journals, their times): each run
    // shown is checked and read, so the first page is right before any reindex.
    let first = page(&["--limit", "2"]);
    assert_eq!((ids(&first), first["total"].as_u64()), (newest.clone(), Some(5)));
    assert_eq!(first["runs"][0]["activityMs"], (1_700_000_000u64 + 400) * 1000);
    let all = page(&[]);

    // Once the index knows them (rows made 2 s after the last change), a first page
    // opens no pointer and no file of any run: the index, and a `stat` of the two journals shown.
    std::thread::sleep(Duration::from_millis(2100));
    let o = bin("runs", &home).arg("reindex").output().unwrap();
    assert!(o.status.success());
    let _ = opened(&ino);
    assert_eq!(page(&["--limit", "2"]), first);
    assert_eq!(opened(&ino), Vec::<String>::new());
    assert_eq!(page(&[]), all);
    assert_eq!(opened(&ino), Vec::<String>::new());

    // Without the index every run is read (and the index rebuilt for the next listing).
    std::fs::remove_file(home.join("index/runs.jsonl")).unwrap();
    assert_eq!(page(&["--limit", "2"]), first);
    let pointers = opened(&ino).into_iter().filter(|n| n.ends_with(".json") && !n.ends_with(".plan.json")).count();
    assert_eq!(pointers, 5, "every pointer is read");
    assert_eq!(page(&["--limit", "2"]), first);
    assert_eq!(opened(&ino), Vec::<String>::new());

    // `runs reap` removes a reaped run's pointer (and its journal link).
    std::fs::remove_dir_all(&runs[2].1).unwrap();
    let o = bin("runs", &home).arg("reap").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&o.stdout)[0]["runId"], runs[2].0);
    assert!(!home.join(format!("runs/{}.json", runs[2].0)).exists());
    assert!(std::fs::symlink_metadata(home.join(format!("journals/{}.jsonl", runs[2].0))).is_err());
    assert_eq!(page(&[])["total"], 4);
    let _ = std::fs::remove_dir_all(&base);
}

/// Sets a file's modification time `secs` seconds back.
fn age_file(path: &Path, secs: u64) {
    let f = std::fs::File::options().append(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(secs)).unwrap();
}

const COMMITTED: &str = concat!(
    r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"committed","rc":0}"#,
    "\n"
);

/// issue 24, case 7: `journals/` replaced by a symlink to a directory
/// outside the home: `runs reap` and `runs rm` delete nothing there.
#[test]
fn reap_and_rm_never_delete_through_a_symlinked_journals_dir() {
    let base = tmp("reap-symlink");
    let home = base.join("home");
    let (gone, gone_rs) = plain_run(&base, &home, "gone", COMMITTED);
    let (done, _) = plain_run(&base, &home, "done", COMMITTED);
    std::fs::remove_dir_all(&gone_rs).unwrap();
    // The links move out (as someone's files would be there), and journals/ points at them.
    let outside = base.join("outside");
    std::fs::rename(home.join("journals"), &outside).unwrap();
    std::fs::write(outside.join("precious.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(&outside, home.join("journals")).unwrap();
    let before = |n: &str| outside.join(format!("{n}.jsonl")).exists();
    assert!(before(&gone) && before(&done));

    let o = bin("runs", &home).arg("reap").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&o.stdout)[0]["runId"], gone);
    assert!(!home.join(format!("runs/{gone}.json")).exists(), "the pointer is reaped");
    assert!(outside.join(format!("{gone}.jsonl")).exists(), "nothing deleted through the symlink");
    assert!(String::from_utf8_lossy(&o.stderr).contains("journal link left"), "{}", String::from_utf8_lossy(&o.stderr));

    let o = bin("runs", &home).args(["rm", &done]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!home.join(format!("runs/{done}.json")).exists());
    assert!(outside.join(format!("{done}.jsonl")).exists(), "nothing deleted through the symlink");
    assert_eq!(std::fs::read_to_string(outside.join("precious.txt")).unwrap(), "keep me");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn rm_and_prune_remove_finished_and_idle_runs_never_live_ones() {
    let base = tmp("rm-prune");
    let home = base.join("home");
    let (done, done_rs) = plain_run(&base, &home, "done", COMMITTED);
    let (running, _) = plain_run(&base, &home, "busy", LEASED);
    let (held, held_rs) = plain_run(&base, &home, "held", COMMITTED);
    // A finished run whose task's process is still alive (this test's own).
    let o = bin("liveness", &home)
        .arg("--runstate")
        .arg(&held_rs)
        .args(["set", "held", "a", &format!(r#"{{"pid":{}}}"#, std::process::id())])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A chat run recorded by the server, in $HARNESS_HOME/serve.
    let rec = runwire::runs::record::Recorder::start(&home, "run-5eed", "claude", "hi", "d").unwrap();
    let chat = rec.run_id.clone();
    drop(rec);
    // The feed exists (someone watched): removals go into it.
    let o = bin("runs", &home).args(["watch", "--no-follow"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pointer = |id: &str| home.join(format!("runs/{id}.json")).exists();

    // A finished run whose log a process holds open (a server still writing it, a viewer).
    let (open, open_rs) = plain_run(&base, &home, "open", COMMITTED);
    std::fs::write(open_rs.join("open.a.log"), "").unwrap();
    let mut holder = Command::new("sleep")
        .arg("60")
        .stdin(std::fs::File::open(open_rs.join("open.a.log")).unwrap())
        .spawn()
        .unwrap();
    let srv = serve(&home, &[]);
    assert_eq!(srv.get(&format!("/runs/{done}")).0, 200);

    // rm by slug: the finished run goes, its repository's files stay.
    let o = bin("runs", &home).args(["rm", "done", "busy", "held", "open"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "three runs were not removed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("rm {running}: not removed: it is running")), "{err}");
    assert!(err.contains(&format!("rm {held}: not removed: task a's process")), "{err}");
    assert!(err.contains(&format!("rm {open}: not removed: process {} has open.a.log open", holder.id())), "{err}");
    let out = lines(&o.stdout);
    assert_eq!((out.len(), out[0]["runId"].as_str()), (1, Some(done.as_str())));
    assert!(!pointer(&done) && pointer(&running) && pointer(&held) && pointer(&open));
    assert!(done_rs.join("done.jsonl").exists(), "a repository's runstate is its owner's");
    // The server's listing and views forget it at once.
    assert_eq!(srv.get(&format!("/runs/{done}")).0, 404);
    let (_, all) = srv.get("/runs");
    assert!(all["runs"].as_array().unwrap().iter().all(|r| r["runId"] != done.as_str()), "{all}");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let o = bin("runs", &home).args(["rm", &open]).output().unwrap();
    assert!(o.status.success(), "once nothing holds it: {}", String::from_utf8_lossy(&o.stderr));

    // prune: a dry run removes nothing; then only what is idle long enough, never the live.
    let serve_rs = home.join("serve/runstate");
    let chat_files: Vec<PathBuf> = std::fs::read_dir(&serve_rs).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(chat_files.len() >= 3, "{chat_files:?}");
    for f in &chat_files {
        age_file(f, 3 * 86_400);
    }
    age_file(&home.join(format!("runs/{chat}.json")), 3 * 86_400);
    let o = bin("runs", &home).args(["prune", "--older-than", "2d", "--dry-run"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&o.stdout).iter().map(|l| l["runId"].clone()).collect::<Vec<_>>(), [chat.as_str()]);
    assert!(pointer(&chat) && chat_files.iter().all(|f| f.exists()));
    let o = bin("runs", &home).args(["prune", "--older-than", "2d"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!pointer(&chat) && pointer(&running) && pointer(&held));
    assert!(chat_files.iter().all(|f| !f.exists()), "the server's own files go with its run");
    // A `running` run idle for days is taken for dead; one with a live process never is.
    for f in ["busy/runstate/busy.jsonl", "held/runstate/held.jsonl"] {
        age_file(&base.join(f), 3 * 86_400);
    }
    for id in [&running, &held] {
        age_file(&home.join(format!("runs/{id}.json")), 3 * 86_400);
    }
    let o = bin("runs", &home).args(["prune", "--older-than", "1d"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(!pointer(&running) && pointer(&held));

    // Names that are not runs, durations that are not durations.
    let o = bin("runs", &home).args(["rm", "nosuch"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("rm: no run \"nosuch\""));
    for bad in ["3x", "d", ""] {
        assert_eq!(bin("runs", &home).args(["prune", "--older-than", bad]).output().unwrap().status.code(), Some(2));
    }

    // Each removal is a `removed` event in the feed.
    let o = bin("runs", &home).args(["watch", "--since", "0", "--no-follow", "--type", "removed"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ev = lines(&o.stdout);
    let got: Vec<_> = ev.iter().map(|e| (e["runId"].as_str().unwrap(), e["status"].as_str().unwrap())).collect();
    let want =
        [(done.as_str(), "done"), (open.as_str(), "done"), (chat.as_str(), "running"), (running.as_str(), "running")];
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_table_is_for_people_and_show_finds_runs_by_slug_or_prefix() {
    let base = tmp("table");
    let home = base.join("home");
    let (feat, rs) = plain_run(&base, &home, "feat", COMMITTED);
    let (feature, _) = plain_run(&base, &home, "feature-x", LEASED);
    std::fs::copy(root().join("fixtures/claude/bb-turn-tools.partial.jsonl"), rs.join("feat.a.log")).unwrap();
    let rec = runwire::runs::record::Recorder::start(&home, "run-c4a7", "claude", "hi", "d").unwrap();
    drop(rec);
    // Piped, JSON lines as before: every run, the cost unrounded.
    let o = bin("runs", &home).arg("list").output().unwrap();
    let json = lines(&o.stdout);
    assert_eq!(json.len(), 3);
    let cost = by_id(&json, &feat)["costUsd"].as_f64().unwrap();
    assert!(cost > 0.0);

    let o = bin("runs", &home).args(["list", "--table"]).env("TZ", "UTC").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    let rows: Vec<&str> = t.lines().collect();
    assert!(rows[0].starts_with("RUN ") && rows[0].contains("COST") && rows[0].contains("LAST ACTIVE"), "{t}");
    let row = rows.iter().find(|r| r.starts_with("feat ")).unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains(&format!("${cost:.2}")) && row.contains("done") && row.contains("1/1"), "{row}");
    assert!(row.contains(&feat) && (row.contains(" 0s ") || row.contains(" 1s ")), "{row}");
    assert!(!t.contains("agui-run-c4a7") && t.contains("(1 chat run not shown: runs list --all)"), "{t}");
    let o = bin("runs", &home).args(["list", "--table", "--all"]).output().unwrap();
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(t.lines().any(|r| r.starts_with("agui-run-c4a7") && r.contains(" chat ")), "{t}");

    // On a real terminal (a pty, through script(1)), `runs` alone is the table.
    let o = Command::new("script")
        .args(["-qec", env!("CARGO_BIN_EXE_runs"), "/dev/null"])
        .env("HARNESS_HOME", &home)
        .stdin(Stdio::null())
        .output()
        .expect("script(1), util-linux");
    let t = String::from_utf8_lossy(&o.stdout).replace('\r', "");
    assert!(t.starts_with("RUN ") && t.contains("\nfeat ") && !t.contains('{'), "{t}");

    // show by slug, by prefix; hints when ambiguous or unknown.
    let show = |q: &str| bin("runs", &home).args(["show", q]).output().unwrap();
    for q in ["feat", &feat[..16], feat.as_str()] {
        let o = show(q);
        assert!(o.status.success(), "{q}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(lines(&o.stdout)[0]["run"]["runId"], feat);
    }
    let o = show("fea");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 runs match \"fea\"") && err.contains(&feat) && err.contains(&feature), "{err}");
    let o = show("fet");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("no run \"fet\"; did you mean {feat}?")));
    assert_eq!(show("a/b").status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&base);
}

/// Registrations of one slug in one runstate directory started at the same
/// moment (from different repo roots: different runs) are one at a time:
/// exactly one is registered, every other is refused as any later one is
/// (exit 2, naming the run that owns the slug) with nothing written.
/// Several rounds, each on a fresh runstate directory, to make the race likely.
#[test]
fn concurrent_registrations_of_one_slug_in_one_runstate_directory_let_one_win() {
    let base = tmp("regrace");
    let home = base.join("home");
    const N: usize = 8;
    for round in 0..3 {
        let rs = base.join(format!("shared{round}"));
        let kids: Vec<Child> = (0..N)
            .map(|i| {
                bin("runs", &home)
                    .args(["register", "--slug", "same", "--repo-root"])
                    .arg(base.join(format!("r{round}-{i}")))
                    .arg("--runstate-dir")
                    .arg(&rs)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = kids.into_iter().map(|k| k.wait_with_output().unwrap()).collect();
        let won: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one registration wins: {outs:?}");
        let owner = lines(&won[0].stdout)[0]["runId"].as_str().unwrap().to_string();
        for o in outs.iter().filter(|o| !o.status.success()) {
            assert_eq!(o.status.code(), Some(2), "round {round}: {o:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("already owned by run") && err.contains(&owner), "round {round}: {err}");
            assert!(o.stdout.is_empty());
        }
        let mine: Vec<String> = std::fs::read_dir(home.join("runs"))
            .unwrap()
            .flatten()
            .filter(|e| {
                let p: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
                p["runstateDir"].as_str() == rs.to_str()
            })
            .map(|e| e.file_name().to_string_lossy().trim_end_matches(".json").to_string())
            .collect();
        assert_eq!(mine, [owner.as_str()], "round {round}: one pointer");
        // Only the winner's journal link names the journal.
        let links = std::fs::read_dir(home.join("journals")).unwrap().flatten().count();
        assert_eq!(links, round + 1, "round {round}: one journal link a round");
    }
}

/// `runs register` creates the run's journal; one it cannot create (its
/// runstate directory not writable by the caller) fails the registration
/// (exit 3, naming the journal) rather than registering the run with a
/// dangling journal link, which every later reader tripped on. As root
/// (CI), the registration runs as `nobody`, for whom the mode holds.
#[test]
fn a_journal_that_cannot_be_created_fails_the_registration() {
    use std::os::unix::fs::PermissionsExt;
    let base = tmp("nojournal");
    let (home, rs) = (base.join("home"), base.join("rs"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&rs).unwrap();
    std::fs::set_permissions(&rs, std::fs::Permissions::from_mode(0o555)).unwrap();
    let runs = env!("CARGO_BIN_EXE_runs");
    let mut c = if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(&home, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", runs]);
        c
    } else {
        Command::new(runs)
    };
    let out = c
        .env("HARNESS_HOME", &home)
        .args(["register", "--slug", "p", "--repo-root"])
        .arg(&base)
        .arg("--runstate-dir")
        .arg(&rs)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.starts_with("runs: ") && err.contains(&format!("{}: ", rs.join("p.jsonl").display())), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    let left = |d: &str| std::fs::read_dir(home.join(d)).map(|r| r.flatten().count()).unwrap_or(0);
    assert_eq!((left("runs"), left("journals")), (0, 0), "no pointer, no link");
    std::fs::set_permissions(&rs, std::fs::Permissions::from_mode(0o755)).unwrap();
}
