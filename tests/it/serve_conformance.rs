//! A live `runwire-serve` judged by the official AG-UI 1.0.0 client: each
//! test starts the server as a child on 127.0.0.1:0 and drives it with
//! `conformance/live.mjs` (`HttpAgent.runAgent()` of `@ag-ui/client` 1.0.0,
//! every raw event through `EventSchemas`, exactly one terminal event, last,
//! and no client warning). Needs node and npm (ignored without them, failed
//! under CI: `tests/support/tools.rs`); `npm ci` runs first when
//! `conformance/node_modules` is missing.
//! Every wait has a deadline, and each test stops its server and checks that
//! no agent process outlives it.

use crate::support;
use support::Server;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The session id in the stub's default fixture (bb-turn-tools.partial.jsonl).
const SESSION: &str = "d8785ba1-3fa6-4606-b465-f13165cc441f";
const LIVE_DEADLINE: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

/// Collects a child's pipe in a thread.
fn collect(r: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let b = buf.clone();
    std::thread::spawn(move || {
        let mut r = r;
        let mut chunk = [0u8; 8192];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

fn text(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// A server ([`Server`]) whose agent may be the stub recording its
/// invocations (`STUB_RECORD`): stopping it checks that no agent process
/// group the stub recorded outlives it.
struct Recorded {
    server: Server,
    url: String,
    /// The stub's STUB_RECORD file, when the agent is the stub.
    record: Option<PathBuf>,
}

impl Recorded {
    fn start(args: &[&str], envs: &[(&str, &str)]) -> Recorded {
        Self::start_recorded(args, envs, None)
    }

    fn start_recorded(args: &[&str], envs: &[(&str, &str)], record: Option<PathBuf>) -> Recorded {
        let mut cmd = Server::command();
        cmd.args(args);
        cmd.env("RUNWIRE_REPLAY_DELAY_MS", "1").env_remove("SOURCE_DATE_EPOCH").env_remove("STUB_MODE");
        // Runs the server records (POST /agui) go to a temp dir, not ~/.harness.
        // One home a server: a recorded runId is never recorded again, and the tests reuse theirs.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let home = std::env::temp_dir().join(format!("runwire-serve-conf-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        crate::support::keep_on_failure(&home);
        cmd.env("HARNESS_HOME", home);
        cmd.envs(envs.iter().copied());
        if let Some(r) = &record {
            let _ = std::fs::remove_file(r);
            cmd.env("STUB_RECORD", r);
        }
        let server = Server::spawn(cmd);
        Recorded { url: server.url("/agui"), server, record }
    }

    fn stderr(&self) -> String {
        self.server.stderr()
    }

    /// SIGTERM, a bounded wait (SIGKILL after 10 s), then: no agent process
    /// group the stub recorded is still alive.
    fn stop(&mut self) {
        let (_, code) = self.server.terminate(Duration::from_secs(10));
        if code.is_none() {
            self.server.kill();
        }
        assert_eq!(code, Some(0), "runwire-serve did not exit 0 after SIGTERM; stderr:\n{}", self.stderr());
        for pgid in self.agent_groups() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && !self.members(pgid).is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let left = self.members(pgid);
            for &p in &left {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            assert!(left.is_empty(), "agent process group {pgid} outlived the server: {left:?}");
        }
    }

    /// The processes of group `pgid` that this server's stub started (their
    /// environment names this test's `STUB_RECORD`). Not the group id
    /// alone: once the stub's group is gone its id may be another
    /// process's (pids wrap at 32768 here), which a probe would call
    /// alive and a `killpg` would kill.
    fn members(&self, pgid: i32) -> Vec<i32> {
        let Some(record) = &self.record else { return Vec::new() };
        let mine = format!("STUB_RECORD={}", record.display()).into_bytes();
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                // After the command's closing parenthesis: state, ppid, pgrp.
                let group = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(2)?.parse::<i32>().ok());
                group == Some(pgid)
                    && std::fs::read(format!("/proc/{p}/environ"))
                        .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == mine.as_slice()))
            })
            .collect()
    }

    /// `(pgid, argv)` of every stub invocation.
    fn invocations(&self) -> Vec<(i32, String)> {
        let Some(r) = &self.record else { return Vec::new() };
        std::fs::read_to_string(r)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (pid, argv) = l.split_once(' ').unwrap_or((l, ""));
                (pid.parse().expect("pid in STUB_RECORD"), argv.to_string())
            })
            .collect()
    }

    fn agent_groups(&self) -> Vec<i32> {
        self.invocations().into_iter().map(|(p, _)| p).collect()
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        self.server.kill();
        for pgid in self.agent_groups() {
            for p in self.members(pgid) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
        if let Some(r) = &self.record {
            let _ = std::fs::remove_file(r);
        }
    }
}

