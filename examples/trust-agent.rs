//! `trust-agent`: a scripted stand-in agent for the answer-path tests
//! (`tests/it/trust_answers.rs`), acting as the attacker of issue 25 would:
//!
//! - `TRUST_PROTO=acp` (run as `trust-agent acp`): an ACP agent that numbers
//!   its permission requests from 0 in every process (as codex and ACP
//!   agents do) and asks, for each prompt, to run `touch file-<process>`:
//!   after a restart the same request id asks for a different command;
//! - `TRUST_PROTO=claude`: Claude Code's stream-json control protocol; each
//!   user message raises every `can_use_tool` request of `TRUST_REQUESTS`
//!   (a JSON array of `{request_id, tool_name, input,
//!   permission_suggestions?}`) at once, and the turn ends once all are
//!   answered.
//!
//! Every line runwire writes is appended to `TRUST_LOG` as
//! `{"process": N, "line": …}`, so a test sees exactly what reached the
//! agent. `TRUST_STATE` is a file counting the processes started.

use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn out(v: &Value) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{v}");
    let _ = o.flush();
}

fn main() {
    let proto = std::env::var("TRUST_PROTO").unwrap_or_else(|_| "acp".into());
    let log = std::env::var("TRUST_LOG").expect("TRUST_LOG");
    let state = std::env::var("TRUST_STATE").expect("TRUST_STATE");
    let process: u64 = std::fs::read_to_string(&state).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0) + 1;
    std::fs::write(&state, process.to_string()).expect("TRUST_STATE");
    let requests: Vec<Value> =
        std::env::var("TRUST_REQUESTS").ok().and_then(|r| serde_json::from_str(&r).ok()).unwrap_or_default();
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("TRUST_LOG");
    let mut next_request = 0u64;
    // ACP: the prompt waiting for its permission answer.
    let mut prompt: Option<Value> = None;
    // claude: request ids still waiting.
    let mut waiting: Vec<String> = Vec::new();
    let session = format!("trust-session-{process}");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
        let _ = writeln!(log, "{}", json!({"process": process, "line": v}));
        let _ = log.flush();
        if proto == "claude" {
            match v["type"].as_str() {
                Some("control_request") => {
                    out(&json!({"type": "control_response", "response": {"subtype": "success",
                        "request_id": v["request_id"], "response": {}}}));
                }
                Some("user") => {
                    out(&json!({"type": "system", "subtype": "init", "session_id": session, "model": "trust",
                        "cwd": "/tmp", "tools": ["Bash"]}));
                    for r in &requests {
                        waiting.push(r["request_id"].as_str().unwrap_or_default().to_string());
                        let mut req = json!({"subtype": "can_use_tool", "tool_name": r["tool_name"],
                            "input": r["input"], "tool_use_id": format!("toolu_{}", r["request_id"].as_str().unwrap_or_default())});
                        if let Some(s) = r.get("permission_suggestions") {
                            req["permission_suggestions"] = s.clone();
                        }
                        out(&json!({"type": "control_request", "request_id": r["request_id"], "request": req}));
                    }
                }
                Some("control_response") => {
                    let id = v.pointer("/response/request_id").and_then(Value::as_str).unwrap_or_default();
                    waiting.retain(|w| w != id);
                    if waiting.is_empty() {
                        out(&json!({"type": "assistant", "session_id": session, "message": {"id": "m1",
                            "role": "assistant", "content": [{"type": "text", "text": "done"}]}}));
                        out(&json!({"type": "result", "subtype": "success", "is_error": false,
                            "session_id": session, "num_turns": 1, "result": "done", "duration_ms": 1,
                            "total_cost_usd": 0, "usage": {"input_tokens": 1, "output_tokens": 1}}));
                    }
                }
                _ => {}
            }
            continue;
        }
        let id = v.get("id").cloned().unwrap_or(Value::Null);
        match v["method"].as_str() {
            Some("initialize") => {
                out(&json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {}}}))
            }
            Some("session/new") => out(&json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": session}})),
            Some("session/load") => out(&json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            Some("session/prompt") => {
                let sid = v.pointer("/params/sessionId").cloned().unwrap_or(Value::Null);
                let command = format!("touch file-{process}");
                out(&json!({"jsonrpc": "2.0", "id": next_request, "method": "session/request_permission",
                    "params": {"sessionId": sid, "toolCall": {"toolCallId": format!("call-{process}-{next_request}"),
                        "title": format!("`{command}`"), "kind": "execute", "status": "pending",
                        "rawInput": {"command": command}},
                    "options": [
                        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "allow-always", "name": "Allow always", "kind": "allow_always"},
                        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]}}));
                next_request += 1;
                prompt = Some(id);
            }
            Some("session/cancel") => {
                if let Some(p) = prompt.take() {
                    out(&json!({"jsonrpc": "2.0", "id": p, "result": {"stopReason": "cancelled"}}));
                }
            }
            None if v.get("result").is_some() || v.get("error").is_some() => {
                // The answer to the permission request: the turn ends.
                if let Some(p) = prompt.take() {
                    out(&json!({"jsonrpc": "2.0", "id": p, "result": {"stopReason": "end_turn"}}));
                }
            }
            _ => {}
        }
    }
}
