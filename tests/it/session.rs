//! `runwire-session claude` against recorded Claude Code sessions: the
//! replaying stub (`fixtures/stub-engines/replay`) prints each cell's agent
//! lines and checks every line runwire writes against the recording, failing
//! loudly (exit 86) on a mismatch; these tests play the person (answers,
//! steer, interrupt, kill) and check the record runwire leaves, through the
//! same normalizer as `normalize-events`.

use crate::support;

use runwire::pipeline::events::{Data, Decision, Event, InputKind};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cell(name: &str) -> PathBuf {
    root().join("fixtures/interactive/claude-code").join(name)
}

/// A running `runwire-session claude` over the replay stub.
struct Run {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    out: Vec<String>,
}

impl Run {
    fn start(cell_dir: &Path, prompt: Option<&str>, session_args: &[&str], stub_args: &[&str]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-session"));
        cmd.arg("claude");
        if let Some(p) = prompt {
            cmd.arg("--prompt").arg(p);
        }
        cmd.args(session_args)
            .arg("--")
            .arg(root().join("fixtures/stub-engines/replay"))
            .arg("claude")
            .arg(cell_dir)
            .args(stub_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("runwire-session starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Run { child, stdin, lines, out: Vec::new() }
    }

    fn send(&mut self, line: &str) {
        let s = self.stdin.as_mut().expect("input still open");
        writeln!(s, "{line}").unwrap();
        s.flush().unwrap();
    }

    /// Reads output until a line satisfies `f`; panics with the output so far after 30 s.
    fn until(&mut self, what: &str, mut f: impl FnMut(&str) -> bool) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) => {
                    self.out.push(l.clone());
                    if f(&l) {
                        return l;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let err = self.stderr();
                    panic!("no output line {what} came; output so far:\n{}\nstderr:\n{err}", self.out.join("\n"))
                }
            }
        }
    }

    /// The next pending request the session raised.
    fn request(&mut self) -> Value {
        let l = self.until("runwire.request", |l| l.starts_with(r#"{"type":"runwire.request""#));
        serde_json::from_str(&l).unwrap()
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    }

    /// Closes the input (or not), waits for the exit; asserts the stub saw
    /// every line it expected and runwire exited 0. Returns the whole output.
    fn finish(mut self) -> Vec<String> {
        self.stdin = None;
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.out.push(l);
        }
        let status = self.child.wait().unwrap();
        let err = self.stderr();
        assert!(!err.contains("replay stub:"), "the stub found a mismatch:\n{err}\noutput:\n{}", self.out.join("\n"));
        assert!(status.success(), "runwire-session exited {status}:\n{err}");
        self.out
    }
}

fn events(out: &[String]) -> (Vec<Event>, Option<String>) {
    let mut n = Normalizer::new(Adapter::Claude, Options::default());
    let evs = out.iter().flat_map(|l| n.push(l.as_bytes())).collect();
    (evs, n.resume_session().map(str::to_string))
}

fn requests(evs: &[Event]) -> Vec<&runwire::pipeline::events::InputRequest> {
    evs.iter().filter_map(|e| if let Data::InputRequest(r) = &e.data { Some(r) } else { None }).collect()
}

fn answers(evs: &[Event]) -> Vec<&runwire::pipeline::events::InputAnswer> {
    evs.iter().filter_map(|e| if let Data::InputAnswer(a) = &e.data { Some(a) } else { None }).collect()
}

