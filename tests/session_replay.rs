//! `runwire-session codex` and `runwire-session cursor` against the real
//! protocol: every recorded cell with a conversation in
//! `fixtures/interactive/{codex,acp-cursor}/` is replayed by
//! `examples/replay-agent` (a stand-in for `codex app-server` /
//! `cursor-agent acp` that prints the agent's recorded lines and checks each
//! line runwire writes against the recorded client's), while this test plays
//! the person: it sends the messages, approvals, answers, steers and
//! interrupts the recorded person gave, when the stand-in waits for them.
//! Then the session's output must normalize to the same turns, with an
//! `input_request` / `input_answer` pair for every decision.

use runwire::events::{Data, Decision};
use runwire::normalize::{Adapter, Normalizer, Options};
use runwire::time::Clock;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn replay_agent() -> PathBuf {
    // Examples are built by `cargo test` (and --all-targets) next to the test binaries' deps.
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("examples/replay-agent");
    assert!(p.exists(), "{} is missing: cargo build --example replay-agent", p.display());
    p
}

/// The client lines of the cell's `part`-th process, as `replay-agent` splits it.
fn parts(dir: &Path) -> Vec<Vec<Value>> {
    let mut env: Vec<(u64, u64, Value)> = Vec::new();
    let text = std::fs::read_to_string(dir.join("to-agent.ndjson")).unwrap();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let line: Value = serde_json::from_str(v["line"].as_str().unwrap()).unwrap();
        env.push((v["run"].as_u64().unwrap(), v["seq"].as_u64().unwrap(), line));
    }
    env.sort_by_key(|e| (e.0, e.1));
    let mut out: Vec<Vec<Value>> = Vec::new();
    let mut last = None;
    for (run, _, line) in env {
        if out.is_empty() || last != Some(run) || line["method"] == "initialize" && !out.last().unwrap().is_empty() {
            out.push(Vec::new());
        }
        last = Some(run);
        out.last_mut().unwrap().push(line);
    }
    out
}

