//! A thread that opens anywhere (issue 38): live `runwire-serve`s driven by
//! the official `@ag-ui/client` 1.0.0 (`conformance/thread.mjs`): a fresh
//! `HttpAgent` that opens an existing thread with only its new message gets
//! a `MESSAGES_SNAPSHOT` right after `RUN_STARTED` and ends with the same
//! messages (ids, roles, content, tool calls) as one that was there all
//! along, which got none; a retried runId that joins a live run gets the
//! snapshot of what it missed, then live. Batch (the demo replay) and
//! interactive (`--demo`) modes. Needs node and npm (the one skip rule,
//! `tests/support/tools.rs`). The thread's messages file is checked too.

use crate::support;
use support::Server;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(180);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A server on a home of its own (removed with it), with `args` and `envs`.
fn server(test: &str, args: &[&str], envs: &[(&str, &str)]) -> Server {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let home = std::env::temp_dir().join(format!("runwire-thread-{}-{test}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let mut cmd = Server::command();
    cmd.args(args).env("HARNESS_HOME", &home).env_remove("SOURCE_DATE_EPOCH").env_remove("STUB_MODE");
    cmd.envs(envs.iter().copied());
    Server::spawn(cmd).owning(home)
}

/// `node conformance/thread.mjs ARGS...`: its exit success and its one JSON line.
fn thread_mjs(args: &[&str]) -> (bool, Value, String) {
    let mut child = Command::new("node")
        .arg(root().join("conformance/thread.mjs"))
        .args(args)
        .current_dir(root().join("conformance"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start node");
    let start = Instant::now();
    while child.try_wait().expect("wait node").is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("thread.mjs {args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("node output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = stdout.lines().last().unwrap_or_default();
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("thread.mjs printed no JSON ({e}):\n{stdout}{stderr}"));
    (out.status.success(), v, format!("{stdout}{stderr}"))
}

fn stop(mut s: Server) {
    let (_, code) = s.terminate(Duration::from_secs(10));
    assert_eq!(code, Some(0), "runwire-serve did not exit 0 after SIGTERM; stderr:\n{}", s.stderr());
}

/// The lines of the server's thread files.
fn thread_lines(home: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(home.join("serve/threads")).expect("serve/threads exists") {
        let text = std::fs::read_to_string(e.expect("entry").path()).expect("read a thread file");
        out.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).expect("a thread line is JSON")));
    }
    out
}

fn open_thread(test: &str, args: &[&str]) {
    support::need(&["agui-client"]);
    let along = server(test, args, &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let fresh = server(test, args, &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let (ok, v, output) = thread_mjs(&["open", &along.url("/agui"), &fresh.url("/agui")]);
    assert!(ok, "{test}: thread.mjs failed:\n{output}\nstderr:\n{}\n{}", along.stderr(), fresh.stderr());
    assert_eq!(v["ok"], true, "{v}");
    // Something to compare: three user messages and the agent's answers,
    // with tool calls and their results.
    let msgs = v["fresh"].as_array().expect("the fresh client's messages");
    assert_eq!(msgs.iter().filter(|m| m["role"] == "user").count(), 3, "{v}");
    assert!(msgs.iter().any(|m| m["role"] == "tool"), "{v}");
    assert!(msgs.iter().any(|m| m["role"] == "assistant" && m["toolCalls"].as_array().is_some_and(|c| !c.is_empty())));
    assert_eq!(v["fresh"], v["along"]);
    assert!(v["snapshots"]["along"].as_array().is_some_and(|a| a.iter().all(|n| n == 0)), "{v}");
    assert!(v["snapshots"]["fresh"].as_u64().is_some_and(|n| n >= 1), "{v}");
    // The file holds the user messages as sent, marked as input.
    let lines = thread_lines(fresh.home());
    let inputs: Vec<&Value> = lines.iter().filter(|l| l["input"] == true).collect();
    let users: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(inputs.len(), 3, "{lines:?}");
    for (l, u) in inputs.iter().zip(users) {
        assert_eq!(l["message"]["id"], u["id"]);
        assert_eq!(l["message"]["content"], u["content"]);
    }
    stop(along);
    stop(fresh);
}

/// Batch mode (the demo's replayed Claude run, a thread continued by its
/// session): a fresh client ends with the thread.
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn batch_fresh_client_gets_the_thread() {
    open_thread("batch_fresh", &[]);
}

/// Interactive mode (`--demo`: one live session a thread; its approvals and
/// questions answered in runs of their own).
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn interactive_fresh_client_gets_the_thread() {
    open_thread("interactive_fresh", &["--demo"]);
}

/// The thread is the home's: a fresh client on another server of the same
/// `$HARNESS_HOME` (which never saw the thread's runs) gets it too.
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn another_server_of_the_home_gives_the_thread() {
    support::need(&["agui-client"]);
    let envs = [("RUNWIRE_REPLAY_DELAY_MS", "1")];
    let along = server("home_along", &[], &envs);
    let first = server("home_first", &[], &envs);
    let mut cmd = Server::command();
    cmd.env("HARNESS_HOME", first.home()).env("RUNWIRE_REPLAY_DELAY_MS", "1").env_remove("SOURCE_DATE_EPOCH");
    let last = Server::spawn(cmd);
    let (ok, v, output) = thread_mjs(&["open", &along.url("/agui"), &first.url("/agui"), &last.url("/agui")]);
    assert!(ok, "thread.mjs failed:\n{output}\nstderr:\n{}\n{}", first.stderr(), last.stderr());
    assert_eq!(v["fresh"], v["along"]);
    assert!(v["snapshots"]["fresh"].as_u64().is_some_and(|n| n >= 1), "{v}");
    stop(last);
    stop(along);
    stop(first);
}

/// The check can fail: a server that records nothing sends no snapshot, and
/// the fresh client then lacks the thread.
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn without_a_record_the_fresh_client_lacks_the_thread() {
    support::need(&["agui-client"]);
    let along = server("norecord", &[], &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let fresh = server("norecord", &["--no-record"], &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let (ok, v, output) = thread_mjs(&["open", &along.url("/agui"), &fresh.url("/agui")]);
    assert!(!ok, "{output}");
    let err = v["error"].as_str().unwrap_or_default();
    assert!(err.contains("wanted RUN_STARTED then MESSAGES_SNAPSHOT"), "{err}");
    assert!(err.contains("the messages differ"), "{err}");
    stop(along);
    stop(fresh);
}

/// A retried runId joins the live run mid-message (a Claude run streamed
/// as text deltas, a line every 60 ms): RUN_STARTED, the snapshot of what
/// it missed, the open message reopened, then live; both clients end with
/// the same messages. The retrying client holds what the first held by
/// then (a reconnect: part of the answer, so another request body of the
/// same run), or only the input (the very same body).
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn retried_run_joins_mid_message() {
    support::need(&["agui-client"]);
    let log = root().join("fixtures/claude/bb-stop-interrupt.killed-midstream.partial.jsonl");
    let log = log.display().to_string();
    let s = server("retry", &["--agent", "claude", "--replay", &log], &[("RUNWIRE_REPLAY_DELAY_MS", "60")]);
    for holding in ["partial", "input"] {
        let (ok, v, output) = thread_mjs(&["retry", &s.url("/agui"), "--after", "20", "--holding", holding]);
        assert!(ok, "{holding}: thread.mjs failed:\n{output}\nstderr:\n{}", s.stderr());
        assert_eq!(v["first"], v["retry"]);
        let text = v["retry"].as_array().and_then(|m| m.iter().find(|m| m["role"] == "assistant")).expect("an answer");
        assert!(text["content"].as_str().is_some_and(|c| c.len() > 1000), "{text}");
        let held = v["partial"].as_array().and_then(|m| m.iter().find(|m| m["role"] == "assistant"));
        if holding == "partial" {
            // The retrying client held part of the answer when it posted.
            assert!(held.and_then(|m| m["content"].as_str()).is_some_and(|c| !c.is_empty()), "{v}");
        } else {
            assert!(held.is_none(), "{v}");
        }
    }
    stop(s);
}

/// `POST /agui` with `messages`; the SSE body.
fn post_run(s: &Server, thread: &str, run: &str, messages: Value) -> String {
    let body = serde_json::json!({"threadId": thread, "runId": run, "messages": messages}).to_string();
    let r = s.request("POST", "/agui", "Content-Type: application/json\r\n", &body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    String::from_utf8(r.body).expect("UTF-8 SSE")
}

fn events(sse: &str) -> Vec<Value> {
    sse.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).expect("JSON event")).collect()
}

/// What a client sends that does not fit the official message schemas (an
/// assistant message whose content is a number, a user message without an
/// id) is not recorded: the snapshot a later client gets leaves it out, and
/// the official client and schemas accept that stream
/// (`conformance/check.mjs`); what fits is kept as sent.
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn messages_that_do_not_fit_the_schemas_are_not_snapshotted() {
    support::need(&["agui-client"]);
    let s = server("unfit", &[], &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let first = serde_json::json!([
        {"id": "bad", "role": "assistant", "content": 5},
        {"role": "user", "content": "no id"},
        {"id": "sys", "role": "system", "content": "be brief", "metadata": {"k": "v"}},
        {"id": "u1", "role": "user", "content": [{"type": "text", "text": "first"}]}
    ]);
    let one = events(&post_run(&s, "t-unfit", "r1", first));
    assert_eq!(one.iter().filter(|e| e["type"] == "MESSAGES_SNAPSHOT").count(), 0, "{one:?}");
    let sse = post_run(&s, "t-unfit", "r2", serde_json::json!([{"id": "u2", "role": "user", "content": "second"}]));
    let two = events(&sse);
    let snaps: Vec<&Value> = two.iter().filter(|e| e["type"] == "MESSAGES_SNAPSHOT").collect();
    // The first gives the history without the client's new message (never
    // an empty list, which would blank the client's view), the last the
    // whole thread.
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    let history: Vec<&str> = snaps[0]["messages"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(&history[..2], ["sys", "u1"], "{history:?}");
    assert!(!history.contains(&"u2"), "{history:?}");
    let last = snaps.last().expect("a snapshot for a client holding only its new message");
    let msgs = last["messages"].as_array().expect("messages");
    let ids: Vec<&str> = msgs.iter().filter_map(|m| m["id"].as_str()).collect();
    assert!(!ids.contains(&"bad"), "{ids:?}");
    assert_eq!(&ids[..2], ["sys", "u1"], "{ids:?}");
    assert_eq!(ids.last(), Some(&"u2"), "{ids:?}");
    assert_eq!(msgs[0]["metadata"]["k"], "v", "kept as sent: {}", msgs[0]);
    assert_eq!(msgs[1]["content"][0]["text"], "first", "kept as sent: {}", msgs[1]);
    let file = s.home().join("t-unfit.sse");
    std::fs::write(&file, &sse).unwrap();
    let out = Command::new("node")
        .arg(root().join("conformance/check.mjs"))
        .arg(&file)
        .current_dir(root().join("conformance"))
        .output()
        .expect("run check.mjs");
    assert!(
        out.status.success(),
        "check.mjs: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    stop(s);
}

/// `GET /agui/thread?threadId=`: the thread as a client holding none of it
/// would get it with its next run (the snapshot that run sends, less the
/// new message), without starting a run; 404 for a thread not recorded
/// here (or on a server that records nothing), 400 without a valid id, and
/// the bearer token's rule as every API route.
#[test]
fn a_threads_messages_are_served_without_a_run() {
    let s = server("history", &[], &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    let thread = "t history/é";
    let q = "/agui/thread?threadId=t%20history%2F%C3%A9";
    assert_eq!(s.request("GET", q, "", "").status, 404);
    post_run(&s, thread, "r1", serde_json::json!([{"id": "u1", "role": "user", "content": "first"}]));
    post_run(&s, thread, "r2", serde_json::json!([{"id": "u2", "role": "user", "content": "second"}]));
    let r = s.request("GET", q, "", "");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let got: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(got["threadId"], thread);
    let served = got["messages"].as_array().expect("messages").clone();
    assert!(served.iter().any(|m| m["role"] == "assistant"), "{got}");
    // What the next run's snapshot gives a client that held nothing.
    let sse = post_run(&s, thread, "r3", serde_json::json!([{"id": "u3", "role": "user", "content": "third"}]));
    let all = events(&sse);
    let last = all.iter().rfind(|e| e["type"] == "MESSAGES_SNAPSHOT").expect("a snapshot");
    let snap = last["messages"].as_array().unwrap();
    assert_eq!(snap.last().map(|m| &m["id"]), Some(&Value::from("u3")));
    assert_eq!(&snap[..snap.len() - 1], &served[..], "the route's thread is the snapshot's");
    for bad in ["/agui/thread", "/agui/thread?threadId=", "/agui/thread?threadId=a%0Ab"] {
        assert_eq!(s.request("GET", bad, "", "").status, 400, "{bad}");
    }
    assert_eq!(s.request("POST", q, "Content-Type: application/json\r\n", "{}").status, 405);
    stop(s);
    // A server that records nothing has no thread to give.
    let quiet = server("history-norecord", &["--no-record"], &[("RUNWIRE_REPLAY_DELAY_MS", "1")]);
    post_run(&quiet, "t2", "r1", serde_json::json!([{"id": "u1", "role": "user", "content": "first"}]));
    assert_eq!(quiet.request("GET", "/agui/thread?threadId=t2", "", "").status, 404);
    stop(quiet);
}

/// Many clients opening one large thread at once: at most one read of it
/// runs (each costs a few times the file's size while it lasts); the others
/// are told 503 with `Retry-After`, and every 200 carries the whole thread.
#[test]
fn a_large_thread_read_by_many_at_once_is_read_one_at_a_time() {
    let s = server("history-many", &[], &[]);
    let file = runwire::runs::thread::path(s.home(), "big");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let text = "y".repeat(280);
    let lines: String = (0..60_000)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"run": "r", "message": {"id": format!("m{i}"), "role": "user", "content": text}})
            )
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    let answers: Vec<(u16, Option<String>, usize)> = std::thread::scope(|sc| {
        let asks: Vec<_> = (0..6)
            .map(|_| {
                sc.spawn(|| {
                    let r = s.request("GET", "/agui/thread?threadId=big", "", "");
                    let n = serde_json::from_slice::<Value>(&r.body)
                        .ok()
                        .and_then(|v| v["messages"].as_array().map(Vec::len))
                        .unwrap_or(0);
                    (r.status, r.header("retry-after").map(str::to_string), n)
                })
            })
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    assert!(answers.iter().any(|a| a.0 == 200), "{answers:?}");
    assert!(answers.iter().any(|a| a.0 == 503), "six at once, one read at a time: {answers:?}");
    for a in &answers {
        match a {
            (200, _, n) => assert_eq!(*n, 60_000),
            (503, Some(after), _) => assert_eq!(after, "1"),
            other => panic!("{other:?}"),
        }
    }
    stop(s);
}