fn tool_result(evs: &[Event], id: &str) -> runwire::pipeline::events::ToolResult {
    evs.iter()
        .find_map(|e| match &e.data {
            Data::ToolResult(r) if r.id == id => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool_result for {id}"))
}

fn last_turn_ok(evs: &[Event]) -> bool {
    evs.iter().rev().find_map(|e| if let Data::TurnEnd(t) = &e.data { Some(t.ok) } else { None }) == Some(true)
}

// The replay stub runs jq: ignored without it, failed under CI (tests/support/tools.rs).
macro_rules! need_jq {
    () => {
        support::need(&["jq"])
    };
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn turn_tools_runs_a_whole_turn_with_nothing_to_answer() {
    need_jq!();
    let c = cell("turn-tools");
    let msgs = support::user_messages(&c);
    let mut r = Run::start(&c, Some(&msgs[0]), &[], &[]);
    r.stdin = None; // nobody will answer: the session ends after the turn
    let out = r.finish();
    let (evs, resume) = events(&out);
    assert!(requests(&evs).is_empty());
    // The recording's two Bash calls ran without asking (accept-edits) and returned.
    let calls: Vec<String> =
        evs.iter().filter_map(|e| if let Data::ToolCall(c) = &e.data { Some(c.id.clone()) } else { None }).collect();
    assert_eq!(calls.len(), 2);
    for c in &calls {
        assert!(!tool_result(&evs, c).is_error);
    }
    assert!(last_turn_ok(&evs));
    assert_eq!(resume.as_deref(), Some("d8785ba1-3fa6-4606-b465-f13165cc441f"));
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn approval_allow_answers_the_bash_call_and_the_turn_finishes() {
    need_jq!();
    let c = cell("approval-allow");
    let dir = tempdir("allow");
    let journal = dir.join("run.jsonl");
    let j = journal.to_str().unwrap();
    let mut r = Run::start(
        &c,
        Some(&support::user_messages(&c)[0]),
        &["--journal", j, "--task", "a", "--actor", "runner"],
        &[],
    );
    let req = r.request();
    assert_eq!((req["kind"].as_str(), req["tool"].as_str()), (Some("tool_approval"), Some("Bash")));
    assert!(req["expires_at"].as_str().is_some());
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"allow","by":"ana"}}"#, req["id"]));
    r.until("the result", |l| l.contains(r#""stop_reason":"end_turn""#) && l.contains("total_cost_usd"));
    r.send(r#"{"type":"end"}"#);
    let (evs, _) = events(&r.finish());
    let reqs = requests(&evs);
    let call = reqs[0].tool_call_id.clone().unwrap();
    // The request concerns the call already streamed, and comes after it.
    let call_at = evs.iter().position(|e| matches!(&e.data, Data::ToolCall(c) if c.id == call)).unwrap();
    let req_at = evs.iter().position(|e| matches!(e.data, Data::InputRequest(_))).unwrap();
    assert!(call_at < req_at);
    let ans = answers(&evs);
    assert_eq!(
        (ans[0].decision, ans[0].by.as_deref(), ans[0].id.as_str()),
        (Decision::Allow, Some("ana"), reqs[0].id.as_str())
    );
    assert!(!tool_result(&evs, &call).is_error);
    assert!(last_turn_ok(&evs));
    // The journal has the request and who answered it.
    let recs: Vec<Value> =
        std::fs::read_to_string(&journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 2, "{recs:?}");
    assert_eq!((recs[0]["input"].as_str(), recs[0]["kind"].as_str()), (Some("requested"), Some("tool_approval")));
    assert_eq!((recs[0]["task"].as_str(), recs[0]["actor"].as_str()), (Some("a"), Some("runner")));
    assert_eq!(recs[0]["request"], req["id"]);
    assert_eq!(
        (recs[1]["input"].as_str(), recs[1]["decision"].as_str(), recs[1]["by"].as_str()),
        (Some("answered"), Some("allow"), Some("ana"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `--journal` on a full disk (a real tmpfs, the journal's last page
/// nearly used): the session goes on (the answer still reaches the agent),
/// then exits 3 saying how many input records could not be written, and
/// the journal holds no torn record. It exited 0.
#[test]
#[cfg_attr(
    not(all(tool = "jq", tool = "root")),
    ignore = "needs jq (the replay stub runs it) and root (a small tmpfs)"
)]
fn a_journal_on_a_full_disk_exits_3_and_keeps_whole_lines() {
    need_jq!();
    support::need(&["root"]);
    let c = cell("approval-allow");
    let dir = tempdir("journal-full");
    let u = support::Tmpfs::mount(&dir, "size=64k");
    let journal = dir.join("run.jsonl");
    // 4,001 bytes: the next record crosses into a page the disk cannot give.
    std::fs::write(&journal, format!("{}\n", "x".repeat(4000))).unwrap();
    let mut n = 0;
    while std::fs::write(dir.join(format!("fill{n}")), vec![0u8; 4096]).is_ok() {
        n += 1;
    }
    let j = journal.to_str().unwrap();
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &["--journal", j, "--task", "a"], &[]);
    let req = r.request();
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"allow"}}"#, req["id"]));
    r.until("the result", |l| l.contains(r#""stop_reason":"end_turn""#) && l.contains("total_cost_usd"));
    r.send(r#"{"type":"end"}"#);
    r.stdin = None;
    while r.lines.recv_timeout(Duration::from_secs(30)).is_ok() {}
    let status = r.child.wait().unwrap();
    let err = r.stderr();
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("runwire-session: --journal {j}: 2 input record(s) could not be written")), "{err}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), format!("{}\n", "x".repeat(4000)), "no torn record");
    drop(u);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The typed status lines (spec/SESSION-INPUT.md): one after each step that
/// changed the status, numbered with their place among the output lines;
/// the open request with its interrupt id and the process's generation;
/// `applied` counting the input lines taken; the last line the exit.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn status_lines_say_the_state_after_each_step_in_order() {
    need_jq!();
    let c = cell("approval-allow");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &["--generation", "3"], &[]);
    let req = r.request();
    let open = r.until("a status with the request open", |l| {
        l.contains(r#""type":"runwire.session_status","seq""#) && l.contains("rw-")
    });
    let open: Value = serde_json::from_str(&open).unwrap();
    assert_eq!(open["phase"], "turn", "{open}");
    assert_eq!(
        open["open"],
        serde_json::json!([{"interrupt_id": req["interrupt_id"], "id": req["id"], "generation": 3}])
    );
    assert_eq!(open["applied"], 0);
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"allow"}}"#, req["interrupt_id"]));
    r.until("the result", |l| l.contains(r#""stop_reason":"end_turn""#) && l.contains("total_cost_usd"));
    r.send(r#"{"type":"end"}"#);
    let out = r.finish();
    let status: Vec<(usize, Value)> = out
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with(r#"{"type":"runwire.session_status","seq":"#))
        .map(|(i, l)| (i, serde_json::from_str(l).unwrap()))
        .collect();
    for (i, s) in &status {
        assert_eq!(s["seq"].as_u64(), Some(*i as u64 + 1), "a status line's seq is its place: {s}");
    }
    // Each says something the one before did not.
    for w in status.windows(2) {
        let (mut a, mut b) = (w[0].1.clone(), w[1].1.clone());
        a["seq"] = Value::Null;
        b["seq"] = Value::Null;
        assert_ne!(a, b, "a status line that changes nothing");
    }
    let answered = status.iter().find(|(_, s)| s["applied"] == 1).map(|(_, s)| s.clone()).unwrap();
    assert_eq!(answered["open"], serde_json::json!([]), "{answered}");
    let (at, last) = status.last().unwrap();
    assert_eq!(*at, out.len() - 1, "the exit's status line is the last line");
    assert_eq!((last["exit"].as_i64(), last["applied"].as_u64()), (Some(0), Some(2)), "{last}");
    assert_eq!(last["phase"], "ended");
    // The replies to the two lines come after the status that counts them.
    let ack2 = out.iter().position(|l| l.starts_with(r#"{"type":"runwire.ack","line":2"#)).unwrap();
    let applied2 = status.iter().find(|(_, s)| s["applied"] == 2).unwrap().0;
    assert!(applied2 < ack2);
}

fn tempdir(what: &str) -> PathBuf {
    support::scratch(&format!("runwire-session-{what}"))
}

/// Processes whose command line holds all of `parts` (the stub of one test).
fn processes_with(parts: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if parts.iter().all(|p| cmd.contains(p)) {
            out.push(pid);
        }
    }
    out
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn answers_come_through_a_fifo_while_stdout_is_piped() {
    need_jq!();
    let c = cell("approval-allow");
    let dir = tempdir("fifo");
    let fifo = dir.join("answers");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let f = fifo.to_str().unwrap();
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &["--input", f], &[]);
    let req = r.request();
    // Each writer opens, writes, closes: the session reopens the FIFO for the next.
    std::fs::write(&fifo, format!("{{\"type\":\"answer\",\"id\":{},\"decision\":\"allow\"}}\n", req["id"])).unwrap();
    r.until("the result", |l| l.contains("total_cost_usd"));
    std::fs::write(&fifo, "{\"type\":\"end\"}\n").unwrap();
    let (evs, _) = events(&r.finish());
    assert_eq!(answers(&evs)[0].decision, Decision::Allow);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn approval_deny_tells_the_agent_no_with_a_message() {
    need_jq!();
    let c = cell("approval-deny");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &[], &[]);
    let req = r.request();
    r.send(&format!(
        r#"{{"type":"answer","id":{},"decision":"deny","message":"not outside the workspace"}}"#,
        req["id"]
    ));
    let out = r.finish();
    let (evs, _) = events(&out);
    let ans = answers(&evs);
    assert_eq!((ans[0].decision, ans[0].message.as_deref()), (Decision::Deny, Some("not outside the workspace")));
    assert!(tool_result(&evs, req["tool_call_id"].as_str().unwrap()).is_error);
    assert!(last_turn_ok(&evs));
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_question_is_answered_with_a_label() {
    need_jq!();
    let c = cell("user-question");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &[], &[]);
    let req = r.request();
    assert_eq!(req["kind"], "question");
    let q = &req["questions"][0];
    assert_eq!(q["question"], "Tabs or spaces?");
    let labels: Vec<&str> = q["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["tabs", "spaces"]);
    // An answer to a question nobody asked is refused, and nothing reaches the agent (the stub would fail).
    r.send(&format!(
        r#"{{"type":"answer","id":{},"decision":"answer","answers":{{"Vim or Emacs?":"vim"}}}}"#,
        req["id"]
    ));
    r.send(&format!(
        r#"{{"type":"answer","id":{},"decision":"answer","answers":{{"Tabs or spaces?":"spaces"}}}}"#,
        req["id"]
    ));
    let mut r2 = r;
    r2.stdin = None;
    let out = {
        while let Ok(l) = r2.lines.recv_timeout(Duration::from_secs(30)) {
            r2.out.push(l);
        }
        let status = r2.child.wait().unwrap();
        let err = r2.stderr();
        assert!(!err.contains("replay stub:"), "{err}");
        assert!(err.contains("input:1: refused") && err.contains("no question \"Vim or Emacs?\" was asked"), "{err}");
        assert!(status.success(), "a refused input line is reported, the session goes on: {status}");
        r2.out
    };
    let (evs, _) = events(&out);
    let ans = answers(&evs);
    assert_eq!(ans.len(), 1);
    assert_eq!(ans[0].answers.as_ref().unwrap()["Tabs or spaces?"], "spaces");
    let result = tool_result(&evs, req["tool_call_id"].as_str().unwrap());
    assert!(result.output.contains("spaces"), "{}", result.output);
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn plan_mode_approves_the_plan_then_denies_a_command() {
    need_jq!();
    let c = cell("plan-mode");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &["--permission-mode", "plan"], &[]);
    let plan = r.request();
    assert_eq!(plan["kind"], "plan_approval");
    assert!(plan["message"].as_str().unwrap().contains("multiply"));
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"allow","mode":"acceptEdits"}}"#, plan["id"]));
    let bash = r.request();
    assert_eq!(bash["tool"], "Bash");
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"deny"}}"#, bash["id"]));
    let (evs, _) = events(&r.finish());
    let kinds: Vec<InputKind> = requests(&evs).iter().map(|q| q.kind).collect();
    assert_eq!(kinds, [InputKind::PlanApproval, InputKind::ToolApproval]);
    let d: Vec<Decision> = answers(&evs).iter().map(|a| a.decision).collect();
    assert_eq!(d, [Decision::Allow, Decision::Deny]);
    assert!(last_turn_ok(&evs));
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn steer_writes_a_message_into_the_running_turn() {
    need_jq!();
    let c = cell("steer");
    let msgs = support::user_messages(&c);
    // The recording goes on into a /compact: end at the steered turn's last line.
    let mut r = Run::start(&c, Some(&msgs[0]), &[], &["--end-at", "311"]);
    // Mid-turn: after the sixth Bash result, as the recording client did.
    let mut results = 0;
    r.until("the sixth tool result", |l| {
        if l.contains(r#""type":"tool_result""#) {
            results += 1;
        }
        results == 6
    });
    r.send(&format!(r#"{{"type":"message","text":{}}}"#, Value::String(msgs[1].clone())));
    r.until("the result", |l| l.contains("total_cost_usd"));
    r.send(r#"{"type":"end"}"#);
    let (evs, _) = events(&r.finish());
    assert!(requests(&evs).is_empty());
    assert!(last_turn_ok(&evs));
    let text: String = evs
        .iter()
        .filter_map(|e| if let Data::TokenDelta(d) = &e.data { Some(d.text.as_str()) } else { None })
        .collect();
    assert!(text.contains("main"), "the steered answer names the branch: {text}");
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn kill_mid_turn_then_the_next_message_resumes_the_session() {
    need_jq!();
    let c = cell("stop-interrupt");
    let msgs = support::user_messages(&c);
    let mut r = Run::start(&c, Some(&msgs[0]), &[], &["--part", "1"]);
    // The recording's first process ends in the middle of the essay.
    r.until("text deltas", |l| l.contains("text_delta"));
    std::thread::sleep(Duration::from_millis(300));
    // Kill the session's process: the stub goes with it (PR_SET_PDEATHSIG).
    let pid = r.child.id() as i32;
    unsafe { nix::libc::kill(pid, nix::libc::SIGKILL) };
    let _ = r.child.wait();
    while let Ok(l) = r.lines.recv_timeout(Duration::from_secs(5)) {
        r.out.push(l);
    }
    // Nothing of the killed session is left running.
    let cell_path = c.to_str().unwrap().to_string();
    let mut left = processes_with(&[&cell_path, "--part 1"]);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        left = processes_with(&[&cell_path, "--part 1"]);
    }
    assert!(left.is_empty(), "the killed session's engine is still running: {left:?}");
    let (evs, resume) = events(&r.out);
    assert!(!last_turn_ok(&evs), "the killed turn has no result");
    let sid = resume.expect("the first process announced its session");
    // The next message starts a new process with --resume (the stub checks the id).
    let r = Run::start(&c, Some(&msgs[1]), &["--resume", &sid], &["--part", "2"]);
    let (evs, _) = events(&r.finish());
    assert!(last_turn_ok(&evs));
    let text: String = evs
        .iter()
        .filter_map(|e| if let Data::TokenDelta(d) = &e.data { Some(d.text.as_str()) } else { None })
        .collect();
    assert_eq!(text.trim(), "4");
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_graceful_interrupt_stops_the_turn_and_keeps_the_session() {
    need_jq!();
    let c = cell("stop-interrupt");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &[], &["--part", "1"]);
    r.until("text deltas", |l| l.contains("text_delta"));
    r.send(r#"{"type":"interrupt","by":"ana"}"#);
    // No recording shows claude's reply to interrupt: the stub's is made up and says so.
    let res = r.until("the interrupted turn's result", |l| l.contains(r#""type":"result""#));
    assert!(res.contains("made up"), "{res}");
    // The session stays: a new message is a new turn in the same process.
    r.send(r#"{"type":"message","text":"Now just say hi."}"#);
    r.until("the next result", |l| l.contains(r#""type":"result""#) && l.contains(r#""is_error":false"#));
    r.send(r#"{"type":"end"}"#);
    let (evs, _) = events(&r.finish());
    let oks: Vec<bool> =
        evs.iter().filter_map(|e| if let Data::TurnEnd(t) = &e.data { Some(t.ok) } else { None }).collect();
    assert_eq!(oks, [false, true]);
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn resume_runs_a_second_process_on_the_same_session() {
    need_jq!();
    let c = cell("resume");
    let msgs = support::user_messages(&c);
    let mut r = Run::start(&c, Some(&msgs[0]), &[], &["--part", "1"]);
    r.stdin = None; // released after its turn
    let (evs, sid) = events(&r.finish());
    assert!(last_turn_ok(&evs));
    let r = Run::start(&c, Some(&msgs[1]), &["--resume", sid.as_deref().unwrap()], &["--part", "2"]);
    let (evs, sid2) = events(&r.finish());
    assert!(last_turn_ok(&evs));
    assert_eq!(sid, sid2);
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn the_stub_fails_loudly_when_runwire_answers_otherwise() {
    need_jq!();
    // The recording allowed the call: a deny is a mismatch the stub must catch.
    let c = cell("approval-allow");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &[], &[]);
    let req = r.request();
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"deny"}}"#, req["id"]));
    r.stdin = None;
    while r.lines.recv_timeout(Duration::from_secs(30)).is_ok() {}
    let status = r.child.wait().unwrap();
    let err = r.stderr();
    assert!(err.contains("replay stub: line 3 from runwire does not match the recording"), "{err}");
    assert!(err.contains(r#""behavior":"deny""#) && err.contains(r#""behavior":"allow""#), "{err}");
    assert_eq!(status.code(), Some(1));
    // A wrong first message is caught too.
    let r = Run::start(&c, Some("something else"), &[], &[]);
    let mut r = r;
    r.stdin = None;
    while r.lines.recv_timeout(Duration::from_secs(30)).is_ok() {}
    let _ = r.child.wait();
    assert!(r.stderr().contains("line 2 from runwire does not match"));
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn an_unanswered_request_expires_and_is_denied() {
    need_jq!();
    // approval-deny's recording denied the call: a session that expires it matches.
    let c = cell("approval-deny");
    let mut r = Run::start(&c, Some(&support::user_messages(&c)[0]), &["--answer-timeout", "300ms"], &[]);
    let req = r.request();
    let ans = r.until("the expiry", |l| l.starts_with(r#"{"type":"runwire.answer""#));
    let ans: Value = serde_json::from_str(&ans).unwrap();
    assert_eq!((&ans["id"], ans["decision"].as_str()), (&req["id"], Some("expired")));
    // The answer that comes too late is refused.
    r.send(&format!(r#"{{"type":"answer","id":{},"decision":"allow"}}"#, req["id"]));
    r.stdin = None;
    while let Ok(l) = r.lines.recv_timeout(Duration::from_secs(30)) {
        r.out.push(l);
    }
    let status = r.child.wait().unwrap();
    let err = r.stderr();
    assert!(!err.contains("replay stub:"), "{err}");
    assert!(err.contains("expired and was denied"), "{err}");
    assert!(status.success());
}

#[test]
fn granting_everything_needs_the_flag_that_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--permission-mode", "bypassPermissions", "--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-session: usage: --permission-mode:") && err.contains("--grant-all"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn help_starts_nothing_and_a_closed_stdout_stops_the_agent_quietly() {
    // --help: exit 0, usage on stdout, no agent run (the command would fail loudly if it ran).
    let out =
        Command::new(env!("CARGO_BIN_EXE_runwire-session")).args(["--help"]).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("--answer-timeout"));
    need_jq!();
    // The reader leaves after the first line: the session stops the agent and exits 0, quietly.
    let c = cell("steer");
    let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", &support::user_messages(&c)[0], "--"])
        .arg(root().join("fixtures/stub-engines/replay"))
        .args(["claude"])
        .arg(&c)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with('{'));
    let what = "the session, its reader gone";
    let (status, err) = support::exit_within(&mut child, Duration::from_secs(20), what);
    assert!(status.success(), "{status}: {err}");
    assert!(!err.contains("runwire-session:"), "{err}");
}

/// The agent's CLI missing: exit 3, the program named once, and what to do
/// about it (a newcomer's first line without the agent installed).
#[test]
fn a_missing_agent_cli_is_said_with_what_to_do() {
    let o = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", "hi", "--", "/nonexistent/claude"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.starts_with("runwire-session: /nonexistent/claude: "), "{err}");
    assert_eq!(err.matches("/nonexistent/claude").count(), 1, "named once: {err}");
    assert!(err.contains("Put it on PATH") && err.contains("runs doctor"), "{err}");
}

/// `--input` naming a directory: exit 3 before the agent starts, as for an
/// input that cannot be opened (it was read as an empty input, exit 0).
#[test]
fn an_input_that_is_a_directory_is_refused_before_the_agent_starts() {
    let dir = crate::support::scratch("inputdir");
    let started = dir.join("started");
    let o = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--input"])
        .arg(&dir)
        .args(["--", "sh", "-c", &format!("touch {}", started.display())])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.starts_with(&format!("runwire-session: {}: a directory", dir.display())), "{err}");
    assert!(!started.exists(), "the agent never started");
}

/// What the session would send or journal is checked before the agent
/// starts: a blank `--prompt` (a message's rule on every door), a `--task`
/// outside the id set, an empty `--actor` (exit 2), and a `--journal` it
/// cannot write (exit 3: every record would have been lost, exit 0).
#[test]
fn the_prompt_task_actor_and_journal_are_checked_before_the_agent_starts() {
    let dir = crate::support::scratch("session-args");
    let started = dir.join("started");
    let journal = dir.join("j.jsonl");
    std::fs::write(&journal, "").unwrap();
    let j = journal.to_str().unwrap();
    let d = dir.to_str().unwrap();
    for (args, code, says) in [
        (vec!["--prompt", "   "], 2, "runwire-session: usage: --prompt: "),
        (vec!["--journal", j, "--task", "../evil"], 2, "runwire-session: usage: --task "),
        (vec!["--actor", ""], 2, "runwire-session: usage: --actor "),
        (vec!["--journal", d, "--task", "a"], 3, "runwire-session: --journal "),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
            .arg("claude")
            .args(&args)
            .args(["--", "sh", "-c", &format!("touch {}", started.display())])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
        assert!(!started.exists(), "{args:?}: the agent started");
    }
}
