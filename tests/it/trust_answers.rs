//! Issue 25, cases 1–4: the agent does exactly what the person approved.
//! `runwire-serve --interactive` over `examples/trust-agent`, a stand-in
//! that acts as the attacker would (a restart that reuses request ids,
//! planted permission suggestions, two requests at once) and logs every
//! line runwire writes to it, so each test sees what reached the agent:
//!
//! 1. a resume re-sent after the agent restarted never approves the new
//!    process's request that reuses the old id;
//! 2. a resume with one refused entry sends nothing at all;
//! 3. "approve for session" applies exactly the updates the interrupt
//!    showed as kept (a planted `bypassPermissions`, `addDirectories ["/"]`
//!    or allow-all rule is dropped and the card says so), and an
//!    always-allow is `user_permanent`;
//! 4. each interrupt offers what its agent can do (ACP: no edited input, no
//!    deny message, `allow_always` as "always", never "for the session").

use crate::support;
use support::server::{agui_events as agui, request as http};
use support::Server;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::Duration;

/// runwire-serve over the trust stand-in; `agent`: `cursor` (the
/// stand-in speaks ACP) or `claude`.
fn start(test: &str, agent: &str, requests: Value, args: &[&str]) -> Server {
    start_in(support::scratch(test), agent, requests, args, None)
}

/// [`start`] in `dir` (the server's and the agent's working directory).
/// With `home`, the server's and the agent's `HOME`.
fn start_in(
    dir: std::path::PathBuf,
    agent: &str,
    requests: Value,
    args: &[&str],
    home: Option<&std::path::Path>,
) -> Server {
    let proto = if agent == "claude" { "claude" } else { "acp" };
    let mut cmd = Server::command();
    cmd.args(["--agent", agent, "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .args(args)
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", proto)
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests.to_string());
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    Server::spawn(cmd).owning(dir)
}

/// Every line runwire wrote to the agent: (process, line).
fn agent_input(s: &Server) -> Vec<(u64, Value)> {
    crate::support::complete_json_lines(&s.dir().join("agent-input.jsonl"))
        .into_iter()
        .map(|v| (v["process"].as_u64().unwrap(), v["line"].clone()))
        .collect()
}

fn run(thread: &str, run: &str, prompt: &str) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": prompt}]})
}

fn resume(thread: &str, run: &str, entries: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [], "resume": entries})
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

fn refused(ev: &[Value]) -> String {
    let end = ev.last().unwrap();
    assert_eq!((end["type"].as_str(), end["code"].as_str()), (Some("RUN_ERROR"), Some("resume_refused")), "{end}");
    end["message"].as_str().unwrap().to_string()
}

fn finished_ok(ev: &[Value]) {
    let end = ev.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert!(end.get("outcome").is_none(), "{end}");
}

/// The recorded run of the thread's session (its task routes).
/// The agent process of the thread the run streams (`runwire.session`'s `generation`).
fn generation(ev: &[Value]) -> u64 {
    ev.iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["generation"].as_u64())
        .expect("runwire.session says which agent process runs")
}

fn session_run(ev: &[Value]) -> String {
    ev.iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("runwire.session names the recorded run")
        .to_string()
}

/// ACP permission answers that reached the agent: (process, optionId or outcome).
fn acp_answers(s: &Server) -> Vec<(u64, String)> {
    agent_input(s)
        .into_iter()
        .filter(|(_, l)| l.get("method").is_none() && l.get("result").is_some())
        .map(|(p, l)| {
            let o = &l["result"]["outcome"];
            (p, o["optionId"].as_str().or(o["outcome"].as_str()).unwrap_or("?").to_string())
        })
        .collect()
}

