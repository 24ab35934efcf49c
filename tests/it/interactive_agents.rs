//! `runwire-serve --agent codex|cursor --interactive` end to end, over
//! `examples/replay-agent` replaying recorded `codex app-server` and
//! `cursor-agent acp` sessions (`fixtures/interactive/`) and checking every
//! line the server's session writes to it (it fails with `replay-agent:` on
//! stderr, which the server passes on). An AG-UI client's view: the run ends
//! with an interrupt for the approval, a resume approves or denies it, and
//! the resumed run finishes with the tool's result; the decision is
//! journaled; a question (codex) is answered from its choices. Mid-turn, the
//! task routes steer (codex: `turn/steer`; cursor: cancel, then prompt) and
//! stop the turn where the recorded person did; an AG-UI client that leaves
//! mid-turn interrupts the turn (`turn/interrupt`, `session/cancel`, as the
//! recorded stop) and the session stays for the thread's next run. The
//! official `@ag-ui/client` (`conformance/interrupts.mjs`) accepts the
//! streams.

use crate::support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{cell, first_prompt, prompt_of, Server};

fn replay_agent() -> PathBuf {
    support::example("replay-agent")
}

fn start(test: &str, agent: &str, cell_name: &str) -> Server {
    start_with(test, agent, cell_name, &[])
}

/// The server over the stand-in replaying `cell_name`, with more
/// environment for the stand-in (`REPLAY_CONTINUE`, …).
fn start_with(test: &str, agent: &str, cell_name: &str, env: &[(&str, &str)]) -> Server {
    let dir = support::scratch(test);
    let mut cmd = Server::command();
    cmd.args(["--agent", agent, "--interactive", "--agent-cmd"])
        .arg(replay_agent())
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("REPLAY_CELL", cell(agent, cell_name))
        .env("REPLAY_EXPECT_ARGS", if agent == "codex" { "app-server" } else { "acp" })
        // The stand-in says what it waits for (the test acts as the person then).
        .env("REPLAY_STATE", dir.join("replay-state.json"))
        .envs(env.iter().copied());
    Server::spawn(cmd).owning(dir)
}

/// The stand-in's state (`examples/replay-agent` `--state`), once it wrote one.
fn replay_state(s: &Server) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(s.dir().join("replay-state.json")).ok()?).ok()
}

fn assert_replay_happy(s: &Server) {
    let e = s.stderr();
    assert!(!e.contains("replay-agent:"), "the replayed agent found a wrong line:\n{e}");
}

/// POST /agui and the AG-UI events of its SSE response.
fn agui(port: u16, body: Value) -> Vec<Value> {
    let mut s = post_agui(port, body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    support::sse::http_events(&raw)
}

/// Sends POST /agui; the response is the caller's to read (or to leave).
fn post_agui(port: u16, body: Value) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.to_string();
    write!(
        s,
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

fn run(thread: &str, run: &str, prompt: &str) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": prompt}]})
}

fn resume(thread: &str, run: &str, id: &Value, payload: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [],
           "resume": [{"interruptId": id, "status": "resolved", "payload": payload}]})
}

/// The run's interrupts (it must end with them).
fn interrupts(ev: &[Value]) -> Vec<Value> {
    let end = ev.last().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["outcome"]["type"].as_str()),
        (Some("RUN_FINISHED"), Some("interrupt")),
        "{end}"
    );
    end["outcome"]["interrupts"].as_array().unwrap().clone()
}

fn finished_ok(ev: &[Value]) {
    let end = ev.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert!(end.get("outcome").is_none(), "{end}");
}

