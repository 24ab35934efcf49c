//! The record of an interactive session tells the truth (issue 25 case 9),
//! through the real server, real agent processes and the run views: a
//! session that cannot start is `failed` with the reason; a session held
//! between turns is `idle`, `running` again while a turn runs; a clean
//! shutdown ends a held session `done` (the feed's `ended`), its finished
//! turns staying finished.

use crate::support;
use support::Server;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(15);

/// A fake claude that takes turns: each user message gets a short answer
/// and the turn's `result`; it stays until its input closes.
fn turn_agent(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("turns.sh");
    let body = r#"#!/bin/sh
read -r opening
echo '{"type":"system","subtype":"init","session_id":"s-turns","tools":[],"model":"m"}'
while read -r l; do
  case "$l" in
    *'"type":"user"'*)
      echo '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"done"}]},"session_id":"s-turns"}'
      echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-turns","num_turns":1,"total_cost_usd":0}'
      ;;
  esac
done
"#;
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// runwire-serve `--interactive ARGS` with `env`, its home in the test's directory.
fn start(test: &str, args: &[&str], env: &[(&str, &Path)]) -> Server {
    let dir = support::scratch(test);
    let mut cmd = Server::command();
    cmd.arg("--interactive")
        .args(args)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env_remove("RUNWIRE_CODEX_BIN")
        .envs(env.iter().copied());
    Server::spawn(cmd)
}

