//! `runwire-serve --agent claude --interactive` end to end, over the
//! replaying stub engine (`fixtures/stub-engines/replay`): it prints a
//! recorded Claude Code session (`fixtures/interactive/claude-code/<cell>`)
//! and, wherever the recording shows the client writing, reads runwire's
//! line and checks it against the recorded one, failing loudly (exit 86 and
//! a `replay stub:` line on stderr) on a mismatch. Every test also checks
//! that the stub never complained.
//!
//! The official client's view of the same flows is `tests/it/conformance.rs`
//! territory: `conformance/interrupts.mjs` runs here too when node is there.

use crate::support;
use support::server::{Response, Server};

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cell(name: &str) -> PathBuf {
    root().join("fixtures/interactive/claude-code").join(name)
}

fn tmp(test: &str) -> PathBuf {
    support::scratch(test)
}

/// A script that runs the replaying stub for the cell in `cell_dir` (argv checked by the stub).
fn engine(dir: &Path, cell_dir: &Path, extra: &str) -> PathBuf {
    support::need(&["jq"]);
    let name = cell_dir.file_name().unwrap().to_string_lossy();
    let p = dir.join(format!("engine-{name}.sh"));
    let script = format!(
        "#!/bin/sh\nexec {} claude {} {extra} -- \"$@\"\n",
        root().join("fixtures/stub-engines/replay").display(),
        cell_dir.display()
    );
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn start(test: &str, cell_name: &str, extra: &str, args: &[&str]) -> Server {
    start_at(test, &cell(cell_name), extra, args)
}

/// [`start`] over the cell in `cell_dir` (one built at test time).
fn start_at(test: &str, cell_dir: &Path, extra: &str, args: &[&str]) -> Server {
    let dir = tmp(test);
    let eng = engine(&dir, cell_dir, extra);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(&eng)
        .args(args)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000");
    Server::spawn(cmd)
}

/// The stub never found runwire's lines wrong.
fn assert_stub_happy(s: &Server) {
    let e = s.stderr();
    assert!(!e.contains("replay stub:"), "the replaying stub complained:\n{e}");
}

fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut h = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        h.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (n, v) in headers {
        h.push_str(&format!("{n}: {v}\r\n"));
    }
    if method == "POST" {
        h.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    h.push_str("\r\n");
    h.push_str(body);
    s.write_all(h.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the response");
    Response::parse(&raw)
}

fn agui(port: u16, body: Value) -> Response {
    request(port, "POST", "/agui", &[], &body.to_string())
}

fn run_input(thread: &str, run: &str, prompt: &str) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": prompt}]})
}

fn resume_input(thread: &str, run: &str, resume: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [], "resume": resume})
}

fn last(events: &[Value]) -> &Value {
    events.last().expect("at least one event")
}

fn interrupts(events: &[Value]) -> Vec<Value> {
    let end = last(events);
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    end["outcome"]["interrupts"].as_array().unwrap().clone()
}

fn session_run(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("a runwire.session event naming the recorded run")
        .to_string()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// approval-allow: the Bash call is streamed, the run ends with its
/// interrupt, the resume allows it, the resumed run carries the result on
/// the original toolCallId and finishes; the answer is journaled.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn approval_allow_interrupts_then_resumes() {
    let s = start("allow", "approval-allow", "", &[]);
    let prompt = &support::user_messages(&cell("approval-allow"))[0];
    let r1 = agui(s.port, run_input("t", "r1", prompt));
    assert_eq!(r1.status, 200);
    let ev = r1.events();
    let ints = interrupts(&ev);
    assert_eq!(ints.len(), 1);
    let i = &ints[0];
    assert_eq!(i["reason"], "tool_call");
    assert_eq!(i["metadata"]["runwire"]["tool"], "Bash");
    let tcid = i["toolCallId"].as_str().unwrap();
    assert!(
        ev.iter().any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == tcid),
        "the call was streamed first"
    );
    let expires = i["expiresAt"].as_str().expect("expiresAt");
    assert!(runwire::util::time::parse_rfc3339_ms(expires).is_some(), "{expires}");

    let r2 = agui(
        s.port,
        resume_input("t", "r2", json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true}}])),
    );
    let ev2 = r2.events();
    assert_eq!(last(&ev2)["type"], "RUN_FINISHED", "{}", r2.text());
    assert!(last(&ev2).get("outcome").is_none(), "success: {}", last(&ev2));
    assert!(ev2.iter().any(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == tcid), "{}", r2.text());
    assert!(!ev2.iter().any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == tcid));

    let j = s.journal();
    let req = j.iter().find(|r| r["input"] == "requested").expect("requested record");
    assert_eq!((req["kind"].as_str(), req["tool"].as_str()), (Some("tool_approval"), Some("Bash")));
    let ans = j.iter().find(|r| r["input"] == "answered").expect("answered record");
    assert_eq!((ans["decision"].as_str(), ans["by"].as_str()), (Some("allow"), Some("agui")));
    assert_eq!(ans["request"], req["request"]);
    assert_stub_happy(&s);
}

