//! Subagents as AG-UI subagents (issue 38): captures with subagents go
//! through the real binaries (`normalize-events | agui-translate`), and the
//! AG-UI stream has a `SUBAGENT_STARTED` before each subagent's first event,
//! `subagentRunId` on every event the subagent produced (and on none of the
//! main agent's), and a `SUBAGENT_FINISHED` / `SUBAGENT_ERROR` for each
//! before the run ends. The independent verifier (`support::verify`) checks
//! every stream; the official `@ag-ui/client` 1.0.0 checks them in
//! `official_client_accepts_every_subagent_stream`.

use crate::support;
use assert_cmd::Command;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (adapter, fixture): every capture with subagents, recorded and synthetic.
const CAPTURES: &[(&str, &str)] = &[
    ("claude", "fixtures/claude/bb-subagent.partial.jsonl"),
    ("claude", "fixtures/claude/synthetic.subagents-concurrent.partial.jsonl"),
    ("claude", "fixtures/claude/synthetic.subagents-nested.jsonl"),
    ("claude", "fixtures/claude/synthetic.subagent-cut-off.partial.jsonl"),
    ("codex", "fixtures/codex/bb-app-server.subagent.jsonl"),
    ("cursor", "fixtures/cursor/bb-acp.subagent.jsonl"),
];

struct Piped {
    /// The events/v1 stream normalize-events wrote.
    events: Vec<Value>,
    /// The AG-UI stream agui-translate wrote, verified.
    agui: Vec<Value>,
    /// That stream as agui-translate wrote it.
    agui_text: String,
}

/// `normalize-events ADAPTER --input F | agui-translate`, the two real binaries.
fn pipe(adapter: &str, fixture: &str) -> Piped {
    let n = Command::cargo_bin("normalize-events")
        .unwrap()
        .args([adapter, "--input"])
        .arg(root().join(fixture))
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(n.status.code().is_some_and(|c| c <= 1), "{fixture}: normalize-events {:?}", n.status);
    let t = Command::cargo_bin("agui-translate").unwrap().write_stdin(n.stdout.clone()).output().unwrap();
    assert!(t.status.success(), "{fixture}: agui-translate: {}", String::from_utf8_lossy(&t.stderr));
    let agui_text = String::from_utf8(t.stdout).unwrap();
    let agui = support::verify::verify_lines(&agui_text)
        .unwrap_or_else(|e| panic!("{fixture}: invalid AG-UI stream: {e}\n{agui_text}"));
    let events =
        String::from_utf8(n.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<Value>>();
    Piped { events, agui, agui_text }
}

fn ty(e: &Value) -> &str {
    e["type"].as_str().unwrap()
}

/// The AG-UI id part after `<runId>:<kind>:` (the translator's namespacing).
fn raw_id<'a>(id: &'a str, kind: &str) -> Option<&'a str> {
    id.split_once(&format!(":{kind}:")).map(|(_, r)| r)
}