/// What the person decided, from the recorded client's answer.
fn answer_for(expect: &Value) -> Option<Value> {
    let id = match &expect["id"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let r = &expect["result"];
    let (decision, extra) = if let Some(d) = r["decision"].as_str() {
        match d {
            "accept" => ("allow", json!({})),
            "acceptForSession" => ("allow", json!({"scope": "session"})),
            "decline" => ("deny", json!({})),
            _ => ("cancelled", json!({})),
        }
    } else if let Some(o) = r.pointer("/outcome/optionId").and_then(Value::as_str) {
        match o {
            "allow-once" => ("allow", json!({})),
            "allow-always" => ("allow", json!({"scope": "session"})),
            _ => ("deny", json!({})),
        }
    } else if let Some(text) = r.pointer("/contentItems/0/text").and_then(Value::as_str) {
        let t: Value = serde_json::from_str(text).unwrap();
        ("answer", json!({"answers": t["answers"]}))
    } else {
        return None; // an error answer (cursor/task): runwire's own
    };
    let mut a = json!({"type": "answer", "id": id, "decision": decision});
    a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    Some(a)
}

fn prompt_text(line: &Value) -> Option<String> {
    let p = &line["params"];
    let blocks = p.get("input").or_else(|| p.get("prompt"))?.as_array()?;
    blocks.last()?.get("text")?.as_str().map(str::to_string)
}

struct Replayed {
    output: Vec<String>,
    /// The decisions the person gave, in order.
    decided: Vec<String>,
}

/// Runs one process of a cell through `runwire-session AGENT` and the stand-in.
fn replay(agent: &str, cell: &str, part: usize) -> Replayed {
    let dir =
        root().join("fixtures/interactive").join(if agent == "codex" { "codex" } else { "acp-cursor" }).join(cell);
    let client = &parts(&dir)[part - 1];
    let tmp = std::env::temp_dir().join(format!("runwire-replay-{}-{agent}-{cell}-{part}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let state = tmp.join("state.json");
    let _ = std::fs::remove_file(&state);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.arg(agent).args(["--answer-timeout", "60s", "--cwd"]).arg(&tmp);
    // A later process resumes the session the recording resumed.
    if let Some(resume) = client.iter().find_map(|l| match l["method"].as_str() {
        Some("thread/resume") => l.pointer("/params/threadId").cloned(),
        Some("session/load") => l.pointer("/params/sessionId").cloned(),
        _ => None,
    }) {
        cmd.args(["--resume", resume.as_str().unwrap()]);
    }
    let expect_args = if agent == "codex" { "app-server" } else { "acp" };
    cmd.arg("--").arg(replay_agent()).arg(&dir).args(["--run", &part.to_string(), "--state"]).arg(&state);
    cmd.args(["--expect-args", expect_args]);
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            sink.lock().unwrap().push(l.unwrap());
        }
    });
    // The session has read (and passed on) the agent's first `n` lines.
    let caught_up = |st: &Value| {
        let n = st["printed"].as_u64().unwrap_or(0) as usize;
        seen.lock().unwrap().iter().filter(|l| !l.starts_with(r#"{"type":"runwire."#)).count() >= n
    };
    let mut handled: Vec<u64> = Vec::new();
    let mut decided = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let why = loop {
        assert!(
            Instant::now() < deadline,
            "{agent} {cell} part {part}: no progress (state {:?})",
            std::fs::read_to_string(&state)
        );
        let Ok(text) = std::fs::read_to_string(&state) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let st: Value = serde_json::from_str(&text).unwrap();
        match st["state"].as_str() {
            Some("done") if caught_up(&st) => break None,
            Some("done") => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Some("fail") => break Some(st["why"].as_str().unwrap().to_string()),
            _ => {}
        }
        let index = st["index"].as_u64().unwrap();
        // Act as the person only once the session saw what the agent said.
        if handled.contains(&index) || !caught_up(&st) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        handled.push(index);
        let expect = &st["expect"];
        let input = match expect["method"].as_str() {
            // The first prompt of the process waits for the session; later
            // ones for the turn before to end: runwire sends each when it can.
            Some("turn/start" | "turn/steer" | "session/prompt") => {
                Some(json!({"type": "message", "text": prompt_text(expect).unwrap()}))
            }
            Some("turn/interrupt") => Some(json!({"type": "interrupt"})),
            // ACP: a cancel the recorded person followed with a prompt was a
            // steer; runwire does both from one message.
            Some("session/cancel") if st["then"]["method"] == "session/prompt" => {
                handled.push(st["then_index"].as_u64().unwrap());
                Some(json!({"type": "message", "text": prompt_text(&st["then"]).unwrap()}))
            }
            Some("session/cancel") => Some(json!({"type": "interrupt"})),
            Some(_) => None, // initialize, thread/start, session/new, …: runwire's own
            None => answer_for(expect),
        };
        if let Some(i) = input {
            if i["type"] == "answer" {
                decided.push(i["decision"].as_str().unwrap().to_string());
            }
            writeln!(stdin, "{i}").unwrap();
        }
    };
    writeln!(stdin, "{}", json!({"type": "end"})).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    reader.join().unwrap();
    let output = std::mem::take(&mut *seen.lock().unwrap());
    assert!(why.is_none(), "{agent} {cell} part {part}: the replay failed: {}\n{err}", why.unwrap());
    assert!(status.success(), "{agent} {cell} part {part}: runwire-session {status}\n{err}");
    let _ = std::fs::remove_dir_all(&tmp);
    Replayed { output, decided }
}

/// The session's output through `normalize-events`: no unknown or
/// malformed line; one `input_request` and one `input_answer` (with the
/// person's decision) per decision; the turns' ends.
fn check_output(agent: &str, cell: &str, r: &Replayed) -> Vec<(bool, Option<String>)> {
    let adapter = if agent == "codex" { Adapter::Codex } else { Adapter::Cursor };
    let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
    let evs: Vec<_> = r.output.iter().flat_map(|l| n.push(l.as_bytes())).collect();
    let mut requests = 0;
    let mut answers = Vec::new();
    let mut ends = Vec::new();
    for e in &evs {
        match &e.data {
            Data::Error(x) => assert!(
                !matches!(x.code.as_str(), "unknown_kind" | "invalid_line" | "not_json"),
                "{agent} {cell}: {x:?}"
            ),
            Data::InputRequest(_) => requests += 1,
            Data::InputAnswer(a) => answers.push(a.decision),
            Data::TurnEnd(t) => ends.push((t.ok, t.reason.clone())),
            _ => {}
        }
    }
    let want: Vec<Decision> = r
        .decided
        .iter()
        .map(|d| match d.as_str() {
            "allow" => Decision::Allow,
            "deny" => Decision::Deny,
            "answer" => Decision::Answer,
            _ => Decision::Cancelled,
        })
        .collect();
    assert_eq!(requests, want.len(), "{agent} {cell}: input_request events");
    assert_eq!(answers, want, "{agent} {cell}: input_answer decisions");
    ends
}

fn replay_all(agent: &str, cell: &str) -> Vec<(bool, Option<String>)> {
    let dir =
        root().join("fixtures/interactive").join(if agent == "codex" { "codex" } else { "acp-cursor" }).join(cell);
    let n = parts(&dir).len();
    assert!(n >= 1, "{cell}: no process recorded");
    let mut ends = Vec::new();
    for part in 1..=n {
        let r = replay(agent, cell, part);
        ends.extend(check_output(agent, cell, &r));
    }
    ends
}

fn ok() -> (bool, Option<String>) {
    (true, None)
}

#[test]
fn codex_turn_tools_web_search_and_subagent() {
    for cell in ["turn-tools", "web-search", "subagent"] {
        assert_eq!(replay_all("codex", cell), vec![ok()], "{cell}");
    }
}

#[test]
fn codex_approval_allow_and_deny() {
    assert_eq!(replay_all("codex", "approval-allow"), vec![ok()]);
    assert_eq!(replay_all("codex", "approval-deny"), vec![ok()]);
}

#[test]
fn codex_question_through_runwires_own_tool() {
    let r = replay("codex", "user-question", 1);
    assert_eq!(r.decided, vec!["answer"]);
    assert_eq!(check_output("codex", "user-question", &r), vec![ok()]);
}

#[test]
fn codex_steer_mid_turn() {
    // The second process resumes and compacts (`thread/compact/start`):
    // runwire does not compact, so that replay ends at it.
    assert_eq!(replay_all("codex", "steer"), vec![ok()]);
}

#[test]
fn codex_interrupt_then_resume() {
    assert_eq!(replay_all("codex", "stop-interrupt"), vec![(false, Some("interrupted".into())), ok()]);
}

#[test]
fn codex_resume_plan_and_failures() {
    assert_eq!(replay_all("codex", "resume"), vec![ok(), ok()]);
    assert_eq!(replay_all("codex", "plan-mode"), vec![ok(), ok()]);
    // A resume of an archived thread is refused, then works once unarchived
    // (by another client); a missing or empty rollout cannot be resumed.
    assert_eq!(replay_all("codex", "archived-resume"), vec![ok(), ok()]);
    assert_eq!(replay_all("codex", "missing-rollout"), vec![ok(), ok()]);
    assert_eq!(replay_all("codex", "empty-rollout"), vec![ok()]);
    let ends = replay_all("codex", "auth-failure");
    assert!(matches!(&ends[..], [(false, Some(r))] if r.contains("401")), "{ends:?}");
}

#[test]
fn cursor_turns_tools_and_subagent() {
    for cell in ["turn-tools", "web-search", "subagent"] {
        assert_eq!(replay_all("cursor", cell), vec![ok()], "{cell}");
    }
}

#[test]
fn cursor_approval_allow_and_deny() {
    assert_eq!(replay_all("cursor", "approval-allow"), vec![ok()]);
    assert_eq!(replay_all("cursor", "approval-deny"), vec![ok()]);
}

#[test]
fn cursor_steer_is_cancel_then_prompt() {
    assert_eq!(replay_all("cursor", "steer"), vec![(false, Some("cancelled".into())), ok()]);
}

#[test]
fn cursor_interrupt_then_resume() {
    assert_eq!(replay_all("cursor", "stop-interrupt"), vec![(false, Some("cancelled".into())), ok()]);
    assert_eq!(replay_all("cursor", "resume"), vec![ok(), ok()]);
}

#[test]
fn cursor_question_cell_is_a_tool_approval_here() {
    // The recorded client asked through its own MCP server, which runwire
    // does not pass: the permission request for that tool is dropped from
    // the replay and the turn goes on as recorded.
    let r = replay("cursor", "user-question", 1);
    assert!(r.decided.is_empty());
    assert_eq!(check_output("cursor", "user-question", &r), vec![ok()]);
}

#[test]
fn a_wrong_line_fails_the_replay() {
    // The stand-in is strict: an approval answered the other way round is caught.
    let dir = root().join("fixtures/interactive/codex/approval-allow");
    let tmp = std::env::temp_dir().join(format!("runwire-replay-wrong-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let state = tmp.join("state.json");
    let mut child = Command::new(replay_agent())
        .arg(&dir)
        .args(["--state"])
        .arg(&state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"x","version":"1"},"capabilities":{"experimentalApi":true}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"thread/start","params":{"approvalPolicy":"on-request","sandbox":"workspace-write"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"turn/start","params":{"threadId":"01a021ee-ae65-7c01-b43c-0b05adccb539","input":[{"type":"text","text":"Run `touch ~/bb-recording-outside.txt` in the shell (it writes outside the workspace), then reply with the single word done.","text_elements":[]}]}}"#,
        r#"{"jsonrpc":"2.0","id":0,"result":{"decision":"decline"}}"#,
    ];
    let drain = std::thread::spawn(move || out.lines().count());
    for l in lines {
        let _ = writeln!(stdin, "{l}");
    }
    drop(stdin);
    assert!(!child.wait().unwrap().success());
    drain.join().unwrap();
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(st["state"], "fail");
    assert!(st["why"].as_str().unwrap().contains("/result/decision"), "{st}");
    let _ = std::fs::remove_dir_all(&tmp);
}
