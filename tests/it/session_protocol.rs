//! Issue 26's protocol cases, against small fake agents written by each
//! test (shell scripts speaking just enough of each protocol), so they run
//! without the real agents: `runwire-session` finds a bare agent name on
//! `PATH` (case 1); an error reply to runwire's own request ends the
//! session with that error (case 4); an ACP session ends after `end` even
//! when the agent never exits on its own (case 5); `runwire-session acp --
//! CMD ARGS…` runs the command exactly as given (case 7). The real agents
//! show the same in tests/it/real_agents.rs.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Writes an executable `name` into `dir` with `body` (a `/bin/sh` script).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn lines(out: &[u8]) -> Vec<Value> {
    out.split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect()
}

/// A `runwire-session` whose input the test writes and whose output lines
/// it reads as they come.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<Value>>>,
    err: Arc<Mutex<String>>,
}

impl Session {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Session {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-session"));
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("runwire-session starts");
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                o.lock().unwrap().push(serde_json::from_str(&l).unwrap_or(Value::String(l)));
            }
        });
        let err = Arc::new(Mutex::new(String::new()));
        let e = err.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines() {
                let Ok(l) = l else { break };
                let mut e = e.lock().unwrap();
                e.push_str(&l);
                e.push('\n');
            }
        });
        Session { stdin: child.stdin.take(), child, out, err }
    }

    fn send(&mut self, line: Value) {
        let stdin = self.stdin.as_mut().expect("the input is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn lines(&self) -> Vec<Value> {
        self.out.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn why(&self) -> String {
        let lines: Vec<String> = self.lines().iter().map(|l| l.to_string()).collect();
        format!("stdout:\n{}\nstderr:\n{}", lines.join("\n"), self.stderr())
    }

    fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| pred(l)) {
                return l;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no {what} within 20 s\n{}", self.why());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit code within `limit`, or `None` (then it is killed).
    fn exit_within(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                // Let the readers take the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return Some(s.code().unwrap_or(-1));
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Claude Code stand-in: answers `initialize`, then each user message
/// with `system/init` and a `result`; exits when its input ends.
const FAKE_CLAUDE: &str = r#"
while IFS= read -r l; do
  case $l in
    *'"subtype":"initialize"'*) ;;
    *'"type":"user"'*)
      echo '{"type":"system","subtype":"init","session_id":"s1"}'
      echo '{"type":"result","subtype":"success","is_error":false,"result":"hello from PATH"}' ;;
  esac
done
"#;

/// Case 1: `runwire-session claude` with `claude` only on `PATH` runs it
/// (it failed `claude: No such file or directory`, exit 3).
#[test]
fn a_bare_agent_name_is_found_on_path() {
    let dir = support::scratch("session-protocol-path");
    script(&dir, "claude", FAKE_CLAUDE);
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", "say hello"])
        .env_remove("RUNWIRE_CLAUDE_BIN")
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "runwire-session claude: {:?}: {err}", out.status);
    let ls = lines(&out.stdout);
    assert!(ls.iter().any(|l| l["result"] == "hello from PATH"), "{ls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An ACP agent stand-in: answers `initialize`, `session/new`,
/// `session/load` (or refuses the method named in `$FAKE_FAIL` with an
/// error) and each `session/prompt` with a chunk and `end_turn`. Like the
/// real ACP agents it does not exit when its input ends: it keeps running,
/// its stdout open.
const FAKE_ACP: &str = r#"
reply() { printf '{"jsonrpc":"2.0","id":%s,%s}\n' "$1" "$2"; }
while IFS= read -r l; do
  id=$(printf '%s' "$l" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  m=$(printf '%s' "$l" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  if [ -n "$FAKE_FAIL" ] && [ "$m" = "$FAKE_FAIL" ]; then
    reply "$id" '"error":{"code":-32002,"message":"Resource not found: no such session"}'
    continue
  fi
  case $m in
    initialize) reply "$id" '"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}' ;;
    session/new) reply "$id" '"result":{"sessionId":"s1"}' ;;
    session/load) reply "$id" '"result":{}' ;;
    session/prompt)
      echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello over ACP."}}}}'
      printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" (argv: %s)"}}}}\n' "$*"
      reply "$id" '"result":{"stopReason":"end_turn"}' ;;
  esac
done
exec sleep 600
"#;

fn fake_acp(what: &str) -> (PathBuf, PathBuf) {
    let dir = support::scratch(&format!("session-protocol-{what}"));
    let agent = script(&dir, "fake-acp", FAKE_ACP);
    (dir, agent)
}

/// Case 5: `end` ends an ACP session although the agent neither exits
/// when its input closes nor closes its stdout: after a grace it is
/// stopped, and the session ends 0 (it ended as asked).
#[test]
fn an_acp_session_ends_after_end_whatever_the_agent_does() {
    let (dir, agent) = fake_acp("acp-end");
    let mut s = Session::start(&["acp", "--", agent.to_str().unwrap()], &[]);
    s.send(json!({"type": "message", "text": "say hello"}));
    s.wait_for("runwire.idle", |l| l["type"] == "runwire.idle" && l["inputs"] == 1);
    s.send(json!({"type": "end"}));
    let t = Instant::now();
    let code = s.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "end did not end the ACP session\n{}", s.why());
    assert!(t.elapsed() < Duration::from_secs(12), "it took {:?}", t.elapsed());
    assert!(s.stderr().contains("did not exit within"), "{}", s.why());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 5, the end of input: the same.