/// Case 1: codex and ACP agents number their requests 0, 1, 2… in every
/// process. The thread's agent restarts (the kill route) and asks again as
/// request 0, for a different command; the client re-sends the old resume.
/// The old interrupt id is runwire's, not "0": its identical replay is
/// acknowledged with nothing sent (the new request stays open), a
/// different answer is refused with nothing sent, and the new request is
/// answered only through its own interrupt.
#[test]
fn a_resume_replayed_after_a_restart_never_approves_the_new_processes_request() {
    let s = start("trust-restart", "cursor", json!([]), &[]);
    let ev = agui(s.port, run("t", "r1", "touch a file"));
    assert_eq!(generation(&ev), 1, "the thread's first agent process");
    let old = interrupts(&ev)[0].clone();
    assert_eq!(old["metadata"]["runwire"]["input"]["command"], "touch file-1");
    let old_id = old["id"].as_str().unwrap().to_string();
    assert_ne!(old_id, "0", "the interrupt id is runwire's, never the agent's request id");
    assert!(old_id.starts_with("rw-") && old_id.len() >= 35, "{old_id}");
    let approve = json!([{"interruptId": old_id, "status": "resolved", "payload": {"approved": true}}]);
    finished_ok(&agui(s.port, resume("t", "r2", approve.clone())));
    assert_eq!(acp_answers(&s), vec![(1, "allow-once".to_string())]);

    // The agent restarts and asks again as request 0, for another command.
    let record = session_run(&ev);
    let (code, body) = http(s.port, "POST", &format!("/runs/{record}/tasks/agent/kill"), "{}");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let ev = agui(s.port, run("t", "r3", "touch another file"));
    assert_eq!(generation(&ev), 2, "the thread's agent, started again, is its second process");
    let new = interrupts(&ev)[0].clone();
    // A stale client answers request "0" on the old run's task route: that
    // run's process is gone, and the new process's request "0" is not its.
    let (code, body) = http(
        s.port,
        "POST",
        &format!("/runs/{record}/tasks/agent/answer"),
        &json!({"request": "0", "decision": "allow"}).to_string(),
    );
    assert_eq!(code, 409, "{}", String::from_utf8_lossy(&body));
    assert_eq!(acp_answers(&s), vec![(1, "allow-once".to_string())], "nothing reached the new process");
    assert_eq!(new["metadata"]["runwire"]["input"]["command"], "touch file-2");
    assert_ne!(new["id"], old["id"], "ids are unique across the thread's processes");
    let asked = agent_input(&s).iter().filter(|(p, l)| *p == 2 && l["method"] == "session/prompt").count();
    assert_eq!(asked, 1, "the new process was asked once: {:?}", agent_input(&s));

    // The stale tab re-sends the old resume: acknowledged, nothing sent, the new request still open.
    let ev = agui(s.port, resume("t", "r4", approve));
    assert_eq!(generation(&ev), 2, "a run on the same process: the same generation");
    let still = interrupts(&ev);
    assert_eq!((still.len(), &still[0]["id"]), (1, &new["id"]), "{ev:?}");
    assert!(
        ev.iter().any(|e| e["name"] == "runwire.resume_skipped"
            && e["value"]["warning"].as_str().unwrap_or_default().contains("acknowledged, nothing sent")),
        "{ev:?}"
    );
    // A different answer to the old interrupt: refused, nothing sent.
    let deny_old = json!([{"interruptId": old_id, "status": "resolved", "payload": {"approved": false}},
                          {"interruptId": new["id"], "status": "resolved", "payload": {"approved": true}}]);
    let m = refused(&agui(s.port, resume("t", "r5", deny_old)));
    assert!(m.contains("earlier agent process"), "{m}");
    assert_eq!(acp_answers(&s), vec![(1, "allow-once".to_string())], "nothing reached the new process");
    // The new request is answered through its own interrupt only.
    let deny_new = json!([{"interruptId": new["id"], "status": "resolved", "payload": {"approved": false}}]);
    finished_ok(&agui(s.port, resume("t", "r6", deny_new)));
    assert_eq!(acp_answers(&s), vec![(1, "allow-once".to_string()), (2, "reject-once".to_string())]);
    // On the new run's task route, the old interrupt id is refused too.
    let current = session_run(&ev);
    assert_ne!(current, record, "the restarted process is recorded as another run");
    let (code, _) = http(
        s.port,
        "POST",
        &format!("/runs/{current}/tasks/agent/answer"),
        &json!({"request": old_id, "decision": "allow"}).to_string(),
    );
    assert_eq!(code, 409);
    // Another thread's id is refused on this one.
    let ev = agui(s.port, run("u", "u1", "touch a file"));
    let theirs = interrupts(&ev)[0]["id"].clone();
    let ev = agui(s.port, run("t", "r7", "once more"));
    let mine = interrupts(&ev)[0]["id"].clone();
    let cross = json!([{"interruptId": theirs, "status": "resolved", "payload": {"approved": true}},
                       {"interruptId": mine, "status": "resolved", "payload": {"approved": true}}]);
    let m = refused(&agui(s.port, resume("t", "r8", cross)));
    assert!(m.contains("not raised on this thread"), "{m}");
    assert_eq!(acp_answers(&s).len(), 2, "{:?}", acp_answers(&s));
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
}

