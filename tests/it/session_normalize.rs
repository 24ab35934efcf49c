//! The interactive sessions' streams (`codex app-server`, ACP) through
//! `normalize-events codex` / `cursor`: every recorded cell in
//! `fixtures/interactive/` normalizes with no unknown or malformed line, and
//! what each cell shows (an approval, a denial, a question, an interrupt, a
//! resume, an auth failure) comes out as the events a viewer needs.

use runwire::pipeline::events::{Data, Event};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::util::time::Clock;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/interactive")
}

/// The agent's stdout of a recorded cell, in order (envelopes removed).
fn agent_lines(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("from-agent.ndjson")).unwrap_or_default();
    let mut env: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    env.sort_by_key(|e| (e["run"].as_u64().unwrap(), e["seq"].as_u64().unwrap()));
    env.iter().map(|e| e["line"].as_str().unwrap().to_string()).collect()
}

fn normalize(adapter: Adapter, lines: &[String]) -> (Vec<Event>, Normalizer) {
    let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
    let evs = lines.iter().flat_map(|l| n.push(l.as_bytes())).collect();
    (evs, n)
}

fn cell(agent: &str, name: &str) -> Vec<Event> {
    let adapter = if agent == "codex" { Adapter::Codex } else { Adapter::Cursor };
    normalize(adapter, &agent_lines(&root().join(agent).join(name))).0
}

