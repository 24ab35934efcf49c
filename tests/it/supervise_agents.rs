//! `runwire-supervise --interactive` with codex and cursor tasks: the task's
//! turn runs `codex.sh --interactive` / `cursor.sh --interactive` →
//! `runwire-session` → `examples/replay-agent` replaying a recorded `codex
//! app-server` or `cursor-agent acp` session (`fixtures/interactive/`), which
//! checks every line runwire writes to it against the recorded client line
//! and fails with `replay-agent:` on stderr (passed on to the supervisor's).
//!
//! The test acts as the recorded person, through the supervisor's control
//! socket (and once through `runwire-serve`'s task routes): where the
//! recording has an answer it answers the same way, where the client steered
//! (codex `turn/steer`; ACP `session/cancel` then `session/prompt`) it
//! steers with the recorded text, where it interrupted (`turn/interrupt`, a
//! lone `session/cancel`) it stops. Then it checks the journal's input
//! records, the task's states and the replies. Every wait is bounded; the
//! supervisor's group is killed on the way out.

use crate::support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{cell, first_prompt, prompt_of};

const LIMIT: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The supervisor, and what the test reads of it ([`support::Supervised`]).
struct Sup(support::Supervised);

impl std::ops::Deref for Sup {
    type Target = support::Supervised;
    fn deref(&self) -> &support::Supervised {
        &self.0
    }
}

impl Sup {
    /// A supervisor running one `agent` task ("a") over the recording `cell_name`.
    fn start(name: &str, agent: &str, cell_name: &str, env: &[(&str, &str)]) -> Sup {
        Sup::start_plan(name, agent, cell_name, env, json!({}))
    }

    /// [`Sup::start`] with more fields for the task (a gate, …).
    fn start_plan(name: &str, agent: &str, cell_name: &str, env: &[(&str, &str)], task: Value) -> Sup {
        Sup::start_with(name, agent, cell_name, env, task, &root().join("wrappers"))
    }

    /// [`Sup::start_plan`] with the wrappers of `wrappers`. Agent `acp`: a
    /// task with adapter `acp` whose `cmd` is the stand-in (`replay-agent
    /// acp`) replaying a cursor recording, with no wrapper (an empty wrapper
    /// directory) and no cursor-agent (`RUNWIRE_CURSOR_BIN` leads nowhere).
    fn start_with(name: &str, agent: &str, cell_name: &str, env: &[(&str, &str)], task: Value, wrappers: &Path) -> Sup {
        let dir = support::scratch(name);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let c = cell(agent, cell_name);
        let mut t = json!({"id":"a","adapter":agent,"prompt":first_prompt(&c)});
        let no_wrappers = dir.join("no-wrappers");
        let wrappers = if agent == "acp" {
            std::fs::create_dir_all(&no_wrappers).unwrap();
            t["cmd"] = json!([support::example("replay-agent"), "acp"]);
            no_wrappers.as_path()
        } else {
            wrappers
        };
        t.as_object_mut().unwrap().extend(task.as_object().unwrap().clone());
        let plan = json!({"v":"plan/v1","tasks":[t]});
        std::fs::write(dir.join("p.plan.json"), plan.to_string()).unwrap();
        let cmd = Sup::command(&dir, agent, &c, env, wrappers, "replay-state.json");
        Sup(support::Supervised::spawn(dir, cmd))
    }

