//! The run store after restarts and crashes, through the real binaries
//! (issue 35, defects 1-5): a recorded runId is replayed or refused, never
//! recorded again, by a server started again on the same home; a run a
//! SIGKILLed server left waiting for an answer is journaled failed, with
//! why, by the next server, and can be removed; registration refuses a
//! slug another run owns and `runs rm` removes only a run's own files; a
//! filter never misses a run whose files have the status, also after the
//! run index could not be written (a full disk, a real tmpfs).

use crate::support;
use support::Server;

use serde_json::Value;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runwire-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// runwire-serve on `home` with `args` (its recorded runs replay the demo
/// log at once unless `--demo`).
fn serve(home: &Path, args: &[&str]) -> Server {
    let mut cmd = Server::command();
    cmd.args(args).env("HARNESS_HOME", home).env("RUNWIRE_REPLAY_DELAY_MS", "0").env_remove("SOURCE_DATE_EPOCH");
    Server::spawn(cmd)
}

fn runs(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runs"))
        .args(args)
        .env("HARNESS_HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("runs runs")
}

fn body(thread: &str, run: &str, prompt: &str) -> String {
    serde_json::json!({"threadId": thread, "runId": run, "messages": [{"id": "m1", "role": "user", "content": prompt}]})
        .to_string()
}

/// One POST /agui: its status and its whole body.
fn post(s: &Server, b: &str) -> (u16, String) {
    let mut c = s.send("POST", "/agui", "Content-Type: application/json\r\n", b);
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let r = support::server::Response::parse(&raw);
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

/// The AG-UI events of an SSE body, without their timestamps.
fn events(sse: &str) -> Vec<Value> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("timestamp");
            }
            v
        })
        .collect()
}

fn server_run_id(home: &Path, slug: &str) -> String {
    let root = home.join("serve").display().to_string();
    runwire::runs::registry::run_id(&root, &root, slug)
}

fn item(s: &Server, id: &str) -> Value {
    let (st, v) = s.get("/runs");
    assert_eq!(st, 200, "{v}");
    v["runs"].as_array().unwrap().iter().find(|r| r["runId"] == id).cloned().unwrap_or(Value::Null)
}

fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Batch runs: a runId posted again after a restart is the same run: the
/// same request gets its stream again from its record (the agent not run,
/// the journal untouched), another request is refused 409; within one
/// server's life the same, also once the server has forgotten the run.
#[test]
fn a_batch_run_id_is_replayed_or_refused_across_a_restart_never_recorded_again() {
    let home = scratch("batch");
    let id = server_run_id(&home, "agui-r1");
    let journal = home.join("serve/runstate/agui-r1.jsonl");
    let mut s = serve(&home, &[]);
    let (st, first) = post(&s, &body("t1", "r1", "hello"));
    assert_eq!(st, 200, "{first}");
    assert!(first.contains("RUN_FINISHED"), "{first}");
    let recorded = std::fs::read(&journal).unwrap();
    let log = std::fs::read(home.join("serve/runstate/agui-r1.agent.log")).unwrap();
    // Within the server's life: another request with the runId is refused.
    let (st, e) = post(&s, &body("t1", "r1", "another prompt"));
    assert_eq!(st, 409, "{e}");
    assert_eq!(s.terminate(Duration::from_secs(10)).1, Some(0));

    let s = serve(&home, &[]);
    let (st, again) = post(&s, &body("t1", "r1", "hello"));
    assert_eq!(st, 200, "{again}");
    assert_eq!(events(&again), events(&first), "the same request after a restart: the recorded run's stream");
    let (st, e) = post(&s, &body("t1", "r1", "another prompt"));
    assert_eq!(st, 409, "{e}");
    assert!(e.contains("already recorded") && e.contains(&id), "names the recorded run: {e}");
    // Nothing was recorded again: the journal and the log are as they were.
    assert_eq!(std::fs::read(&journal).unwrap(), recorded, "the journal is untouched");
    assert_eq!(std::fs::read(home.join("serve/runstate/agui-r1.agent.log")).unwrap(), log);
    assert_eq!(item(&s, &id)["status"], "done");
    // A new runId is a new run.
    let (st, other) = post(&s, &body("t1", "r2", "another prompt"));
    assert_eq!(st, 200, "{other}");
    assert!(home.join("serve/runstate/agui-r2.jsonl").is_file());
    let _ = std::fs::remove_dir_all(&home);
}

/// Within one server's life, the same request for a run still streaming
/// gets the run from its record: its log so far, then its new lines, to
/// its end: the same events the first client gets.
#[test]
fn the_same_request_for_a_live_run_follows_it_from_its_log() {
    let home = scratch("follow");
    let mut cmd = Server::command();
    cmd.env("HARNESS_HOME", &home).env("RUNWIRE_REPLAY_DELAY_MS", "40").env_remove("SOURCE_DATE_EPOCH");
    let s = Server::spawn(cmd);
    let req = body("t", "live", "hello");
    let first = std::thread::scope(|sc| {
        let a = sc.spawn(|| post(&s, &req));
        // The run is recorded and streaming.
        let log = home.join("serve/runstate/agui-live.agent.log");
        until("the run's first lines", Duration::from_secs(10), || std::fs::metadata(&log).is_ok_and(|m| m.len() > 0));
        let (st, second) = post(&s, &req);
        assert_eq!(st, 200, "{second}");
        let (st, first) = a.join().unwrap();
        assert_eq!(st, 200);
        assert_eq!(events(&second), events(&first), "the follower gets the run's events");
        first
    });
    assert!(first.contains("RUN_FINISHED"));
    // A name from outside never becomes a path: a runId that is not an id
    // is recorded under a digest of it, inside the server's directory.
    let (st, _) = post(&s, &body("t2", "../../escape", "hello"));
    assert_eq!(st, 200);
    let names: Vec<String> = std::fs::read_dir(home.join("serve/runstate"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.len() == "agui-".len() + 16 + ".jsonl".len() && n.ends_with(".jsonl")), "{names:?}");
    assert!(!home.join("escape.jsonl").exists() && !home.join("serve/escape.jsonl").exists());
    drop(s);
    let _ = std::fs::remove_dir_all(&home);
}