/// approval-deny: a new message while the interrupt is open sends nothing
/// (the stub would fail on it) and ends with the same interrupt; then the
/// deny goes out with its message and the turn finishes.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn approval_deny_and_new_input_never_skips_the_interrupt() {
    let s = start("deny", "approval-deny", "", &[]);
    let prompt = &support::user_messages(&cell("approval-deny"))[0];
    let ev = agui(s.port, run_input("t", "r1", prompt)).events();
    let i = interrupts(&ev)[0].clone();

    // The client went away and came back with something else to say.
    let again = agui(s.port, run_input("t", "r2", "do something else")).events();
    let i2 = interrupts(&again);
    assert_eq!(i2, vec![i.clone()], "the still-open interrupt again");
    assert!(again.iter().any(|e| e["name"] == "runwire.input_not_sent"));

    let r = agui(
        s.port,
        resume_input(
            "t",
            "r3",
            json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": false, "message": "not now"}}]),
        ),
    );
    let ev3 = r.events();
    assert_eq!(last(&ev3)["type"], "RUN_FINISHED", "{}", r.text());
    assert!(ev3.iter().any(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == i["toolCallId"]));
    let j = s.journal();
    assert!(j.iter().any(|r| r["input"] == "answered" && r["decision"] == "deny" && r["detail"] == "not now"), "{j:?}");
    // The message that was not sent is not the thread's history: a client
    // opening the thread later is never shown it as if the agent had seen it.
    let threads = s.home().join("serve/threads");
    let history: String = std::fs::read_dir(&threads)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(history.contains(prompt.as_str()), "the sent prompt is recorded: {history}");
    assert!(!history.contains("do something else"), "an unsent message was recorded: {history}");

    // An identical replay is accepted and not sent again; a different answer is refused.
    let same =
        json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": false, "message": "not now"}}]);
    let ev4 = agui(s.port, resume_input("t", "r4", same)).events();
    assert_eq!(last(&ev4)["type"], "RUN_FINISHED");
    let other = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true}}]);
    let ev5 = agui(s.port, resume_input("t", "r5", other)).events();
    assert_eq!(last(&ev5)["type"], "RUN_ERROR");
    assert!(last(&ev5)["message"].as_str().unwrap().contains("already decided"), "{}", last(&ev5));
    // Cancelling a decided interrupt never blocks the thread; an unknown id is skipped with a warning.
    let ev6 = agui(s.port, resume_input("t", "r6", json!([{"interruptId": i["id"], "status": "cancelled"}]))).events();
    assert_eq!(last(&ev6)["type"], "RUN_FINISHED");
    let ev7 = agui(
        s.port,
        resume_input("t", "r7", json!([{"interruptId": "nope", "status": "resolved", "payload": {"approved": true}}])),
    )
    .events();
    assert_eq!(last(&ev7)["type"], "RUN_FINISHED");
    assert!(ev7.iter().any(|e| e["name"] == "runwire.resume_skipped"));
    assert_stub_happy(&s);
}

/// user-question: an input_required interrupt whose schema holds the
/// recorded choices; a list for this single-select question is refused;
/// the recorded label is sent and matches what the recording's client wrote.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_question_is_answered_from_its_choices() {
    let s = start("question", "user-question", "", &[]);
    let prompt = &support::user_messages(&cell("user-question"))[0];
    let ev = agui(s.port, run_input("t", "r1", prompt)).events();
    let i = interrupts(&ev)[0].clone();
    assert_eq!(i["reason"], "input_required");
    let props = &i["responseSchema"]["properties"]["answers"]["properties"];
    let (q, schema) = props.as_object().unwrap().iter().next().unwrap();
    assert_eq!(schema["anyOf"][0]["enum"], json!(["tabs", "spaces"]), "{schema}");
    let bad = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"answers": {q.clone(): ["tabs", "spaces"]}}}]);
    let ev2 = agui(s.port, resume_input("t", "r2", bad)).events();
    assert_eq!(last(&ev2)["type"], "RUN_ERROR", "{}", last(&ev2));
    let ok = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"answers": {q.clone(): "spaces"}}}]);
    let r3 = agui(s.port, resume_input("t", "r3", ok));
    assert_eq!(last(&r3.events())["type"], "RUN_FINISHED", "{}", r3.text());
    assert!(s.journal().iter().any(|r| r["input"] == "answered" && r["decision"] == "answer"));
    assert_stub_happy(&s);
}

/// The person's own answer in the free-text cell (with a comma: claude's
/// multi-select joins with ", ", a single answer keeps it whole).
const FREE_TEXT: &str = "two spaces, like the rest of the repo";

