//! Issue 26's protocol cases, against small fake agents written by each
//! test (shell scripts speaking just enough of each protocol), so they run
//! without the real agents: `runwire-session` finds a bare agent name on
//! `PATH` (case 1); an error reply to runwire's own request ends the
//! session with that error (case 4); an ACP session ends after `end` even
//! when the agent never exits on its own (case 5); `runwire-session acp --
//! CMD ARGS…` runs the command exactly as given (case 7). The real agents
//! show the same in tests/real_agents.rs.

mod support;

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