/// The attribution the events/v1 stream implies, checked against the AG-UI
/// stream: for every message, reasoning span and tool call, the subagent
/// that produced it (by its invocation id), or none for the main agent's.
fn check_attribution(p: &Piped, fixture: &str) -> BTreeMap<String, Value> {
    // events/v1: who produced each message and tool call.
    let mut who: BTreeMap<(char, String), Option<String>> = BTreeMap::new();
    let mut invocations = BTreeSet::new();
    for e in &p.events {
        let d = &e["data"];
        let parent = d.get("parent").map(|p| p["id"].as_str().expect("parent.id").to_string());
        if let Some(p) = d.get("parent") {
            invocations.insert(p["id"].as_str().unwrap().to_string());
            assert!(p["name"].as_str().is_some_and(|n| !n.is_empty()), "{fixture}: a subagent with no name: {e}");
            assert!(p["tool_call"].as_str().is_some_and(|n| !n.is_empty()), "{fixture}: {e}");
        }
        match e["type"].as_str().unwrap() {
            "token_delta" if d["text"] != "" => {
                let k = if d["channel"] == "text" { 'm' } else { 'r' };
                who.insert((k, d["message"].as_str().unwrap().to_string()), parent);
            }
            "tool_call" | "tool_result" => {
                who.entry(('t', d["id"].as_str().unwrap().to_string())).or_insert(parent);
            }
            _ => {}
        }
    }
    // AG-UI: the subagents, by subagentRunId.
    let started: BTreeMap<String, Value> = p
        .agui
        .iter()
        .filter(|e| ty(e) == "SUBAGENT_STARTED")
        .map(|e| (e["subagentRunId"].as_str().unwrap().to_string(), e.clone()))
        .collect();
    assert_eq!(started.len(), invocations.len(), "{fixture}: one SUBAGENT_STARTED per invocation\n{}", p.agui_text);
    let run_of = |inv: &str| started.keys().find(|k| raw_id(k, "sa") == Some(inv)).cloned();
    let mut attributed = 0;
    for e in &p.agui {
        let (k, id) = match ty(e) {
            "TEXT_MESSAGE_START" | "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => ('m', &e["messageId"]),
            "REASONING_MESSAGE_START" | "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" => ('r', &e["messageId"]),
            "REASONING_START" | "REASONING_END" => ('r', &e["messageId"]),
            "TOOL_CALL_START" | "TOOL_CALL_ARGS" | "TOOL_CALL_END" | "TOOL_CALL_RESULT" => ('t', &e["toolCallId"]),
            _ => continue,
        };
        let kind = if k == 't' { "t" } else { &k.to_string() };
        let mut raw = raw_id(id.as_str().unwrap(), kind).unwrap().to_string();
        // A subagent's messages carry it: `<runId>:m:<subagent>/<message>`.
        if let (Some(s), true) = (e["subagentRunId"].as_str(), k != 't') {
            let prefix = format!("{}/", raw_id(s, "sa").unwrap());
            raw = raw.strip_prefix(&prefix).unwrap_or_else(|| panic!("{fixture}: {e}: not under {prefix}")).to_string();
        }
        let want = who.get(&(k, raw.clone())).unwrap_or_else(|| panic!("{fixture}: {e} has no events/v1 source"));
        let want = want.as_deref().map(|inv| run_of(inv).unwrap_or_else(|| panic!("{fixture}: {inv} never started")));
        assert_eq!(e["subagentRunId"].as_str(), want.as_deref(), "{fixture}: attribution of {e}");
        attributed += usize::from(want.is_some());
    }
    assert!(attributed > 0 || fixture.contains("acp"), "{fixture}: no subagent event at all");
    // Each subagent starts before its first event and ends before the run does.
    let terminal = p.agui.iter().position(|e| matches!(ty(e), "RUN_FINISHED" | "RUN_ERROR")).unwrap();
    for run_id in started.keys() {
        let at = |pred: &dyn Fn(&Value) -> bool| p.agui.iter().position(pred);
        let start = at(&|e| ty(e) == "SUBAGENT_STARTED" && e["subagentRunId"] == run_id.as_str()).unwrap();
        let first = at(&|e| e["subagentRunId"] == run_id.as_str()).unwrap();
        let end =
            at(&|e| matches!(ty(e), "SUBAGENT_FINISHED" | "SUBAGENT_ERROR") && e["subagentRunId"] == run_id.as_str())
                .unwrap_or_else(|| panic!("{fixture}: {run_id} never ends"));
        assert_eq!(start, first, "{fixture}: {run_id}: SUBAGENT_STARTED is its first event");
        assert!(end < terminal, "{fixture}: {run_id} ends after the run");
    }
    started
}

#[test]
fn every_capture_yields_subagents_with_every_subagent_event_attributed() {
    for (adapter, fixture) in CAPTURES {
        let p = pipe(adapter, fixture);
        let started = check_attribution(&p, fixture);
        assert!(!started.is_empty(), "{fixture}: no SUBAGENT_STARTED\n{}", p.agui_text);
        for s in started.values() {
            assert!(s["name"].as_str().is_some_and(|n| !n.is_empty()), "{fixture}: {s}");
        }
    }
}

