//! The Agent Client Protocol (`cursor-agent acp`, `opencode acp`, any ACP
//! agent): the JSON-RPC 2.0 stream the agent prints on stdout, as the
//! session tool logs it.
//!
//! | line | maps to |
//! |---|---|
//! | response with `result.sessionId` (`session/new`) | the session id; no event |
//! | response with `result.stopReason` (`session/prompt`) | `turn_end` (`end_turn` is ok; `cancelled`, `refusal`, `max_tokens`, `max_turn_requests` are not) |
//! | other responses | skipped |
//! | error response | `error` (`agent_error`, not fatal) |
//! | `session/update` `agent_message_chunk` | `token_delta` (text) |
//! | `session/update` `agent_thought_chunk` | `token_delta` (reasoning) |
//! | `session/update` `tool_call` | `tool_call` (and `tool_result` when it arrives finished) |
//! | `session/update` `tool_call_update` `completed` / `failed` | `tool_result` (and `tool_call` if never announced) |
//! | agent requests (`session/request_permission`, `fs/*`, `terminal/*`, …) | skipped: the session answers them and logs a `runwire.request` line for what a person decides |
//!
//! ACP has no turn-start notification (the client starts a turn by sending
//! `session/prompt`): the first update that belongs to a turn opens one
//! (`turn_start`), and a `stopReason` with no turn open yields `turn_start`
//! then `turn_end`. `session/load` replays the conversation as
//! `user_message_chunk` / `agent_message_chunk` updates before its response:
//! from a `user_message_chunk` until the next response, updates are history
//! the earlier run already showed, and are skipped. Only there: once the
//! session is live (any response after `initialize`'s: `session/new`'s, the
//! load's own), a `user_message_chunk` is the agent echoing the prompt, and
//! the turn it opens is shown whole (issue 26 case 6).

use super::ctx::{tool_call, tool_result, value_text, Ctx, STATUS_TYPE};
use super::fields::ValueExt;
use crate::pipeline::events::{Channel, Data, TokenDelta, TurnEnd, TurnStart};
use serde_json::{json, Value};

/// `session/update` kinds known and skipped on purpose: editor state (commands,
/// modes, config options, title), plans (events/v1 has no plan event),
/// usage and notices, and the user's own message (the prompt runwire sent).
pub(crate) const SKIPPED_UPDATES: &[&str] = &[
    "user_message_chunk",
    "plan",
    "plan_update",
    "plan_removed",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
    "notice",
    "compaction_update",
    "compaction_summary_chunk",
    "prompt_suggestions_update",
];

/// Requests an ACP agent sends its client (the schema's client methods, and
/// cursor's own `cursor/*` extensions). The session answers them.
pub(crate) fn is_agent_request(method: &str) -> bool {
    matches!(
        method,
        "session/request_permission"
            | "fs/read_text_file"
            | "fs/write_text_file"
            | "terminal/create"
            | "terminal/output"
            | "terminal/release"
            | "terminal/wait_for_exit"
            | "terminal/kill"
            | "elicitation/create"
    ) || method.starts_with("cursor/")
        || method.starts_with('_')
}

/// cursor's `cursor/task`: the agent reports a subagent it ran for a Task
/// call (`toolCallId`), after the fact (`durationMs`): a `custom`
/// `runwire.subagent` attributed to that subagent, so a viewer shows it
/// under its call. Named by `subagentType` when that is a name, else
/// `task` (the tool's own name); the invocation is `agentId`.
fn task(ctx: &mut Ctx, p: &Value) {
    let Some(call) = p.str_at("toolCallId").filter(|c| !c.is_empty()) else { return };
    let name = p.str_at("subagentType").filter(|t| !t.is_empty()).unwrap_or("task");
    let sub = crate::pipeline::events::Subagent {
        tool_call: call.to_string(),
        id: p.str_at("agentId").filter(|a| !a.is_empty()).unwrap_or(call).to_string(),
        name: name.to_string(),
        description: p.str_at("description").map(str::to_string),
        parent_id: None,
    };
    // Redacted like tool arguments: the prompt may carry anything.
    let mut v = p.clone();
    super::redact::redact_json(&mut v);
    ctx.custom_in("subagent", v, Some(Box::new(sub)));
}