/// Case 2: two open interrupts (a Bash call and a plan); the resume
/// approves the call and the plan with a mode the server refuses
/// (`bypassPermissions` without `--grant-all`). Nothing reaches the agent;
/// the same resume with an allowed mode sends both.
#[test]
fn a_refused_resume_sends_nothing_at_all() {
    let requests = json!([
        {"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls"}},
        {"request_id": "p1", "tool_name": "ExitPlanMode", "input": {"plan": "1. do it"}},
    ]);
    let s = start("trust-all-or-nothing", "claude", requests, &[]);
    let ev = agui(s.port, run("t", "r1", "plan it"));
    let mut ints = interrupts(&ev);
    if ints.len() == 1 {
        // The run ended at the first request; the next run shows both (the
        // message is not sent while they are open).
        std::thread::sleep(Duration::from_millis(300));
        let ev = agui(s.port, run("t", "r1b", "and?"));
        assert!(ev.iter().any(|e| e["name"] == "runwire.input_not_sent"), "{ev:?}");
        ints = interrupts(&ev);
    }
    assert_eq!(ints.len(), 2, "{ints:?}");
    let (bash, plan) = (&ints[0], &ints[1]);
    assert_eq!(plan["metadata"]["runwire"]["kind"], "plan_approval");
    let modes = plan["responseSchema"]["properties"]["mode"]["enum"].as_array().unwrap();
    assert!(!modes.contains(&json!("bypassPermissions")), "no bypassPermissions without --grant-all: {modes:?}");
    let answers = |mode: &str| {
        json!([{"interruptId": bash["id"], "status": "resolved", "payload": {"approved": true}},
               {"interruptId": plan["id"], "status": "resolved", "payload": {"approved": true, "mode": mode}}])
    };
    let responses = |s: &Server| -> Vec<Value> {
        agent_input(s).into_iter().map(|(_, l)| l).filter(|l| l["type"] == "control_response").collect()
    };
    let m = refused(&agui(s.port, resume("t", "r2", answers("bypassPermissions"))));
    assert!(m.contains("--grant-all"), "{m}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(responses(&s), Vec::<Value>::new(), "a refused resume wrote to the agent");
    let modes: Vec<Value> = agent_input(&s)
        .into_iter()
        .map(|(_, l)| l)
        .filter(|l| l["request"]["subtype"] == "set_permission_mode")
        .collect();
    assert!(modes.is_empty(), "{modes:?}");
    // The interrupts are still open and take a good resume whole.
    finished_ok(&agui(s.port, resume("t", "r3", answers("acceptEdits"))));
    let r = responses(&s);
    assert_eq!(r.len(), 2, "{r:?}");
    let mode = agent_input(&s).into_iter().map(|(_, l)| l).find(|l| l["request"]["subtype"] == "set_permission_mode");
    assert_eq!(mode.unwrap()["request"]["mode"], "acceptEdits");
}