/// `runs …` against the server's `$HARNESS_HOME` (no server needed).
fn runs(s: &Server, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_runs")).args(args).env("HARNESS_HOME", s.home()).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `runs show RUN`, as JSON.
fn show(s: &Server, run: &str) -> Value {
    serde_json::from_str::<Value>(&runs(s, &["show", run])).map(|v| v["run"].clone()).unwrap_or(Value::Null)
}

/// The runs of the server's journal records, in order.
fn journal_runs(s: &Server) -> Vec<String> {
    s.journal().iter().filter_map(|r| r["run"].as_str().map(str::to_string)).collect()
}

/// One AG-UI run to its end: its events.
fn agui(port: u16, thread: &str, run: &str, text: &str) -> Vec<Value> {
    let body = json!({"threadId": thread, "runId": run, "messages": [{"id": run, "role": "user", "content": text}]})
        .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let h = format!(
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(h.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    support::sse::http_events(&raw)
}

fn last_type(events: &[Value]) -> String {
    events.last().map(|e| e["type"].as_str().unwrap_or("").to_string()).unwrap_or_default()
}

fn session_run(events: &[Value]) -> String {
    let e = events.iter().find(|e| e["name"] == "runwire.session").expect("the runwire.session event");
    e["value"]["run"].as_str().expect("a recorded run").to_string()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < LIMIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--agent codex --interactive` with no codex anywhere: the run's client
/// gets `RUN_ERROR spawn_failed`, and the record says `failed` with why,
/// at once and after the server stopped (not `running, leased` forever).
#[test]
fn a_session_that_cannot_start_is_failed_with_the_reason() {
    let empty = support::scratch("session_record_empty_path");
    std::fs::create_dir_all(&empty).unwrap();
    let mut s = start("session_record_no_agent", &["--agent", "codex"], &[("PATH", &empty)]);
    let evs = agui(s.port, "t1", "r-nocodex", "hello");
    let end = evs.last().cloned().unwrap_or(Value::Null);
    assert_eq!(end["type"], "RUN_ERROR", "{evs:?}");
    assert_eq!(end["code"], "spawn_failed", "{end}");
    let runs: Vec<Value> = runs(&s, &["list"]).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run["status"], "failed", "{run}");
    let reason = run["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("could not start"), "the reason says why: {run}");
    assert_eq!(s.terminate(Duration::from_secs(20)).1, Some(0));
    let id = run["runId"].as_str().unwrap();
    assert_eq!(show(&s, id)["status"], "failed");
}

/// A session held between turns is `idle` (never `running`), `running`
/// again while its next turn runs, `idle` after it; SIGTERM ends it `done`
/// (the feed says `ended`), not `failed`/`halted`.
#[test]
fn a_held_session_is_idle_between_turns_and_a_clean_shutdown_ends_it_done() {
    let dir = support::scratch("session_record_agent");
    std::fs::create_dir_all(&dir).unwrap();
    let agent = turn_agent(&dir);
    let mut s = start("session_record_idle", &["--agent", "claude", "--agent-cmd", agent.to_str().unwrap()], &[]);
    let evs = agui(s.port, "t1", "r-1", "first");
    assert_eq!(last_type(&evs), "RUN_FINISHED", "{evs:?}");
    let run = session_run(&evs);
    wait_for("the held session to show idle", || show(&s, &run)["status"] == "idle");
    // The feed begins now, with the run in it.
    let feed = runs(&s, &["watch", "--since", "0", "--no-follow"]);
    assert!(feed.contains(&run), "{feed}");

    let evs = agui(s.port, "t1", "r-2", "second");
    assert_eq!(last_type(&evs), "RUN_FINISHED", "{evs:?}");
    wait_for("the session to be idle again", || show(&s, &run)["status"] == "idle");
    let marks = journal_runs(&s);
    let idles = marks.iter().filter(|r| *r == "idle").count();
    let resumed = marks.iter().filter(|r| *r == "resumed").count();
    assert!(idles >= 2 && resumed >= 1, "held, running, held again: {marks:?}");
    assert_eq!(marks.last().map(String::as_str), Some("idle"), "{marks:?}");

    assert_eq!(s.terminate(Duration::from_secs(20)).1, Some(0), "a clean shutdown");
    let shown = show(&s, &run);
    assert_eq!(shown["status"], "done", "{shown}");
    let feed = runs(&s, &["watch", "--since", "0", "--no-follow", "--run", &run]);
    let ended: Vec<Value> =
        feed.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|e| e["type"] == "ended").collect();
    assert_eq!(ended.len(), 1, "{feed}");
    assert_eq!(ended[0]["status"], "done", "{feed}");
}

/// The engine's status is the one source of what a session does, and it
/// can be watched: over a real agent process, a watcher wakes when the
/// status changes (no polling), and the status shows the phase, the turn
/// and its end, the session id and, once the agent is killed, its exit.
#[test]
fn the_engines_status_can_be_watched_over_a_real_agent() {
    use runwire::session::engine::Engine;
    use runwire::session::input::{Input, MessageInput};
    use runwire::session::launch::{AgentKind, LaunchOptions};
    use runwire::session::{Ack, Phase};
    use std::sync::{Arc, Mutex};

    let dir = support::scratch("session_record_engine");
    let agent = turn_agent(&dir);
    let o = LaunchOptions { cmd: vec![agent.display().to_string()], ..LaunchOptions::default() };
    let opts = runwire::session::Options::default();
    let (engine, mut feed) =
        Engine::start(AgentKind::Claude, &o, opts, 1, None, Arc::new(Mutex::new(None)), "session_record").unwrap();
    let s0 = engine.status();
    assert_eq!((s0.phase, s0.turn, s0.turns_ended, s0.exit), (Phase::Idle, 0, 0, None), "{s0:?}");

    let t = engine.command(Input::Message(MessageInput { text: "go".into(), by: None })).unwrap();
    assert_eq!(t.ack, Ack::Started);
    let s1 = engine.status();
    assert_eq!((s1.phase, s1.turn), (Phase::Turn, 1), "{s1:?}");
    // Watch until the turn is over: each wait returns on a change.
    let mut seen = s1.changes;
    let t0 = Instant::now();
    let over = loop {
        engine.wait(seen, LIMIT);
        let s = engine.status();
        assert!(s.changes > seen || t0.elapsed() >= LIMIT, "a wait returned without a change: {s:?}");
        seen = s.changes;
        if s.turns_ended >= 1 {
            break s;
        }
        assert!(t0.elapsed() < LIMIT, "the turn never ended: {s:?}");
    };
    assert_eq!((over.phase, over.turn, over.turns_ended), (Phase::Idle, 1, 1), "{over:?}");
    assert_eq!(over.session_id.as_deref(), Some("s-turns"));
    assert!(over.is_idle() && over.between_turns(), "{over:?}");
    // The reader follows with its own cursor and catches up with what was produced.
    while feed.taken() < over.produced {
        let _ = feed.read(Duration::from_millis(100));
    }
    assert!(over.settled(feed.taken()), "{over:?} taken {}", feed.taken());

    // A watcher wakes when the agent is killed, and the exit is shown.
    let before = engine.status().changes;
    let watcher = std::thread::scope(|sc| {
        // Woken by each change; done when the change is the exit (a late line of the
        // agent's, between its turns, is a change too, and not the one watched for).
        let w = sc.spawn(|| {
            let (mut seen, t0) = (before, Instant::now());
            loop {
                engine.wait(seen, LIMIT);
                let s = engine.status();
                if s.exit.is_some() || t0.elapsed() >= LIMIT {
                    return Instant::now();
                }
                seen = s.changes;
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        let killed_at = Instant::now();
        assert!(engine.kill().is_some());
        (w.join().unwrap(), killed_at)
    });
    assert!(watcher.0 >= watcher.1, "the watcher woke only with the kill");
    let end = engine.status();
    assert!(end.exit.is_some() && !end.is_idle(), "{end:?}");
}