#[derive(Default)]
pub(crate) struct Acp {
    turn_open: bool,
    /// A `session/load` is replaying history (see the module doc).
    replay: bool,
    /// A response other than `initialize`'s was seen: the session is live,
    /// and no replay can come any more.
    live: bool,
    /// A tool call of this turn was denied (a `runwire.answer` deny or
    /// expiry): a turn that then ends `cancelled` ended as the person
    /// chose (the agent's reject option ends the turn, codex-acp's
    /// `abort`; or it had none and runwire cancelled the turn).
    denied: bool,
    /// Requests of this turn and the tool calls they asked about (request
    /// id, call id), and the calls denied, with the reason.
    asked: Vec<(String, String)>,
    denied_calls: Vec<(String, String)>,
    /// The message id of the text (or reasoning) run in progress: the line
    /// that opened it, since ACP chunks carry no id of their own.
    text_msg: Option<String>,
    thought_msg: Option<String>,
    /// Tool call ids announced and not yet finished.
    open_tools: Vec<String>,
}

impl Acp {
    pub(crate) fn line(&mut self, ctx: &mut Ctx, raw: &[u8]) {
        let Some(v) = ctx.value(raw) else { return };
        if let Some(ty) = v.str_at("type") {
            return match ty {
                STATUS_TYPE => ctx.status_value(&v),
                // A session line read here (its `type` not first: a copy
                // re-encoded): the same as the generic reader's path.
                super::ctx::REQUEST_TYPE | super::ctx::ANSWER_TYPE => {
                    self.session_line(ctx, raw, ty == super::ctx::REQUEST_TYPE);
                    ctx.unknown(raw, ty)
                }
                other => ctx.unknown(raw, other),
            };
        }
        let Some(method) = v.str_at("method") else {
            return self.response(ctx, raw, &v);
        };
        if v.get("id").is_some_and(|id| !id.is_null()) {
            if method == "cursor/task" {
                task(ctx, v.get("params").unwrap_or(&Value::Null));
            } else if !is_agent_request(method) {
                ctx.unknown(raw, method);
            }
            return;
        }
        match method {
            "session/update" => {
                let p = v.get("params").unwrap_or(&Value::Null);
                ctx.offer_session(p.str_at("sessionId"));
                ctx.offer_resume(p.str_at("sessionId"));
                match p.get("update").filter(|u| u.is_object()) {
                    Some(u) => self.update(ctx, raw, u),
                    None => ctx.invalid(raw, "session/update without \"update\""),
                }
            }
            other => ctx.unknown(raw, other),
        }
    }