/// A cell built at test time from the recorded `user-question` cell: the
/// same lines, but the client answered the question with `FREE_TEXT` (its
/// "Other") instead of the recorded label: in the client's
/// `control_response` (`updatedInput.answers`, which the replaying stub
/// checks) and in claude's echo of it (the `tool_result` text and
/// `tool_use_result.answers`). Not a recording: what claude's own UI sends
/// for "Other", in the recorded shapes.
fn free_text_cell(dir: &Path) -> PathBuf {
    let rec = cell("user-question");
    let out = dir.join("user-question-other");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(rec.join("manifest.json"), out.join("manifest.json")).unwrap();
    let mut answered = 0;
    for file in ["to-agent.ndjson", "from-agent.ndjson"] {
        let lines: Vec<String> = envelopes(&rec, file)
            .into_iter()
            .map(|mut e| {
                let mut l: Value = serde_json::from_str(e["line"].as_str().unwrap()).unwrap();
                let mut edit = |answers: &mut Value| {
                    for v in answers.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
                        *v = FREE_TEXT.into();
                        answered += 1;
                    }
                };
                if l["type"] == "control_response" {
                    edit(&mut l["response"]["response"]["updatedInput"]["answers"]);
                }
                if l["type"] == "user" && l["tool_use_result"]["answers"].is_object() {
                    edit(&mut l["tool_use_result"]["answers"]);
                    let c = &mut l["message"]["content"][0]["content"];
                    *c = c.as_str().unwrap().replace(r#"="spaces""#, &format!("={FREE_TEXT:?}")).into();
                }
                e["line"] = l.to_string().into();
                e.to_string()
            })
            .collect();
        std::fs::write(out.join(file), lines.join("\n") + "\n").unwrap();
    }
    assert_eq!(answered, 2, "the recording's answer and claude's echo of it");
    out
}

/// claude's AskUserQuestion always offers "Other": the interrupt's schema
/// takes a string beyond the recorded choices and its metadata says so; a
/// blank answer is refused; the person's own words reach claude as the
/// question's `answers` value (the stub checks the line against the
/// free-text cell), and the record keeps them.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_question_is_answered_in_the_persons_own_words() {
    let cell_dir = free_text_cell(&tmp("other-cell"));
    let s = start_at("other", &cell_dir, "", &[]);
    let prompt = &support::user_messages(&cell_dir)[0];
    let ev = agui(s.port, run_input("t", "r1", prompt)).events();
    let i = interrupts(&ev)[0].clone();
    let props = &i["responseSchema"]["properties"]["answers"]["properties"];
    let (q, schema) = props.as_object().unwrap().iter().next().unwrap();
    assert_eq!(schema["anyOf"][0]["enum"], json!(["tabs", "spaces"]), "{schema}");
    assert_eq!(schema["anyOf"][1]["minLength"], 1, "{schema}");
    assert_eq!(i["metadata"]["runwire"]["questions"][0]["freeText"], true, "{i}");
    let blank = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"answers": {q.clone(): "  "}}}]);
    let ev2 = agui(s.port, resume_input("t", "r2", blank)).events();
    assert_eq!(last(&ev2)["type"], "RUN_ERROR", "{}", last(&ev2));
    let own = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"answers": {q.clone(): FREE_TEXT}}}]);
    let r3 = agui(s.port, resume_input("t", "r3", own));
    assert_eq!(last(&r3.events())["type"], "RUN_FINISHED", "{}", r3.text());
    assert!(s.journal().iter().any(|r| r["input"] == "answered" && r["decision"] == "answer"));
    let log = std::fs::read_to_string(task_log(&s)).unwrap();
    let answer = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "runwire.answer")
        .expect("a runwire.answer line");
    assert_eq!(answer["answers"][q.as_str()], FREE_TEXT, "{answer}");
    assert_stub_happy(&s);
}