fn text(evs: &[Event]) -> String {
    evs.iter()
        .filter_map(|e| match &e.data {
            Data::TokenDelta(d) if d.channel == runwire::pipeline::events::Channel::Text => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

fn turn_ends(evs: &[Event]) -> Vec<(bool, Option<String>)> {
    evs.iter()
        .filter_map(|e| match &e.data {
            Data::TurnEnd(t) => Some((t.ok, t.reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn every_recorded_cell_normalizes_without_an_unknown_or_malformed_line() {
    let mut cells = 0;
    for agent in ["codex", "acp-cursor"] {
        let adapter = if agent == "codex" { Adapter::Codex } else { Adapter::Cursor };
        for entry in std::fs::read_dir(root().join(agent)).unwrap() {
            let dir = entry.unwrap().path();
            let lines = agent_lines(&dir);
            if lines.is_empty() {
                continue; // model-list (manifest only)
            }
            cells += 1;
            let (evs, n) = normalize(adapter, &lines);
            for e in &evs {
                if let Data::Error(x) = &e.data {
                    assert!(
                        !matches!(x.code.as_str(), "unknown_kind" | "invalid_line" | "not_json"),
                        "{}: {x:?}",
                        dir.display()
                    );
                }
            }
            // seq is the line position: strictly increasing, never past the input.
            let seqs: Vec<_> = evs.iter().map(|e| e.seq).collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{}", dir.display());
            assert!(seqs.last().is_none_or(|s| s.line <= lines.len() as u64));
            // Every turn that starts ends, or the cell was cut off by the
            // recorder (fork: initialize only).
            let starts = evs.iter().filter(|e| matches!(e.data, Data::TurnStart(_))).count();
            assert_eq!(starts, turn_ends(&evs).len(), "{}", dir.display());
            if starts > 0 {
                assert!(n.session().is_some(), "{}: no session id", dir.display());
            }
        }
    }
    assert!(cells >= 24, "only {cells} cells");
}

#[test]
fn codex_approved_command_runs_and_the_turn_says_done() {
    let evs = cell("codex", "approval-allow");
    let call = evs.iter().find_map(|e| match &e.data {
        Data::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    let call = call.expect("a tool call");
    assert_eq!(call.name, "command_execution");
    assert!(call.args["command"].as_str().unwrap().contains("touch ~/bb-recording-outside.txt"));
    let result = evs.iter().find_map(|e| match &e.data {
        Data::ToolResult(r) if r.id == call.id => Some(r.clone()),
        _ => None,
    });
    assert_eq!(result.map(|r| (r.is_error, r.exit_code)), Some((false, Some(0))));
    assert!(text(&evs).ends_with("done"));
    assert_eq!(turn_ends(&evs), vec![(true, None)]);
}

#[test]
fn codex_denied_command_is_a_failed_tool_and_the_turn_goes_on() {
    let evs = cell("codex", "approval-deny");
    let r = evs.iter().find_map(|e| match &e.data {
        Data::ToolResult(r) => Some(r.clone()),
        _ => None,
    });
    assert!(r.expect("a tool result").is_error, "a declined command is not a success");
    assert_eq!(turn_ends(&evs), vec![(true, None)]);
}

#[test]
fn codex_interrupt_ends_the_turn_not_ok_and_the_resumed_turn_counts_only_its_own_tokens() {
    let evs = cell("codex", "stop-interrupt");
    assert_eq!(turn_ends(&evs), vec![(false, Some("interrupted".into())), (true, None)]);
    let usages: Vec<u64> = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::TurnEnd(t) => t.usage.as_ref().map(|u| u.output_tokens),
            _ => None,
        })
        .collect();
    // The thread total after the second turn is 73 output tokens; the
    // second turn itself wrote 5 ("4" and its overhead).
    assert_eq!(usages, vec![68, 5]);
}

#[test]
fn codex_auth_failure_ends_the_turn_with_codex_reason() {
    let evs = cell("codex", "auth-failure");
    let ends = turn_ends(&evs);
    assert_eq!(ends.len(), 1);
    assert!(!ends[0].0 && ends[0].1.as_deref().unwrap().contains("401 Unauthorized"), "{ends:?}");
    let retries = evs.iter().filter(|e| matches!(&e.data, Data::Error(x) if !x.fatal)).count();
    assert!(retries >= 10, "the reconnect notices are visible ({retries})");
}

#[test]
fn codex_question_tool_call_carries_the_answer() {
    let evs = cell("codex", "user-question");
    let call = evs.iter().find_map(|e| match &e.data {
        Data::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(call.as_ref().map(|c| c.name.as_str()), Some("AskUserQuestion"));
    assert_eq!(call.unwrap().args["questions"][0]["question"], "Tabs or spaces?");
    assert_eq!(text(&evs), "spaces");
}

#[test]
fn acp_denied_tool_and_cancelled_turn() {
    let deny = cell("acp-cursor", "approval-deny");
    assert!(deny.iter().any(|e| matches!(&e.data, Data::ToolCall(c) if c.name == "execute" && c.args["command"] == "touch ~/bb-recording-outside.txt")));
    assert_eq!(turn_ends(&deny), vec![(true, None)]);
    assert!(text(&deny).ends_with("denied"));
    let stop = cell("acp-cursor", "stop-interrupt");
    assert_eq!(turn_ends(&stop), vec![(false, Some("cancelled".into())), (true, None)]);
}

#[test]
fn acp_session_load_history_is_not_shown_again() {
    let evs = cell("acp-cursor", "resume");
    // Turn 1 says "ready"; session/load replays it before turn 2, which
    // answers "ready" again after its thoughts: the replay yields nothing.
    let t = text(&evs);
    assert_eq!(t.matches("ready").count(), 2, "{t:?}");
    assert_eq!(turn_ends(&evs).len(), 2);
}

#[test]
fn acp_tool_ids_with_newlines_pair_calls_and_results() {
    let evs = cell("acp-cursor", "web-search");
    let calls: Vec<String> = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::ToolCall(c) => Some(c.id.clone()),
            _ => None,
        })
        .collect();
    let results: Vec<(String, bool, Option<i64>)> = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::ToolResult(r) => Some((r.id.clone(), r.is_error, r.exit_code)),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| results.iter().any(|r| &r.0 == c)), "{calls:?} {results:?}");
    assert!(calls.iter().any(|c| c.contains('\n')));
    // The node one-liner that failed (exit 1) is an error; its retry is not.
    assert!(results.contains(&(calls[1].clone(), true, Some(1))), "{results:?}");
    assert!(results.contains(&(calls[2].clone(), false, Some(0))), "{results:?}");
}

#[test]
fn print_mode_streams_are_still_read_as_before() {
    // The detection must not take a codex exec or cursor stream-json line for JSON-RPC.
    let (evs, _) = normalize(Adapter::Codex, &[r#"{"id":"1","msg":{"type":"task_started"}}"#.to_string()]);
    assert!(matches!(evs[0].data, Data::TurnStart(_)));
    let (evs, _) = normalize(
        Adapter::Cursor,
        &[
            r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":"","files":[]}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#.to_string(),
        ],
    );
    // runwire's own line does not decide; the JSON-RPC line after it does.
    assert!(matches!(evs[0].data, Data::Exit(_)));
    assert!(matches!(evs.last().unwrap().data, Data::TurnEnd(_)));
    // An unknown codex notification (a newer codex) is shown, not dropped,
    // and is no error (issue 26 case 8): a `runwire.notice`.
    let (evs, _) = normalize(Adapter::Codex, &[r#"{"method":"never/seen","params":{}}"#.to_string()]);
    assert!(matches!(&evs[0].data, Data::Custom(c) if c.name == "runwire.notice" && c.value["method"] == "never/seen"));
    let (evs, _) = normalize(
        Adapter::Cursor,
        &[r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"brand_new"}}}"#.to_string()],
    );
    assert!(matches!(&evs[0].data, Data::Error(x) if x.code == "unknown_kind"));
}

/// Issue 26 case 6: an agent that echoes the prompt as `user_message_chunk`
/// in a live turn (not a `session/load` replay) has the whole turn shown.
#[test]
fn acp_a_prompt_echoed_in_a_live_turn_is_not_taken_for_a_replay() {
    let lines: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"say hello"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello, live."}}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#,
        // A new process loads the session: its replay is history again.
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"say hello"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello, live."}}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let (evs, _) = normalize(Adapter::Cursor, &lines);
    assert_eq!(text(&evs), "Hello, live.", "the live turn shown once, the replay not");
    assert_eq!(turn_ends(&evs), vec![(true, None)]);
}

/// Issue 26 case 7, as codex-acp does it: it asks before announcing its
/// tool call, and its only reject option (`abort`) ends the turn
/// `cancelled`. The request announces the call it binds to (the AG-UI
/// interrupt names a call the stream showed), the later announcement is not
/// a second call, and the denied turn ends ok (a denial, not a failure).
#[test]
fn acp_a_permission_asked_before_its_call_binds_to_it_and_a_denial_that_ends_the_turn_is_ok() {
    let lines: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"call_1","title":"touch made","kind":"execute","rawInput":{"command":["touch","made"]}},"options":[{"optionId":"approved","name":"Yes","kind":"allow_once"},{"optionId":"abort","name":"No","kind":"reject_once"}]}}"#,
        r#"{"type":"runwire.request","id":"0","kind":"tool_approval","tool_call_id":"call_1","tool":"execute","input":{"command":["touch","made"],"title":"touch made"}}"#,
        r#"{"type":"runwire.answer","id":"0","decision":"deny","message":"not now","at":"2026-01-01T00:00:00.000Z"}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"touch made","kind":"execute","status":"pending"}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}"#,
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let (evs, _) = normalize(Adapter::Cursor, &lines);
    let calls: Vec<(String, String)> = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::ToolCall(c) => Some((c.id.clone(), c.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls, vec![("call_1".to_string(), "execute".to_string())]);
    let call_at = evs.iter().position(|e| matches!(&e.data, Data::ToolCall(_))).unwrap();
    let asked_at = evs.iter().position(|e| matches!(&e.data, Data::InputRequest(_))).unwrap();
    assert!(call_at < asked_at, "the call is shown before the request that binds to it");
    assert_eq!(turn_ends(&evs), vec![(true, None)]);
}

/// The same denial when the agent never says a word on the call (codex-acp
/// 0.16.0): the call failed as denied, so the AG-UI run shows its result.
#[test]
fn acp_a_denied_call_the_agent_never_finished_failed_as_denied() {
    let lines: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#,
        r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"call_1","title":"touch made","kind":"execute"},"options":[{"optionId":"abort","name":"No","kind":"reject_once"}]}}"#,
        // Keys re-ordered (a copy re-encoded): read all the same.
        r#"{"id":"p1","kind":"tool_approval","tool":"execute","tool_call_id":"call_1","input":{},"type":"runwire.request"}"#,
        r#"{"at":"2026-01-01T00:00:00.000Z","decision":"deny","id":"p1","message":"not now","type":"runwire.answer"}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}"#,
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let (evs, _) = normalize(Adapter::Cursor, &lines);
    let result = evs.iter().find_map(|e| match &e.data {
        Data::ToolResult(r) => Some((r.id.clone(), r.is_error)),
        _ => None,
    });
    assert_eq!(result, Some(("call_1".to_string(), true)));
    assert_eq!(turn_ends(&evs), vec![(true, None)]);
}