/// Approve or deny the one approval of `cell`, as the recording's person did.
fn approval(agent: &str, cell_name: &str, approved: bool, tool: &str) {
    let s = start(&format!("{agent}-{cell_name}"), agent, cell_name);
    let ev = agui(s.port, run("t", "r1", &first_prompt(&cell(agent, cell_name))));
    let ints = interrupts(&ev);
    assert_eq!(ints.len(), 1, "{ints:?}");
    let i = &ints[0];
    assert_eq!(i["reason"], "tool_call");
    assert_eq!(i["metadata"]["runwire"]["tool"], tool, "{i}");
    let tcid = i["toolCallId"].as_str().unwrap();
    assert!(
        ev.iter().any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == tcid),
        "the call was streamed first"
    );
    // The interrupt offers what this agent can do (issue 25): no edited
    // input, no deny message (neither reaches codex or an ACP agent), and
    // scopes from the agent's own options only.
    let props = &i["responseSchema"]["properties"];
    assert!(props.get("editedArgs").is_none() && props.get("message").is_none(), "{props}");
    let scopes: Vec<Value> = props["scope"]["enum"].as_array().cloned().unwrap_or_default();
    let offered = i["metadata"]["runwire"]["suggestions"].as_array().cloned().unwrap_or_default();
    let session_offered = agent == "codex" && offered.contains(&json!("acceptForSession"));
    assert_eq!(scopes.contains(&json!("session")), session_offered, "{scopes:?} {offered:?}");
    assert_ne!(i["id"], "0", "the interrupt id is runwire's");
    let payload = if approved { json!({"approved": true}) } else { json!({"approved": false, "message": "not now"}) };
    let ev2 = agui(s.port, resume("t", "r2", &i["id"], payload));
    finished_ok(&ev2);
    assert!(ev2.iter().any(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == tcid), "{ev2:?}");
    let j = s.journal();
    let want = if approved { "allow" } else { "deny" };
    assert!(j.iter().any(|r| r["input"] == "requested" && r["kind"] == "tool_approval"), "{j:?}");
    assert!(j.iter().any(|r| r["input"] == "answered" && r["decision"] == want), "{j:?}");
    // The session said it was idle once the turn was over (its line is in the
    // task log, after the answer and the turn's end); the AG-UI streams show
    // nothing of it (normalize-events skips it).
    let logs: String = std::fs::read_dir(s.dir().join("harness/serve/runstate"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    // Idle before the first message, and after the turn with both inputs (the message, the answer) applied.
    let idle: Vec<&str> = logs.lines().filter(|l| l.contains("runwire.idle")).collect();
    assert_eq!(idle, [r#"{"type":"runwire.idle","inputs":0}"#, r#"{"type":"runwire.idle","inputs":2}"#]);
    let last = logs.rfind("runwire.idle").unwrap();
    assert!(logs.rfind(r#""type":"runwire.answer""#).unwrap() < last, "{logs}");
    assert!(!format!("{ev:?}{ev2:?}").contains("runwire.idle"));
    assert_replay_happy(&s);
}

#[test]
fn codex_command_approved_and_denied_through_agui() {
    approval("codex", "approval-allow", true, "command_execution");
    approval("codex", "approval-deny", false, "command_execution");
}

#[test]
fn cursor_tool_call_approved_and_denied_through_agui() {
    approval("cursor", "approval-allow", true, "execute");
    approval("cursor", "approval-deny", false, "execute");
}

#[test]
fn codex_question_through_agui() {
    let s = start("codex-question", "codex", "user-question");
    let ev = agui(s.port, run("t", "r1", &first_prompt(&cell("codex", "user-question"))));
    let i = interrupts(&ev)[0].clone();
    assert_eq!(i["reason"], "input_required", "{i}");
    let q = "Tabs or spaces?";
    let ev2 = agui(s.port, resume("t", "r2", &i["id"], json!({"answers": {q: "spaces"}})));
    finished_ok(&ev2);
    let text: String =
        ev2.iter().filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "spaces");
    assert_replay_happy(&s);
}

/// A permission-profile approval (`item/permissions/requestApproval`) is
/// an interrupt like a command's; granted for the session, codex is sent
/// the profile it asked for with `scope: "session"` (the stand-in checks
/// the line).
#[test]
fn codex_permission_profile_granted_through_agui() {
    let name = "synthetic.codex-permissions";
    let s = start("codex-permissions", "codex", name);
    let ev = agui(s.port, run("t", "r1", &first_prompt(&cell("codex", name))));
    let ints = interrupts(&ev);
    let i = &ints[0];
    assert_eq!(
        (i["reason"].as_str(), i["metadata"]["runwire"]["tool"].as_str()),
        (Some("tool_call"), Some("permissions"))
    );
    assert_eq!(i["responseSchema"]["properties"]["scope"]["enum"], json!(["once", "session"]), "{i}");
    assert!(i["message"].as_str().unwrap().contains("outside the workspace"), "{i}");
    let ev2 = agui(s.port, resume("t", "r2", &i["id"], json!({"approved": true, "scope": "session"})));
    finished_ok(&ev2);
    let j = s.journal();
    assert!(j.iter().any(|r| r["input"] == "answered" && r["decision"] == "allow"), "{j:?}");
    assert_replay_happy(&s);
}

/// An MCP server's form (`mcpServer/elicitation/request`) is a question
/// per field; the answers go back as the form's typed content (a choice
/// by its value, a whole number as a number; the stand-in checks the line).
#[test]
fn codex_mcp_form_answered_through_agui() {
    let name = "synthetic.codex-elicitation";
    let s = start("codex-elicitation", "codex", name);
    let ev = agui(s.port, run("t", "r1", &first_prompt(&cell("codex", name))));
    let i = interrupts(&ev)[0].clone();
    assert_eq!(i["reason"], "input_required", "{i}");
    assert_eq!(i["message"], "deploy asks: Where should the file go?");
    let answers = &i["responseSchema"]["properties"]["answers"]["properties"];
    assert_eq!(answers["Place"]["enum"], json!(["Home directory", "Workspace"]), "{i}");
    let payload = json!({"answers": {"Place": "Home directory", "How many copies?": "1"}});
    let ev2 = agui(s.port, resume("t", "r2", &i["id"], payload));
    finished_ok(&ev2);
    assert_replay_happy(&s);
}

/// A non-blocking question (codex `isBlocking: false`) is a card in the
/// stream (`runwire.input_request` with `blocking: false`), not the run's
/// end: the run streams on while codex works, the task route answers it
/// (the stand-in checks the answer line), and the run finishes as any turn.
#[test]
fn codex_non_blocking_question_answered_through_the_task_route_while_the_run_streams() {
    let name = "synthetic.codex-nonblocking-question";
    let s = start("codex-nonblocking", "codex", name);
    let port = s.port;
    let prompt = first_prompt(&cell("codex", name));
    let stream = std::thread::spawn(move || agui(port, run("t", "r1", &prompt)));
    let deadline = Instant::now() + Duration::from_secs(60);
    let state = || replay_state(&s).unwrap_or(Value::Null);
    let why = || format!("state {}\nserver:\n{}", state(), s.stderr());
    // Codex worked on past the question: the stand-in now waits for the answer
    // (runwire's own lines before it are its to write).
    let mut handled = Vec::new();
    loop {
        let (i, st) =
            support::next_exchange(state, &handled, deadline, why).expect("the stand-in waits for the answer");
        if st["expect"].pointer("/result/answers").is_some() {
            break;
        }
        handled.push(i);
    }
    let (_, runs) = http(port, "GET", "/runs", "");
    let id = runs["runs"][0]["runId"].as_str().expect("the session's run is listed").to_string();
    // The stand-in wrote the question before it waited: the server may read
    // it a moment after. The route names it by runwire's interrupt id (the
    // journal's `requested` record), as every door does.
    let interrupt = loop {
        let raised = s
            .journal()
            .into_iter()
            .find(|r| r["input"] == "requested")
            .and_then(|r| r["interrupt"].as_str().map(str::to_string));
        match raised {
            Some(i) => break i,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!("the question was never raised\n{}", why()),
        }
    };
    let body =
        json!({"request": interrupt, "decision": "answer", "answers": {"Tabs or spaces?": "spaces"}}).to_string();
    let (status, reply) = http(port, "POST", &format!("/runs/{id}/tasks/agent/answer"), &body);
    assert_eq!(status, 200, "{reply}\nserver:\n{}", s.stderr());
    let ev = stream.join().unwrap();
    finished_ok(&ev);
    let card = ev.iter().find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.input_request").expect("a card");
    assert_eq!(card["value"]["blocking"], false, "{card}");
    assert!(ev.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"), "the run streamed on");
    let j = s.journal();
    assert!(j.iter().any(|r| r["input"] == "answered" && r["decision"] == "answer"), "{j:?}");
    assert_replay_happy(&s);
}

/// Unanswered, a non-blocking question is cancelled at the turn's end and
/// the run finishes with it (nothing is written to codex for it).
#[test]
fn codex_non_blocking_question_unanswered_is_cancelled_at_the_turns_end() {
    let name = "synthetic.codex-nonblocking-unanswered";
    let s = start("codex-nonblocking-un", "codex", name);
    let ev = agui(s.port, run("t", "r1", &first_prompt(&cell("codex", name))));
    finished_ok(&ev);
    assert!(ev.iter().any(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.input_request"), "{ev:?}");
    // The session journals the cancel as it writes the line the run streams
    // from: the record may land a moment after the run's end reached us.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let cancelled = |j: &[Value]| j.iter().any(|r| r["input"] == "answered" && r["decision"] == "cancelled");
    while !cancelled(&s.journal()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let j = s.journal();
    assert!(cancelled(&j), "{j:?}");
    assert_replay_happy(&s);
}

#[test]
fn the_capabilities_say_codex_takes_no_edited_input() {
    let s = start("caps", "codex", "approval-allow");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(c, "GET /agui/capabilities HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", s.port).unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let body = &raw[raw.find("\r\n\r\n").unwrap() + 4..];
    let start = body.find('{').unwrap();
    let v: Value = serde_json::from_str(body[start..].trim_end_matches(|c: char| c != '}')).unwrap();
    assert_eq!(v["humanInTheLoop"]["approvals"], true, "{v}");
    assert_eq!(v["humanInTheLoop"]["approveWithEdits"], false, "{v}");
    assert_eq!(v["identity"]["type"], "codex", "{v}");
}

/// One HTTP request (`Connection: close`): the status and the JSON body.
fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, Value) {
    let (status, body) = support::server::request(port, method, path, body);
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// What the person did mid-turn, through the task routes.
#[derive(Debug, PartialEq)]
enum Act {
    Steer,
    Stop,
}

/// Replays the first process of `cell_name` through the server: the AG-UI
/// run starts the turn; where the recorded client steered (codex
/// `turn/steer`; ACP `session/cancel` then `session/prompt`) the test POSTs
/// …/steer with the recorded text, where it interrupted (`turn/interrupt`,
/// a lone `session/cancel`) it POSTs …/stop. The stand-in checks every line
/// runwire writes and must reach the end of the process's recording. Returns
/// the AG-UI events of every run (the last one's last) and the routes' replies.
fn mid_turn(agent: &str, cell_name: &str) -> (Vec<Value>, Vec<(Act, Value)>) {
    let s = start(&format!("{agent}-{cell_name}"), agent, cell_name);
    let port = s.port;
    let prompt = first_prompt(&cell(agent, cell_name));
    let mut stream = std::thread::spawn(move || agui(port, run("t", "r1", &prompt)));
    let mut runs = 1;
    // Every run's events, in order.
    let mut all: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut record: Option<String> = None;
    let mut handled: Vec<u64> = Vec::new();
    let mut acts = Vec::new();
    loop {
        let state = || replay_state(&s).unwrap_or(Value::Null);
        let why = || format!("state {}\nserver:\n{}", state(), s.stderr());
        let Some((index, st)) = support::next_exchange(state, &handled, deadline, why) else {
            break;
        };
        let expect = &st["expect"];
        let act = match expect["method"].as_str() {
            Some("turn/steer") => Some((Act::Steer, prompt_of(expect))),
            Some("session/cancel") if st["then"]["method"] == "session/prompt" => {
                Some((Act::Steer, prompt_of(&st["then"])))
            }
            Some("turn/interrupt" | "session/cancel") => Some((Act::Stop, String::new())),
            _ => None,
        };
        // An approval the recorded person gave: the run ends with its
        // interrupt, and a resume answers it the same way.
        let approved = match (expect.pointer("/result/decision"), expect.pointer("/result/outcome/optionId")) {
            (Some(d), _) => Some(d == "accept" || d == "acceptForSession"),
            (_, Some(o)) => Some(o.as_str().is_some_and(|o| o.starts_with("allow"))),
            _ => None,
        };
        if let Some(approved) = approved {
            handled.push(index);
            let ev = stream.join().unwrap();
            let ints = interrupts(&ev);
            all.extend(ev);
            assert_eq!(ints.len(), 1, "{ints:?}");
            runs += 1;
            let body = resume("t", &format!("r{runs}"), &ints[0]["id"], json!({"approved": approved}));
            stream = std::thread::spawn(move || agui(port, body));
            continue;
        }
        if act.is_none() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        handled.push(index);
        // The session's record (the run the task routes name).
        if record.is_none() {
            let (_, l) = http(port, "GET", "/runs", "");
            record = l["runs"].as_array().and_then(|a| a.first()).and_then(|r| r["runId"].as_str()).map(str::to_string);
        }
        let id = record.clone().expect("the session's run is listed");
        let (act, text) = act.unwrap();
        let (status, reply) = match act {
            Act::Steer => {
                http(port, "POST", &format!("/runs/{id}/tasks/agent/steer"), &json!({"msg": text}).to_string())
            }
            Act::Stop => http(port, "POST", &format!("/runs/{id}/tasks/agent/stop"), "{}"),
        };
        assert_eq!(status, 200, "{act:?}: {reply}\nserver:\n{}", s.stderr());
        acts.push((act, reply));
    }
    all.extend(stream.join().unwrap());
    assert_replay_happy(&s);
    (all, acts)
}

#[test]
fn codex_steer_mid_turn_through_the_task_route() {
    let (ev, acts) = mid_turn("codex", "steer");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0].0, Act::Steer);
    assert!(acts[0].1["detail"].as_str().unwrap().contains("live steer"), "{acts:?}");
    finished_ok(&ev);
}

/// The steer races the turn's end (`synthetic.codex-steer-late`): codex
/// ends the turn just before it reads the `turn/steer`, and refuses it (as
/// the app-server does: `no active turn to steer`). The message is not
/// lost: the session sends it as the next `turn/start` (the stand-in checks
/// the line), and the AG-UI run that was streaming the turn follows the
/// steer's turn to its end instead of ending with the first one (the cell
/// holds the turn's end and the refusal 300 ms each, so the run has seen
/// the first turn end while the steer was still unanswered).
#[test]
fn codex_steer_racing_the_turn_end_starts_the_next_turn_and_the_run_follows_it() {
    let (ev, acts) = mid_turn("codex", "synthetic.codex-steer-late");
    assert_eq!(acts.iter().map(|a| &a.0).collect::<Vec<_>>(), vec![&Act::Steer], "{acts:?}");
    assert!(acts[0].1["detail"].as_str().unwrap().contains("starts the next turn"), "{acts:?}");
    // One run, two turns: the steered one, and the one the steer started.
    assert_eq!(ev.iter().filter(|e| e["type"] == "RUN_STARTED").count(), 1, "{ev:?}");
    let ends: Vec<&Value> =
        ev.iter().filter(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.turn_end").map(|e| &e["value"]).collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(ends.iter().all(|v| v["ok"] == true), "{ends:?}");
    finished_ok(&ev);
    // The steer's answer streamed in this run, after the first turn's end.
    let first_end = ev.iter().position(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.turn_end").unwrap();
    let after: String = ev[first_end..]
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(after.contains("Current git branch"), "{after:?}");
}

#[test]
fn codex_stop_interrupts_the_turn_through_the_task_route() {
    let (ev, acts) = mid_turn("codex", "stop-interrupt");
    assert_eq!(acts.iter().map(|a| &a.0).collect::<Vec<_>>(), vec![&Act::Stop], "{acts:?}");
    let end = ev.last().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["outcome"]["type"].as_str()),
        (Some("RUN_FINISHED"), Some("cancelled")),
        "{end}"
    );
}

#[test]
fn cursor_steer_is_cancel_then_prompt_through_the_task_route() {
    let (ev, acts) = mid_turn("cursor", "steer");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0].0, Act::Steer);
    // Reported as what it is: ACP cannot steer a running turn.
    assert!(acts[0].1["detail"].as_str().unwrap().contains("cancelled"), "{acts:?}");
    // The run shows the cancelled turn, then the steer's own, and finishes.
    let ends: Vec<(bool, Option<&str>)> = ev
        .iter()
        .filter(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.turn_end")
        .map(|e| (e["value"]["ok"] == true, e["value"]["reason"].as_str()))
        .collect();
    assert_eq!(ends, vec![(false, Some("cancelled")), (true, None)], "{ev:?}");
    finished_ok(&ev);
}

#[test]
fn cursor_stop_cancels_the_turn_through_the_task_route() {
    let (ev, acts) = mid_turn("cursor", "stop-interrupt");
    assert_eq!(acts.iter().map(|a| &a.0).collect::<Vec<_>>(), vec![&Act::Stop], "{acts:?}");
    let end = ev.last().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["outcome"]["type"].as_str()),
        (Some("RUN_FINISHED"), Some("cancelled")),
        "{end}"
    );
}

/// `conformance/interrupts.mjs` (the official @ag-ui/client HttpAgent)
/// against a codex or cursor interactive server over the stand-in: both runs
/// (the interrupt, the resume that answers it) pass its checks, and the
/// stand-in found every line runwire wrote as recorded.
fn official_client(agent: &str, cell_name: &str, answer: &str, extra: &[&str]) {
    support::need(&["agui-client"]);
    let s = start(&format!("oc-{agent}-{cell_name}"), agent, cell_name);
    let prompt = first_prompt(&cell(agent, cell_name));
    support::official_interrupts(s.port, &prompt, answer, extra, 60000, || s.stderr());
    assert_replay_happy(&s);
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn official_client_approves_and_denies_a_codex_command() {
    official_client("codex", "approval-allow", "approve", &["--replay", "--different"]);
    official_client("codex", "approval-deny", "deny", &[]);
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn official_client_approves_and_denies_a_cursor_tool_call() {
    official_client("cursor", "approval-allow", "approve", &["--replay", "--different"]);
    official_client("cursor", "approval-deny", "deny", &[]);
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn official_client_answers_a_codex_question() {
    official_client("codex", "user-question", "question:spaces", &[]);
}

/// The person's prompt in process `n` of the cell, the processes split as
/// the stand-in splits them (a new recorder run, or a client `initialize`).
fn prompt_of_process(dir: &Path, n: usize) -> String {
    let mut env: Vec<(u64, u64, Value)> = std::fs::read_to_string(dir.join("to-agent.ndjson"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            let line = serde_json::from_str(e["line"].as_str().unwrap()).unwrap();
            (e["run"].as_u64().unwrap(), e["seq"].as_u64().unwrap(), line)
        })
        .collect();
    env.sort_by_key(|e| (e.0, e.1));
    let mut parts: Vec<Vec<Value>> = Vec::new();
    let mut last = None;
    for (run, _, v) in env {
        if parts.is_empty()
            || last != Some(run)
            || v["method"] == "initialize" && parts.last().is_some_and(|p| !p.is_empty())
        {
            parts.push(Vec::new());
        }
        last = Some(run);
        parts.last_mut().unwrap().push(v);
    }
    let line = parts[n - 1]
        .iter()
        .find(|v| matches!(v["method"].as_str(), Some("turn/start" | "session/prompt")))
        .expect("a prompt in the process");
    prompt_of(line)
}

/// An AG-UI client leaves mid-turn, where the recorded person stopped the
/// turn (`stop-interrupt`): the server interrupts the turn as the recorded
/// client did (the stand-in checks the line), the session stays, and the
/// thread's next run (the recording's next prompt, which the stand-in
/// replays in the same process) runs to its end on it.
fn client_leaves_mid_turn(agent: &str, stop: &str) {
    let dir = cell(agent, "stop-interrupt");
    let s = start_with(&format!("leave-{agent}"), agent, "stop-interrupt", &[("REPLAY_CONTINUE", "2")]);
    let port = s.port;
    let mut conn = post_agui(port, run("t", "r1", &first_prompt(&dir)));
    let mut runs = 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut handled = Vec::new();
    // Until the stand-in waits for the stop: approvals the person gave are given.
    loop {
        assert!(Instant::now() < deadline, "no progress: {:?}\nserver:\n{}", replay_state(&s), s.stderr());
        let st = replay_state(&s).unwrap_or(Value::Null);
        assert_ne!(st["state"], "fail", "{st}\nserver:\n{}", s.stderr());
        if st["state"] == "wait" && st["expect"]["method"] == stop {
            break;
        }
        let approval = st["expect"].pointer("/result/outcome/optionId").or(st["expect"].pointer("/result/decision"));
        if st["state"] == "wait" && approval.is_some() && !handled.contains(&st["index"]) {
            handled.push(st["index"].clone());
            let mut raw = Vec::new();
            conn.read_to_end(&mut raw).unwrap();
            let ints = interrupts(&support::sse::http_events(&raw));
            runs += 1;
            conn = post_agui(port, resume("t", &format!("r{runs}"), &ints[0]["id"], json!({"approved": true})));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The turn runs: the client reads its first frames, then leaves.
    let mut first = [0u8; 256];
    assert!(conn.read(&mut first).unwrap() > 0, "the run streams");
    conn.shutdown(std::net::Shutdown::Both).unwrap();
    drop(conn);
    // The stand-in got the stop and replayed the turn's end; it now waits
    // for the next prompt in the same process.
    let next = prompt_of_process(&dir, 2);
    loop {
        assert!(Instant::now() < deadline, "the turn was not stopped: {:?}\nserver:\n{}", replay_state(&s), s.stderr());
        let st = replay_state(&s).unwrap_or(Value::Null);
        assert_ne!(st["state"], "fail", "{st}\nserver:\n{}", s.stderr());
        if st["state"] == "wait"
            && st["expect"]["method"] != stop
            && st["index"].as_u64() > handled.last().and_then(Value::as_u64)
        {
            let m = st["expect"]["method"].as_str().unwrap_or_default();
            assert!(matches!(m, "turn/start" | "session/prompt"), "after the stop: {st}");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The session stayed: the next run on the thread uses it.
    runs += 1;
    let ev = agui(port, run("t", &format!("r{runs}"), &next));
    finished_ok(&ev);
    let session =
        ev.iter().find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session").expect("the session's routes");
    assert_eq!(session["value"]["interactive"], true);
    let text: String =
        ev.iter().filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT").filter_map(|e| e["delta"].as_str()).collect();
    assert!(!text.is_empty(), "the next turn answered: {ev:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replay_state(&s).is_some_and(|st| st["state"] == "done") {
        assert!(Instant::now() < deadline, "the replay did not end: {:?}", replay_state(&s));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_replay_happy(&s);
}

#[test]
fn codex_client_leaving_mid_turn_interrupts_it_and_the_session_stays() {
    client_leaves_mid_turn("codex", "turn/interrupt");
}

#[test]
fn cursor_client_leaving_mid_turn_cancels_it_and_the_session_stays() {
    client_leaves_mid_turn("cursor", "session/cancel");
}