/// The task routes: the same rules with 409, and the browser boundary.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn task_routes_answer_with_the_same_rules_and_the_boundary() {
    let tokfile = tmp("routes-token").join("token");
    std::fs::write(&tokfile, "0123456789abcdef0123").unwrap();
    let s = start("routes", "approval-allow", "", &["--token-file", tokfile.to_str().unwrap()]);
    let auth = ("Authorization", "Bearer 0123456789abcdef0123");
    let prompt = &support::user_messages(&cell("approval-allow"))[0];
    let r = request(s.port, "POST", "/agui", &[auth], &run_input("t", "r1", prompt).to_string());
    let ev = r.events();
    let i = interrupts(&ev)[0].clone();
    let run = session_run(&ev);
    let path = format!("/runs/{run}/tasks/agent/answer");
    let allow = json!({"request": i["id"], "decision": "allow"}).to_string();
    // Boundary first: no token, a foreign Origin, a foreign Host.
    assert_eq!(request(s.port, "POST", &path, &[], &allow).status, 401);
    assert_eq!(request(s.port, "POST", &path, &[auth, ("Origin", "http://evil.example")], &allow).status, 403);
    assert_eq!(request(s.port, "POST", &path, &[auth, ("Host", "evil.example")], &allow).status, 403);
    // Malformed and unknown.
    assert_eq!(request(s.port, "POST", &path, &[auth], r#"{"decision":"allow"}"#).status, 400);
    // A request named by anything but runwire's interrupt id: refused, as on every route.
    let agents = request(s.port, "POST", &path, &[auth], r#"{"request":"nope","decision":"allow"}"#);
    assert_eq!(agents.status, 400, "{}", agents.text());
    assert!(agents.text().contains("not a runwire interrupt id"), "{}", agents.text());
    let unknown = request(
        s.port,
        "POST",
        &path,
        &[auth],
        r#"{"request":"rw-00000000000000000000000000000000","decision":"allow"}"#,
    );
    assert_eq!(unknown.status, 409, "{}", unknown.text());
    // The answer, its identical replay, a different one.
    let a = request(s.port, "POST", &path, &[auth], &allow);
    assert_eq!((a.status, a.json()["sent"].as_bool()), (200, Some(true)), "{}", a.text());
    let a2 = request(s.port, "POST", &path, &[auth], &allow);
    assert_eq!((a2.status, a2.json()["sent"].as_bool()), (200, Some(false)));
    let deny = json!({"request": i["id"], "decision": "deny", "message": "no"}).to_string();
    let d = request(s.port, "POST", &path, &[auth], &deny);
    assert_eq!(d.status, 409, "{}", d.text());
    assert!(d.json()["detail"].as_str().unwrap().contains("already decided"));
    // The turn went on without a stream: the next run on the thread shows its tail.
    wait_for("the answer journaled", Duration::from_secs(5), || {
        s.journal().iter().any(|r| r["input"] == "answered" && r["by"] == "task route")
    });
    let cancel = json!([{"interruptId": i["id"], "status": "cancelled"}]);
    let r2 = request(s.port, "POST", "/agui", &[auth], &resume_input("t", "r2", cancel).to_string());
    let ev2 = r2.events();
    assert!(ev2.iter().any(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == i["toolCallId"]), "{}", r2.text());
    assert_eq!(last(&ev2)["type"], "RUN_FINISHED");
    // answer/stop on a run this server does not hold: 409.
    let other = request(s.port, "POST", "/runs/nope/tasks/agent/stop", &[auth], "{}");
    assert!(other.status == 409 || other.status == 404, "{}", other.text());
    assert_stub_happy(&s);
}

/// Fail closed: with --answer-timeout 1 the request expires, is denied to
/// the agent (the recording's deny) and journaled `expired`; `resolved`
/// past expiresAt is a RUN_ERROR, `cancelled` is accepted.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn an_unanswered_request_is_denied_when_it_expires() {
    let s = start("expiry", "approval-deny", "", &["--answer-timeout", "1"]);
    let prompt = &support::user_messages(&cell("approval-deny"))[0];
    let ev = agui(s.port, run_input("t", "r1", prompt)).events();
    let i = interrupts(&ev)[0].clone();
    let exp = runwire::util::time::parse_rfc3339_ms(i["expiresAt"].as_str().unwrap()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(exp > now - 1000 && exp <= now + 1500, "expiresAt {exp} vs now {now}");
    wait_for("the expiry journaled", Duration::from_secs(10), || {
        s.journal().iter().any(|r| r["input"] == "answered" && r["decision"] == "expired")
    });
    let late = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true}}]);
    let ev2 = agui(s.port, resume_input("t", "r2", late)).events();
    assert_eq!(last(&ev2)["type"], "RUN_ERROR", "{}", last(&ev2));
    let cancel = json!([{"interruptId": i["id"], "status": "cancelled"}]);
    let ev3 = agui(s.port, resume_input("t", "r3", cancel)).events();
    assert_eq!(last(&ev3)["type"], "RUN_FINISHED", "{ev3:?}");
    assert_stub_happy(&s);
}

/// The capabilities route and /api/info agree, in the @ag-ui/core shape.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn capabilities_are_served() {
    let s = start("caps", "approval-allow", "", &[]);
    let c = request(s.port, "GET", "/agui/capabilities", &[], "").json();
    let hitl = &c["humanInTheLoop"];
    for k in ["supported", "approvals", "interrupts", "approveWithEdits"] {
        assert_eq!(hitl[k], true, "{k}: {c}");
    }
    // Claude's subagents stream as AG-UI subagents.
    assert_eq!(c["multiAgent"], json!({"supported": true, "delegation": true}), "{c}");
    let info = request(s.port, "GET", "/api/info", &[], "").json();
    assert_eq!(info["capabilities"], c);
    assert_eq!(info["interactive"], true);
}

/// The id of the run the server recorded for the session (listed once the
/// session names its record: the run is live then).
fn recorded_run(port: u16) -> String {
    let mut run = None;
    wait_for("the recorded run", Duration::from_secs(10), || {
        let l = request(port, "GET", "/runs", &[], "").json();
        run = l["runs"].as_array().and_then(|a| a.first()).and_then(|r| r["runId"].as_str()).map(str::to_string);
        run.is_some()
    });
    run.unwrap()
}

/// steer: a message written into the running turn (the stub waits for it
/// at the recorded point, and checks it), then the turn finishes.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn steer_writes_into_the_running_turn() {
    let msgs = support::user_messages(&cell("steer"));
    // The recording ends its first turn before the /compact message.
    let end_at = first_result_seq(&cell("steer"));
    let s = start("steer", "steer", &format!("--end-at {end_at}"), &[]);
    let port = s.port;
    let first = msgs[0].clone();
    let stream = std::thread::spawn(move || agui(port, run_input("t", "r1", &first)));
    let run = recorded_run(port);
    let steer =
        request(port, "POST", &format!("/runs/{run}/tasks/agent/steer"), &[], &json!({"msg": msgs[1]}).to_string());
    assert_eq!(steer.status, 200, "{}", steer.text());
    assert!(steer.json()["detail"].as_str().unwrap().contains("running turn"), "{}", steer.text());
    let r = stream.join().unwrap();
    assert_eq!(last(&r.events())["type"], "RUN_FINISHED", "{}", r.text());
    assert_stub_happy(&s);
}