#[test]
fn a_claude_subagent_is_named_by_its_type_under_the_call_that_spawned_it() {
    let p = pipe("claude", "fixtures/claude/bb-subagent.partial.jsonl");
    let s: Vec<&Value> = p.agui.iter().filter(|e| ty(e) == "SUBAGENT_STARTED").collect();
    let [s] = &s[..] else { panic!("{s:?}") };
    assert_eq!(s["name"], "Explore");
    assert_eq!(s["description"], "Read README first line");
    let call = s["parentToolCallId"].as_str().unwrap();
    assert_eq!(raw_id(call, "t"), Some("toolu_01RNa8dUfBrdgn5ocMFVqkSN"));
    // The spawning call was streamed first, in the message the subagent names.
    let start = p.agui.iter().find(|e| ty(e) == "TOOL_CALL_START" && e["toolCallId"] == call).expect("spawning call");
    assert_eq!(start["toolCallName"], "Agent");
    assert_eq!(s["parentMessageId"], start["parentMessageId"]);
    assert!(start.get("subagentRunId").is_none(), "the spawning call is the main agent's");
    // It finishes before the main agent gets the Agent call's result.
    let fin = p.agui.iter().position(|e| ty(e) == "SUBAGENT_FINISHED").unwrap();
    let res = p.agui.iter().position(|e| ty(e) == "TOOL_CALL_RESULT" && e["toolCallId"] == call).unwrap();
    assert!(fin < res);
    assert_eq!(p.agui[fin]["outcome"]["type"], "success");
}

#[test]
fn three_concurrent_subagents_stay_separate() {
    let p = pipe("claude", "fixtures/claude/synthetic.subagents-concurrent.partial.jsonl");
    let started: Vec<&Value> = p.agui.iter().filter(|e| ty(e) == "SUBAGENT_STARTED").collect();
    assert_eq!(started.len(), 3);
    // All three are open at once: every start comes before the first end.
    let first_end = p.agui.iter().position(|e| ty(e) == "SUBAGENT_FINISHED").unwrap();
    let last_start = p.agui.iter().rposition(|e| ty(e) == "SUBAGENT_STARTED").unwrap();
    assert!(last_start < first_end);
    // Their streamed words interleave on the wire but add up per subagent.
    let mut text: BTreeMap<String, String> = BTreeMap::new();
    for e in p.agui.iter().filter(|e| ty(e) == "TEXT_MESSAGE_CONTENT") {
        if let Some(s) = e["subagentRunId"].as_str() {
            text.entry(raw_id(s, "sa").unwrap().to_string()).or_default().push_str(e["delta"].as_str().unwrap());
        }
    }
    for k in ["A", "B", "C"] {
        assert_eq!(text[&format!("toolu_{k}")], format!("Working on it. ({k})Done with toolu_{k}."), "{text:?}");
    }
    // Each Bash call is its own subagent's, whatever order the results came in.
    for k in ["A", "B", "C"] {
        let r = p.agui.iter().find(|e| ty(e) == "TOOL_CALL_RESULT" && e["content"] == format!("toolu_{k}")).unwrap();
        assert_eq!(raw_id(r["subagentRunId"].as_str().unwrap(), "sa"), Some(format!("toolu_{k}").as_str()));
    }
    let names: BTreeSet<&str> = started.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, BTreeSet::from(["Explore", "general-purpose"]));
}

