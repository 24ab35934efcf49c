//! `runwire-session claude --journal` run by hand over the trust stand-in
//! (`examples/trust-agent`, Claude's control protocol): what its journal
//! says of an answer given on its own input, and
//! what a stop signal does with the requests it holds open: an operator's
//! SIGTERM closes them (cancelled, by the signal), ends the agent and exits
//! 143; under a runner that says a signal means it died (`--supervised`,
//! `RUNWIRE_SUPERVISED=1`, what `runwire-supervise` gives its tasks) the
//! session is killed by it and answers nothing (control_doors' killed
//! supervisor test is the supervisor's side).

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(15);

/// A session over the stand-in in `dir`, which asks to run `npm test`
/// (with a rule claude would keep, so "for the session" is offered), its
/// journal `dir/j.jsonl`; stdout's lines on the receiver.
fn start(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (Child, Receiver<String>) {
    let ask = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"},
        "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
            "behavior": "allow", "destination": "localSettings"}]}]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.args(["claude", "--prompt", "test it", "--task", "a", "--journal"])
        .arg(dir.join("j.jsonl"))
        .args(args)
        .arg("--")
        .arg(support::example("trust-agent"))
        .current_dir(dir)
        .env_remove("RUNWIRE_SUPERVISED")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", ask.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// The session's `runwire.request` line, once it says it.
fn request(lines: &Receiver<String>) -> Value {
    loop {
        let l = lines.recv_timeout(LIMIT).expect("a runwire.request line");
        if l.starts_with(r#"{"type":"runwire.request""#) {
            return serde_json::from_str(&l).unwrap();
        }
    }
}

fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("j.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn answered(dir: &Path) -> Vec<Value> {
    journal(dir).into_iter().filter(|r| r["input"] == "answered").collect()
}

/// What reached the stand-in: its `control_response` lines after the
/// first (the reply to `initialize` is the session's, not an answer).
fn answers_sent(dir: &Path) -> Vec<Value> {
    support::control_responses(&dir.join("agent-input.jsonl"))
        .into_iter()
        .filter(|l| l["response"]["response"].get("behavior").is_some())
        .collect()
}

/// The session's exit, within [`LIMIT`] (killed if it outstays it).
fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the session did not exit within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
}

