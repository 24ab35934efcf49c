//! The agent wrappers (`wrappers/*.sh`, spec/WRAPPER-CONTRACT.md) against the stub
//! engines in `fixtures/stub-engines/`: the contract probe passes, and each wrapper's
//! output read by `normalize-events <adapter>` ends in an `exit` event with rc 0 whose
//! events carry the session id of the status line.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command as Process;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[cfg_attr(not(all(tool = "bash", tool = "jq")), ignore = "needs bash and jq: apt-get install bash jq")]
fn contract_probe_passes() {
    support::need(&["bash", "jq"]);
    let out = Process::new("bash")
        .arg(root().join("wrappers/_contract-probe.sh"))
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .current_dir(root())
        .output()
        .expect("run the contract probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A `# skip` would pass a check that did not run.
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("not ok") || l.starts_with("#   ") || l.starts_with("# skip"))
        .collect();
    assert!(
        out.status.success() && failed.is_empty(),
        "contract probe failed ({}):\n{}\n--- full output ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status,
        failed.join("\n")
    );
    let passed = stdout.lines().filter(|l| l.starts_with("ok - ")).count();
    assert!(passed >= 90, "only {passed} checks ran:\n{stdout}");
}

/// Run `wrappers/<adapter>.sh` with the stub engine in mode ok; return its stdout.
fn wrapper_stdout(adapter: &str, extra: &[&str]) -> String {
    let stubs = root().join("fixtures/stub-engines");
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    let out = Process::new("bash")
        .arg(root().join(format!("wrappers/{adapter}.sh")))
        .args(["--prompt", "say hi"])
        .args(extra)
        .env("PATH", path)
        .env("STUB_MODE", "ok")
        .env_remove("RUNWIRE_CLAUDE_BIN")
        .env_remove("RUNWIRE_CURSOR_BIN")
        .env_remove("RUNWIRE_CODEX_BIN")
        .env_remove("STUB_STREAM")
        .env_remove("STUB_DELAY")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run the wrapper");
    assert!(out.status.success(), "{adapter}.sh failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn check_normalized(adapter: &str, extra: &[&str], want_session: Option<&str>) {
    let raw = wrapper_stdout(adapter, extra);
    let status: Value = serde_json::from_str(raw.lines().last().expect("some output")).expect("status line is JSON");
    assert_eq!(status["type"], "runwire.status", "{adapter}: last line {status}");
    assert_eq!(status["rc"], 0, "{adapter}: {status}");
    let session = status["session_id"].as_str().unwrap_or_else(|| panic!("{adapter}: no session_id in {status}"));
    if let Some(w) = want_session {
        assert_eq!(session, w, "{adapter}: status {status}");
    }

    let out = Command::cargo_bin("normalize-events").unwrap().arg(adapter).write_stdin(raw.clone()).output().unwrap();
    assert!(out.status.success(), "normalize-events {adapter}: {}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{adapter}: bad event {l}: {e}")))
        .collect();
    let last = events.last().unwrap_or_else(|| panic!("{adapter}: no events"));
    assert_eq!(last["type"], "exit", "{adapter}: last event {last}");
    assert_eq!(last["data"]["rc"], 0, "{adapter}: {last}");
    assert_eq!(last["data"]["ok"], true, "{adapter}: {last}");
    assert_eq!(last["session"], session, "{adapter}: the exit event carries the session id: {last}");
    let exits = events.iter().filter(|e| e["type"] == "exit").count();
    assert_eq!(exits, 1, "{adapter}: one exit event");
    for e in &events {
        if let Some(s) = e.get("session") {
            assert_eq!(s, session, "{adapter}: event with another session: {e}");
        }
    }
    assert!(
        events.iter().any(|e| e["type"] == "turn_end"),
        "{adapter}: the stub's stream ends its turn before the status line"
    );
}

#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn wrapper_output_normalizes_to_an_exit_event_with_the_session() {
    support::need(&["bash"]);
    check_normalized("claude", &[], None);
    check_normalized(
        "claude",
        &["--session-id", "5e55a1d0-0000-4000-8000-00000000abcd"],
        Some("5e55a1d0-0000-4000-8000-00000000abcd"),
    );
    check_normalized("cursor", &[], Some("c0ffee00-0000-4000-8000-000000000001"));
    check_normalized("codex", &[], Some("0199a213-81c0-7800-8aa1-bbab2a035a53"));
    for adapter in ["claude", "cursor", "codex"] {
        check_normalized(
            adapter,
            &["--resume", "7e5a0b1c-1111-4222-8333-444455556666"],
            Some("7e5a0b1c-1111-4222-8333-444455556666"),
        );
    }
}

/// `claude.sh --interactive` over the replay stub of the recorded `approval-allow` session:
/// the request appears in the stream, an answer written to the wrapper's stdin reaches the
/// engine as the recording shows (the stub checks it), and the status line closes the turn.
#[test]
#[cfg_attr(not(all(tool = "bash", tool = "jq")), ignore = "needs bash and jq: apt-get install bash jq")]
fn claude_interactive_takes_an_answer_on_stdin() {
    use std::io::{BufRead, BufReader, Write};
    support::need(&["bash", "jq"]);
    let cell = root().join("fixtures/interactive/claude-code/approval-allow");
    let dir = support::scratch("runwire-wrap-live");
    let engine = dir.join("replay-claude");
    std::fs::write(
        &engine,
        format!(
            "#!/usr/bin/env bash\nexec '{}' claude '{}' \"$@\"\n",
            root().join("fixtures/stub-engines/replay").display(),
            cell.display()
        ),
    )
    .unwrap();
    Process::new("chmod").arg("755").arg(&engine).status().unwrap();
    let prompt = "Run `curl -sI https://example.com | head -n 1` in the shell (it needs network access), then reply with the single word done.";
    let mut child = Process::new("bash")
        .arg(root().join("wrappers/claude.sh"))
        .args(["--interactive", "--prompt", prompt])
        .env("RUNWIRE_CLAUDE_BIN", &engine)
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .current_dir(&dir)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        out.push(l.clone());
        if l.starts_with(r#"{"type":"runwire.request""#) {
            let req: Value = serde_json::from_str(&l).unwrap();
            writeln!(stdin, r#"{{"type":"answer","id":{},"decision":"allow","by":"probe"}}"#, req["id"]).unwrap();
            break;
        }
    }
    drop(stdin);
    out.extend(lines.map(|l| l.unwrap()));
    let st = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(st.status.success() && !err.contains("replay stub:"), "{}\n{err}\n{}", st.status, out.join("\n"));
    let status: Value = serde_json::from_str(out.last().unwrap()).unwrap();
    assert_eq!(
        (status["ok"].as_bool(), status["session_id"].as_str()),
        (Some(true), Some("0e70de90-9b5d-47f6-96b1-1d2711dbcade"))
    );
    assert!(out.iter().any(|l| l.starts_with(r#"{"type":"runwire.answer""#)
        && l.contains(r#""decision":"allow","scope":"once","by":"probe""#)));
    let _ = std::fs::remove_dir_all(&dir);
}