#[test]
fn a_nested_subagent_names_the_one_that_spawned_it() {
    let p = pipe("claude", "fixtures/claude/synthetic.subagents-nested.jsonl");
    let s = |name: &str| p.agui.iter().find(|e| ty(e) == "SUBAGENT_STARTED" && e["name"] == name).unwrap().clone();
    let (outer, inner) = (s("Plan"), s("Explore"));
    assert!(outer.get("parentSubagentRunId").is_none());
    assert_eq!(inner["parentSubagentRunId"], outer["subagentRunId"]);
    // The inner one was spawned by a call the outer one made.
    let call =
        p.agui.iter().find(|e| ty(e) == "TOOL_CALL_START" && e["toolCallId"] == inner["parentToolCallId"]).unwrap();
    assert_eq!(call["subagentRunId"], outer["subagentRunId"]);
    // The inner one ends first.
    let end = |s: &Value| {
        p.agui.iter().position(|e| ty(e) == "SUBAGENT_FINISHED" && e["subagentRunId"] == s["subagentRunId"]).unwrap()
    };
    assert!(end(&inner) < end(&outer));
}

#[test]
fn a_cut_off_stream_closes_its_subagents_with_an_error_before_the_run_error() {
    let p = pipe("claude", "fixtures/claude/synthetic.subagent-cut-off.partial.jsonl");
    let tail: Vec<&str> = p.agui.iter().rev().take(3).map(ty).collect();
    assert_eq!(tail, ["RUN_ERROR", "SUBAGENT_ERROR", "TEXT_MESSAGE_END"], "{}", p.agui_text);
    let err = &p.agui[p.agui.len() - 2];
    assert!(err["message"].as_str().unwrap().contains("ended before the subagent finished"), "{err}");
    assert!(!p.agui.iter().any(|e| ty(e) == "SUBAGENT_FINISHED"));
}

#[test]
fn codex_and_acp_subagents_are_named_by_what_the_agent_says() {
    let p = pipe("codex", "fixtures/codex/bb-app-server.subagent.jsonl");
    let s = p.agui.iter().find(|e| ty(e) == "SUBAGENT_STARTED").unwrap();
    assert_eq!((s["name"].as_str(), s["description"].as_str()), (Some("read_readme"), Some("/root/read_readme")));
    assert_eq!(raw_id(s["subagentRunId"].as_str().unwrap(), "sa"), Some("01a02207-f139-7391-91f2-4360d97ba1d1"));
    // It sits under the spawn_agent call its subAgentActivity names (the
    // item's id is that call's), streamed first as the main agent's call,
    // which returns the subagent's answer after the subagent finished.
    let call = s["parentToolCallId"].as_str().expect("parentToolCallId");
    assert_eq!(raw_id(call, "t"), Some("call_uJGmCg6fIV3B8ZWScoCEGpLq"));
    let at = |pred: &dyn Fn(&Value) -> bool| p.agui.iter().position(pred).unwrap();
    let spawn = at(&|e| ty(e) == "TOOL_CALL_START" && e["toolCallId"] == call);
    assert_eq!(p.agui[spawn]["toolCallName"], "collab__spawnAgent");
    assert!(p.agui[spawn].get("subagentRunId").is_none(), "the spawning call is the main agent's");
    assert_eq!(s.get("parentMessageId"), p.agui[spawn].get("parentMessageId"));
    let started = at(&|e| ty(e) == "SUBAGENT_STARTED");
    let finished = at(&|e| ty(e) == "SUBAGENT_FINISHED" && e["subagentRunId"] == s["subagentRunId"]);
    let result = at(&|e| ty(e) == "TOOL_CALL_RESULT" && e["toolCallId"] == call);
    assert!(spawn < started && started < finished && finished < result, "{}", p.agui_text);
    assert_eq!(p.agui[result]["content"], "# Recording workspace");
    // The subagent's command ran in its thread: the call is the subagent's.
    let cmd = p.agui.iter().find(|e| ty(e) == "TOOL_CALL_START" && e["toolCallName"] == "command_execution");
    assert_eq!(cmd.expect("the subagent's command")["subagentRunId"], s["subagentRunId"]);
    let p = pipe("cursor", "fixtures/cursor/bb-acp.subagent.jsonl");
    let s = p.agui.iter().find(|e| ty(e) == "SUBAGENT_STARTED").unwrap();
    assert_eq!((s["name"].as_str(), s["description"].as_str()), (Some("task"), Some("Read README first line")));
    assert_eq!(raw_id(s["subagentRunId"].as_str().unwrap(), "sa"), Some("78d1cd3b-94d2-4c87-82a2-c83fe54712f1"));
    let call = p.agui.iter().find(|e| ty(e) == "TOOL_CALL_START").unwrap();
    assert_eq!(s["parentToolCallId"], call["toolCallId"], "under the Task call that ran it");
}