/// stop: the turn is interrupted (the stub's synthetic reply), the run ends
/// with the cancelled outcome, and the session stays.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn stop_interrupts_the_turn_and_keeps_the_session() {
    let msgs = support::user_messages(&cell("steer"));
    // Stop before the recorded steer: the replay ends there, and the
    // interrupt gets the stub's synthetic reply.
    let end_at = seq_before_second_message(&cell("steer"));
    let s = start("stop", "steer", &format!("--end-at {end_at}"), &[]);
    let port = s.port;
    let first = msgs[0].clone();
    let stream = std::thread::spawn(move || agui(port, run_input("t", "r1", &first)));
    let run = recorded_run(port);
    std::thread::sleep(Duration::from_millis(300));
    let stop = request(port, "POST", &format!("/runs/{run}/tasks/agent/stop"), &[], "{}");
    assert_eq!(stop.status, 200, "{}", stop.text());
    let r = stream.join().unwrap();
    let end = last(&r.events()).clone();
    assert_eq!(
        (end["type"].as_str(), end["outcome"]["type"].as_str()),
        (Some("RUN_FINISHED"), Some("cancelled")),
        "{}",
        r.text()
    );
    // The session is still there: a steer is taken (no turn: it starts one).
    let again = request(port, "POST", &format!("/runs/{run}/tasks/agent/steer"), &[], r#"{"msg":"still there?"}"#);
    assert_eq!(again.status, 200, "{}", again.text());
    assert_stub_happy(&s);
}

fn envelopes(cell_dir: &Path, file: &str) -> Vec<Value> {
    std::fs::read_to_string(cell_dir.join(file)).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The envelope seq of the cell's first `result` line.
fn first_result_seq(cell_dir: &Path) -> u64 {
    envelopes(cell_dir, "from-agent.ndjson")
        .iter()
        .find(|e| {
            e["line"]
                .as_str()
                .and_then(|l| serde_json::from_str::<Value>(l).ok())
                .is_some_and(|v| v["type"] == "result")
        })
        .and_then(|e| e["seq"].as_u64())
        .expect("a result line")
}

/// The envelope seq just before the client's second user message.
fn seq_before_second_message(cell_dir: &Path) -> u64 {
    let second = envelopes(cell_dir, "to-agent.ndjson")
        .into_iter()
        .filter(|e| {
            e["line"].as_str().and_then(|l| serde_json::from_str::<Value>(l).ok()).is_some_and(|v| v["type"] == "user")
        })
        .nth(1)
        .expect("a second user message");
    second["seq"].as_u64().unwrap() - 1
}

/// `conformance/interrupts.mjs` (the official @ag-ui/client HttpAgent)
/// against the server over the replaying stub: every JSON line it prints ok.
fn official_client(test: &str, cell_name: &str, answer: &str, extra: &[&str]) {
    official_client_at(test, &cell(cell_name), answer, extra)
}

/// [`official_client`] over the cell in `cell_dir` (one built at test time).
fn official_client_at(test: &str, cell_dir: &Path, answer: &str, extra: &[&str]) {
    support::need(&["agui-client"]);
    let s = start_at(test, cell_dir, "", &[]);
    let prompt = support::user_messages(cell_dir)[0].clone();
    support::official_interrupts(s.port, &prompt, answer, extra, 30000, || s.stderr());
    assert_stub_happy(&s);
}

#[test]
#[cfg_attr(not(all(tool = "agui-client", tool = "jq")), ignore = "needs node, npm, jq: apt-get install nodejs npm jq")]
fn official_client_approves_and_replays() {
    official_client("oc-allow", "approval-allow", "approve", &["--replay", "--different", "--unknown"]);
}

#[test]
#[cfg_attr(not(all(tool = "agui-client", tool = "jq")), ignore = "needs node, npm, jq: apt-get install nodejs npm jq")]
fn official_client_denies() {
    official_client("oc-deny", "approval-deny", "deny", &["--different"]);
}

#[test]
#[cfg_attr(not(all(tool = "agui-client", tool = "jq")), ignore = "needs node, npm, jq: apt-get install nodejs npm jq")]
fn official_client_answers_a_question() {
    official_client("oc-question", "user-question", "question:spaces", &["--replay"]);
}

/// The official client answers with the person's own words (the schema's
/// string beyond the choices), a replay of it and a different answer too.
#[test]
#[cfg_attr(not(all(tool = "agui-client", tool = "jq")), ignore = "needs node, npm, jq: apt-get install nodejs npm jq")]
fn official_client_answers_a_question_in_the_persons_own_words() {
    let cell_dir = free_text_cell(&tmp("oc-other-cell"));
    official_client_at("oc-other", &cell_dir, &format!("question:{FREE_TEXT}"), &["--replay", "--different"]);
}

/// plan-mode: the plan is an interrupt of its own (ExitPlanMode); approving
/// it with a mode carries the plan out in that mode (the session sets the
/// mode, then allows, as the recording's client did), and the next request
/// is a second interrupt on the same thread, denied. A replay stub that
/// dies (a mismatch) ends the run with RUN_ERROR, never a hang.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_plan_then_a_tool_call_each_interrupt_and_resume() {
    let s = start("plan", "plan-mode", "", &["--permission-mode", "plan"]);
    let prompt = &support::user_messages(&cell("plan-mode"))[0];
    let ev = agui(s.port, run_input("t", "r1", prompt)).events();
    let plan = interrupts(&ev)[0].clone();
    assert_eq!(plan["metadata"]["runwire"]["kind"], "plan_approval", "{plan}");
    // The recording's client carried the plan out in acceptEdits.
    assert!(plan["responseSchema"]["properties"]["mode"]["enum"].as_array().unwrap().contains(&json!("acceptEdits")));
    let r2 = agui(
        s.port,
        resume_input(
            "t",
            "r2",
            json!([{"interruptId": plan["id"], "status": "resolved", "payload": {"approved": true, "mode": "acceptEdits"}}]),
        ),
    );
    let ev2 = r2.events();
    let bash = interrupts(&ev2)[0].clone();
    assert_eq!(bash["metadata"]["runwire"]["tool"], "Bash", "{}", r2.text());
    // The journal says what the approval switched the agent to.
    let j = s.journal();
    let ans = j.iter().find(|r| r["input"] == "answered").expect("answered record");
    assert_eq!(
        (ans["mode"].as_str(), ans["scope"].as_str(), ans["door"].as_str()),
        (Some("acceptEdits"), Some("once"), Some("agui")),
        "{ans}"
    );
    // The recording's client denied it.
    let r3 = agui(
        s.port,
        resume_input(
            "t",
            "r3",
            json!([{"interruptId": bash["id"], "status": "resolved", "payload": {"approved": false, "message": "no"}}]),
        ),
    );
    assert_eq!(last(&r3.events())["type"], "RUN_FINISHED", "{}", r3.text());
    assert!(last(&r3.events()).get("outcome").is_none());
    assert_stub_happy(&s);
}