/// Case 3: claude suggests, with one Bash call, its own "allow edits this
/// session" and a command-prefix rule (kept), and a planted
/// `bypassPermissions`, `addDirectories ["/"]`, a rule with no content and
/// an allow-all `*` rule (dropped without --grant-all, and the card says
/// so). Approving for the session applies exactly the kept ones, with
/// destination `session`, `user_temporary`; approving always applies them
/// as claude suggested them, `user_permanent`.
#[test]
fn approve_for_session_applies_exactly_what_was_shown() {
    let suggestions = json!([
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
        {"type": "setMode", "mode": "bypassPermissions", "destination": "session"},
        {"type": "addDirectories", "directories": ["/"], "destination": "session"},
        {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "session"},
        {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "*"}], "behavior": "allow", "destination": "localSettings"},
        {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow", "destination": "localSettings"},
    ]);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"},
                           "permission_suggestions": suggestions}]);
    let s = start("trust-session-grants", "claude", requests, &[]);
    let ev = agui(s.port, run("t", "r1", "test it"));
    let i = interrupts(&ev)[0].clone();
    let meta = &i["metadata"]["runwire"];
    let ups = meta["permissionUpdates"].as_array().unwrap();
    let applied: Vec<bool> = ups.iter().map(|u| u["applied"].as_bool().unwrap()).collect();
    assert_eq!(applied, [true, false, false, false, false, true], "{ups:?}");
    assert!(ups.iter().all(|u| u["effect"].as_str().is_some_and(|e| !e.is_empty())), "{ups:?}");
    for u in ups.iter().filter(|u| u["applied"] == false) {
        assert!(u["dropped"].as_str().unwrap().contains("--grant-all"), "{u}");
    }
    assert!(meta["droppedUpdates"].as_str().unwrap().starts_with("4 of"), "{meta}");
    assert_eq!(i["responseSchema"]["properties"]["scope"]["enum"], json!(["once", "session", "always"]));
    assert!(meta["scopes"]["always"].as_str().unwrap().contains("saved by the agent"), "{meta}");
    assert!(meta["scopes"]["session"].as_str().unwrap().starts_with("for this session"), "{meta}");
    let ok = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true, "scope": "session"}}]);
    finished_ok(&agui(s.port, resume("t", "r2", ok)));
    let answer = |s: &Server| -> Value {
        agent_input(s)
            .into_iter()
            .map(|(_, l)| l)
            .rfind(|l| l["type"] == "control_response")
            .expect("an answer reached the agent")["response"]["response"]
            .clone()
    };
    let r = answer(&s);
    assert_eq!(r["behavior"], "allow");
    assert_eq!(r["decisionClassification"], "user_temporary");
    assert_eq!(
        r["updatedPermissions"],
        json!([
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow", "destination": "session"},
        ]),
        "{r}"
    );
    // Always: the kept updates as claude suggested them (saved by claude), user_permanent.
    let ev = agui(s.port, run("t", "r3", "test it again"));
    let i = interrupts(&ev)[0].clone();
    let always =
        json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true, "scope": "always"}}]);
    finished_ok(&agui(s.port, resume("t", "r4", always)));
    let r = answer(&s);
    assert_eq!(r["decisionClassification"], "user_permanent");
    assert_eq!(
        r["updatedPermissions"],
        json!([
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow", "destination": "localSettings"},
        ]),
        "{r}"
    );
}