/// The official client (`conformance/check.mjs`: `HttpAgent.runAgent`, its
/// `verifyEvents`, and `EventSchemas` of `@ag-ui/core` 1.0.0) accepts every
/// subagent stream, SSE-encoded by the real `sse-encode`.
#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn official_client_accepts_every_subagent_stream() {
    support::need(&["agui-client"]);
    let dir = support::scratch("subagents-official");
    let mut files = Vec::new();
    for (i, (adapter, fixture)) in CAPTURES.iter().enumerate() {
        let p = pipe(adapter, fixture);
        let sse = Command::cargo_bin("sse-encode").unwrap().write_stdin(p.agui_text).output().unwrap();
        assert!(sse.status.success());
        let f = dir.join(format!("{i}.sse"));
        std::fs::write(&f, sse.stdout).unwrap();
        files.push(f);
    }
    let out = std::process::Command::new("node")
        .arg(root().join("conformance/check.mjs"))
        .args(&files)
        .current_dir(root().join("conformance"))
        .output()
        .expect("node runs");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = report.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), files.len(), "{report}");
    for (l, (_, fixture)) in lines.iter().zip(CAPTURES) {
        assert_eq!(l["ok"], true, "{fixture}: {l}");
        assert!(
            l["types"]["SUBAGENT_STARTED"].as_u64().unwrap_or(0) >= 1,
            "{fixture}: the client saw no subagent: {l}"
        );
        let ended =
            l["types"]["SUBAGENT_FINISHED"].as_u64().unwrap_or(0) + l["types"]["SUBAGENT_ERROR"].as_u64().unwrap_or(0);
        assert_eq!(Some(ended), l["types"]["SUBAGENT_STARTED"].as_u64(), "{fixture}: {l}");
    }
}

