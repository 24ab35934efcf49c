//! `runwire-supervise --interactive`: a claude task runs as a live session
//! (`claude.sh --interactive` → `runwire-session` → the replay stub of a
//! recorded Claude Code session, which checks every line written to it).
//! `steer` writes into the running turn, `stop` interrupts it and keeps the
//! session, `answer` answers the agent, and the journal records requests and
//! answers. Every wait is bounded; the supervisor's group is killed on the way out.

use crate::support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The supervisor, and what the test reads of it ([`support::Supervised`]).
struct Live(support::Supervised);

impl std::ops::Deref for Live {
    type Target = support::Supervised;
    fn deref(&self) -> &support::Supervised {
        &self.0
    }
}

impl Live {
    /// A supervisor over one claude task replaying `cell` (with `stub_args`).
    fn start(name: &str, cell: &str, stub_args: &str) -> Live {
        let dir = support::scratch(name);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let cell = root().join("fixtures/interactive/claude-code").join(cell);
        let engine = dir.join("replay-claude");
        std::fs::write(
            &engine,
            format!(
                "#!/usr/bin/env bash\nexec '{}' claude '{}' {stub_args} \"$@\"\n",
                root().join("fixtures/stub-engines/replay").display(),
                cell.display()
            ),
        )
        .unwrap();
        Command::new("chmod").arg("755").arg(&engine).status().unwrap();
        let plan = serde_json::json!({"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":support::user_messages(&cell)[0]}]});
        std::fs::write(dir.join("p.plan.json"), plan.to_string()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        cmd.env("HARNESS_HOME", dir.join("home"))
            .env("RUNWIRE_CLAUDE_BIN", &engine)
            .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
            .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
            .arg(root().join("wrappers"));
        Live(support::Supervised::spawn(dir, cmd))
    }

    fn until(&self, what: &str, f: impl Fn(&Live) -> bool) {
        let t = Instant::now();
        while !f(self) {
            assert!(t.elapsed() < LIMIT, "{what} did not happen; log:\n{}\nstderr:\n{}", self.log(), self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn call(&self, req: Value) -> Value {
        self.0.call(req, LIMIT)
    }

    /// Waits for the supervisor's exit; the stub must have matched every line.
    fn finish(&mut self) -> i32 {
        let code = self.0.wait(LIMIT, |s| format!("log:\n{}", s.log()));
        let err = self.stderr();
        assert!(!err.contains("replay stub:"), "the stub found a mismatch:\n{err}");
        code
    }
}

/// runwire's interrupt id of the agent's request `raw`: the task log's
/// `runwire.request` line carries it.
fn interrupt_of(l: &Live, raw: &str) -> String {
    let log = l.log();
    let line = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "runwire.request" && v["id"] == raw)
        .unwrap_or_else(|| panic!("no runwire.request line for {raw}:\n{log}"));
    line["interrupt_id"].as_str().expect("the request line carries runwire's id").to_string()
}

// The replay stub runs jq: ignored without it, failed under CI (tests/support/tools.rs).
macro_rules! need_jq {
    () => {
        support::need(&["jq"])
    };
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn steer_writes_into_the_running_turn_without_kill_or_resume() {
    need_jq!();
    let mut l = Live::start("steer", "steer", "--end-at 311");
    l.until("six tool results in the log", |l| l.log().matches(r#""type":"tool_result""#).count() >= 6);
    let r = l.call(serde_json::json!({"verb":"steer","task":"a","actor":"ana",
        "msg":"Stop counting now. Instead, tell me the current git branch name and finish."}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("written into the running turn"), "{r}");
    assert_eq!(l.finish(), 0, "{}", l.stderr());
    // One turn, one process: no second lease, no --resume.
    assert_eq!(l.states(), ["leased", "implemented", "committed"]);
    let steer = l.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert_eq!((steer["actor"].as_str(), steer["detail"].as_str()), (Some("ana"), Some("task a: 75 bytes, live")));
    let status = l.log().lines().last().unwrap().to_string();
    assert!(status.contains(r#""type":"runwire.status","ok":true"#), "{status}");
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn answer_reaches_the_agent_and_the_journal_records_request_and_answer() {
    need_jq!();
    let mut l = Live::start("answer", "approval-allow", "");
    l.until("the request in the log", |l| l.log().contains(r#"{"type":"runwire.request""#));
    let r = l.call(serde_json::json!({"verb":"answer","task":"a","answer":{"id":"rw-0123","decision":"allow"}}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("was not raised by this task's agent"), "{r}");
    // The agent's own id names no process: refused, nothing sent.
    let raw = "7036d017-a860-42d1-b7a6-0951dcae5f6a";
    let r = l.call(serde_json::json!({"verb":"answer","task":"a","answer":{"id":raw,"decision":"allow"}}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("not a runwire interrupt id"), "{r}");
    let id = &interrupt_of(&l, raw);
    // The wrong decision for a tool approval is refused before it reaches the session.
    let r = l.call(
        serde_json::json!({"verb":"answer","task":"a","answer":{"id":id,"decision":"answer","answers":{"q":"a"}}}),
    );
    assert_eq!(r["ok"], false, "{r}");
    let r = l.call(serde_json::json!({"verb":"answer","task":"a","actor":"ana","answer":{"id":id,"decision":"allow"}}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(l.finish(), 0, "{}", l.stderr());
    assert_eq!(l.states(), ["leased", "implemented", "committed"]);
    let inputs: Vec<Value> = l.journal().into_iter().filter(|r| r.get("input").is_some()).collect();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert_eq!((inputs[0]["input"].as_str(), inputs[0]["request"].as_str()), (Some("requested"), Some(raw)));
    assert_eq!(
        (inputs[0]["interrupt"].as_str(), inputs[1]["interrupt"].as_str()),
        (Some(id.as_str()), Some(id.as_str()))
    );
    assert_eq!(inputs[1]["door"], "supervisor-socket");
    assert_eq!((inputs[0]["kind"].as_str(), inputs[0]["tool"].as_str()), (Some("tool_approval"), Some("Bash")));
    assert_eq!(
        (inputs[1]["input"].as_str(), inputs[1]["decision"].as_str(), inputs[1]["by"].as_str()),
        (Some("answered"), Some("allow"), Some("ana"))
    );
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn stop_interrupts_the_turn_and_keeps_the_session_for_a_steer() {
    need_jq!();
    let mut l = Live::start("stop", "stop-interrupt", "--part 1");
    l.until("the essay streaming", |l| l.log().contains("text_delta"));
    let r = l.call(serde_json::json!({"verb":"stop","task":"a","actor":"ana"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("the session stays"), "{r}");
    // The stub's reply to interrupt is made up, and says so.
    l.until("the interrupted turn's result", |l| {
        l.log().contains(r#""type":"result","subtype":"error_during_execution""#)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(l.states(), ["leased"], "the task waits with its session open");
    // Paused, nothing new starts: a steer to the idle session would start a
    // turn, and is refused with nothing sent (it started one).
    let r = l.call(serde_json::json!({"verb":"pause"}));
    assert_eq!(r["ok"], true, "{r}");
    let r = l.call(serde_json::json!({"verb":"steer","task":"a","msg":"Now just say hi."}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("the run is paused"), "{r}");
    let r = l.call(serde_json::json!({"verb":"resume"}));
    assert_eq!(r["ok"], true, "{r}");
    // A second stop has nothing to interrupt but the session is still there: a steer goes on.
    let r = l.call(serde_json::json!({"verb":"steer","task":"a","msg":"Now just say hi."}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("live"), "{r}");
    assert_eq!(l.finish(), 0, "{}", l.stderr());
    assert_eq!(l.states(), ["leased", "implemented", "committed"]);
}

#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn kill_still_kills_an_interactive_task() {
    need_jq!();
    let mut l = Live::start("kill", "stop-interrupt", "--part 1");
    l.until("the essay streaming", |l| l.log().contains("text_delta"));
    let r = l.call(serde_json::json!({"verb":"kill","task":"a"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(l.finish(), 1);
    assert_eq!(l.states(), ["leased", "halted"]);
}

/// `runwire-serve`'s task routes reach the supervisor's session: `answer` (the
/// same body as for a session the server holds) and `stop`, with 409 for what
/// the supervisor refuses.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn server_task_routes_answer_and_stop_a_supervised_session() {
    need_jq!();
    let mut l = Live::start("routes", "approval-allow", "");
    l.until("the request in the log", |l| l.log().contains(r#"{"type":"runwire.request""#));
    let srv = support::Server::start(&l.dir.join("home"));
    let post = |path: &str, body: &str| srv.post(path, body);
    let run = std::fs::read_dir(l.dir.join("home/runs")).unwrap().flatten().next().unwrap();
    let id = run.path().file_stem().unwrap().to_string_lossy().to_string();
    let raw = "7036d017-a860-42d1-b7a6-0951dcae5f6a";
    // The agent's own id names no process: refused before the supervisor is asked.
    let (code, v) =
        post(&format!("/runs/{id}/tasks/a/answer"), &format!(r#"{{"request":"{raw}","decision":"allow"}}"#));
    assert_eq!(code, 400, "{v}");
    let (code, v) = post(&format!("/runs/{id}/tasks/a/answer"), r#"{"request":"rw-0123","decision":"allow"}"#);
    assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{v}");
    let rid = interrupt_of(&l, raw);
    let (code, v) =
        post(&format!("/runs/{id}/tasks/a/answer"), &format!(r#"{{"request":"{rid}","decision":"allow"}}"#));
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(l.finish(), 0, "{}", l.stderr());
    let answered = l.journal().into_iter().find(|r| r["input"] == "answered").unwrap();
    assert_eq!((answered["decision"].as_str(), answered["by"].as_str()), (Some("allow"), Some("runwire-serve")));
    assert_eq!(answered["door"], "task-route");
    // The run is over: nobody holds its session any more.
    let (code, _) = post(&format!("/runs/{id}/tasks/a/stop"), "");
    assert_eq!(code, 409);
}