/// Issue 34, defect 2: grants are judged by where they reach. Claude
/// suggests the worktree's `docs`, a symlink to `/` (named by its absolute
/// path inside the worktree), its `code`, a symlink to its `src`, rules
/// reaching the home directory (`Edit(~/**)`, `Write(~/.ssh/**)`) and an
/// open `Bash(sh -c:*)`. The card shows where each reaches and labels the
/// shell rule; approving for the session sends the agent only the
/// directory inside the worktree (resolved) and the shell rule, never `/`
/// or the home rules. With `--grant-all` they are the person's to grant.
#[test]
fn grants_are_judged_by_where_they_reach_not_by_their_text() {
    for grant_all in [false, true] {
        let dir = support::scratch(if grant_all { "trust-reach-all" } else { "trust-reach" });
        let home = support::scratch(if grant_all { "trust-reach-all-home" } else { "trust-reach-home" });
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::os::unix::fs::symlink("/", dir.join("docs")).unwrap();
        std::os::unix::fs::symlink("src", dir.join("code")).unwrap();
        let suggestions = json!([
            {"type": "addDirectories", "directories": [dir.join("docs")], "destination": "session"},
            {"type": "addDirectories", "directories": [dir.join("code")], "destination": "session"},
            {"type": "addRules", "rules": [{"toolName": "Edit", "ruleContent": "~/**"}], "behavior": "allow", "destination": "session"},
            {"type": "addRules", "rules": [{"toolName": "Write", "ruleContent": "~/.ssh/**"}], "behavior": "allow", "destination": "userSettings"},
            {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "sh -c:*"}], "behavior": "allow", "destination": "localSettings"},
        ]);
        let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls docs"},
                               "permission_suggestions": suggestions}]);
        let args: &[&str] = if grant_all { &["--grant-all"] } else { &[] };
        // The agent's home (what claude reads `~` as) is outside the worktree.
        let s = start_in(dir.clone(), "claude", requests, args, Some(&home));
        let ev = agui(s.port, run("t", "r1", "look"));
        let i = interrupts(&ev)[0].clone();
        let ups = i["metadata"]["runwire"]["permissionUpdates"].as_array().unwrap().clone();
        let applied: Vec<bool> = ups.iter().map(|u| u["applied"].as_bool().unwrap()).collect();
        let src = std::fs::canonicalize(dir.join("src")).unwrap().display().to_string();
        assert_eq!(ups[0]["reaches"], json!(["/"]), "the card shows the resolved path: {:?}", ups[0]);
        assert_eq!(ups[1]["reaches"], json!([src]), "{:?}", ups[1]);
        assert!(ups[4]["runsAnything"].as_str().is_some_and(|r| r.contains("sh -c")), "{:?}", ups[4]);
        assert!(ups[1].get("runsAnything").is_none(), "{:?}", ups[1]);
        if grant_all {
            assert_eq!(applied, [true; 5], "{ups:?}");
        } else {
            assert_eq!(applied, [false, true, false, false, true], "{ups:?}");
            assert!(ups[0]["dropped"].as_str().unwrap().contains("outside the worktree"), "{:?}", ups[0]);
            assert!(ups[2]["dropped"].as_str().unwrap().contains("outside the worktree"), "{:?}", ups[2]);
        }
        let ok =
            json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true, "scope": "session"}}]);
        finished_ok(&agui(s.port, resume("t", "r2", ok)));
        let r = agent_input(&s)
            .into_iter()
            .map(|(_, l)| l)
            .rfind(|l| l["type"] == "control_response")
            .expect("an answer reached the agent")["response"]["response"]
            .clone();
        let sent = r["updatedPermissions"].as_array().unwrap().clone();
        let text = serde_json::to_string(&sent).unwrap();
        if grant_all {
            assert_eq!(sent.len(), 5, "{r}");
            assert_eq!(sent[0]["directories"], json!(["/"]), "applied as resolved: {r}");
        } else {
            assert_eq!(
                sent,
                [
                    json!({"type": "addDirectories", "directories": [src], "destination": "session"}),
                    json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "sh -c:*"}], "behavior": "allow", "destination": "session"}),
                ],
                "{r}"
            );
            assert!(!text.contains("docs") && !text.contains('~'), "nothing reaching outside was sent: {text}");
        }
        drop(s);
        let _ = std::fs::remove_dir_all(&home);
    }
}

/// The same judgement on `runwire-session`'s door (what a supervisor's
/// claude tasks run under): a session in a worktree whose `docs` is a
/// symlink to `/`, answered `allow` for the session through its input
/// lines, sends claude neither `docs` nor the home rule; the directory that
/// stays inside goes resolved.
#[test]
fn runwire_session_sends_no_grant_that_reaches_outside_the_worktree() {
    use std::io::{BufRead, BufReader};
    let dir = support::scratch("trust-reach-session");
    let home = support::scratch("trust-reach-session-home");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::os::unix::fs::symlink("/", dir.join("docs")).unwrap();
    let suggestions = json!([
        {"type": "addDirectories", "directories": [dir.join("docs"), dir.join("src")], "destination": "session"},
        {"type": "addDirectories", "directories": [dir.join("src/../src")], "destination": "session"},
        {"type": "addRules", "rules": [{"toolName": "Write", "ruleContent": "~/.ssh/**"}], "behavior": "allow", "destination": "session"},
    ]);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls docs"},
                           "permission_suggestions": suggestions}]);
    let log = dir.join("agent-input.jsonl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", "look", "--"])
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("HOME", &home)
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", &log)
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let request = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the session ended before the request");
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        if v["type"] == "runwire.request" {
            break v;
        }
    };
    let answer = json!({"type": "answer", "id": request["id"], "decision": "allow", "scope": "session"});
    writeln!(stdin, "{answer}").unwrap();
    writeln!(stdin, "{}", json!({"type": "end"})).unwrap();
    drop(stdin);
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let _ = child.wait();
    let sent = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].clone())
        .find(|l| l["type"] == "control_response")
        .expect("the answer reached the agent")["response"]["response"]
        .clone();
    assert_eq!(sent["behavior"], "allow", "{sent}");
    let src = std::fs::canonicalize(dir.join("src")).unwrap();
    // The first update names /, so all of it is dropped; the second is inside once resolved.
    assert_eq!(
        sent["updatedPermissions"],
        json!([{"type": "addDirectories", "directories": [src], "destination": "session"}]),
        "{sent}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&home);
}