/// The interactive sessions (`runwire-serve --interactive` over the
/// recorded subagent cells: claude through `fixtures/stub-engines/replay`,
/// codex app-server and cursor ACP through `examples/replay-agent`, each
/// checking the lines runwire writes to it): the run a client posts streams
/// the agent's subagent as an AG-UI subagent, through the session's own
/// normalizer.
#[test]
#[cfg_attr(not(tool = "jq"), ignore = "needs jq (the claude replay stub runs it): apt-get install jq")]
fn interactive_sessions_stream_their_subagent() {
    use std::io::{Read, Write};
    support::need(&["jq"]);
    for (agent, args) in [("claude", ""), ("codex", "app-server"), ("cursor", "acp")] {
        let dir = support::scratch(&format!("subagent-{agent}"));
        let cell = if agent == "claude" {
            root().join("fixtures/interactive/claude-code/subagent")
        } else {
            support::cell(agent, "subagent")
        };
        let mut cmd = support::Server::command();
        cmd.args(["--agent", agent, "--interactive", "--agent-cmd"])
            .env("HARNESS_HOME", dir.join("harness"))
            .env("RUNWIRE_KEEPALIVE_MS", "60000");
        if agent == "claude" {
            // The replaying stub, as tests/it/interactive.rs runs it.
            let eng = dir.join("engine.sh");
            let stub = root().join("fixtures/stub-engines/replay");
            std::fs::write(&eng, format!("#!/bin/sh\nexec {} claude {} -- \"$@\"\n", stub.display(), cell.display()))
                .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&eng, std::fs::Permissions::from_mode(0o755)).unwrap();
            cmd.arg(eng);
        } else {
            cmd.arg(support::example("replay-agent"))
                .env("REPLAY_CELL", &cell)
                .env("REPLAY_EXPECT_ARGS", args)
                .env("REPLAY_STATE", dir.join("replay-state.json"));
        }
        let s = support::Server::spawn(cmd).owning(dir);
        let prompt =
            if agent == "claude" { support::user_messages(&cell).remove(0) } else { support::first_prompt(&cell) };
        let body = serde_json::json!({"threadId": "t", "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": prompt}]})
        .to_string();
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        write!(
            c,
            "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            s.port,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).unwrap();
        let ev = support::sse::http_events(&raw);
        support::verify::verify(&ev).unwrap_or_else(|e| panic!("{agent}: {e}\n{ev:#?}"));
        let err = s.stderr();
        assert!(
            !err.contains("replay-agent:") && !err.contains("replay:"),
            "{agent}: the replay found a wrong line:\n{err}"
        );
        assert_eq!(ev.last().unwrap()["type"], "RUN_FINISHED", "{agent}: {:?}", ev.last());
        let started: Vec<&Value> = ev.iter().filter(|e| ty(e) == "SUBAGENT_STARTED").collect();
        let [sa] = &started[..] else { panic!("{agent}: {started:?}") };
        let id = &sa["subagentRunId"];
        let ended = ev.iter().filter(|e| ty(e) == "SUBAGENT_FINISHED" && e["subagentRunId"] == *id).count();
        assert_eq!(ended, 1, "{agent}");
        let attributed = ev.iter().filter(|e| ty(e) != "SUBAGENT_STARTED" && e["subagentRunId"] == *id).count();
        assert!(attributed >= 2, "{agent}: only {attributed} events of the subagent");
        let want = match agent {
            "claude" => "Explore",
            "codex" => "read_readme",
            _ => "task",
        };
        assert_eq!(sa["name"], want, "{agent}");
    }
}