/// A client that leaves mid-turn interrupts the turn (the stub's synthetic
/// reply ends it); the session stays, and the next message is a new turn.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_client_leaving_mid_turn_interrupts_the_turn_and_keeps_the_session() {
    let msgs = support::user_messages(&cell("steer"));
    let end_at = seq_before_second_message(&cell("steer"));
    let s = start("leave", "steer", &format!("--end-at {end_at}"), &[]);
    {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let body = run_input("t", "r1", &msgs[0]).to_string();
        let head = format!(
            "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            s.port,
            body.len()
        );
        c.write_all(head.as_bytes()).unwrap();
        c.write_all(body.as_bytes()).unwrap();
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("TOOL_CALL_START") {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "the stream ended early");
            got.extend_from_slice(&buf[..n]);
        }
        // Gone, mid-turn.
    }
    let log = s.home().join("serve/runstate");
    wait_for("the interrupt's synthetic result in the task log", Duration::from_secs(10), || {
        std::fs::read_dir(&log).unwrap().flatten().any(|e| {
            e.file_name().to_string_lossy().ends_with(".agent.log")
                && std::fs::read_to_string(e.path()).unwrap_or_default().contains("aborted_streaming")
        })
    });
    let r = agui(s.port, run_input("t", "r2", "are you there?"));
    let ev = r.events();
    assert_eq!(last(&ev)["type"], "RUN_FINISHED", "{}", r.text());
    assert!(last(&ev).get("outcome").is_none());
    assert_stub_happy(&s);
}