fn scratch(name: &str) -> PathBuf {
    let d = support::scratch(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An answer on the session's own input is journaled with its door
/// (`session-input`, as every other door names its own) and what it
/// granted: its scope and the edited input the call runs with (secrets
/// redacted as the events redact it).
#[test]
fn an_answer_on_the_session_input_journals_its_scope_and_edits() {
    let dir = scratch("session-signals-grants");
    let (mut child, lines) = start(&dir, &[], &[]);
    let r = request(&lines);
    let answer = json!({"type": "answer", "id": r["interrupt_id"], "decision": "allow", "scope": "session", "by": "ana",
        "updated_input": {"command": "npm test -- --ci", "env": {"API_TOKEN": "t0ps3cret-value"}}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{answer}").unwrap();
    writeln!(stdin, r#"{{"type":"end"}}"#).unwrap();
    assert_eq!(exit_of(&mut child).code(), Some(0));
    let a = answered(&dir);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(
        (a[0]["decision"].as_str(), a[0]["by"].as_str(), a[0]["scope"].as_str(), a[0]["door"].as_str()),
        (Some("allow"), Some("ana"), Some("session"), Some("session-input")),
        "{a:?}"
    );
    let shown = a[0]["updated_input"].as_str().unwrap_or_else(|| panic!("no edited input: {a:?}"));
    assert!(shown.contains("npm test -- --ci") && !shown.contains("t0ps3cret"), "{shown}");
    // The agent got the edit itself, unredacted: the record's copy is redacted, not the call.
    let sent = answers_sent(&dir);
    assert_eq!(sent[0]["response"]["response"]["updatedInput"]["env"]["API_TOKEN"], "t0ps3cret-value", "{sent:?}");
}

/// An operator's SIGTERM to a session run by hand: its open request is
/// closed (the agent told no, the journal's `answered` record `cancelled`
/// by `signal SIGTERM`), the agent's input closed and the agent let exit,
/// and the session exits 143. It was killed outright, the request left
/// open in the journal (the run waited for a person no one could be).
#[test]
fn an_operators_sigterm_closes_the_open_request_ends_the_agent_and_exits_143() {
    let dir = scratch("session-signals-operator");
    let (mut child, lines) = start(&dir, &[], &[]);
    let r = request(&lines);
    sigterm(&child);
    let status = exit_of(&mut child);
    let err = {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut s);
        s
    };
    assert_eq!(status.code(), Some(143), "exited, not killed, with 128 + SIGTERM: {status:?} {err}");
    let a = answered(&dir);
    assert_eq!(a.len(), 1, "the request closed in the journal: {:?}", journal(&dir));
    assert_eq!(
        (a[0]["decision"].as_str(), a[0]["by"].as_str(), a[0]["interrupt"].as_str()),
        (Some("cancelled"), Some("signal SIGTERM"), r["interrupt_id"].as_str()),
        "{a:?}"
    );
    let sent = answers_sent(&dir);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["response"]["response"]["behavior"], "deny", "{sent:?}");
    // The agent ended as the session did: it read its input to the end (the stand-in logs each line).
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(rest.iter().any(|l| l.contains(r#""type":"runwire.answer""#) && l.contains("cancelled")), "{rest:?}");
}

/// Under a runner that says a stop signal means it died (`--supervised`,
/// or `RUNWIRE_SUPERVISED=1` as `runwire-supervise` gives its tasks,
/// reaching a session a wrapper runs): the session is killed by the
/// signal and answers nothing, neither to the agent nor in the journal (a
/// dead supervisor's request must not be answered by its session).
#[test]
fn under_a_runner_a_sigterm_kills_the_session_and_answers_nothing() {
    use std::os::unix::process::ExitStatusExt;
    for (name, env, args) in [
        ("session-signals-flag", &[][..], &["--supervised"][..]),
        ("session-signals-env", &[("RUNWIRE_SUPERVISED", "1")][..], &[][..]),
    ] {
        let dir = scratch(name);
        let (mut child, lines) = start(&dir, env, args);
        let _ = request(&lines);
        sigterm(&child);
        let status = exit_of(&mut child);
        assert_eq!(status.signal(), Some(nix::sys::signal::Signal::SIGTERM as i32), "{name}: {status:?}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(answered(&dir).is_empty(), "{name}: {:?}", journal(&dir));
        assert!(answers_sent(&dir).is_empty(), "{name}: {:?}", answers_sent(&dir));
    }
}

/// `RUNWIRE_SUPERVISED=1` is the supervisor's word to the session of its
/// task's turn, and reaches no session further down: a session a person
/// (or a tool) starts by hand from inside the supervised session's agent
/// is an operator's, so a SIGTERM to it closes its open request
/// (cancelled, by the signal) and it exits 143.
#[test]
fn a_session_started_inside_a_supervised_sessions_agent_is_not_supervised() {
    let dir = scratch("session-signals-nested");
    let _ = std::fs::remove_file(dir.join("inner.in"));
    nix::unistd::mkfifo(&dir.join("inner.in"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // The outer session's agent: a shell that starts a second session by
    // hand (its input a FIFO no one writes, so it stays open), and says
    // the second session's pid and its exit.
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
"$INNER_SESSION" claude --prompt "test it" --task a --journal "$INNER_DIR/j.jsonl" --input "$INNER_DIR/inner.in" \
    -- "$INNER_AGENT" >"$INNER_DIR/inner.out" 2>"$INNER_DIR/inner.err" &
pid=$!
echo "$pid" >"$INNER_DIR/inner.pid.tmp" && mv "$INNER_DIR/inner.pid.tmp" "$INNER_DIR/inner.pid"
wait "$pid"
echo "$?" >"$INNER_DIR/inner.rc.tmp" && mv "$INNER_DIR/inner.rc.tmp" "$INNER_DIR/inner.rc"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ask = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"}}]);
    let mut outer = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", "start a second session"])
        .arg("--")
        .arg(&agent)
        .current_dir(&dir)
        .env("RUNWIRE_SUPERVISED", "1")
        .env("INNER_SESSION", env!("CARGO_BIN_EXE_runwire-session"))
        .env("INNER_AGENT", support::example("trust-agent"))
        .env("INNER_DIR", &dir)
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", ask.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + LIMIT;
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}, within {LIMIT:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let inner_out = || std::fs::read_to_string(dir.join("inner.out")).unwrap_or_default();
    wait_for("the second session's request", &|| inner_out().contains(r#"{"type":"runwire.request""#));
    let pid: i32 = std::fs::read_to_string(dir.join("inner.pid")).unwrap().trim().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM).unwrap();
    wait_for("the second session's exit", &|| dir.join("inner.rc").exists());
    let rc = std::fs::read_to_string(dir.join("inner.rc")).unwrap();
    let err = std::fs::read_to_string(dir.join("inner.err")).unwrap_or_default();
    let _ = outer.kill();
    let _ = outer.wait();
    assert_eq!(rc.trim(), "143", "{err}");
    let a = answered(&dir);
    assert_eq!(a.len(), 1, "an operator's signal closes the open request: {:?} {err}", journal(&dir));
    assert_eq!((a[0]["decision"].as_str(), a[0]["by"].as_str()), (Some("cancelled"), Some("signal SIGTERM")), "{a:?}");
    assert_eq!(answers_sent(&dir).len(), 1, "{:?}", answers_sent(&dir));
}
