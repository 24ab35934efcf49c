//! An independent AG-UI 1.0 stream verifier for the tests: a re-statement of
//! the official client's `verify.ts` sequence rules (reference §7) plus the
//! wire rules its enforcement stage and the conformance checker apply (§1, §2):
//! known types, required and known keys only, no `null`, camelCase keys,
//! integer timestamps, exactly one terminal event, last. It deliberately
//! knows nothing of the translator's own state. A stream that passes is then
//! checked by `agui-check`'s library as well ([`agui_check`]).
#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashSet;

/// `(type, required keys, optional keys)`; `timestamp`, `rawEvent`,
/// `metadata` are allowed on every event.
const SHAPES: &[(&str, &[&str], &[&str])] = &[
    ("RUN_STARTED", &["threadId", "runId"], &["protocolVersion", "parentRunId", "input"]),
    ("RUN_FINISHED", &["threadId", "runId"], &["result", "outcome", "usage"]),
    ("RUN_ERROR", &["message"], &["code", "usage"]),
    ("TEXT_MESSAGE_START", &["messageId"], &["role", "name"]),
    ("TEXT_MESSAGE_CONTENT", &["messageId", "delta"], &[]),
    ("TEXT_MESSAGE_END", &["messageId"], &[]),
    ("TOOL_CALL_START", &["toolCallId", "toolCallName"], &["parentMessageId"]),
    ("TOOL_CALL_ARGS", &["toolCallId", "delta"], &[]),
    ("TOOL_CALL_END", &["toolCallId"], &[]),
    ("TOOL_CALL_RESULT", &["messageId", "toolCallId", "content"], &["role"]),
    ("REASONING_START", &["messageId"], &[]),
    ("REASONING_MESSAGE_START", &["messageId", "role"], &[]),
    ("REASONING_MESSAGE_CONTENT", &["messageId", "delta"], &[]),
    ("REASONING_MESSAGE_END", &["messageId"], &[]),
    ("REASONING_END", &["messageId"], &[]),
    ("CUSTOM", &["name", "value"], &[]),
    (
        "SUBAGENT_STARTED",
        &["subagentRunId", "name"],
        &["description", "parentSubagentRunId", "parentToolCallId", "parentMessageId"],
    ),
    ("SUBAGENT_FINISHED", &["subagentRunId"], &["result", "outcome"]),
    ("SUBAGENT_ERROR", &["subagentRunId", "message"], &["code"]),
];

/// The events that carry `subagentRunId` as attribution (AG-UI 1.0's
/// `Attributable`: every event but the run's own and the subagent ones).
const ATTRIBUTABLE: &[&str] = &[
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
    "CUSTOM",
];

const TOKEN_USAGE_KEYS: &[&str] = &[
    "provider",
    "model",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "reasoningTokens",
    "cachedInputTokens",
    "cacheWriteInputTokens",
];

fn is_camel(k: &str) -> bool {
    let mut b = k.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_lowercase()) && b.all(|c| c.is_ascii_alphanumeric())
}

fn check_value(v: &Value, path: &str) -> Result<(), String> {
    match v {
        Value::Null => Err(format!("null at {path}")),
        Value::Array(a) => a.iter().enumerate().try_for_each(|(i, x)| check_value(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().try_for_each(|(k, x)| {
            if !is_camel(k) {
                return Err(format!("key {k:?} at {path} is not camelCase"));
            }
            check_value(x, &format!("{path}.{k}"))
        }),
        _ => Ok(()),
    }
}

fn str_field<'a>(e: &'a Value, k: &str) -> Result<&'a str, String> {
    e.get(k).and_then(Value::as_str).ok_or_else(|| format!("{k} missing or not a string in {e}"))
}