    /// The supervisor's command line for the plan in `dir`, the stand-in
    /// replaying `c` with its state in `state`.
    fn command(dir: &Path, agent: &str, c: &Path, env: &[(&str, &str)], wrappers: &Path, state: &str) -> Command {
        let (bin_var, args) =
            if agent == "codex" { ("RUNWIRE_CODEX_BIN", "app-server") } else { ("RUNWIRE_CURSOR_BIN", "acp") };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        cmd.env("HARNESS_HOME", dir.join("home"))
            .env(bin_var, support::example("replay-agent"))
            .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
            // The stand-in's settings (the wrapper passes only the agent's own arguments).
            .env("REPLAY_CELL", c)
            .env("REPLAY_EXPECT_ARGS", args)
            .env("REPLAY_STATE", dir.join(state))
            .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
            .arg(wrappers);
        if agent == "acp" {
            cmd.env(bin_var, "/nonexistent/cursor-agent");
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Kills the supervisor with SIGKILL (its tasks die with it: their
    /// parent-death signal) and starts another on the same run, its
    /// stand-in replaying from the start with its state in `state`.
    fn restart(&mut self, agent: &str, cell_name: &str, state: &str) -> Sup {
        let mut c = self.0.child.take().expect("running");
        // SAFETY: kill(2) on the process group this test started.
        unsafe { nix::libc::kill(-(c.id() as i32), nix::libc::SIGKILL) };
        let _ = c.wait();
        let wrappers = root().join("wrappers");
        let cmd = Sup::command(&self.dir, agent, &cell(agent, cell_name), &[], &wrappers, state);
        Sup(support::Supervised::spawn(self.dir.clone(), cmd))
    }

    fn inputs(&self) -> Vec<Value> {
        self.journal().into_iter().filter(|r| r.get("input").is_some()).collect()
    }

    /// The stand-in's state (`examples/replay-agent --state`), once written.
    fn replay(&self) -> Value {
        replay_state(&self.dir)
    }

    fn until(&self, what: &str, f: impl Fn(&Sup) -> bool) {
        let t = Instant::now();
        while !f(self) {
            assert!(
                t.elapsed() < LIMIT,
                "{what} did not happen; replay {}\nlog:\n{}\nstderr:\n{}",
                self.replay(),
                self.log(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    fn call(&self, req: Value) -> Value {
        self.0.call(req, LIMIT)
    }

    /// `answer` once the supervisor has read the request from the task log
    /// (journaled it): the stand-in may be waiting for the answer before
    /// the session has read the request, which it would refuse as unknown.
    /// The supervisor takes runwire's interrupt id only: the journal's
    /// `requested` record names it (the last one for the agent's id).
    fn answer(&self, mut answer: Value) -> Value {
        let id = answer["id"].clone();
        self.until("the request in the journal", |s| {
            s.inputs().iter().any(|r| r["input"] == "requested" && r["request"] == id)
        });
        let inputs = self.inputs();
        let asked = inputs.iter().rev().find(|r| r["input"] == "requested" && r["request"] == id).unwrap();
        let interrupt = asked["interrupt"].as_str().expect("the requested record names runwire's interrupt id");
        assert!(interrupt.starts_with("rw-"), "{asked}");
        answer["id"] = interrupt.into();
        let t = Instant::now();
        loop {
            let r = self.call(json!({"verb":"answer","task":"a","actor":"ana","answer":answer}));
            let not_yet = r["detail"].as_str().is_some_and(|d| d.contains("is pending"));
            if r["ok"] == true || !not_yet || t.elapsed() > LIMIT {
                return r;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// `runs list`'s status of the run (the registry's view: `needs_input`
    /// while a request waits).
    fn listed_status(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_runs"))
            .arg("list")
            .env("HARNESS_HOME", self.dir.join("home"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Value = serde_json::from_str(text.lines().next().unwrap_or("null")).unwrap_or(Value::Null);
        v["status"].as_str().unwrap_or_default().to_string()
    }

    /// Waits for the supervisor's exit; the stand-in must have matched every line.
    fn finish(&mut self) -> i32 {
        let code = self
            .0
            .wait(LIMIT, |s| format!("replay {}\nlog:\n{}\nstderr:\n{}", replay_state(&s.dir), s.log(), s.stderr()));
        self.assert_replay_happy();
        code
    }

    fn assert_replay_happy(&self) {
        let err = self.stderr();
        assert!(!err.contains("replay-agent:"), "the replayed agent found a wrong line:\n{err}");
    }
}

/// The stand-in's state in `dir` (`examples/replay-agent --state`), once written.
fn replay_state(dir: &Path) -> Value {
    std::fs::read_to_string(dir.join("replay-state.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// What the test did as the recorded person.
#[derive(Debug, PartialEq)]
enum Act {
    /// Answered request `id` (allowed: true/false, or a question's answer).
    Answer(String, Value),
    Steer(Value),
    Stop(Value),
}

/// The answer the recorded client gave to the agent's request, as the
/// supervisor's `answer` verb takes it; `None` for other client lines.
fn recorded_answer(expect: &Value) -> Option<Value> {
    if expect.get("method").is_some() {
        return None;
    }
    let id = match &expect["id"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(d) = expect.pointer("/result/decision").and_then(Value::as_str) {
        let allow = d == "accept" || d == "acceptForSession";
        return Some(json!({"id": id, "decision": if allow { "allow" } else { "deny" }}));
    }
    if let Some(o) = expect.pointer("/result/outcome/optionId").and_then(Value::as_str) {
        return Some(json!({"id": id, "decision": if o.starts_with("allow") { "allow" } else { "deny" }}));
    }
    // runwire's question tool: the answers are in the tool result's text.
    let text = expect.pointer("/result/contentItems/0/text").and_then(Value::as_str)?;
    let answers = serde_json::from_str::<Value>(text).ok()?.get("answers")?.clone();
    Some(json!({"id": id, "decision": "answer", "answers": answers}))
}

/// Plays the person until the stand-in has replayed its process (`done`):
/// answers, steers and stops where the recording did. Returns what it did.
fn drive(s: &Sup) -> Vec<Act> {
    drive_with(s, Cut::AsRecorded)
}

/// What the test does where the recorded client interrupted the turn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    /// Steer where the client steered (ACP: a cancel followed by a prompt),
    /// stop where it interrupted.
    AsRecorded,
    /// Every interrupt (every ACP `session/cancel`: the stand-in goes on with
    /// a later process's prompt, which would make it look like a steer) is a
    /// `stop`; once stopped, return when the stand-in waits for the next
    /// prompt: the test sends it.
    Stop,
    /// Every interrupt is a `steer` with `interrupt:true` and the prompt the
    /// client sent next: runwire writes the interrupt, then the prompt once
    /// the turn has ended.
    InterruptSteer,
}

/// [`drive`], doing `cut` where the recorded client interrupted the turn.
fn drive_with(s: &Sup, cut: Cut) -> Vec<Act> {
    let t = Instant::now();
    let mut handled: Vec<u64> = Vec::new();
    let mut acts = Vec::new();
    loop {
        let why = || format!("replay {}\nlog:\n{}\nstderr:\n{}", s.replay(), s.log(), s.stderr());
        let Some((index, st)) = support::next_exchange(|| s.replay(), &handled, t + LIMIT, why) else {
            return acts;
        };
        let expect = &st["expect"];
        if let Some(a) = recorded_answer(expect) {
            handled.push(index);
            let r = s.answer(a.clone());
            assert_eq!(r["ok"], true, "answer {a}: {r}\nstderr:\n{}", s.stderr());
            acts.push(Act::Answer(a["id"].as_str().unwrap().to_string(), a));
            continue;
        }
        let method = expect["method"].as_str();
        if cut == Cut::Stop
            && matches!(acts.last(), Some(Act::Stop(_)))
            && matches!(method, Some("turn/start" | "session/prompt"))
        {
            return acts;
        }
        let interrupt = cut == Cut::InterruptSteer && matches!(method, Some("turn/interrupt" | "session/cancel"));
        let steer = match method {
            Some("turn/steer") => Some(prompt_of(expect)),
            _ if interrupt => Some(prompt_of(&st["then"])),
            Some("session/cancel") if st["then"]["method"] == "session/prompt" && cut == Cut::AsRecorded => {
                Some(prompt_of(&st["then"]))
            }
            _ => None,
        };
        if let Some(msg) = steer {
            handled.push(index);
            let r = s.call(json!({"verb":"steer","task":"a","actor":"ana","msg":msg,"interrupt":interrupt}));
            assert_eq!(r["ok"], true, "steer: {r}\nstderr:\n{}", s.stderr());
            acts.push(Act::Steer(r));
            continue;
        }
        if matches!(expect["method"].as_str(), Some("turn/interrupt" | "session/cancel")) {
            handled.push(index);
            let r = s.call(json!({"verb":"stop","task":"a","actor":"ana"}));
            assert_eq!(r["ok"], true, "stop: {r}\nstderr:\n{}", s.stderr());
            acts.push(Act::Stop(r));
            continue;
        }
        // A line runwire writes by itself (initialize, thread/start, …): wait for it.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The input records of the journal: (input, request, kind or decision, actor or by).
fn input_summary(inputs: &[Value]) -> Vec<(String, String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    inputs
        .iter()
        .map(|r| {
            // A request is the runner's record; an answer says who decided.
            let (what, who) = if r["input"] == "requested" {
                (s(&r["kind"]), s(&r["actor"]))
            } else {
                (s(&r["decision"]), s(&r["by"]))
            };
            (s(&r["input"]), s(&r["request"]), what, who)
        })
        .collect()
}

/// A task that answers one approval as recorded runs to `committed`; the
/// run is `needs_input` while the request waits; the journal records the
/// request and the person's decision.
fn approval(agent: &str, cell_name: &str, tool: &str, decision: &str) {
    let mut s = Sup::start(&format!("{agent}-{cell_name}"), agent, cell_name, &[]);
    s.until("the request in the journal", |s| s.inputs().iter().any(|r| r["input"] == "requested"));
    assert_eq!(s.listed_status(), "needs_input");
    let acts = drive(&s);
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let inputs = s.inputs();
    let id = inputs[0]["request"].as_str().unwrap().to_string();
    assert_eq!(
        input_summary(&inputs),
        vec![
            ("requested".into(), id.clone(), "tool_approval".into(), "runner".into()),
            ("answered".into(), id, decision.into(), "ana".into()),
        ]
    );
    assert_eq!(inputs[0]["tool"], tool, "{inputs:?}");
    // The wrapper's status line closes the log: the session ended on its own
    // (an acp task has no wrapper: runwire-session's exit 0 says so).
    let status = s.log().lines().last().unwrap().to_string();
    if agent == "acp" {
        assert!(!s.log().contains(r#""type":"runwire.status","ok""#), "{}", s.log());
        assert!(s.log().contains(r#""stopReason":"end_turn""#), "{}", s.log());
    } else {
        assert!(status.contains(r#""type":"runwire.status","ok":true"#), "{status}");
    }
}

#[test]
fn codex_command_approved() {
    approval("codex", "approval-allow", "command_execution", "allow");
}

#[test]
fn codex_command_denied() {
    approval("codex", "approval-deny", "command_execution", "deny");
}

#[test]
fn cursor_tool_call_approved() {
    approval("cursor", "approval-allow", "execute", "allow");
}

#[test]
fn cursor_tool_call_denied() {
    approval("cursor", "approval-deny", "execute", "deny");
}

/// Issue 26: any ACP agent runs exactly as given. A plan task with
/// adapter `acp` and a `cmd` runs that command line under `runwire-session
/// acp` (no wrapper, no cursor-agent); its permission request is answered
/// through the supervisor's `answer` verb, and the task commits.
#[test]
fn acp_task_runs_its_command_line_and_its_permission_is_answered() {
    approval("acp", "approval-allow", "execute", "allow");
}

#[test]
fn acp_task_denied() {
    approval("acp", "approval-deny", "execute", "deny");
}

/// `stop` and a live steer go to an acp task's session as to cursor's.
#[test]
fn acp_stop_cancels_and_keeps_the_session() {
    stop("acp");
}

#[test]
fn acp_steer_with_interrupt_cancels_once_then_prompts() {
    interrupt_steer("acp");
}

/// ACP has no batch mode: an `acp` task without `--interactive` is refused
/// as the plan is loaded (usage, exit 2), before anything runs; so are a
/// plan whose acp task has no `cmd` and one that gives `cmd` to claude.
#[test]
fn acp_task_refused_without_interactive_or_cmd() {
    let dir = support::scratch("acp-refused");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let run = |task: Value, interactive: bool| {
        std::fs::write(dir.join("p.plan.json"), json!({"v":"plan/v1","tasks":[task]}).to_string()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        cmd.current_dir(&dir).env("HARNESS_HOME", dir.join("home")).args(["--plan", "p.plan.json"]);
        if interactive {
            cmd.arg("--interactive");
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let acp = json!({"id":"a","adapter":"acp","prompt":"hi","cmd":["/bin/true"]});
    let (code, err) = run(acp, false);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("runwire-supervise: "), "{err}");
    assert!(err.contains(r#"task "a": adapter "acp" runs only with --interactive (ACP has no batch mode)"#), "{err}");
    let (code, err) = run(json!({"id":"a","adapter":"acp","prompt":"hi"}), true);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(r#"adapter "acp" needs cmd"#), "{err}");
    let (code, err) = run(json!({"id":"a","adapter":"claude","prompt":"hi","cmd":["claude"]}), true);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(r#"cmd is only for adapter "acp""#), "{err}");
    // Nothing was registered or journaled.
    assert!(!dir.join("p.journal.ndjson").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn codex_question_answered_from_its_choices() {
    let mut s = Sup::start("codex-question", "codex", "user-question", &[]);
    s.until("the question in the journal", |s| s.inputs().iter().any(|r| r["input"] == "requested"));
    let id = s.inputs()[0]["request"].as_str().unwrap().to_string();
    // A question that was not asked, and an answer the question cannot take (runwire's question
    // tool takes the person's own words, but not blank ones), are refused before the session (the
    // session's own check; the server's resume makes it too).
    let r = s.answer(json!({"id": id, "decision": "answer", "answers": {"Tabs or commas?": "spaces"}}));
    assert_eq!(r["ok"], false, "{r}");
    let r = s.answer(json!({"id": id, "decision": "answer", "answers": {"Tabs or spaces?": " "}}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains(r#"an answer of "Tabs or spaces?" in the person's own words must not be blank"#),
        "{r}"
    );
    let acts = drive(&s);
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let inputs = s.inputs();
    assert_eq!(
        input_summary(&inputs),
        vec![
            ("requested".into(), id.clone(), "question".into(), "runner".into()),
            ("answered".into(), id, "answer".into(), "ana".into()),
        ]
    );
    let answers: Value = serde_json::from_str(inputs[1]["detail"].as_str().unwrap()).unwrap();
    assert_eq!(answers, json!({"Tabs or spaces?": "spaces"}), "{inputs:?}");
}

#[test]
fn codex_steer_goes_into_the_running_turn() {
    let mut s = Sup::start("codex-steer", "codex", "steer", &[]);
    let acts = drive(&s);
    let [Act::Steer(r)] = &acts[..] else { panic!("{acts:?}") };
    assert!(r["detail"].as_str().unwrap().contains("written into the running turn (live"), "{r}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    // One turn, one process: no second lease, no --resume.
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let steer = s.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert_eq!(steer["actor"], "ana");
    assert!(steer["detail"].as_str().unwrap().ends_with(" bytes, live"), "{steer}");
    assert!(s.inputs().is_empty(), "nothing was asked");
}

/// A copy of a recorded cell under `to` whose agent lines matching `pick`
/// are printed `ms` after the previous one (`pause_ms`, see
/// `examples/replay-agent.rs`): the test pins an interleaving.
fn paused_cell(from: &Path, to: &Path, pick: impl Fn(&Value) -> bool, ms: u64) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for f in ["to-agent.ndjson", "manifest.json"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    let mut out = String::new();
    for l in std::fs::read_to_string(from.join("from-agent.ndjson")).unwrap().lines() {
        let mut env: Value = serde_json::from_str(l).unwrap();
        let line: Value = serde_json::from_str(env["line"].as_str().unwrap()).unwrap();
        if pick(&line) {
            env["pause_ms"] = json!(ms);
        }
        out.push_str(&env.to_string());
        out.push('\n');
    }
    std::fs::write(to.join("from-agent.ndjson"), out).unwrap();
    to.to_path_buf()
}

#[test]
fn cursor_steer_cancels_the_turn_and_prompts_again_in_the_same_session() {
    // The new turn's first request comes a while after the cancelled turn
    // ended, so the supervisor has seen that end first: the session must
    // stay open for the steer's own turn (its request is answered, not
    // refused as if nobody could answer).
    let tmp = support::scratch("cursor-steer-cell");
    let c = paused_cell(
        &cell("cursor", "steer"),
        &tmp,
        |l| l["method"] == "session/request_permission" && l["id"] == 4,
        700,
    );
    let c = c.to_string_lossy().to_string();
    let mut s = Sup::start("cursor-steer", "cursor", "steer", &[("REPLAY_CELL", &c)]);
    let acts = drive(&s);
    // Four approvals, the steer, and the new turn's approval: all in one process.
    let kinds: Vec<&str> = acts
        .iter()
        .map(|a| match a {
            Act::Answer(..) => "answer",
            Act::Steer(_) => "steer",
            Act::Stop(_) => "stop",
        })
        .collect();
    assert_eq!(kinds, ["answer", "answer", "answer", "answer", "steer", "answer"], "{acts:?}");
    let Act::Steer(r) = &acts[4] else { unreachable!() };
    // Said as what it is: ACP cannot steer a running turn.
    let d = r["detail"].as_str().unwrap();
    assert!(d.contains("cannot steer a running turn: the turn was cancelled and the message prompts again"), "{r}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let steer = s.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert!(steer["detail"].as_str().unwrap().contains("cancel then prompt"), "{steer}");
    // The log shows the cancelled turn, then the steer's own.
    let log = s.log();
    let ends: Vec<&str> = ["\"stopReason\":\"cancelled\"", "\"stopReason\":\"end_turn\""]
        .into_iter()
        .filter(|p| log.contains(p))
        .collect();
    assert_eq!(ends.len(), 2, "{log}");
    assert!(log.find("\"stopReason\":\"cancelled\"") < log.find("\"stopReason\":\"end_turn\""));
    let answered = s.inputs().into_iter().filter(|r| r["input"] == "answered" && r["decision"] == "allow").count();
    assert_eq!(answered, 5);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `stop` interrupts the running turn (codex `turn/interrupt`, ACP
/// `session/cancel`) and keeps the session: the task stays `leased`, the
/// wrapper still runs. Then a steer starts the next turn in the same
/// process, with the prompt the recorded person sent when they resumed the
/// session in a new one (the stand-in goes on with that exchange:
/// `REPLAY_CONTINUE=2`), and the task finishes.
fn stop(agent: &str) {
    let mut s = Sup::start(&format!("{agent}-stop"), agent, "stop-interrupt", &[("REPLAY_CONTINUE", "2")]);
    let acts = drive_with(&s, Cut::Stop);
    let Some(Act::Stop(r)) = acts.last() else { panic!("{acts:?}") };
    assert!(r["detail"].as_str().unwrap().contains("the turn was interrupted; the session stays"), "{r}");
    // The interrupted turn's end reaches the log, and the session is still open.
    let end = if agent == "codex" { r#""status":"interrupted""# } else { r#""stopReason":"cancelled""# };
    s.until("the interrupted turn's end in the log", |s| s.log().contains(end));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.states(), ["leased"], "the task waits with its session open");
    assert!(!s.log().contains(r#""type":"runwire.status","ok""#), "the wrapper has not ended:\n{}", s.log());
    // A second stop finds nothing running and keeps the session too.
    let r = s.call(json!({"verb":"stop","task":"a"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("no turn is running"), "{r}");
    let next = prompt_of(&s.replay()["expect"]);
    let r = s.call(json!({"verb":"steer","task":"a","actor":"ana","msg":next}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("no turn was running: the message started one"), "{r}");
    let more = drive(&s);
    assert!(more.is_empty(), "{more:?}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    // One process: no second lease, no --resume.
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let steer = s.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert!(steer["detail"].as_str().unwrap().ends_with("bytes, live, new turn"), "{steer}");
}

/// A `stop` before codex has even answered `thread/start` (its answer is
/// held back, `pause_ms`): the first prompt still starts its turn, which is
/// interrupted as soon as codex names it (the recorded `turn/interrupt`);
/// the session stays, and a steer's turn then ends the task as usual.
#[test]
fn codex_stop_before_the_thread_exists_interrupts_the_first_turn() {
    let tmp = support::scratch("codex-early-cell");
    let c = paused_cell(
        &cell("codex", "stop-interrupt"),
        &tmp,
        |l| l.pointer("/result/thread/id").is_some() && l["id"] == 4,
        1500,
    );
    let c = c.to_string_lossy().to_string();
    let mut s = Sup::start("codex-early", "codex", "stop-interrupt", &[("REPLAY_CELL", &c), ("REPLAY_CONTINUE", "2")]);
    s.until("thread/start written", |s| s.replay()["expect"]["method"] == "thread/start");
    std::thread::sleep(Duration::from_millis(300));
    let r = s.call(json!({"verb":"stop","task":"a","actor":"ana"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("the turn was interrupted; the session stays"), "{r}");
    // The stand-in now wants the resumed exchange's prompt: the interrupt was the recorded one.
    s.until("the interrupted turn's end", |s| s.log().contains(r#""status":"interrupted""#));
    s.until("the stand-in waiting for the next prompt", |s| s.replay()["expect"]["method"] == "turn/start");
    assert_eq!(s.states(), ["leased"]);
    let next = prompt_of(&s.replay()["expect"]);
    let r = s.call(json!({"verb":"steer","task":"a","msg":next}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `steer` with `interrupt:true` mid-turn: the turn is interrupted (codex
/// `turn/interrupt`, ACP one `session/cancel`) and the message, written right
/// after, starts the next turn only once the interrupted one has ended (codex
/// `turn/start`, not a `turn/steer` into the dying turn; ACP
/// `session/prompt`), in the same process (`REPLAY_CONTINUE=2`: the
/// recorded resume's prompt).
fn interrupt_steer(agent: &str) {
    let mut s = Sup::start(&format!("{agent}-isteer"), agent, "stop-interrupt", &[("REPLAY_CONTINUE", "2")]);
    let acts = drive_with(&s, Cut::InterruptSteer);
    let Some(Act::Steer(r)) = acts.last() else { panic!("{acts:?}") };
    assert!(
        r["detail"].as_str().unwrap().contains("the turn was interrupted and the message starts the next one"),
        "{r}"
    );
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let steer = s.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert!(steer["detail"].as_str().unwrap().ends_with("bytes, live, interrupt"), "{steer}");
}

#[test]
fn codex_steer_with_interrupt_starts_the_next_turn_after_the_interrupted_one() {
    interrupt_steer("codex");
}

#[test]
fn cursor_steer_with_interrupt_cancels_once_then_prompts() {
    interrupt_steer("cursor");
}

/// A steer after the session ended (the task is at its gate) waits for the
/// turn boundary and resumes the agent's session in a new process (codex
/// `thread/resume` with the thread the log named, ACP `session/load`), as
/// the recorded client did (`resume` cells: process 1, then process 2).
fn boundary_steer(agent: &str) {
    let dir = support::scratch(&format!("{agent}-resume-engine"));
    // Each start of the agent replays the next process of the recording.
    let engine = dir.join("engine");
    std::fs::write(
        &engine,
        format!(
            "#!/usr/bin/env bash\nn=$(( $(cat '{d}/n' 2>/dev/null || echo 0) + 1 ))\necho $n >'{d}/n'\nREPLAY_RUN=$n exec '{}' \"$@\"\n",
            support::example("replay-agent").display(),
            d = dir.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("755").arg(&engine).status().unwrap();
    let var = if agent == "codex" { "RUNWIRE_CODEX_BIN" } else { "RUNWIRE_CURSOR_BIN" };
    let engine = engine.to_string_lossy().to_string();
    let mut s =
        Sup::start_plan(&format!("{agent}-resume"), agent, "resume", &[(var, &engine)], json!({"gate":"sleep 2"}));
    s.until("the first turn implemented", |s| s.states().contains(&"implemented".to_string()));
    // The recorded person's next prompt, from the second process.
    let text = std::fs::read_to_string(cell(agent, "resume").join("to-agent.ndjson"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| serde_json::from_str::<Value>(e["line"].as_str()?).ok())
        .filter(|v| matches!(v["method"].as_str(), Some("turn/start" | "session/prompt")))
        .nth(1)
        .map(|v| prompt_of(&v))
        .unwrap();
    let r = s.call(json!({"verb":"steer","task":"a","actor":"ana","msg":text}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("applied at its next turn boundary (--resume)"), "{r}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "gated", "leased", "implemented", "gated", "committed"]);
    assert_eq!(std::fs::read_to_string(dir.join("n")).unwrap().trim(), "2", "two processes");
    assert_eq!(s.replay()["state"], "done");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn codex_steer_at_the_turn_boundary_resumes_the_thread() {
    boundary_steer("codex");
}

#[test]
fn cursor_steer_at_the_turn_boundary_loads_the_session() {
    boundary_steer("cursor");
}

/// `kill` still ends an interactive codex task (and its session) mid-turn.
#[test]
fn kill_ends_an_interactive_codex_task() {
    let s = Sup::start("codex-kill", "codex", "stop-interrupt", &[]);
    s.until("the turn running", |s| s.replay()["expect"]["method"] == "turn/interrupt");
    let r = s.call(json!({"verb":"kill","task":"a","actor":"ana"}));
    assert_eq!(r["ok"], true, "{r}");
    s.until("the supervisor's end", |s| s.journal().iter().any(|r| r["run"] == "finished"));
    assert_eq!(s.states(), ["leased", "halted"]);
    let halted = s.journal().into_iter().find(|r| r["state"] == "halted").unwrap();
    assert_eq!(halted["detail"], "killed by ana");
}

#[test]
fn codex_stop_interrupts_and_keeps_the_session() {
    stop("codex");
}

#[test]
fn cursor_stop_cancels_and_keeps_the_session() {
    stop("cursor");
}

/// Nobody answers: the session denies the request when its time is up
/// (fail closed: codex `decline`, ACP `reject_once`, as the recorded
/// person's denial), the journal says `expired`, and a late answer is refused.
fn expiry(agent: &str) {
    // The turn's end comes 1.5 s after the line before it, so the late answer
    // below reaches a supervisor still running the session (not one that has
    // already finished the task and closed its socket).
    let tmp = support::scratch(&format!("{agent}-expiry-cell"));
    let end = |l: &Value| l["method"] == "turn/completed" || l.pointer("/result/stopReason").is_some();
    let c = paused_cell(&cell(agent, "approval-deny"), &tmp, end, 1500).to_string_lossy().to_string();
    let env = [("RUNWIRE_ANSWER_TIMEOUT", "1s"), ("REPLAY_CELL", c.as_str())];
    let mut s = Sup::start(&format!("{agent}-expiry"), agent, "approval-deny", &env);
    s.until("the expiry in the journal", |s| s.inputs().iter().any(|r| r["decision"] == "expired"));
    let inputs = s.inputs();
    let id = inputs[0]["request"].as_str().unwrap().to_string();
    assert_eq!(
        input_summary(&inputs)[1],
        ("answered".to_string(), id.clone(), "expired".to_string(), "runwire-session".to_string())
    );
    // Too late: the request was denied (or its session is over by now).
    let iid = inputs[0]["interrupt"].as_str().unwrap();
    let r = s.call(json!({"verb":"answer","task":"a","answer":{"id": iid, "decision": "allow"}}));
    assert_eq!(r["ok"], false, "{r}");
    let d = r["detail"].as_str().unwrap();
    assert!(
        d.contains("expired and was denied")
            || d.contains("was decided (expired)")
            || d.contains("ended before it took"),
        "{r}"
    );
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    assert_eq!(s.replay()["state"], "done");
    assert_eq!(s.inputs().len(), 2, "the late answer reached nothing");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn codex_unanswered_approval_expires_denied() {
    expiry("codex");
}

#[test]
fn cursor_unanswered_permission_expires_denied() {
    expiry("cursor");
}

/// `runwire-serve`'s task routes reach a supervised cursor session: an
/// answer that does not fit the request is a `400`, a stale one a `409`,
/// each with the supervisor's reason, the recorded one
/// goes through, and a different answer to the decided request is refused.
#[test]
fn server_task_routes_answer_a_supervised_cursor_session() {
    let mut s = Sup::start("cursor-routes", "cursor", "approval-allow", &[]);
    s.until("the request in the journal", |s| s.inputs().iter().any(|r| r["input"] == "requested"));
    let srv = support::Server::start(&s.dir.join("home"));
    let post = |path: &str, body: &str| srv.post(path, body);
    let run = std::fs::read_dir(s.dir.join("home/runs")).unwrap().flatten().next().unwrap();
    let run = run.path().file_stem().unwrap().to_string_lossy().to_string();
    let raw = s.inputs()[0]["request"].as_str().unwrap().to_string();
    let rid = s.inputs()[0]["interrupt"].as_str().unwrap().to_string();
    let answer = format!("/runs/{run}/tasks/a/answer");
    // The agent's own id names no process: refused before the supervisor is asked.
    let (code, v) = post(&answer, &format!(r#"{{"request":"{raw}","decision":"allow"}}"#));
    assert_eq!(code, 400, "{v}");
    let (code, v) = post(&answer, r#"{"request":"rw-0123","decision":"allow"}"#);
    assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{v}");
    // ACP takes no edited input: refused before anything reaches the agent,
    // as an answer wrong in itself (400, as for a session the server holds).
    let (code, v) = post(&answer, &format!(r#"{{"request":"{rid}","decision":"allow","updated_input":{{"x":1}}}}"#));
    assert_eq!((code, v["code"].as_str()), (400, Some("bad_request")), "{v}");
    assert!(v["detail"].as_str().unwrap_or_default().contains("ACP takes no edited input"), "{v}");
    let (code, v) = post(&answer, &format!(r#"{{"request":"{rid}","decision":"allow"}}"#));
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    // Stale: the request is decided; a different answer is refused.
    let (code, v) = post(&answer, &format!(r#"{{"request":"{rid}","decision":"deny"}}"#));
    assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{v}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.replay()["state"], "done");
    let answered: Vec<Value> = s.inputs().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!((answered[0]["decision"].as_str(), answered[0]["by"].as_str()), (Some("allow"), Some("runwire-serve")));
}

/// The answers the journal holds: (request, decision, by).
fn answers(s: &Sup) -> Vec<(String, String, String)> {
    let t = |v: &Value| v.as_str().unwrap_or_default().to_string();
    s.inputs()
        .iter()
        .filter(|r| r["input"] == "answered")
        .map(|r| (t(&r["request"]), t(&r["decision"]), t(&r["by"])))
        .collect()
}

/// The codex race of spec/SUPERVISOR.md: the steer reaches codex just after
/// the turn it meant to join ended, codex refuses it, and the session starts
/// a new turn with it (`synthetic.codex-steer-late-approval`: the turn's end
/// and the refusal 300 ms apart, the new turn's command approval 700 ms
/// after it started). The supervisor has long seen the first turn end, yet
/// keeps the session input open because the session has not said it is
/// idle: the new turn's request reaches the person and is answered (not
/// refused as if nobody could answer), and the task commits. Counting turn
/// ends closed the input at the first end, and the request was refused.
#[test]
fn codex_steer_refused_at_the_turn_end_keeps_the_session_for_the_turn_it_starts() {
    let mut s = Sup::start("codex-late", "codex", "synthetic.codex-steer-late-approval", &[]);
    let acts = drive(&s);
    let [Act::Steer(r), Act::Answer(id, _)] = &acts[..] else { panic!("{acts:?}") };
    assert!(r["detail"].as_str().unwrap().contains("written into the running turn (live"), "{r}");
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    assert_eq!(answers(&s), [(id.clone(), "allow".to_string(), "ana".to_string())]);
    // The first turn's end came before the request, and the session said it was idle only after the second.
    let log = s.log();
    let first_end = log.find(r#""method":"turn/completed""#).unwrap();
    assert!(first_end < log.find("item/commandExecution/requestApproval").unwrap());
    let idle: Vec<&str> = log.lines().filter(|l| l.starts_with(r#"{"type":"runwire.idle""#)).collect();
    assert_eq!(idle, [r#"{"type":"runwire.idle","inputs":2}"#], "{log}");
}

/// The ACP race of spec/SUPERVISOR.md: a steer cancels the turn and its
/// prompt is sent once the turn has stopped; a `stop` catches that prompt on
/// its way (the stand-in has read it, the supervisor has not yet read the
/// cancelled turn's end: a wrapper around cursor.sh holds the log's first
/// cancelled end back until the test lets it go), and a second steer follows
/// at once (`synthetic.acp-steer-stop-steer`; the second steer's turn asks
/// 700 ms after it starts). Two cancelled ends reach the log before the
/// second steer's turn: the session input stays open until the session says
/// it is idle with every line read, so that turn's request is answered and
/// the task commits. Counting turn ends expected one end too few and closed
/// the input at the second cancelled end.
#[test]
fn cursor_steer_after_a_stop_that_caught_a_steers_prompt_gets_its_turn() {
    let tmp = support::scratch("cursor-gate");
    let gate = tmp.join("open");
    std::fs::write(
        tmp.join("cursor.sh"),
        format!(
            r#"#!/usr/bin/env bash
# cursor.sh, with its output held back at the first cancelled turn end until {gate} exists.
set -o pipefail
'{real}' "$@" | {{
    held=0
    while IFS= read -r l || [[ -n $l ]]; do
        if ((held == 0)) && [[ $l == *'"stopReason":"cancelled"'* ]]; then
            held=1
            until [[ -e '{gate}' ]]; do sleep 0.02; done
        fi
        printf '%s\n' "$l"
    done
}}
"#,
            real = root().join("wrappers/cursor.sh").display(),
            gate = gate.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("755").arg(tmp.join("cursor.sh")).status().unwrap();
    let mut s = Sup::start_with("cursor-race", "cursor", "synthetic.acp-steer-stop-steer", &[], json!({}), &tmp);
    // The four approvals as recorded, the steer where the client steered;
    // then the stand-in waits for the stop's cancel: it has read the steer's prompt.
    let (mut handled, mut steered, t) = (Vec::new(), false, Instant::now());
    let then = loop {
        assert!(t.elapsed() < LIMIT, "no progress: replay {}\nstderr:\n{}", s.replay(), s.stderr());
        let st = s.replay();
        let index = st["index"].as_u64();
        if st["state"] != "wait" || handled.contains(&index) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        handled.push(index);
        if let Some(a) = recorded_answer(&st["expect"]) {
            assert_eq!(s.answer(a.clone())["ok"], true, "{a}");
        } else if st["expect"]["method"] == "session/cancel" && !steered {
            let r = s.call(json!({"verb":"steer","task":"a","actor":"ana","msg":prompt_of(&st["then"])}));
            assert!(r["detail"].as_str().unwrap().contains("cancelled and the message prompts again"), "{r}");
            steered = true;
        } else if st["expect"]["method"] == "session/cancel" {
            break st;
        } else {
            handled.pop();
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert!(!s.log().contains(r#""stopReason":"cancelled""#), "the gate holds the cancelled end back");
    // The gate holds the session's output back, its acknowledgements with
    // it: the replies say the lines were written, not yet what they did.
    let r = s.call(json!({"verb":"stop","task":"a","actor":"ana"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("the session has not acknowledged it yet"), "{r}");
    let r = s.call(json!({"verb":"steer","task":"a","actor":"ana","msg":prompt_of(&then["then"])}));
    assert_eq!(r["ok"], true, "{r}");
    std::fs::write(&gate, "").unwrap();
    // Played already: the stand-in must have gone past that cancel before
    // `drive` reads its state, or it would steer there once more.
    s.until("the stop's cancel read", |s| s.replay()["index"] != then["index"]);
    let acts = drive(&s);
    let [Act::Answer(id, _)] = &acts[..] else { panic!("{acts:?}") };
    assert_eq!(s.finish(), 0, "{}", s.stderr());
    assert_eq!(s.states(), ["leased", "implemented", "committed"]);
    let answered = answers(&s);
    assert_eq!(answered.len(), 5, "{answered:?}");
    assert!(answered.iter().all(|(_, d, by)| d == "allow" && by == "ana"), "{answered:?}");
    assert_eq!(&answered[4].0, id);
    let log = s.log();
    assert_eq!(log.matches(r#""stopReason":"cancelled""#).count(), 2, "{log}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A supervisor that restarts (`kill -9`, then another on the same run)
/// rebuilds from the journal which runwire interrupt id belongs to which
/// of the task's agent processes, and how each was closed (#34): an answer
/// naming a request of a process the last supervisor ran is bound as
/// before the restart, never taken for a request of the processes this one
/// starts. Run 1 leaves a request open; run 2 redoes the turn (a new
/// process, a new request) and refuses the old id, delivers the new one;
/// run 3 (the gate in flight) acknowledges an identical replay of that
/// answer with nothing sent and refuses a different one.
#[test]
fn after_a_restart_answers_by_interrupt_id_are_still_bound_to_their_process() {
    let gate = "until test -e go.flag; do sleep 0.05; done";
    let mut s1 = Sup::start_plan("restart-bound", "codex", "approval-allow", &[], json!({"gate": gate}));
    s1.until("the request in the journal", |s| s.inputs().iter().any(|r| r["input"] == "requested"));
    let requested = |s: &Sup| -> Vec<String> {
        let r = s.inputs();
        r.iter().filter(|r| r["input"] == "requested").map(|r| r["interrupt"].as_str().unwrap().to_string()).collect()
    };
    let old = requested(&s1)[0].clone();
    let mut s2 = s1.restart("codex", "approval-allow", "replay-state-2.json");
    s2.until("the redone turn's request", |s| requested(s).len() == 2);
    let new = requested(&s2)[1].clone();
    assert_ne!(old, new);
    let agent_id =
        s2.inputs().iter().rev().find(|r| r["input"] == "requested").unwrap()["request"].as_str().unwrap().to_string();
    let ask = |s: &Sup, id: &str, decision: &str| {
        s.call(json!({"verb":"answer","task":"a","actor":"ana","answer":{"id":id,"decision":decision}}))
    };
    // The first process's request ended unanswered with it.
    let r = ask(&s2, &old, "allow");
    assert_eq!(r["ok"], false, "{r}");
    let d = r["detail"].as_str().unwrap();
    assert!(d.contains("earlier supervisor") && d.contains("ended before it was answered"), "{r}");
    // The running process's own request is delivered.
    let r = s2.answer(json!({"id":agent_id,"decision":"allow"}));
    assert_eq!((r["ok"].clone(), r["sent"].clone()), (json!(true), json!(true)), "{r}");
    s2.until("the turn's end", |s| s.states().contains(&"implemented".to_string()));
    let mut s3 = s2.restart("codex", "approval-allow", "replay-state-3.json");
    s3.until("the restart", |s| s.journal().iter().filter(|r| r["run"] == "started").count() == 3);
    let r = ask(&s3, &new, "allow");
    assert_eq!((r["ok"].clone(), r["sent"].clone()), (json!(true), json!(false)), "{r}");
    assert!(r["detail"].as_str().unwrap().contains("acknowledged, nothing sent"), "{r}");
    let r = ask(&s3, &new, "deny");
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("a different answer is refused"), "{r}");
    assert_eq!(ask(&s3, &old, "deny")["ok"], false);
    std::fs::write(s3.dir.join("go.flag"), "").unwrap();
    assert_eq!(s3.finish(), 0, "{}", s3.stderr());
    assert_eq!(s3.states(), ["leased", "leased", "implemented", "gated", "committed"]);
    // One answer reached an agent: the one run 2 delivered.
    assert_eq!(answers(&s3), [(agent_id.clone(), "allow".to_string(), "ana".to_string())]);
}