struct Live {
    success: bool,
    runs: Vec<Value>,
    output: String,
}

/// `node conformance/live.mjs URL ARGS...`, within [`LIVE_DEADLINE`].
fn live(url: &str, args: &[&str]) -> Live {
    let mut child = Command::new("node")
        .arg(root().join("conformance/live.mjs"))
        .arg(url)
        .args(args)
        .current_dir(root().join("conformance"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let out = collect(child.stdout.take().unwrap());
    let err = collect(child.stderr.take().unwrap());
    let deadline = Instant::now() + LIVE_DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for node") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("live.mjs {url} {args:?} still running after {LIVE_DEADLINE:?}:\n{}{}", text(&out), text(&err));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The readers finish at EOF, right after the exit.
    std::thread::sleep(Duration::from_millis(50));
    let stdout = text(&out);
    let output = format!("{stdout}{}", text(&err));
    let runs = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("live.mjs printed a line that is not JSON ({e}): {l}"))
        })
        .collect();
    Live { success: status.success(), runs, output }
}

/// Starts the server with `args`/`envs`, runs live.mjs with `--expect`, and
/// checks every run passed with that terminal event.
fn check(test: &str, args: &[&str], envs: &[(&str, &str)], expect: &str) {
    support::need(&["agui-client"]);
    let stub = args.contains(&"--agent-cmd");
    let record = stub.then(|| std::env::temp_dir().join(format!("runwire-live-{}-{test}.record", std::process::id())));
    let mut server = Recorded::start_recorded(args, envs, record);
    let r = live(&server.url, &["--expect", expect]);
    let stderr = server.stderr();
    server.stop();
    assert!(r.success, "{test}: live.mjs failed:\n{}\nserver stderr:\n{stderr}", r.output);
    assert_eq!(r.runs.len(), 1, "{}", r.output);
    let run = &r.runs[0];
    let want = if expect == "finished" { "RUN_FINISHED" } else { "RUN_ERROR" };
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["terminal"], want, "{run}");
    assert!(run["events"].as_u64().unwrap() >= 2, "{run}");
    if stub {
        assert_eq!(server.invocations().len(), 1, "the stub ran once");
    }
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn demo_replay_finishes() {
    check("demo_replay_finishes", &[], &[], "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn cursor_replay_finishes() {
    let log = path("fixtures/cursor/cursor-hack-parallel-sleep.jsonl");
    check("cursor_replay_finishes", &["--agent", "cursor", "--replay", &log], &[], "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_replay_finishes() {
    let log = path("fixtures/codex/openai-docs-exec-sample.jsonl");
    check("codex_replay_finishes", &["--agent", "codex", "--replay", &log], &[], "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_killed_midstream_replay_ends_in_run_error() {
    let log = path("fixtures/claude/bb-stop-interrupt.killed-midstream.partial.jsonl");
    check("claude_killed_midstream_replay_ends_in_run_error", &["--agent", "claude", "--replay", &log], &[], "error");
}

fn stub_args() -> [String; 4] {
    ["--agent".into(), "claude".into(), "--agent-cmd".into(), path("fixtures/stub-wrapper/agent.sh")]
}

fn check_stub(test: &str, mode: &str, expect: &str) {
    let args = stub_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    check(test, &args, &[("STUB_MODE", mode)], expect);
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn stub_agent_ok_finishes() {
    check_stub("stub_agent_ok_finishes", "ok", "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn stub_agent_fail_ends_in_run_error() {
    check_stub("stub_agent_fail_ends_in_run_error", "fail", "error");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn stub_agent_missing_engine_ends_in_run_error() {
    check_stub("stub_agent_missing_engine_ends_in_run_error", "missing", "error");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn second_run_on_a_thread_resumes_and_both_pass() {
    let test = "second_run_on_a_thread_resumes_and_both_pass";
    support::need(&["agui-client"]);
    let record = std::env::temp_dir().join(format!("runwire-live-{}-{test}.record", std::process::id()));
    let args = stub_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Recorded::start_recorded(&args, &[("STUB_MODE", "ok")], Some(record));
    let r = live(&server.url, &["--runs", "2", "--expect", "finished", "--prompt", "go on"]);
    let stderr = server.stderr();
    server.stop();
    assert!(r.success, "live.mjs failed:\n{}\nserver stderr:\n{stderr}", r.output);
    assert_eq!(r.runs.len(), 2, "{}", r.output);
    for run in &r.runs {
        assert_eq!(run["ok"], true, "{run}");
        assert_eq!(run["terminal"], "RUN_FINISHED", "{run}");
    }
    let calls = server.invocations();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(!calls[0].1.contains("--resume"), "the first run starts a session: {calls:?}");
    assert!(
        calls[1].1.contains(&format!("--resume {SESSION}")),
        "the second run resumes the first's session: {calls:?}"
    );
}

/// The checker can fail: a wrong `--expect`, and a stream that stops without
/// a terminal event (which the 1.0.0 client itself accepts).
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn live_checker_rejects_a_wrong_terminal_and_a_truncated_stream() {
    support::need(&["agui-client"]);
    let mut server = Recorded::start(&[], &[]);
    let r = live(&server.url, &["--expect", "error"]);
    server.stop();
    assert!(!r.success, "{}", r.output);
    assert_eq!(r.runs[0]["ok"], false, "{}", r.output);
    assert_eq!(r.runs[0]["terminal"], "RUN_FINISHED", "{}", r.output);
    assert!(r.runs[0]["error"].as_str().unwrap().contains("expect:"), "{}", r.output);

    // A one-shot server answering with a truncated stream.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::fs::read(root().join("conformance/samples/bad-unterminated.sse")).unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut req = vec![0u8; len];
        let _ = s.read_exact(&mut req);
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(&body);
    });
    let r = live(&format!("http://127.0.0.1:{port}/agui"), &[]);
    fake.join().unwrap();
    assert!(!r.success, "{}", r.output);
    assert_eq!(r.runs[0]["ok"], false, "{}", r.output);
    assert!(r.runs[0]["error"].as_str().unwrap().contains("terminal: the stream ends without"), "{}", r.output);
}

/// The real wrappers (`wrappers/<agent>.sh`, found from the checkout) over the
/// stub engines, which check every flag the wrappers pass.
fn check_wrapper(test: &str, agent: &str, mode: &str, expect: &str) {
    let path_var = format!("{}:{}", path("fixtures/stub-engines"), std::env::var("PATH").unwrap_or_default());
    check(test, &["--agent", agent], &[("PATH", &path_var), ("STUB_MODE", mode)], expect);
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_wrapper_over_stub_engine_finishes() {
    check_wrapper("claude_wrapper_over_stub_engine_finishes", "claude", "ok", "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn cursor_wrapper_over_stub_engine_finishes() {
    check_wrapper("cursor_wrapper_over_stub_engine_finishes", "cursor", "ok", "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_wrapper_over_stub_engine_finishes() {
    check_wrapper("codex_wrapper_over_stub_engine_finishes", "codex", "ok", "finished");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn failing_engines_end_in_run_error_through_every_wrapper() {
    for agent in ["claude", "cursor", "codex"] {
        check_wrapper(&format!("failing_engine_{agent}"), agent, "fail", "error");
    }
}