/// A call a subagent made that needs approval (a cell built from the
/// recorded Claude Code subagent cell: the recording up to the subagent's
/// Bash call, then Claude Code's `can_use_tool` request for that call),
/// through `runwire-serve --interactive` over the replaying stub: the run
/// stops on the interrupt, which carries the subagent's `subagentRunId`,
/// and the subagent ends `SUBAGENT_FINISHED` `suspended` with that
/// interrupt's id, before `RUN_FINISHED`. The stream passes `agui-check`
/// (`support::verify::agui_check`) and the official client (`conformance/check.mjs`).
#[test]
#[cfg_attr(
    not(all(tool = "jq", tool = "agui-client")),
    ignore = "needs jq (the claude replay stub) and node, npm (official AG-UI client): apt-get install jq nodejs npm"
)]
fn an_interrupt_inside_a_subagent_suspends_it() {
    use std::io::{Read, Write};
    support::need(&["jq", "agui-client"]);
    let dir = support::scratch("subagent-interrupt");
    let src = root().join("fixtures/interactive/claude-code/subagent");
    let cell = dir.join("cell");
    std::fs::create_dir_all(&cell).unwrap();
    std::fs::copy(src.join("manifest.json"), cell.join("manifest.json")).unwrap();
    let envelopes = |f: &str| -> Vec<Value> {
        std::fs::read_to_string(src.join(f)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    // The subagent's Bash call (its assistant line names its spawner).
    let from = envelopes("from-agent.ndjson");
    let line = |e: &Value| serde_json::from_str::<Value>(e["line"].as_str().unwrap()).unwrap();
    let bash = from
        .iter()
        .position(|e| {
            let l = line(e);
            l["type"] == "assistant"
                && l["parent_tool_use_id"].is_string()
                && l["message"]["content"][0]["name"] == "Bash"
        })
        .expect("the subagent's Bash call");
    let call = line(&from[bash])["message"]["content"][0].clone();
    let seq = from[bash]["seq"].as_u64().unwrap();
    let ask = serde_json::json!({"type": "control_request", "request_id": "req-subagent-bash", "request": {
        "subtype": "can_use_tool", "tool_name": "Bash", "display_name": "Bash", "input": call["input"],
        "tool_use_id": call["id"]}});
    let mut envelope = from[bash].clone();
    envelope["seq"] = (seq + 1).into();
    envelope["line"] = ask.to_string().into();
    let mut kept: Vec<String> = from[..=bash].iter().map(Value::to_string).collect();
    kept.push(envelope.to_string());
    std::fs::write(cell.join("from-agent.ndjson"), kept.join("\n") + "\n").unwrap();
    let to: Vec<String> = envelopes("to-agent.ndjson")
        .iter()
        .filter(|e| e["seq"].as_u64().unwrap() < seq)
        .map(Value::to_string)
        .collect();
    std::fs::write(cell.join("to-agent.ndjson"), to.join("\n") + "\n").unwrap();

    let eng = dir.join("engine.sh");
    let stub = root().join("fixtures/stub-engines/replay");
    std::fs::write(&eng, format!("#!/bin/sh\nexec {} claude {} -- \"$@\"\n", stub.display(), cell.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&eng, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = support::Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(&eng)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000");
    let s = support::Server::spawn(cmd).owning(dir.clone());
    let prompt = support::user_messages(&src).remove(0);
    let body = serde_json::json!({"threadId": "t", "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": prompt}]})
    .to_string();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /agui HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.port,
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let ev = support::sse::http_events(&raw);
    // `agui-check`'s library: the independent verifier's camelCase rule
    // for CUSTOM values does not hold for `runwire.input_request`, whose
    // value is the events/v1 request as is (snake_case, which the studio reads).
    support::verify::agui_check(&ev).unwrap_or_else(|e| panic!("{e}\n{ev:#?}"));
    assert!(!s.stderr().contains("replay:"), "the replay found a wrong line:\n{}", s.stderr());

    let sa = ev.iter().find(|e| ty(e) == "SUBAGENT_STARTED").expect("a subagent");
    let sub = sa["subagentRunId"].as_str().unwrap();
    let end = ev.last().unwrap();
    assert_eq!((ty(end), end["outcome"]["type"].as_str()), ("RUN_FINISHED", Some("interrupt")), "{end}");
    let ints = end["outcome"]["interrupts"].as_array().unwrap();
    let [i] = &ints[..] else { panic!("{ints:?}") };
    assert_eq!(i["subagentRunId"], sub, "the interrupt is the subagent's: {i}");
    let bash_call = ev
        .iter()
        .find(|e| ty(e) == "TOOL_CALL_START" && e["toolCallId"] == i["toolCallId"])
        .expect("the call the interrupt is about was streamed");
    assert_eq!((bash_call["toolCallName"].as_str(), bash_call["subagentRunId"].as_str()), (Some("Bash"), Some(sub)));
    let fin: Vec<&Value> = ev.iter().filter(|e| ty(e) == "SUBAGENT_FINISHED").collect();
    let [fin] = &fin[..] else { panic!("{fin:?}") };
    assert_eq!(fin["subagentRunId"], sub);
    assert_eq!(fin["outcome"], serde_json::json!({"type": "suspended", "interruptIds": [i["id"]]}), "{fin}");
    assert!(!ev.iter().any(|e| ty(e) == "SUBAGENT_ERROR"));

    // The official client, on the bytes as served.
    let head = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let sse = dir.join("interrupt.sse");
    std::fs::write(&sse, &raw[head + 4..]).unwrap();
    let out = std::process::Command::new("node")
        .arg(root().join("conformance/check.mjs"))
        .arg(&sse)
        .current_dir(root().join("conformance"))
        .output()
        .expect("node runs");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    let l: Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!((l["ok"].as_bool(), l["types"]["SUBAGENT_FINISHED"].as_u64()), (Some(true), Some(1)), "{l}");
}
