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

use crate::support;

use runwire::pipeline::events::{Data, Decision};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::util::time::Clock;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn replay_agent() -> PathBuf {
    support::example("replay-agent")
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
            "allow-always" => ("allow", json!({"scope": "always"})),
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
    /// The exit code (a wrapper's is its turn's outcome).
    rc: Option<i32>,
    /// The input records journaled (runwire-session only).
    journal: Vec<Value>,
    output: Vec<String>,
    /// The decisions the person gave, in order.
    decided: Vec<String>,
}

/// Runs one process of a cell through `runwire-session AGENT` and the stand-in.
fn replay(agent: &str, cell: &str, part: usize) -> Replayed {
    replay_via(agent, cell, part, false)
}

/// The same, through the agent's wrapper (`wrappers/AGENT.sh --interactive`)
/// when `wrapper`: the first prompt is its `--prompt`, and the last output
/// line its status line.
fn replay_via(agent: &str, cell: &str, part: usize, wrapper: bool) -> Replayed {
    let dir =
        root().join("fixtures/interactive").join(if agent == "codex" { "codex" } else { "acp-cursor" }).join(cell);
    let client = &parts(&dir)[part - 1];
    let via = if wrapper { "wrapper" } else { "session" };
    let tmp = support::scratch(&format!("{via}-{agent}-{cell}-{part}"));
    let state = tmp.join("state.json");
    let _ = std::fs::remove_file(&state);
    // A later process resumes the session the recording resumed.
    let resume = client.iter().find_map(|l| match l["method"].as_str() {
        Some("thread/resume") => l.pointer("/params/threadId").and_then(Value::as_str).map(str::to_string),
        Some("session/load") => l.pointer("/params/sessionId").and_then(Value::as_str).map(str::to_string),
        _ => None,
    });
    let expect_args = if agent == "codex" { "app-server" } else { "acp" };
    let mut skip_first_prompt = false;
    let mut cmd = if wrapper {
        // The wrapper's engine is runwire-session, whose engine is the stand-in
        // (told which cell to replay by its environment).
        let first = client.iter().find(|l| matches!(l["method"].as_str(), Some("turn/start" | "session/prompt")));
        let mut c = Command::new(root().join("wrappers").join(format!("{agent}.sh")));
        c.args(["--interactive", "--cwd"]).arg(&tmp);
        c.args(["--prompt", &first.and_then(prompt_text).expect("a prompt to start with")]);
        c.env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
            .env(if agent == "codex" { "RUNWIRE_CODEX_BIN" } else { "RUNWIRE_CURSOR_BIN" }, replay_agent())
            .env("REPLAY_CELL", &dir)
            .env("REPLAY_RUN", part.to_string())
            .env("REPLAY_STATE", &state)
            .env("REPLAY_EXPECT_ARGS", expect_args)
            .env("RUNWIRE_ANSWER_TIMEOUT", "60s");
        if let Some(r) = &resume {
            c.args(["--resume", r]);
        }
        skip_first_prompt = true;
        c
    } else {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runwire-session"));
        c.arg(agent).args(["--answer-timeout", "60s", "--cwd"]).arg(&tmp);
        // Every decision is journaled as an input record.
        c.arg("--journal").arg(tmp.join("journal")).args(["--task", "t1"]);
        if let Some(r) = &resume {
            c.args(["--resume", r]);
        }
        c.arg("--").arg(replay_agent()).arg(&dir).args(["--run", &part.to_string(), "--state"]).arg(&state);
        c.args(["--expect-args", expect_args]);
        c
    };
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
        if Instant::now() > deadline {
            let _ = child.kill();
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            panic!("{agent} {cell} part {part}: no progress (state {:?})\n{err}", std::fs::read_to_string(&state));
        }
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
            // Through the wrapper, the first prompt is its --prompt.
            Some("turn/start" | "session/prompt") if skip_first_prompt => {
                skip_first_prompt = false;
                None
            }
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
    // A session that ended on its own (an agent that refused runwire's
    // request, issue 26 case 4) may have closed its input already.
    if let Err(e) = writeln!(stdin, "{}", json!({"type": "end"})) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{agent} {cell} part {part}: end: {e}");
    }
    drop(stdin);
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    reader.join().unwrap();
    let output = std::mem::take(&mut *seen.lock().unwrap());
    assert!(why.is_none(), "{agent} {cell} part {part}: the replay failed: {}\n{err}", why.unwrap());
    // A process whose thread or session the agent refused ends with that
    // error (issue 26 case 4), exit 1 and the reason on stderr.
    let refused = ["refused thread/resume", "refused thread/start", "refused session/load", "refused session/new"]
        .iter()
        .any(|r| err.contains(r));
    assert!(
        wrapper || status.success() || (status.code() == Some(1) && refused),
        "{agent} {cell} part {part}: runwire-session {status}\n{err}"
    );
    let journal = std::fs::read_to_string(tmp.join("journal"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&tmp);
    Replayed { rc: status.code(), journal, output, decided }
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
    if r.rc == Some(0) && !r.output.last().is_some_and(|l| l.starts_with(r#"{"type":"runwire.status","ok""#)) {
        // runwire-session journaled each request and its answer.
        let requested = r.journal.iter().filter(|j| j["input"] == "requested").count();
        let answered: Vec<&str> =
            r.journal.iter().filter(|j| j["input"] == "answered").filter_map(|j| j["decision"].as_str()).collect();
        assert_eq!(requested, want.len(), "{agent} {cell}: journal {:?}", r.journal);
        assert_eq!(answered, r.decided.iter().map(String::as_str).collect::<Vec<_>>(), "{agent} {cell}: journal");
    }
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

/// Issue 26 case 4: codex refuses to resume an archived thread; the
/// session ends at once with codex's reason (a `runwire.status` line that
/// is not ok, exit 1), where it used to wait for an `end` that never came.
#[test]
fn codex_refused_resume_ends_the_session_with_its_reason() {
    let r = replay("codex", "archived-resume", 2);
    assert_eq!(r.rc, Some(1));
    let status: Value = r
        .output
        .iter()
        .rev()
        .find_map(|l| {
            serde_json::from_str(l).ok().filter(|v: &Value| v["type"] == "runwire.status" && v.get("ok").is_some())
        })
        .unwrap_or_else(|| panic!("no runwire.status line: {:?}", r.output));
    assert_eq!(status["ok"], false);
    assert!(status["detail"].as_str().unwrap().contains("refused thread/resume: session"), "{status}");
    assert!(status["detail"].as_str().unwrap().contains("is archived"), "{status}");
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
    let tmp = support::scratch("runwire-replay-wrong");
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

#[test]
fn codex_and_cursor_wrappers_run_interactive_sessions() {
    // codex.sh --interactive: the approval is answered on the wrapper's stdin;
    // the status line names the thread and says the turn completed.
    let r = replay_via("codex", "approval-allow", 1, true);
    assert_eq!(r.decided, vec!["allow"]);
    let status: Value = serde_json::from_str(r.output.last().unwrap()).unwrap();
    assert_eq!((status["type"].as_str(), r.rc), (Some("runwire.status"), Some(0)));
    assert_eq!((status["ok"].as_bool(), status["rc"].as_i64()), (Some(true), Some(0)), "{status}");
    assert_eq!(status["session_id"], "01a021ee-ae65-7c01-b43c-0b05adccb539");
    assert_eq!(check_output("codex", "approval-allow", &r), vec![ok()]);
    // cursor.sh --interactive: a denial; the session is ACP's session/new id.
    let r = replay_via("cursor", "approval-deny", 1, true);
    assert_eq!(r.decided, vec!["deny"]);
    let status: Value = serde_json::from_str(r.output.last().unwrap()).unwrap();
    assert_eq!(
        (status["ok"].as_bool(), status["session_id"].as_str()),
        (Some(true), Some("39f467bf-db3e-4c7f-8d55-bc6d61e8bb25"))
    );
    // A resumed codex session whose turn was interrupted reports it.
    let r = replay_via("codex", "stop-interrupt", 1, true);
    let status: Value = serde_json::from_str(r.output.last().unwrap()).unwrap();
    assert_eq!((status["ok"].as_bool(), r.rc), (Some(false), Some(1)), "{status}");
    assert!(status["detail"].as_str().unwrap().contains("interrupted"), "{status}");
}

#[test]
fn granting_everything_and_a_missing_acp_command_are_usage_errors() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_runwire-session")).args(args).stdin(Stdio::null()).output().unwrap()
    };
    for args in [
        &["codex", "--sandbox", "danger-full-access", "--", "/bin/true"][..],
        &["codex", "--approval-policy", "sometimes", "--", "/bin/true"],
        &["codex", "--sandbox", "everything", "--", "/bin/true"],
        &["acp"],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("runwire-session: ") && o.stdout.is_empty(), "{args:?}: {err}");
    }
    // With the flag that says so, full access is accepted (the agent here exits at once).
    let o = run(&["codex", "--sandbox", "danger-full-access", "--grant-all", "--", "/bin/true"]);
    assert_ne!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}