/// Verifies one whole stream (a single run). Returns the first violation.
pub fn verify(events: &[Value]) -> Result<(), String> {
    let mut text = HashSet::new();
    let mut tools = HashSet::new();
    let mut spans = HashSet::new();
    let mut reasoning = HashSet::new();
    let mut started = false;
    let mut ended = false;
    // subagentRunId -> still active; and who owns each message / tool call / span.
    let mut subs: std::collections::HashMap<String, bool> = Default::default();
    let mut owner: std::collections::HashMap<(char, String), Option<String>> = Default::default();
    for (i, e) in events.iter().enumerate() {
        let at = |m: String| format!("event {i}: {m}");
        check_value(e, "$").map_err(at)?;
        let obj = e.as_object().ok_or_else(|| at("not an object".into()))?;
        let ty = str_field(e, "type").map_err(at)?;
        let (_, req, opt) =
            SHAPES.iter().find(|(t, _, _)| *t == ty).ok_or_else(|| at(format!("unexpected type {ty}")))?;
        for k in *req {
            if !obj.contains_key(*k) {
                return Err(at(format!("{ty} lacks required {k}")));
            }
        }
        for k in obj.keys() {
            let common = ["type", "timestamp", "rawEvent", "metadata"].contains(&k.as_str())
                || (k == "subagentRunId" && ATTRIBUTABLE.contains(&ty));
            if !common && !req.contains(&k.as_str()) && !opt.contains(&k.as_str()) {
                return Err(at(format!("{ty} has unknown key {k} (the client strips it)")));
            }
        }
        if let Some(ts) = obj.get("timestamp") {
            if !(ts.is_i64() || ts.is_u64()) {
                return Err(at(format!("timestamp {ts} is not an integer")));
            }
        }
        if let Some(u) = obj.get("usage") {
            let arr = u.as_array().ok_or_else(|| at("usage is not an array".into()))?;
            for x in arr {
                let o = x.as_object().ok_or_else(|| at("usage entry not an object".into()))?;
                for (k, v) in o {
                    if !TOKEN_USAGE_KEYS.contains(&k.as_str()) {
                        return Err(at(format!("unknown TokenUsage key {k}")));
                    }
                    if k.ends_with("Tokens") && !v.is_u64() {
                        return Err(at(format!("{k} is not a non-negative integer")));
                    }
                }
            }
        }
        if ended {
            return Err(at(format!("{ty} after the terminal event")));
        }
        if i == 0 && ty != "RUN_STARTED" && ty != "RUN_ERROR" {
            return Err(at("first event must be RUN_STARTED".into()));
        }
        let id = |k: &str| str_field(e, k).map(str::to_string).map_err(at);
        let sub = obj.get("subagentRunId").and_then(Value::as_str).map(str::to_string);
        if ATTRIBUTABLE.contains(&ty) {
            if let Some(s) = &sub {
                if subs.get(s) != Some(&true) {
                    return Err(at(format!("{ty} attributed to subagent {s}, which is not active")));
                }
            }
            // An event continuing a message, span or call belongs to whoever opened it.
            let key = match ty {
                "TEXT_MESSAGE_START" | "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => Some(('m', id("messageId")?)),
                "TOOL_CALL_START" | "TOOL_CALL_ARGS" | "TOOL_CALL_END" => Some(('t', id("toolCallId")?)),
                "REASONING_START" | "REASONING_END" => Some(('s', id("messageId")?)),
                "REASONING_MESSAGE_START" | "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" => {
                    Some(('r', id("messageId")?))
                }
                _ => None,
            };
            // A tool call belongs to the message that carries it.
            if let (true, Some(m)) = (ty == "TOOL_CALL_START", obj.get("parentMessageId").and_then(Value::as_str)) {
                if let Some(o) = owner.get(&('m', m.to_string())) {
                    if sub.is_some() && *o != sub {
                        return Err(at(format!("TOOL_CALL_START by {sub:?} in message {m} of {o:?}")));
                    }
                }
            }
            if ty == "TOOL_CALL_RESULT" {
                owner.insert(('m', id("messageId")?), sub.clone());
            }
            if let Some(key) = key {
                let opens = ty.ends_with("_START");
                match owner.get(&key) {
                    Some(o) if *o != sub => {
                        return Err(at(format!("{ty} attributed to {sub:?}, but its opener was {o:?}")));
                    }
                    None if opens => {
                        owner.insert(key, sub.clone());
                    }
                    _ => {}
                }
            }
        }
        match ty {
            "RUN_STARTED" => {
                if started {
                    return Err(at("RUN_STARTED while a run is active".into()));
                }
                started = true;
                id("threadId")?;
                id("runId")?;
                if obj.get("protocolVersion") != Some(&Value::from("1.0")) {
                    return Err(at("protocolVersion is not \"1.0\"".into()));
                }
            }
            "RUN_FINISHED" => {
                id("threadId")?;
                id("runId")?;
                if !text.is_empty() {
                    return Err(at(format!("RUN_FINISHED with text messages open: {text:?}")));
                }
                if !reasoning.is_empty() || !spans.is_empty() {
                    return Err(at("RUN_FINISHED with reasoning open".into()));
                }
                if !tools.is_empty() {
                    return Err(at("RUN_FINISHED with tool calls open".into()));
                }
                if subs.values().any(|&active| active) {
                    return Err(at("RUN_FINISHED with subagents active".into()));
                }
                ended = true;
            }
            "RUN_ERROR" => {
                id("message")?;
                if obj.get("code").is_some_and(|c| !c.is_string()) {
                    return Err(at("code is not a string".into()));
                }
                ended = true;
            }
            "TEXT_MESSAGE_START" => {
                if let Some(r) = obj.get("role") {
                    if !["developer", "system", "assistant", "user"].contains(&r.as_str().unwrap_or("")) {
                        return Err(at(format!("role {r} not allowed on a text message")));
                    }
                }
                if !text.insert(id("messageId")?) {
                    return Err(at("TEXT_MESSAGE_START for an open message".into()));
                }
            }
            "TEXT_MESSAGE_CONTENT" => {
                id("delta")?;
                if !text.contains(&id("messageId")?) {
                    return Err(at("TEXT_MESSAGE_CONTENT for a message not open".into()));
                }
            }
            "TEXT_MESSAGE_END" => {
                if !text.remove(&id("messageId")?) {
                    return Err(at("TEXT_MESSAGE_END for a message not open".into()));
                }
            }
            "TOOL_CALL_START" => {
                id("toolCallName")?;
                if obj.contains_key("parentMessageId") {
                    id("parentMessageId")?;
                }
                if !tools.insert(id("toolCallId")?) {
                    return Err(at("TOOL_CALL_START for an open tool call".into()));
                }
            }
            "TOOL_CALL_ARGS" => {
                id("delta")?;
                if !tools.contains(&id("toolCallId")?) {
                    return Err(at("TOOL_CALL_ARGS for a call not open".into()));
                }
            }
            "TOOL_CALL_END" => {
                if !tools.remove(&id("toolCallId")?) {
                    return Err(at("TOOL_CALL_END for a call not open".into()));
                }
            }
            "TOOL_CALL_RESULT" => {
                id("messageId")?;
                id("toolCallId")?;
                id("content")?;
                if obj.get("role").is_some_and(|r| r != "tool") {
                    return Err(at("TOOL_CALL_RESULT role is not \"tool\"".into()));
                }
            }
            "REASONING_START" => {
                if !spans.insert(id("messageId")?) {
                    return Err(at("REASONING_START for an open span".into()));
                }
            }
            "REASONING_MESSAGE_START" => {
                if obj.get("role") != Some(&Value::from("reasoning")) {
                    return Err(at("REASONING_MESSAGE_START role is not \"reasoning\"".into()));
                }
                if !reasoning.insert(id("messageId")?) {
                    return Err(at("REASONING_MESSAGE_START for an open reasoning message".into()));
                }
            }
            "REASONING_MESSAGE_CONTENT" => {
                id("delta")?;
                if !reasoning.contains(&id("messageId")?) {
                    return Err(at("REASONING_MESSAGE_CONTENT for a message not open".into()));
                }
            }
            "REASONING_MESSAGE_END" => {
                if !reasoning.remove(&id("messageId")?) {
                    return Err(at("REASONING_MESSAGE_END for a message not open".into()));
                }
            }
            "REASONING_END" => {
                if !spans.remove(&id("messageId")?) {
                    return Err(at("REASONING_END for a span not open".into()));
                }
            }
            "CUSTOM" => {
                id("name")?;
            }
            "SUBAGENT_STARTED" => {
                id("name")?;
                let s = id("subagentRunId")?;
                if subs.contains_key(&s) {
                    return Err(at(format!("SUBAGENT_STARTED reuses subagentRunId {s}")));
                }
                if let Some(p) = obj.get("parentSubagentRunId") {
                    let p = p.as_str().ok_or_else(|| at("parentSubagentRunId is not a string".into()))?;
                    if !subs.contains_key(p) {
                        return Err(at(format!("parentSubagentRunId {p} was never started")));
                    }
                }
                subs.insert(s, true);
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let s = id("subagentRunId")?;
                if subs.get(&s) != Some(&true) {
                    return Err(at(format!("{ty} for subagent {s}, which is not active")));
                }
                if ty == "SUBAGENT_ERROR" {
                    id("message")?;
                }
                if let Some(o) = obj.get("outcome") {
                    match o.get("type").and_then(Value::as_str) {
                        Some("success") => {}
                        Some("suspended") => {
                            if let Some(ids) = o.get("interruptIds") {
                                if !ids.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
                                    return Err(at("interruptIds is not an array of strings".into()));
                                }
                            }
                        }
                        other => return Err(at(format!("SUBAGENT_FINISHED outcome type {other:?}"))),
                    }
                }
                subs.insert(s, false);
            }
            _ => unreachable!("filtered by SHAPES"),
        }
    }
    if !ended {
        return Err("the stream has no terminal event".into());
    }
    agui_check(events)
}

/// Every stream verified here is also checked by `agui-check`'s library
/// (`runwire::aguicheck`, the official client's rules restated, with
/// runwire's one-run contract): a stream of runwire's must have no finding.
pub fn agui_check(events: &[Value]) -> Result<(), String> {
    let opts = runwire::aguicheck::Options { one_run: true, ..Default::default() };
    let findings = runwire::aguicheck::stream::check_events(events, opts);
    if findings.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = findings.iter().map(|f| f.to_line()).collect();
    Err(format!("agui-check found {}:\n{}", findings.len(), lines.join("\n")))
}

/// Parses JSON lines and verifies them.
pub fn verify_lines(out: &str) -> Result<Vec<Value>, String> {
    let events: Vec<Value> = out
        .lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect::<Result<_, _>>()?;
    verify(&events)?;
    Ok(events)
}