/// A client that leaves in the middle of the agent's reply (the replay
/// stops after the reply's second text delta and waits): the assistant
/// message keeps the text that client was sent. Another device that opens
/// the thread gets it in its `MESSAGES_SNAPSHOT`, not an empty message.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_reply_the_client_left_mid_message_keeps_its_text_in_the_thread() {
    let msgs = support::user_messages(&cell("steer"));
    let from = envelopes(&cell("steer"), "from-agent.ndjson");
    let line = |e: &Value| serde_json::from_str::<Value>(e["line"].as_str().unwrap()).unwrap();
    // The last text delta before the reply's first whole `assistant` line.
    let end_at = from
        .iter()
        .take_while(|e| line(e)["type"] != "assistant")
        .filter(|e| line(e)["event"]["delta"]["type"] == "text_delta")
        .filter_map(|e| e["seq"].as_u64())
        .last()
        .expect("a text delta");
    let s = start("leave-text", "steer", &format!("--end-at {end_at}"), &[]);
    let seen = {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let body = run_input("t", "r1", &msgs[0]).to_string();
        let head = format!(
            "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            s.port,
            body.len()
        );
        c.write_all(head.as_bytes()).unwrap();
        c.write_all(body.as_bytes()).unwrap();
        c.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        let deltas = |got: &[u8]| -> Vec<String> {
            let text = String::from_utf8_lossy(got);
            let events = support::sse::events(&text[text.find("\r\n\r\n").map_or(0, |i| i + 4)..]);
            events
                .iter()
                .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
                .map(|e| e["delta"].as_str().unwrap().to_string())
                .collect()
        };
        while deltas(&got).len() < 2 {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        deltas(&got).concat()
        // Gone, mid-message.
    };
    let log = s.home().join("serve/runstate");
    wait_for("the interrupt's synthetic result in the task log", Duration::from_secs(10), || {
        std::fs::read_dir(&log).unwrap().flatten().any(|e| {
            e.file_name().to_string_lossy().ends_with(".agent.log")
                && std::fs::read_to_string(e.path()).unwrap_or_default().contains("aborted_streaming")
        })
    });
    // Another device: it holds only its new message.
    let r = agui(s.port, run_input("t", "r2", "are you there?"));
    let ev = r.events();
    let snap = ev.iter().rfind(|e| e["type"] == "MESSAGES_SNAPSHOT").unwrap_or_else(|| panic!("{}", r.text()));
    let assistant: Vec<&Value> =
        snap["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistant.len(), 1, "{snap}");
    assert_eq!(assistant[0]["content"].as_str(), Some(seen.as_str()), "{snap}");
    assert_stub_happy(&s);
}

/// Text deltas in the long answer: more lines than the server's channel
/// holds between runs (8192).
const LONG_DELTAS: usize = 10_000;

/// A cell built at test time from the recorded `resume` cell: its first
/// turn as recorded ("ready"), then a second user message whose answer is
/// LONG_DELTAS text deltas (the recorded turn's lines, its one delta
/// repeated with new text, its whole message holding all of it), ending
/// with the recorded result. Returns the cell, the second message and the
/// deltas' texts in order.
fn long_answer_cell(dir: &Path) -> (PathBuf, String, Vec<String>) {
    let rec = cell("resume");
    let from = envelopes(&rec, "from-agent.ndjson");
    let to = envelopes(&rec, "to-agent.ndjson");
    let result = first_result_seq(&rec);
    // The first process ends where the client writes again after the first result.
    let cut = to.iter().filter_map(|e| e["seq"].as_u64()).filter(|s| *s > result).min().expect("a second process");
    let parsed = |e: &Value| serde_json::from_str::<Value>(e["line"].as_str().unwrap()).unwrap();
    let user = to.iter().find(|e| parsed(e)["type"] == "user").expect("a user message");
    let turn: Vec<&Value> = from
        .iter()
        .filter(|e| e["seq"].as_u64().unwrap() <= result)
        .skip_while(|e| parsed(e)["event"]["type"] != "message_start")
        .collect();
    let deltas: Vec<String> = (0..LONG_DELTAS).map(|i| format!("w{i:05} ")).collect();
    let second = "Write a long answer, one word per delta.".to_string();
    let mut seq = cut;
    let mut env = |proto: &Value, line: &Value| {
        seq += 1;
        let mut e = proto.clone();
        e["seq"] = seq.into();
        e["line"] = line.to_string().into();
        e.to_string()
    };
    let mut to_out: Vec<String> =
        to.iter().filter(|e| e["seq"].as_u64().unwrap() < cut).map(Value::to_string).collect();
    let mut msg = parsed(user);
    msg["message"]["content"] = second.clone().into();
    to_out.push(env(user, &msg));
    let mut from_out: Vec<String> =
        from.iter().filter(|e| e["seq"].as_u64().unwrap() < cut).map(Value::to_string).collect();
    for e in turn {
        let mut l = parsed(e);
        if l["event"]["delta"]["type"] == "text_delta" {
            for d in &deltas {
                l["event"]["delta"]["text"] = d.clone().into();
                from_out.push(env(e, &l));
            }
            continue;
        }
        if l["type"] == "assistant" {
            l["message"]["content"] = json!([{"type": "text", "text": deltas.concat()}]);
        }
        from_out.push(env(e, &l));
    }
    let dir = dir.join("long-answer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("from-agent.ndjson"), from_out.join("\n") + "\n").unwrap();
    std::fs::write(dir.join("to-agent.ndjson"), to_out.join("\n") + "\n").unwrap();
    (dir, second, deltas)
}

/// The task log of the server's one recorded session.
fn task_log(s: &Server) -> PathBuf {
    std::fs::read_dir(s.home().join("serve/runstate"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".agent.log"))
        .expect("a task log")
}

/// The text deltas of claude's lines, in order.
fn text_deltas(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"]["delta"]["type"] == "text_delta")
        .filter_map(|v| v["event"]["delta"]["text"].as_str().map(str::to_string))
        .collect()
}

/// A turn nobody streams: started on the task route (a steer with no turn
/// running) after the thread's first run, its answer is more lines than the
/// server buffers between runs. The session keeps reading the agent (the
/// turn ends; the task log has every line and the result), the task route
/// answers at once, and the thread's next AG-UI run streams that answer
/// whole (every text delta once, in order, re-read from the log where the
/// buffer overflowed), then its own turn, then RUN_FINISHED.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn a_long_turn_nobody_streams_never_stalls_and_the_next_run_streams_it_whole() {
    let cell_tmp = tmp("long-cell");
    let (cell_dir, second, deltas) = long_answer_cell(&cell_tmp);
    let s = start_at("long", &cell_dir, "", &[]);
    let first = &support::user_messages(&cell("resume"))[0];
    let ev = agui(s.port, run_input("t", "r1", first)).events();
    assert_eq!(last(&ev)["type"], "RUN_FINISHED", "{ev:?}");
    let run = session_run(&ev);
    let steer =
        request(s.port, "POST", &format!("/runs/{run}/tasks/agent/steer"), &[], &json!({"msg": second}).to_string());
    assert_eq!(steer.status, 200, "{}", steer.text());

    // No stream: the session still reads the agent to the turn's end.
    let log = task_log(&s);
    wait_for("the long turn's result in the task log", Duration::from_secs(60), || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().filter(|l| l.contains(r#""type":"result""#)).count() == 2
    });
    let logged = text_deltas(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(logged.len(), LONG_DELTAS + 1, "the recorded turn's delta, then the long answer's");
    assert!(logged[1..] == deltas[..], "the task log holds every delta in order");

    // The task route answers at once (nothing waits on an unread buffer).
    let asked = Instant::now();
    let stop = request(s.port, "POST", &format!("/runs/{run}/tasks/agent/stop"), &[], "{}");
    assert_eq!(stop.status, 200, "{}", stop.text());
    assert!(asked.elapsed() < Duration::from_secs(10), "stop took {:?}", asked.elapsed());
    assert!(stop.json()["detail"].as_str().unwrap().contains("no turn is running"), "{}", stop.text());

    // The next run streams the long answer whole, then its own turn.
    let r = agui(s.port, run_input("t", "r2", "And now?"));
    let ev = r.events();
    let end = last(&ev);
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert!(end.get("outcome").is_none(), "{end}");
    assert!(!ev.iter().any(|e| e["type"] == "RUN_ERROR"), "{}", r.text());
    assert!(!ev.iter().any(|e| e["name"] == "runwire.lines_not_streamed"), "nothing was lost");
    let streamed: Vec<&str> = ev
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .filter_map(|e| e["delta"].as_str())
        .filter(|d| d.starts_with('w'))
        .collect();
    assert_eq!(streamed.len(), deltas.len(), "every delta of the long answer, once");
    assert!(streamed.iter().zip(&deltas).all(|(a, b)| a == b), "in order");
    // The stub's made-up reply to "And now?" closes the run's own turn.
    assert!(ev.iter().any(|e| e["delta"].as_str().is_some_and(|d| d.contains("no recording for this message"))));
    assert_stub_happy(&s);
    let server_tmp = s.home().parent().unwrap().to_path_buf();
    drop(s);
    let _ = std::fs::remove_dir_all(server_tmp);
    let _ = std::fs::remove_dir_all(cell_tmp);
}

/// `--plan-exit-mode` is the mode an approved plan is carried out in when
/// the answer names none (the recording's client chose acceptEdits, so the
/// replaying stub takes nothing else), and `bypassPermissions` there needs
/// `--grant-all`, as in runwire-session.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the replay stub runs it): apt-get install jq")]
fn an_approved_plan_without_a_mode_continues_in_the_plan_exit_mode() {
    let s = start("planexit", "plan-mode", "", &["--permission-mode", "plan", "--plan-exit-mode", "acceptEdits"]);
    let prompt = &support::user_messages(&cell("plan-mode"))[0];
    let plan = interrupts(&agui(s.port, run_input("t", "r1", prompt)).events())[0].clone();
    assert_eq!(plan["metadata"]["runwire"]["kind"], "plan_approval", "{plan}");
    let r2 = agui(
        s.port,
        resume_input(
            "t",
            "r2",
            json!([{"interruptId": plan["id"], "status": "resolved", "payload": {"approved": true}}]),
        ),
    );
    let bash = interrupts(&r2.events()).first().cloned().unwrap_or_default();
    assert_eq!(bash["metadata"]["runwire"]["tool"], "Bash", "{}", r2.text());
    assert_stub_happy(&s);
    // The journal names the mode the plan was carried out in: --plan-exit-mode's.
    let j = s.journal();
    let ans = j.iter().find(|r| r["input"] == "answered").expect("answered record");
    assert_eq!(ans["mode"], "acceptEdits", "{ans}");
    for (bin, flags, agent) in [
        (
            env!("CARGO_BIN_EXE_runwire-serve"),
            &["--agent", "claude", "--interactive", "--listen", "127.0.0.1:0"][..],
            &[][..],
        ),
        (env!("CARGO_BIN_EXE_runwire-session"), &["claude", "--prompt", "hi"][..], &["--", "/bin/false"][..]),
    ] {
        let out = Command::new(bin)
            .args(flags)
            .args(["--plan-exit-mode", "bypassPermissions"])
            .args(agent)
            .env("HARNESS_HOME", tmp("planexit-home"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bin}: {err}");
        assert!(
            err.contains("--plan-exit-mode: permission mode bypassPermissions") && err.contains("--grant-all"),
            "{err}"
        );
    }
}