/// Case 3 with `--grant-all`: the planted updates are the person's to
/// grant, shown and applied.
#[test]
fn with_grant_all_every_suggested_update_is_offered() {
    let suggestions = json!([
        {"type": "setMode", "mode": "bypassPermissions", "destination": "session"},
        {"type": "addDirectories", "directories": ["/"], "destination": "session"},
    ]);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls /"},
                           "permission_suggestions": suggestions}]);
    let s = start("trust-grant-all", "claude", requests, &["--grant-all"]);
    let ev = agui(s.port, run("t", "r1", "look around"));
    let i = interrupts(&ev)[0].clone();
    assert!(i["metadata"]["runwire"].get("droppedUpdates").is_none(), "{i}");
    let ok = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true, "scope": "session"}}]);
    finished_ok(&agui(s.port, resume("t", "r2", ok)));
    let r = agent_input(&s).into_iter().map(|(_, l)| l).rfind(|l| l["type"] == "control_response").unwrap();
    assert_eq!(r["response"]["response"]["updatedPermissions"].as_array().unwrap().len(), 2, "{r}");
}

/// Case 4: an ACP agent's interrupt offers what it can do: no edited
/// input, no deny message (ACP carries none to the model), and its
/// `allow_always` option as "always, saved by the agent", never "for the
/// session"; a resume asking for what is not offered is refused with
/// nothing sent, and "always" picks the agent's allow_always option.
/// Claude's interrupts keep edits and the deny message, which reach it.
#[test]
fn each_interrupt_offers_exactly_what_its_agent_can_do() {
    let s = start("trust-offer-acp", "cursor", json!([]), &[]);
    let ev = agui(s.port, run("t", "r1", "touch a file"));
    let i = interrupts(&ev)[0].clone();
    let props = &i["responseSchema"]["properties"];
    assert!(props.get("editedArgs").is_none(), "{props}");
    assert!(props.get("message").is_none(), "{props}");
    assert_eq!(props["scope"]["enum"], json!(["once", "always"]), "{props}");
    assert!(i["metadata"]["runwire"]["scopes"]["always"].as_str().unwrap().contains("saved by the agent"));
    for (n, bad) in
        [json!({"approved": true, "scope": "session"}), json!({"approved": true, "editedArgs": {"command": "x"}})]
            .into_iter()
            .enumerate()
    {
        let e = json!([{"interruptId": i["id"], "status": "resolved", "payload": bad}]);
        refused(&agui(s.port, resume("t", &format!("r2-{n}"), e)));
    }
    assert_eq!(acp_answers(&s), vec![], "a refused resume wrote to the agent");
    let e = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": true, "scope": "always"}}]);
    finished_ok(&agui(s.port, resume("t", "r3", e)));
    assert_eq!(acp_answers(&s), vec![(1, "allow-always".to_string())]);
    // The capabilities agree: no edits for ACP.
    let (_, caps) = http(s.port, "GET", "/agui/capabilities", "");
    let caps: Value = serde_json::from_slice(&caps).unwrap();
    assert_eq!(caps["humanInTheLoop"]["approveWithEdits"], false, "{caps}");
    drop(s);

    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls"}}]);
    let s = start("trust-offer-claude", "claude", requests, &[]);
    let ev = agui(s.port, run("t", "r1", "list"));
    let i = interrupts(&ev)[0].clone();
    let props = &i["responseSchema"]["properties"];
    assert!(props.get("editedArgs").is_some() && props.get("message").is_some(), "{props}");
    assert!(props.get("scope").is_none(), "claude suggested nothing to keep: only once ({props})");
    let e =
        json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": false, "message": "not that"}}]);
    finished_ok(&agui(s.port, resume("t", "r2", e)));
    let r = agent_input(&s).into_iter().map(|(_, l)| l).rfind(|l| l["type"] == "control_response").unwrap();
    assert_eq!(r["response"]["response"]["message"], "not that", "the deny message reaches the model");
    let (_, caps) = http(s.port, "GET", "/agui/capabilities", "");
    let caps: Value = serde_json::from_slice(&caps).unwrap();
    assert_eq!(caps["humanInTheLoop"]["approveWithEdits"], true, "{caps}");
}