#[test]
fn an_acp_session_ends_at_the_end_of_its_input() {
    let (dir, agent) = fake_acp("acp-eof");
    let mut s = Session::start(&["acp", "--prompt", "say hello", "--", agent.to_str().unwrap()], &[]);
    s.stdin = None;
    let code = s.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(0), "the end of input did not end the ACP session\n{}", s.why());
    assert!(s.lines().iter().any(|l| l["params"]["update"]["content"]["text"] == "Hello over ACP."), "{}", s.why());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 4: the agent refuses `session/load` (no such session): the session
/// ends with its reason (a `runwire.status` line that is not ok, the reason
/// on stderr, exit 1), not a queued prompt waiting forever.
#[test]
fn an_acp_agent_refusing_session_load_ends_the_session_with_its_reason() {
    let (dir, agent) = fake_acp("acp-noload");
    let mut s = Session::start(
        &["acp", "--resume", "gone", "--prompt", "say hello", "--", agent.to_str().unwrap()],
        &[("FAKE_FAIL", "session/load")],
    );
    let code = s.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "the session did not end with an error\n{}", s.why());
    let status = s.lines().into_iter().find(|l| l["type"] == "runwire.status" && l.get("ok").is_some());
    let status = status.unwrap_or_else(|| panic!("no runwire.status line\n{}", s.why()));
    assert_eq!(status["ok"], false);
    assert!(status["detail"].as_str().unwrap().contains("refused session/load: Resource not found"), "{status}");
    assert!(s.stderr().contains("refused session/load: Resource not found"), "{}", s.why());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 4, for the other requests runwire makes before a prompt can run.
#[test]
fn an_acp_agent_refusing_initialize_or_session_new_ends_the_session() {
    for method in ["initialize", "session/new"] {
        let (dir, agent) = fake_acp("acp-refuse");
        let mut s = Session::start(&["acp", "--", agent.to_str().unwrap()], &[("FAKE_FAIL", method)]);
        s.send(json!({"type": "message", "text": "say hello"}));
        let code = s.exit_within(Duration::from_secs(20));
        assert_eq!(code, Some(1), "{method}: the session did not end with an error\n{}", s.why());
        assert!(s.stderr().contains(&format!("refused {method}")), "{}", s.why());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A `codex app-server` stand-in that refuses `thread/resume` and
/// `thread/start` as codex 0.169.0 does for a missing thread.
const FAKE_CODEX: &str = r#"
while IFS= read -r l; do
  id=$(printf '%s' "$l" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case $l in
    *'"method":"initialize"'*) printf '{"id":%s,"result":{"userAgent":"fake"}}\n' "$id" ;;
    *'"method":"thread/'*) printf '{"id":%s,"error":{"code":-32600,"message":"no rollout found for thread id 019a"}}\n' "$id" ;;
  esac
done
"#;

/// Case 4 for codex: an error reply to `thread/resume` ends the session.
#[test]
fn codex_refusing_thread_resume_ends_the_session_with_its_reason() {
    let dir = support::scratch("session-protocol-codex-resume");
    let codex = script(&dir, "fake-codex", FAKE_CODEX);
    let mut s =
        Session::start(&["codex", "--resume", "019a", "--prompt", "say hello", "--", codex.to_str().unwrap()], &[]);
    let code = s.exit_within(Duration::from_secs(20));
    assert_eq!(code, Some(1), "the session did not end with an error\n{}", s.why());
    assert!(s.stderr().contains("codex refused thread/resume: no rollout found"), "{}", s.why());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Case 7: `runwire-serve --agent acp --interactive -- CMD ARGS…` runs any
/// ACP agent exactly as given (`--agent cursor --agent-cmd X` ran `X acp`),
/// and a run streams its reply to `RUN_FINISHED`.
#[test]
fn the_server_runs_any_acp_agent_exactly_as_given() {
    let (dir, agent) = fake_acp("serve-acp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-serve"))
        .args(["--agent", "acp", "--interactive", "--listen", "127.0.0.1:0", "--"])
        .arg(&agent)
        .args(["--flag", "two words"])
        .env("HARNESS_HOME", dir.join("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).expect("the port");
    let body =
        json!({"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "say hello"}]})
            .to_string();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /agui HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut c, &mut raw).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let events = support::sse::events(raw.split_once("\r\n\r\n").map_or("", |(_, b)| b));
    let text: String = events.iter().filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "Hello over ACP. (argv: --flag two words)", "{raw}");
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("RUN_FINISHED")), "{raw}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--agent acp` is interactive only (ACP has no batch mode) and needs its
/// command line; a command after `--` goes with `--agent acp` only.
#[test]
fn the_server_refuses_acp_without_interactive_or_a_command() {
    for (args, says) in [
        (&["--agent", "acp", "--", "x"][..], "ACP has no batch mode"),
        (&["--agent", "acp", "--interactive"][..], "give the agent's command line after --"),
        (&["--agent", "codex", "--interactive", "--", "x"][..], "goes with --agent acp only"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_runwire-serve"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("runwire-serve: ") && err.contains(says), "{args:?}: {err}");
    }
}