    fn response(&mut self, ctx: &mut Ctx, raw: &[u8], v: &Value) {
        if v.get("id").is_none() {
            return ctx.invalid(raw, "neither a method nor a response");
        }
        self.replay = false;
        // `initialize` answers with the protocol version (a new process:
        // a load may replay next); every later response means the session
        // exists (or failed): no replay after it.
        self.live = v.pointer("/result/protocolVersion").is_none();
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let m = err.str_at("message").map(str::to_string).unwrap_or_else(|| value_text(err));
            return ctx.error("agent_error", m, raw, false);
        }
        let Some(r) = v.get("result") else {
            return ctx.invalid(raw, "a response without \"result\" or \"error\"");
        };
        if let Some(s) = r.str_at("sessionId").filter(|s| !s.is_empty()) {
            // session/new (and session/fork, session/resume) name the session.
            *ctx.session = Some(s.to_string());
            ctx.announce_session(Some(s));
        }
        if let Some(stop) = r.str_at("stopReason") {
            if !self.turn_open {
                ctx.emit(Data::TurnStart(TurnStart::default()));
            }
            let ok = stop == "end_turn" || (stop == "cancelled" && self.denied);
            // A denied call the agent never finished (codex-acp's `abort`
            // ends the turn without a word on the call) failed as denied.
            for (id, why) in std::mem::take(&mut self.denied_calls) {
                if let Some(p) = self.open_tools.iter().position(|t| *t == id) {
                    self.open_tools.remove(p);
                    ctx.emit(tool_result(id, &format!("denied: {why}"), true, None, None));
                }
            }
            self.end_turn();
            ctx.emit(Data::TurnEnd(TurnEnd { ok, reason: (!ok).then(|| stop.to_string()), ..TurnEnd::default() }));
        }
    }

    /// A session's `runwire.request` / `runwire.answer` line, before its
    /// own event. A permission asked before its tool call was announced
    /// (codex-acp asks first) announces the call from the request (its
    /// `tool` and `input`), so the request binds to a call the stream has
    /// shown; the agent's later announcement of it is then an update. A
    /// denial is noted for the turn's end.
    pub(crate) fn session_line(&mut self, ctx: &mut Ctx, raw: &[u8], request: bool) {
        let Ok(v) = serde_json::from_slice::<Value>(raw) else { return };
        if !request {
            if matches!(v.str_at("decision"), Some("deny" | "expired")) {
                self.denied = true;
                let call = v.str_at("id").and_then(|r| self.asked.iter().find(|(q, _)| q == r)).map(|(_, c)| c.clone());
                if let Some(c) = call {
                    let why = v.str_at("message").unwrap_or("Permission request denied").to_string();
                    super::fields::push_bounded(&mut self.denied_calls, (c, why));
                }
            }
            return;
        }
        let Some(id) = v.str_at("tool_call_id").filter(|i| !i.is_empty()) else { return };
        if let Some(r) = v.str_at("id") {
            super::fields::push_bounded(&mut self.asked, (r.to_string(), id.to_string()));
        }
        if self.replay || self.open_tools.iter().any(|t| t == id) {
            return;
        }
        self.open_turn(ctx);
        self.text_msg = None;
        self.thought_msg = None;
        super::fields::push_bounded(&mut self.open_tools, id.to_string());
        let name = v.str_at("tool").filter(|t| !t.is_empty()).unwrap_or("tool").to_string();
        let args = v.get("input").filter(|i| i.is_object()).cloned().unwrap_or_else(|| json!({}));
        ctx.emit(tool_call(id.to_string(), name, args, None, None));
    }

    fn end_turn(&mut self) {
        self.turn_open = false;
        self.denied = false;
        self.asked.clear();
        self.denied_calls.clear();
        self.text_msg = None;
        self.thought_msg = None;
    }

    fn open_turn(&mut self, ctx: &mut Ctx) {
        if !self.turn_open {
            self.turn_open = true;
            ctx.emit(Data::TurnStart(TurnStart::default()));
        }
    }

    fn update(&mut self, ctx: &mut Ctx, raw: &[u8], u: &Value) {
        let Some(kind) = u.str_at("sessionUpdate") else {
            return ctx.invalid(raw, "update without a string \"sessionUpdate\"");
        };
        if kind == "user_message_chunk" {
            self.replay = !self.live;
            return;
        }
        if SKIPPED_UPDATES.contains(&kind) {
            return;
        }
        let known = matches!(kind, "agent_message_chunk" | "agent_thought_chunk" | "tool_call" | "tool_call_update");
        if !known {
            return ctx.unknown(raw, kind);
        }
        if self.replay {
            return;
        }
        self.open_turn(ctx);
        match kind {
            "agent_message_chunk" | "agent_thought_chunk" => {
                // Only text blocks are text; images, audio and resources have no event.
                let Some(text) =
                    u.get("content").filter(|c| c.str_at("type") == Some("text")).and_then(|c| c.str_at("text"))
                else {
                    return;
                };
                let line_id = ctx.line_id();
                let (slot, channel) = if kind == "agent_message_chunk" {
                    (&mut self.text_msg, Channel::Text)
                } else {
                    (&mut self.thought_msg, Channel::Reasoning)
                };
                let id =
                    u.str_at("messageId").map(str::to_string).unwrap_or_else(|| slot.get_or_insert(line_id).clone());
                if !text.is_empty() {
                    ctx.emit(Data::TokenDelta(TokenDelta {
                        text: text.to_string(),
                        channel,
                        message: id,
                        parent: None,
                    }));
                }
            }
            _ => {
                // A tool call ends the text run before it.
                self.text_msg = None;
                self.thought_msg = None;
                self.tool(ctx, raw, u);
            }
        }
    }

    fn tool(&mut self, ctx: &mut Ctx, raw: &[u8], u: &Value) {
        let Some(id) = u.str_at("toolCallId").filter(|i| !i.is_empty()) else {
            return ctx.invalid(raw, "tool call without a \"toolCallId\"");
        };
        let id = id.to_string();
        let known = self.open_tools.iter().position(|t| *t == id);
        let status = u.str_at("status").unwrap_or("pending");
        if !matches!(status, "completed" | "failed") {
            // Announced, or an update (in progress, new input) of a call not yet finished.
            if known.is_none() {
                super::fields::push_bounded(&mut self.open_tools, id.clone());
                ctx.emit(tool_call(id, tool_name(u), tool_args(u), None, None));
            }
            return;
        }
        match known {
            Some(p) => {
                self.open_tools.swap_remove(p);
            }
            None => ctx.emit(tool_call(id.clone(), tool_name(u), tool_args(u), None, None)),
        }
        let (out, code) = tool_output(u);
        let is_error = status == "failed" || code.is_some_and(|c| c != 0);
        ctx.emit(tool_result(id, &out, is_error, code, None));
    }
}