/// Two servers on one home (one a person's agent each, sharing their
/// `~/.harness`) asked for the same runId at the same moment, 20 times: the
/// run is recorded once (one `started`, one `finished`: the agent ran
/// once, its log never truncated by a second claimer), and each client
/// gets the run's stream, its replay once it ended, or 409 while the other
/// server records it: never a `RUN_ERROR` for a run that finished there.
#[test]
fn two_servers_on_one_home_record_a_run_id_once() {
    let home = scratch("two-servers");
    let a = serve(&home, &[]);
    let b = serve(&home, &[]);
    let (mut refused, mut replayed) = (0, 0);
    for i in 0..20 {
        let req = body(&format!("t{i}"), &format!("r{i}"), "hi");
        let both = std::sync::Barrier::new(2);
        let answers = std::thread::scope(|sc| {
            let (req, both) = (&req, &both);
            let posts = [&a, &b].map(|server| {
                sc.spawn(move || {
                    both.wait();
                    post(server, req)
                })
            });
            posts.map(|p| p.join().unwrap())
        });
        let journal = std::fs::read_to_string(home.join(format!("serve/runstate/agui-r{i}.jsonl"))).unwrap();
        assert_eq!(journal.matches(r#""run":"started""#).count(), 1, "r{i} recorded once:\n{journal}");
        assert_eq!(journal.matches(r#""run":"finished""#).count(), 1, "r{i} ended once:\n{journal}");
        assert!(journal.contains(r#""state":"committed""#), "r{i}:\n{journal}");
        let mut streams = Vec::new();
        for (st, text) in &answers {
            match st {
                200 => {
                    let ev = events(text);
                    assert!(!text.contains("RUN_ERROR"), "r{i}: a RUN_ERROR for a run that finished:\n{text}");
                    assert_eq!(ev.last().map(|e| e["type"].clone()), Some("RUN_FINISHED".into()), "r{i}:\n{text}");
                    streams.push(ev);
                }
                409 => {
                    assert!(text.contains("being recorded by another"), "r{i}: {text}");
                    refused += 1;
                }
                _ => panic!("r{i}: {st} {text}"),
            }
        }
        assert!(!streams.is_empty(), "r{i}: one client gets the run: {answers:?}");
        if streams.len() == 2 {
            assert_eq!(streams[0], streams[1], "r{i}: the replay is the run's stream");
            replayed += 1;
        }
    }
    eprintln!("{refused} refused while recorded at the other server, {replayed} replayed once ended");
    // Every run ended: no owner record is left behind.
    let owners = std::fs::read_dir(home.join("sock")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(owners, 0, "owner records left");
    drop((a, b));
    let _ = std::fs::remove_dir_all(&home);
}

/// Interactive chats (`--demo`) on two servers of one home: a runId posted
/// to both at once starts one session, recorded once; the other client is
/// refused 409 while the run is the other server's (the demo's chat waits
/// for an approval there), never given a replay that ends as if the run had
/// stopped; asked again after, the same.
#[test]
fn two_chat_servers_on_one_home_start_a_run_id_once() {
    let home = scratch("two-chats");
    let a = serve(&home, &["--demo"]);
    let b = serve(&home, &["--demo"]);
    let reqs: Vec<String> = (0..4).map(|i| body(&format!("c{i}"), &format!("c{i}"), "hello demo")).collect();
    let all = std::sync::Barrier::new(2 * reqs.len());
    let answers: Vec<[(u16, String); 2]> = std::thread::scope(|sc| {
        let all = &all;
        let posts: Vec<_> = reqs
            .iter()
            .map(|req| {
                [&a, &b].map(|server| {
                    sc.spawn(move || {
                        all.wait();
                        post(server, req)
                    })
                })
            })
            .collect();
        posts.into_iter().map(|p| p.map(|h| h.join().unwrap())).collect()
    });
    for (i, pair) in answers.iter().enumerate() {
        let journal = std::fs::read_to_string(home.join(format!("serve/runstate/agui-c{i}.jsonl"))).unwrap();
        assert_eq!(journal.matches(r#""run":"started""#).count(), 1, "c{i} recorded once:\n{journal}");
        let ran: Vec<_> = pair.iter().filter(|(st, _)| *st == 200).collect();
        assert_eq!(ran.len(), 1, "c{i}: one session, one stream: {pair:?}");
        assert!(ran[0].1.contains("\"interrupt\"") && !ran[0].1.contains("RUN_ERROR"), "c{i}: {}", ran[0].1);
        let (st, e) = pair.iter().find(|(st, _)| *st != 200).unwrap();
        assert_eq!(*st, 409, "c{i}: {e}");
        assert!(e.contains("being recorded by another"), "c{i}: {e}");
        // Asked again while the session waits at the other server: 409, naming it.
        let (st, e) = post(&a, &reqs[i]);
        let (st2, e2) = post(&b, &reqs[i]);
        let (st, e) = if st == 409 { (st, e) } else { (st2, e2) };
        assert_eq!(st, 409, "c{i}: {e}");
        assert!(e.contains("is being recorded by another server (pid "), "c{i}: {e}");
    }
    drop((a, b));
    let _ = std::fs::remove_dir_all(&home);
}

/// The demo's interactive chat waits for an answer when its server is
/// SIGKILLed: the next server on the home journals it failed, once, with
/// why; the same request is replayed from its record, another refused;
/// `runs rm` removes it.
/// A client that reconnects to a finished interactive run (the same request,
/// holding part of its answer: other messages, the same digest) is answered
/// from the record, and the response ends: the record of a chat run is its
/// thread's session, which goes on after the run, so a finished run is not
/// followed (it used to be, until the session ended).
#[test]
fn a_reconnect_to_a_finished_chat_run_ends() {
    let dir = scratch("reconnect");
    let home = dir.join("home");
    let s = serve(&home, &["--demo"]);
    let first = body("rc", "rc-1", "hi");
    let (status, sse) = post(&s, &first);
    assert_eq!(status, 200, "{sse}");
    assert!(events(&sse).iter().any(|e| e["type"] == "RUN_FINISHED"), "the first run ends:\n{sse}");
    let again = serde_json::json!({"threadId": "rc", "runId": "rc-1", "messages": [
        {"id": "m1", "role": "user", "content": "hi"},
        {"id": "partial", "role": "assistant", "content": "Hi! I am"}]})
    .to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        sc.spawn(|| tx.send(post(&s, &again)).unwrap());
        let (status, sse) = rx.recv_timeout(Duration::from_secs(30)).expect("the reconnect's response ended");
        assert_eq!(status, 200, "{sse}");
        let ev = events(&sse);
        assert_eq!(ev.first().map(|e| e["type"].clone()), Some("RUN_STARTED".into()), "{sse}");
        let last = ev.last().map(|e| e["type"].as_str().unwrap_or("").to_string()).unwrap_or_default();
        assert!(last == "RUN_FINISHED" || last == "RUN_ERROR", "the reconnect ends its run:\n{sse}");
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_chat_left_waiting_by_a_killed_server_is_failed_by_the_next_and_can_be_removed() {
    let home = scratch("chat");
    let id = server_run_id(&home, "agui-c1");
    let mut s = serve(&home, &["--demo"]);
    let req = body("chat", "c1", "hello demo");
    let (st, first) = post(&s, &req);
    assert_eq!(st, 200, "{first}");
    assert!(first.contains("\"interrupt\""), "the demo asks for an approval:\n{first}");
    until("the run to need input", Duration::from_secs(10), || item(&s, &id)["status"] == "needs_input");
    assert_eq!(item(&s, &id)["supervisor"], "live", "its server runs it");
    // The server owns the run (an owner record with its identity).
    let owner = home.join("sock").join(format!("{id}.owner.json"));
    let o: Value = serde_json::from_slice(&std::fs::read(&owner).unwrap()).unwrap();
    assert_eq!(o["supervisor"]["pid"], s.pid());
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(s.pid()), nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = s.child.wait();
    // Dead, the server's run still says needs_input in its files, and that nothing runs it.
    let out = runs(&home, &["show", &id]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (shown["run"]["status"].as_str(), shown["run"]["supervisor"].as_str()),
        (Some("needs_input"), Some("gone"))
    );
    let why = format!(
        "its server (pid {}) is gone: nothing runs it; start runwire-serve on this home again to journal how it ended",
        s.pid()
    );
    assert_eq!(shown["run"]["reason"].as_str(), Some(why.as_str()), "{shown}");

    let s = serve(&home, &["--demo"]);
    let it = item(&s, &id);
    assert_eq!(it["status"], "failed", "{it}");
    assert!(it.get("supervisor").is_none(), "{it}");
    assert!(it["reason"].as_str().unwrap_or_default().contains("server stopped while waiting for an answer"), "{it}");
    assert!(!owner.exists(), "the owner record goes once the run is journaled");
    let journal = home.join("serve/runstate/agui-c1.jsonl");
    let after = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(after.matches("server stopped while").count(), 1, "{after}");
    // Same request: the record's stream, ending with the journaled reason; another: 409.
    let (st, again) = post(&s, &req);
    assert_eq!(st, 200, "{again}");
    assert!(again.contains("RUN_ERROR") && again.contains("server stopped while waiting"), "{again}");
    let (st, e) = post(&s, &body("chat", "c1", "something else"));
    assert_eq!(st, 409, "{e}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), after, "never recorded again");
    drop(s);
    // A third start journals nothing more.
    let s = serve(&home, &["--demo"]);
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), after, "recovered once");
    drop(s);
    let out = runs(&home, &["rm", &id]);
    assert!(out.status.success(), "{out:?}");
    assert!(!journal.exists() && !home.join("runs").join(format!("{id}.json")).exists());
    let _ = std::fs::remove_dir_all(&home);
}

/// The README's demo, stopped cleanly (SIGTERM, as Ctrl-C) while its agent
/// waits for an answer: the run is `failed`, its reason saying why, not
/// `done`. The demo agent, told to end, exits 0, and its turn was still cut
/// short. A question answered first leaves a held session: `done`.
#[test]
fn a_chat_waiting_for_an_answer_when_its_server_stops_cleanly_is_failed() {
    let home = scratch("clean-stop");
    let id = server_run_id(&home, "agui-w1");
    let mut s = serve(&home, &["--demo"]);
    let (st, first) = post(&s, &body("w", "w1", "hello demo"));
    assert_eq!(st, 200, "{first}");
    assert!(first.contains("\"interrupt\""), "the demo asks for an approval:\n{first}");
    until("the run to need input", Duration::from_secs(10), || item(&s, &id)["status"] == "needs_input");
    let (_, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "a clean shutdown");
    let out = runs(&home, &["show", &id]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    let why = shown["run"]["reason"].as_str().unwrap_or_default();
    assert!(why.contains("ended by the server's shutdown while waiting for an answer"), "{shown}");
    let _ = std::fs::remove_dir_all(&home);
}

/// A run the server cannot record is not run, in either mode: the client
/// gets `RUN_ERROR` `not_recorded` and nothing else, no file of the run is
/// left, and the same request runs once the server can record it. Here the
/// claim journals its first records and registration fails (the registry
/// is a file). Such a claim used to stay "recorded" for ever: a runId no
/// listing showed and no `runs rm` freed.
#[test]
fn a_run_the_server_cannot_register_is_not_run_and_its_run_id_stays_free() {
    for mode in ["batch", "--demo"] {
        let home = scratch(&format!("unregistered{mode}"));
        let s = serve(&home, if mode == "batch" { &[] } else { &["--demo"] });
        let registry = home.join("runs");
        let _ = std::fs::remove_dir_all(&registry);
        std::fs::write(&registry, b"").unwrap();
        let req = body("t", "r", "hello demo");
        refused_unrecorded(&s, &req, mode);
        std::fs::remove_file(&registry).unwrap();
        runs_once_recordable(&s, &home, &req, mode);
        drop(s);
        let _ = std::fs::remove_dir_all(&home);
    }
}

/// The same on a real full disk (a tmpfs whose inodes are used up), where
/// the claim itself fails: the agent used to run unrecorded, and a retry
/// after a restart ran it again.
#[test]
#[cfg_attr(not(tool = "root"), ignore = "needs root, to mount a small tmpfs (CI runs as root)")]
fn a_run_the_server_cannot_record_on_a_full_disk_is_not_run() {
    support::need(&["root"]);
    for mode in ["batch", "--demo"] {
        let home = scratch(&format!("full{mode}"));
        let u = support::Tmpfs::mount(&home, "size=4m,nr_inodes=200");
        let s = serve(&home, if mode == "batch" { &[] } else { &["--demo"] });
        // A first run makes the directories every run shares.
        let (st, sse) = post(&s, &body("t0", "r0", "hello demo"));
        assert_eq!(st, 200, "{sse}");
        let fill = home.join("fill");
        std::fs::create_dir(&fill).unwrap();
        let mut n = 0;
        while std::fs::write(fill.join(n.to_string()), b"").is_ok() {
            n += 1;
        }
        let req = body("t", "r", "hello demo");
        refused_unrecorded(&s, &req, mode);
        std::fs::remove_dir_all(&fill).unwrap();
        runs_once_recordable(&s, &home, &req, mode);
        drop(s);
        drop(u);
        assert!(!mounted(&home), "{} is still mounted", home.display());
        let _ = std::fs::remove_dir_all(&home);
    }
}

/// `req` (runId `r`) answered `RUN_STARTED`, `RUN_ERROR` `not_recorded`,
/// and no file of run `r` written.
fn refused_unrecorded(s: &Server, req: &str, mode: &str) {
    let (st, sse) = post(s, req);
    assert_eq!(st, 200, "{mode}: {sse}");
    let ev = events(&sse);
    let types: Vec<_> = ev.iter().map(|e| e["type"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"], "{mode}: nothing run:\n{sse}");
    assert_eq!(ev[1]["code"], "not_recorded", "{mode}: {sse}");
    assert!(ev[1]["message"].as_str().unwrap().contains("not started"), "{mode}: {sse}");
}

/// `req` (runId `r`) runs now, with nothing of the refused attempt in its
/// way, and is listed.
fn runs_once_recordable(s: &Server, home: &Path, req: &str, mode: &str) {
    let (st, sse) = post(s, req);
    assert_eq!(st, 200, "{mode}: {sse}");
    let done = if mode == "batch" { "RUN_FINISHED" } else { "\"interrupt\"" };
    assert!(sse.contains(done) && !sse.contains("RUN_ERROR"), "{mode}: runs now:\n{sse}");
    let id = server_run_id(home, "agui-r");
    until("the run to be listed", Duration::from_secs(10), || item(s, &id) != Value::Null);
}

/// `runs prune --chat` takes a crashed chat too, once a server has been
/// started on the home again.
#[test]
fn a_crashed_chat_is_pruned_after_the_restart() {
    let home = scratch("prune");
    let id = server_run_id(&home, "agui-p1");
    let s = serve(&home, &["--demo"]);
    let (st, _) = post(&s, &body("p", "p1", "hello demo"));
    assert_eq!(st, 200);
    until("the run to need input", Duration::from_secs(10), || item(&s, &id)["status"] == "needs_input");
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(s.pid()), nix::sys::signal::Signal::SIGKILL).unwrap();
    drop(s);
    // Even before a server starts again: its owner is gone, so nobody will
    // answer it, and it may be removed.
    let out = runs(&home, &["rm", "--dry-run", &id]);
    assert!(out.status.success(), "{out:?}");
    let s = serve(&home, &["--demo"]);
    assert_eq!(item(&s, &id)["status"], "failed");
    drop(s);
    std::thread::sleep(Duration::from_millis(1100));
    let out = runs(&home, &["prune", "--older-than", "1s", "--chat"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!home.join("runs").join(format!("{id}.json")).exists(), "{out:?}");
    let _ = std::fs::remove_dir_all(&home);
}

/// `runs register` is a writer too: registering the same run again after
/// its runner wrote records keeps them; registering a slug another run
/// owns in that directory is refused (exit 2, naming the owner) and writes
/// nothing; a run registered there by an older version is removed without
/// the files it does not own.
#[test]
fn registration_keeps_records_refuses_an_owned_slug_and_rm_removes_only_owned_files() {
    let home = scratch("owner");
    let repo = scratch("owner-repo");
    let rs = repo.join("runstate");
    let reg = |slug: &str, root: &Path, dir: &Path| {
        runs(
            &home,
            &[
                "register",
                "--slug",
                slug,
                "--repo-root",
                root.to_str().unwrap(),
                "--runstate-dir",
                dir.to_str().unwrap(),
            ],
        )
    };
    let out = reg("feat", &repo, &rs);
    assert!(out.status.success(), "{out:?}");
    let line = r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","state":"leased"}"#;
    std::fs::write(rs.join("feat.jsonl"), format!("{line}\n")).unwrap();
    let out = reg("feat", &repo, &rs);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(rs.join("feat.jsonl")).unwrap(), format!("{line}\n"), "kept");

    // The server's run r3 owns agui-r3 in its runstate directory.
    let s = serve(&home, &[]);
    assert_eq!(post(&s, &body("t", "r3", "hello")).0, 200);
    drop(s);
    let owner = server_run_id(&home, "agui-r3");
    let srv = home.join("serve/runstate");
    let before: Vec<_> = std::fs::read_dir(&srv).unwrap().flatten().map(|e| e.file_name()).collect();
    let pointers = std::fs::read_dir(home.join("runs")).unwrap().count();
    let out = reg("agui-r3", &repo, &srv);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runs: ") && err.contains(&owner) && err.contains("already owned"), "{err}");
    assert_eq!(std::fs::read_dir(home.join("runs")).unwrap().count(), pointers, "no pointer written");
    // Another repository's slug in its own directory is its own.
    assert!(reg("agui-r3", &repo, &rs).status.success());

    // A pointer an older version let in, naming the server's files: `runs rm`
    // takes its pointer and link, never the server run's files.
    let foreign = runwire::runs::registry::run_id("/elsewhere", "/elsewhere", "agui-r3");
    let p = serde_json::json!({"runId": foreign, "slug": "agui-r3", "repoRoot": "/elsewhere", "project": "x", "repo": "x",
        "branch": null, "worktree": "/elsewhere", "runstateDir": srv.display().to_string(), "created": "2026-01-01T00:00:00.000Z"});
    std::fs::write(home.join("runs").join(format!("{foreign}.json")), p.to_string()).unwrap();
    let out = runs(&home, &["rm", &foreign]);
    assert!(out.status.success(), "{out:?}");
    let after: Vec<_> = std::fs::read_dir(&srv).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(after, before, "the server run's files stay");
    let out = runs(&home, &["show", &owner]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"), "{out:?}");
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&repo);
}

/// A journal written while the run index could not be (its filesystem
/// out of space: a real tmpfs with its inodes used up, so the index's lock
/// cannot be made and the writer's row is never written): `runs list
/// --status done`, with a limit or without, still lists the run its files
/// say is done.
#[test]
#[cfg_attr(not(tool = "root"), ignore = "needs root, to mount a small tmpfs (CI runs as root)")]
fn a_failed_index_write_never_makes_a_filter_miss_a_run() {
    support::need(&["root"]);
    let base = scratch("enospc");
    let home = base.join("home");
    let _u = support::Tmpfs::mount(&home, "size=1m,nr_inodes=64");
    let repo = base.join("repo");
    let rs = repo.join("runstate");
    let out = runs(
        &home,
        &["register", "--slug", "w", "--repo-root", repo.to_str().unwrap(), "--runstate-dir", rs.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#;
    std::fs::write(rs.join("w.plan.json"), plan).unwrap();
    // The run's writer (this process) holds its mark from its first record.
    let out = runs(&home, &["list", "--page"]);
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["runs"][0]["runId"].as_str().unwrap().to_string();
    let writer = runwire::runs::marks::Run::new(&home, &id);
    let record = |state: &str| runwire::runs::journal::Record::task("runner", "a", state, None);
    runwire::runs::journal::append(&writer, &rs.join("w.jsonl"), &record("leased")).unwrap();
    // Past the index's 2 s: a listing trusts the row it repairs from the files.
    std::thread::sleep(Duration::from_millis(2200));
    let list = |args: &[&str]| {
        let out = runs(&home, &[&["list", "--page"], args].concat());
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"]
            .as_array()
            .map(|a| a.iter().map(|r| r["status"].as_str().unwrap().to_string()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(list(&[]), ["running"]);
    assert_eq!(list(&["--status", "running", "--limit", "5"]), ["running"]);
    // The home's filesystem runs out of inodes and space; the journal
    // (elsewhere) takes the run's end.
    std::fs::create_dir(home.join("fill")).unwrap();
    let mut n = 0;
    while std::fs::File::create(home.join("fill").join(n.to_string())).is_ok() {
        n += 1;
    }
    assert!(std::fs::File::create(home.join("index/new")).is_err(), "no inode left");
    // And of space: the index's appends fail too.
    let mut fill = std::fs::OpenOptions::new().append(true).open(runwire::runs::index::path(&home)).unwrap();
    while std::io::Write::write_all(&mut fill, &[b'\n'; 4096]).is_ok() {}
    runwire::runs::journal::append(&writer, &rs.join("w.jsonl"), &record("committed")).unwrap();
    // A writer whose mark cannot be made writes nothing: a record no
    // listing would see is never made.
    let other = runwire::runs::marks::Run::new(&home, "other");
    let e = runwire::runs::journal::append(&other, &rs.join("w.jsonl"), &record("failed")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(28), "ENOSPC: {e}");
    assert!(!std::fs::read_to_string(rs.join("w.jsonl")).unwrap().contains("\"failed\""));
    assert_eq!(list(&["--status", "done", "--limit", "5"]), ["done"], "a page filtered by status");
    assert_eq!(list(&["--status", "done"]), ["done"], "a full listing filtered by status");
    assert!(list(&["--status", "running", "--limit", "5"]).is_empty());
    // What holds files there first (the index's file, the runs' marks): the
    // filesystem is then unmounted whole, and its mount point removed.
    drop((fill, writer, other));
    drop(_u);
    assert!(!mounted(&home), "{} is still mounted", home.display());
    let _ = std::fs::remove_dir_all(&base);
}

/// Whether `dir` is a mount point now (`/proc/self/mounts`).
fn mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap_or("")))
}

/// Every page (walked by cursor, several sizes) and status filter of `runs
/// list` through the run index, and the same read from every run's files.
fn pages_and_filters(home: &Path) -> Vec<(String, String, String)> {
    let walk = |extra: &[&str]| {
        let mut out = String::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut args = vec!["list", "--page"];
            args.extend_from_slice(extra);
            if let Some(c) = &cursor {
                args.extend(["--cursor", c.as_str()]);
            }
            let o = runs(home, &args);
            assert!(o.status.success(), "{o:?}");
            let page: Value = serde_json::from_slice(&o.stdout).unwrap();
            out.push_str(&page["runs"].to_string());
            out.push_str(&page["total"].to_string());
            match page["next"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    };
    let mut queries: Vec<Vec<&str>> = vec![vec![], vec!["--limit", "1"], vec!["--limit", "2"]];
    for s in ["running", "done", "failed", "registered", "needs_input,idle,paused"] {
        queries.push(vec!["--status", s]);
        queries.push(vec!["--status", s, "--limit", "1"]);
    }
    queries
        .into_iter()
        .map(|q| {
            let by_index = walk(&q);
            let from_files = walk(&[&q[..], &["--from-files"]].concat());
            (q.join(" "), by_index, from_files)
        })
        .collect()
}

/// SIGKILL during appends (issue 35, "Done when"): supervisors of four runs
/// (one home) are killed while they journal their tasks, after the run
/// index already holds rows for their earlier records (a listing made them,
/// then the supervisors appended more: the rows are stale). Every page and
/// filter of the real `runs list` through the index equals `--from-files`,
/// right after the kill and once the listings have caught up.
#[test]
fn a_sigkill_during_appends_leaves_every_page_and_filter_the_files_answer() {
    let base = scratch("sigkill");
    let home = base.join("home");
    let tasks: Vec<String> =
        (0..30).map(|i| format!(r#"{{"id":"t{i}","adapter":"claude","prompt":"p{i}"}}"#)).collect();
    let plan = format!(r#"{{"v":"plan/v1","tasks":[{}]}}"#, tasks.join(","));
    let dirs: Vec<PathBuf> = (0..4).map(|i| base.join(format!("w{i}"))).collect();
    let stubs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/stub-engines");
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    let start = |dir: &Path| {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("p.plan.json"), &plan).unwrap();
        Command::new(env!("CARGO_BIN_EXE_runwire-supervise"))
            .current_dir(dir)
            .env("PATH", &path)
            .env("HARNESS_HOME", &home)
            .env("STUB_MODE", "ok")
            .args(["--plan", "p.plan.json", "--kill-grace", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let records = |dir: &Path| std::fs::read_to_string(dir.join("runstate/p.jsonl")).map_or(0, |t| t.lines().count());
    let kill = |kids: Vec<std::process::Child>| {
        for mut k in kids {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(k.id() as i32), nix::sys::signal::SIGKILL);
            let _ = k.wait();
        }
    };
    let check = |when: &str| {
        for (q, by_index, from_files) in pages_and_filters(&home) {
            assert_eq!(by_index, from_files, "{when}: runs list {q}");
        }
    };
    for round in 0..2 {
        let kids: Vec<_> = dirs.iter().map(|d| start(d)).collect();
        // Killed at staggered points: each after its journal has grown by a few records.
        let before: Vec<usize> = dirs.iter().map(|d| records(d)).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while dirs.iter().zip(&before).any(|(d, b)| records(d) < b + 3) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        kill(kids);
        check(&format!("round {round}, right after the kill"));
        // Past the index's 2 s: the listings make rows for these journals,
        // which the next round's records leave stale.
        std::thread::sleep(Duration::from_millis(2100));
        check(&format!("round {round}, the listings caught up"));
        let ix = runwire::runs::index::read(&home);
        assert!(runwire::runs::index::Index::parse(&ix).len() >= 4, "the listings kept rows");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Listings killed at any point (issue 35's leftover: the SIGKILL test
/// above kills writers, not the listings that keep the index): `runs list`
/// takes free marks, appends rows, compacts and removes marks; `runs
/// reindex` rewrites the index whole. Each is SIGKILLed after a few
/// milliseconds, again and again, between records that mark runs. Every
/// page and filter through the index then still equals reading the files.
#[test]
fn listings_and_reindexes_killed_at_any_point_leave_an_index_that_answers_as_the_files_do() {
    use runwire::runs::journal::{self, Record};
    use runwire::runs::{marks, registry};
    let base = scratch("killed-listings");
    let home = base.join("home");
    let repo = base.join("repo");
    let mut runs_made = Vec::new();
    for i in 0..80 {
        let new =
            registry::NewRun { slug: format!("s{i}"), repo_root: repo.display().to_string(), ..Default::default() };
        let p = new.pointer(format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60)).unwrap();
        std::fs::create_dir_all(&p.runstate_dir).unwrap();
        registry::Registry::at(&home).register(&p).unwrap();
        marks::release(&home, &p.run_id);
        let journal = Path::new(&p.runstate_dir).join(format!("s{i}.jsonl"));
        runs_made.push((marks::Run::new(&home, &p.run_id), journal, p.run_id.clone()));
    }
    let states = ["leased", "implemented", "committed", "failed"];
    let write = |round: usize| {
        // A quarter of the runs a round gets a record, through runwire's
        // writer (its mark held, then let go, as a finished writer does).
        for (i, (mark, journal, id)) in runs_made.iter().enumerate().filter(|(i, _)| (i + round) % 4 == 0) {
            let state = states[(i / 4 + round) % states.len()];
            let rc = (state == "committed").then_some(0);
            journal::append(mark, journal, &Record::task("runner", "t", state, rc)).unwrap();
            marks::release(&home, id);
        }
    };
    let kill_after = |args: &[&str], ms: u64| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runs"))
            .args(args)
            .env("HARNESS_HOME", &home)
            // Every listing checks every run (the path that marks, appends and compacts).
            .env("RUNWIRE_INDEX_CHECK_MS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        let _ = c.kill();
        // Killed, or done before the kill.
        use std::os::unix::process::ExitStatusExt;
        c.wait().unwrap().signal().is_some()
    };
    let (mut killed, mut finished) = (0, 0);
    for round in 0..5 {
        write(round);
        // Past the index's 2 s: the listings make rows for what was written.
        std::thread::sleep(Duration::from_millis(2100));
        // A whole listing takes about 15 ms here, a reindex 25: the kills
        // move through both as the rounds go.
        let r = round as u64;
        for (args, ms) in
            [(&["list", "--limit", "20"][..], 1 + r), (&["list"], 3 + 2 * r), (&["list", "--limit", "20"], 6 + 3 * r)]
                .into_iter()
                .chain([(&["reindex"][..], 4 + r * 5), (&["list"], 25)])
        {
            if kill_after(args, ms) {
                killed += 1;
            } else {
                finished += 1;
            }
        }
        if round % 2 == 0 {
            for (q, by_index, from_files) in pages_and_filters(&home) {
                assert_eq!(by_index, from_files, "round {round}: runs list {q}");
            }
        }
    }
    // Some kills fell inside the commands (on a quiet machine some come after
    // a command's end too; a loaded one may have none of those).
    eprintln!("{killed} commands killed on their way, {finished} done before their kill");
    assert!(killed > 0, "killed {killed}, finished {finished}");
    let _ = std::fs::remove_dir_all(&base);
}

/// The marks that let a listing trust its rows without a `stat` a run
/// (`spec/LAYOUT.md`, "The run index"), through the real `runs`: a
/// writer's mark is held while it writes (another process's listing reads
/// the run from its files, never from the row it made before the write)
/// and removed by the next listing once the writer lets go; a record
/// appended after a trusted listing is in the next one; a run's files
/// written by hand come in with `runs reindex`.
#[test]
fn a_writers_mark_is_held_while_it_writes_and_removed_by_the_next_listing() {
    use runwire::runs::journal::{self, Record};
    use runwire::runs::marks;
    let base = scratch("marks");
    let home = base.join("home");
    let repo = base.join("repo");
    let register = |slug: &str| {
        let out = runs(&home, &["register", "--slug", slug, "--repo-root", repo.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let p: Value = serde_json::from_slice(&out.stdout).unwrap();
        p["runId"].as_str().unwrap().to_string()
    };
    let (a, b) = (register("a"), register("b"));
    let open = || {
        let mut v: Vec<String> = std::fs::read_dir(home.join("index/open"))
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let check = |when: &str| {
        for (q, by_index, from_files) in pages_and_filters(&home) {
            assert_eq!(by_index, from_files, "{when}: runs list {q}");
        }
    };
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(open(), both, "registration marks the runs (`runs register` has exited: no one holds them)");
    check("after registration");
    // A row is made only 2 s after its run's files last changed: until
    // then the marks stay, and the runs are read from their files.
    assert_eq!(open(), both, "files changed within 2 s");
    let age = || std::thread::sleep(Duration::from_millis(2100));
    age();
    check("after registration, 2 s on");
    assert!(open().is_empty(), "the listings made the rows and removed the marks");
    let sorted = std::fs::read_to_string(home.join("index/runs.sorted")).expect("a compaction sorted the log");
    assert!(sorted.contains("\"len\""), "{sorted}");

    // This process writes run a: its mark is held while it does.
    let journal = repo.join("runstate/a.jsonl");
    let run = marks::Run::new(&home, &a);
    journal::append(&run, &journal, &Record::task("runner", "t", "leased", None)).unwrap();
    assert_eq!(open(), std::slice::from_ref(&a));
    check("a record written, its writer holding the mark");
    assert_eq!(open(), std::slice::from_ref(&a), "a held mark is never removed");
    journal::append(&run, &journal, &Record::task("runner", "t", "committed", Some(0))).unwrap();
    check("a second record, the mark still held");
    marks::release(&home, &a);
    check("the writer let go");
    age();
    check("the writer let go, 2 s on");
    assert!(open().is_empty(), "the listing made a's row and removed its mark");
    let done = runs(&home, &["list", "--page", "--status", "done"]);
    assert!(String::from_utf8_lossy(&done.stdout).contains(&a), "{done:?}");

    // A record after a listing trusted a's row: the writer's mark is made
    // again first, so the next listing does not trust the old row.
    journal::append(&run, &journal, &Record::task("runner", "u", "leased", None)).unwrap();
    marks::release(&home, &a);
    assert_eq!(open(), std::slice::from_ref(&a));
    let running = runs(&home, &["list", "--page", "--status", "running"]);
    assert!(String::from_utf8_lossy(&running.stdout).contains(&a), "{running:?}");
    check("a record after a trusted listing");

    // Written by hand (no mark): `runs reindex` checks every run again.
    let bj = repo.join("runstate/b.jsonl");
    journal::append_line(
        &bj,
        br#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"x","task":"t","state":"leased"}"#,
    )
    .unwrap();
    let out = runs(&home, &["reindex"]);
    assert!(out.status.success(), "{out:?}");
    check("files written by hand, after runs reindex");
    let _ = std::fs::remove_dir_all(&base);
}

/// A hub's home holds its mirrors of the nodes' runs
/// (`cluster/nodes/<node>/<run>`, spec/CLUSTER.md). `runs rm` of one is
/// refused, naming the node to remove it at (removed here, it only vanished
/// from this hub's listing while it stayed in the cluster and at every
/// other hub), and `runs prune` leaves them out, said once; a run of the
/// home's own beside them is removed as ever.
#[test]
fn runs_rm_and_prune_at_a_hub_leave_its_mirrors_of_the_nodes_runs_to_their_nodes() {
    let home = scratch("hub-mirror");
    let id = "alpha.0123456789ab--feat";
    let dir = home.join("cluster/nodes/alpha/0123456789ab--feat");
    std::fs::create_dir_all(&dir).unwrap();
    let done = r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"t","state":"committed"}"#;
    std::fs::write(dir.join("feat.jsonl"), format!("{done}\n")).unwrap();
    std::fs::create_dir_all(home.join("runs")).unwrap();
    std::fs::create_dir_all(home.join("journals")).unwrap();
    std::fs::hard_link(dir.join("feat.jsonl"), home.join("journals").join(format!("{id}.jsonl"))).unwrap();
    let p = serde_json::json!({"runId": id, "slug": "feat", "repoRoot": "/r", "project": "r", "repo": "r", "branch": null,
        "worktree": "/r", "runstateDir": dir.display().to_string(), "created": "2026-01-01T00:00:00.000Z"});
    std::fs::write(home.join("runs").join(format!("{id}.json")), p.to_string()).unwrap();
    let listed = |home: &Path| String::from_utf8_lossy(&runs(home, &["list", "--all"]).stdout).contains(id);
    assert!(listed(&home), "the mirrored run is listed at the hub");

    let out = runs(&home, &["rm", id]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with(&format!("runs: rm {id}: not removed: it is node alpha's run")), "{err}");
    assert!(listed(&home) && dir.join("feat.jsonl").exists(), "nothing of the mirror was removed");

    // Prune: the mirror left out (said once), and the home's own old run removed.
    let repo = scratch("hub-mirror-repo");
    let rs = repo.join("runstate");
    std::fs::create_dir_all(&rs).unwrap();
    std::fs::write(rs.join("own.jsonl"), format!("{done}\n")).unwrap();
    let reg = Command::new(env!("CARGO_BIN_EXE_runs"))
        .args(["register", "--slug", "own", "--repo-root"])
        .arg(&repo)
        .arg("--runstate-dir")
        .arg(&rs)
        .env("HARNESS_HOME", &home)
        .output()
        .unwrap();
    assert!(reg.status.success(), "{reg:?}");
    // Both runs ten days idle (their journals and pointers).
    let mut files = vec![rs.join("own.jsonl"), dir.join("feat.jsonl")];
    files.extend(std::fs::read_dir(home.join("runs")).unwrap().flatten().map(|e| e.path()));
    assert!(filetime_days_ago(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>(), 10), "files aged");
    let out = runs(&home, &["prune", "--older-than", "2d"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(err.matches("mirrored by this hub").count(), 1, "{err}");
    assert!(err.contains("1 run(s)"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("--own") && !stdout.contains(id), "{stdout}");
    assert!(listed(&home), "the mirror stays");
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&repo);
}

/// Sets each file's modification time `days` ago; true when all were.
fn filetime_days_ago(files: &[&Path], days: u64) -> bool {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
    files.iter().all(|f| std::fs::File::options().append(true).open(f).and_then(|h| h.set_modified(t)).is_ok())
}