/// Polls the server's journal until its `answered` records number `n`.
fn answered_records(s: &Server, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
        if got.len() >= n || std::time::Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// "Who answered" audits: the journal's `answered` record says what an
/// allow granted, whichever door it came through: its scope (for the
/// session grants more than once), the input the call ran with when it was
/// edited (secrets redacted as the events redact it), and `GET /runs/:id`'s
/// `answers` carries them. Through the AG-UI resume (`editedArgs`) and the
/// task route (`updated_input`). Before, the record said `allow` only.
#[test]
fn the_journal_says_what_an_allow_granted_through_the_resume_and_the_task_route() {
    let suggestions = json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
                              "behavior": "allow", "destination": "localSettings"}]);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"},
                           "permission_suggestions": suggestions}]);
    let s = start("trust-audit-grants", "claude", requests, &[]);
    let i = interrupts(&agui(s.port, run("t", "r1", "test it")))[0].clone();
    let edited = json!({"command": "npm test -- --ci", "env": {"API_TOKEN": "t0ps3cret-value"}});
    let ok = json!([{"interruptId": i["id"], "status": "resolved",
                     "payload": {"approved": true, "scope": "session", "editedArgs": edited}}]);
    let ev = agui(s.port, resume("t", "r2", ok));
    finished_ok(&ev);
    let a = answered_records(&s, 1);
    assert_eq!((a[0]["door"].as_str(), a[0]["scope"].as_str()), (Some("agui"), Some("session")), "{a:?}");
    let shown = a[0]["updated_input"].as_str().unwrap_or_else(|| panic!("no edited input: {a:?}"));
    assert!(shown.contains("npm test -- --ci") && !shown.contains("t0ps3cret"), "{shown}");
    // The task route: an always-allow of the next request, edited.
    let ev = agui(s.port, run("t", "r3", "test it again"));
    let i = interrupts(&ev)[0].clone();
    let route = format!("/runs/{}/tasks/agent/answer", session_run(&ev));
    let body = json!({"request": i["id"], "decision": "allow", "scope": "always", "by": "ana",
                      "updated_input": {"command": "npm test -- --password=hunter2hunter2"}});
    let (code, body) = http(s.port, "POST", &route, &body.to_string());
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let a = answered_records(&s, 2);
    let by_route = a.iter().find(|r| r["door"] == "task-route").unwrap_or_else(|| panic!("{a:?}"));
    assert_eq!((by_route["by"].as_str(), by_route["scope"].as_str()), (Some("ana"), Some("always")), "{by_route}");
    let shown = by_route["updated_input"].as_str().unwrap_or_default();
    assert!(shown.contains("npm test") && !shown.contains("hunter2hunter2"), "{shown}");
    // The run's view lists them as the journal keeps them.
    let r = support::server::request(s.port, "GET", &format!("/runs/{}", session_run(&ev)), "");
    let view: Value = serde_json::from_slice(&r.1).unwrap();
    let answers = view["answers"].as_array().unwrap_or_else(|| panic!("{view}"));
    let last = answers.last().unwrap();
    assert_eq!((last["scope"].as_str(), last["door"].as_str()), (Some("always"), Some("task-route")), "{view}");
    assert_eq!(last["updated_input"], by_route["updated_input"], "{view}");
}