/// The tool's kind (`execute`, `edit`, `read`, `fetch`, …); for `other` or
/// none, its title (cursor: `MCP: tool`, `Task: Subagent task`).
fn tool_name(u: &Value) -> String {
    match u.str_at("kind") {
        Some(k) if k != "other" && !k.is_empty() => k.to_string(),
        _ => u.str_at("title").filter(|t| !t.is_empty()).unwrap_or("tool").to_string(),
    }
}

fn tool_args(u: &Value) -> Value {
    let mut args = u.get("rawInput").filter(|r| r.is_object()).cloned().unwrap_or_else(|| json!({}));
    // The title says what the call does when the input is empty ("Web Fetch").
    if let (Some(obj), Some(t)) = (args.as_object_mut(), u.str_at("title")) {
        if obj.is_empty() {
            obj.insert("title".into(), Value::String(t.to_string()));
        }
    }
    args
}

/// The output text and exit code of a finished call: the text of its content
/// blocks (diffs as `diff <path>`), else its `rawOutput` (a shell's
/// stdout and stderr, or the value as JSON).
fn tool_output(u: &Value) -> (String, Option<i64>) {
    let raw = u.get("rawOutput").filter(|r| !r.is_null());
    let code = raw.and_then(|r| r.i64_at("exitCode"));
    let mut parts = Vec::new();
    for block in u.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.str_at("type") {
            Some("content") => {
                if let Some(t) = block.get("content").and_then(|c| c.str_at("text")) {
                    parts.push(t.to_string());
                }
            }
            Some("diff") => parts.push(format!("diff {}", block.str_at("path").unwrap_or("?"))),
            Some("terminal") => parts.push(format!("terminal {}", block.str_at("terminalId").unwrap_or("?"))),
            _ => {}
        }
    }
    if parts.is_empty() {
        if let Some(r) = raw {
            match (r.str_at("stdout"), r.str_at("stderr")) {
                (None, None) => parts.push(value_text(r)),
                (o, e) => parts.extend(
                    [o.unwrap_or(""), e.unwrap_or("")].into_iter().filter(|s| !s.is_empty()).map(str::to_string),
                ),
            }
        }
    }
    (parts.join("\n"), code)
}
