//! `codex exec --json`: the current `thread/turn/item` format and the legacy
//! `{"id":…,"msg":{…}}` format (before late September 2025), told apart line
//! by line.
//!
//! Current format:
//!
//! | line | maps to |
//! |---|---|
//! | `thread.started` | the session id (`thread_id`); no event |
//! | `turn.started` | `turn_start` |
//! | `item.started` of a tool item | `tool_call` |
//! | `item.updated` | `agent_message`/`reasoning`: the unseen part of the text; others skipped |
//! | `item.completed` `agent_message` / `plan` | `token_delta` (text) |
//! | `item.completed` `reasoning` | `token_delta` (reasoning) |
//! | `item.completed` `error` | `error` (`agent_warning`, not fatal) |
//! | `item.completed` of a tool item | `tool_result` (and `tool_call` if never started) |
//! | `turn.completed` / `turn.failed` | `turn_end` |
//! | `error` | `error` (`agent_error`, not fatal: codex keeps running) |
//! | `item.plan.delta`, `request_user_input` | skipped |
//!
//! Tool items: `command_execution`, `file_change`, `mcp_tool_call`,
//! `web_search`, `todo_list`, `collab_tool_call`, and any other item type
//! with an id (kept as a generic tool, so new codex builds still show up).
//!
//! Legacy format: `task_started` → `turn_start`; `agent_message(_delta)` and
//! `agent_reasoning(_delta)` → `token_delta` (deltas appended, the whole
//! message only adds what they missed); `exec_command_*`, `patch_apply_*`,
//! `mcp_tool_call_*`, `web_search_*` → `tool_call`/`tool_result` by `call_id`;
//! `task_complete` → `turn_end` (with the last `token_count` usage);
//! `error` → fatal `error`; `stream_error` → non-fatal `error`; the config
//! and prompt preamble, approvals, raw reasoning, output deltas, plans,
//! diffs and background notices are skipped; `warning` → non-fatal `error`;
//! `view_image_tool_call` → `tool_call` + `tool_result`; review mode,
//! compaction, undo, MCP startup, elicitation and deprecation notices →
//! `custom` (`runwire.<type>`); `web_search_*` emits its call once the query is
//! known. `spec/adapters.md` lists every `EventMsg` variant.

use super::ctx::{tool_call, tool_result, value_text, Ctx, STATUS_TYPE};
use super::fields::{Seen, ValueExt};
use crate::pipeline::events::{Channel, Data, TokenDelta, TurnEnd, TurnStart, Usage};
use serde_json::{Map, Value};

#[derive(Default)]
pub(crate) struct Codex {
    /// Tool item / call ids whose `tool_call` was emitted and whose result was not.
    open_tools: Vec<String>,
    /// Text emitted so far per message id, for items or legacy messages that
    /// arrive in pieces before their whole value.
    texts: Vec<(String, Seen)>,
    /// Legacy: the open streamed agent message and reasoning ids.
    legacy_msg: Option<String>,
    legacy_reasoning: Option<String>,
    /// Legacy: the latest token count, reported on `task_complete`.
    legacy_usage: Option<Usage>,
    /// Current: the last `error` message, the fallback reason of a failed turn.
    last_error: Option<String>,
    /// Text was emitted in this turn (legacy `last_agent_message` repeats it).
    said: bool,
}

#[derive(Clone, Copy)]
enum Piece {
    Delta,
    Update,
    Final,
}

fn usage_from(v: &Value) -> Option<Usage> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    Some(Usage {
        input_tokens: n("input_tokens")?,
        output_tokens: n("output_tokens").unwrap_or(0),
        cached_input_tokens: n("cached_input_tokens"),
        cache_write_input_tokens: n("cache_write_input_tokens"),
        reasoning_tokens: n("reasoning_output_tokens"),
    })
}

fn obj() -> Value {
    Value::Object(Map::new())
}

impl Codex {
    pub(crate) fn line(&mut self, ctx: &mut Ctx, raw: &[u8]) {
        let Some(v) = ctx.value(raw) else { return };
        if let Some(msg) = v.get("msg").filter(|m| m.is_object()) {
            return self.legacy(ctx, raw, msg);
        }
        let Some(kind) = v.str_at("type") else {
            // The legacy preamble: a config summary, then the prompt echo.
            if v.get("prompt").is_some() || v.get("model").is_some() || v.get("sandbox").is_some() {
                return;
            }
            return ctx.invalid(raw, "no string \"type\"");
        };
        match kind {
            "thread.started" => {
                // The only place codex names its session; a resumed thread names it again.
                if let Some(t) = v.str_at("thread_id").filter(|t| !t.is_empty()) {
                    *ctx.session = Some(t.to_string());
                }
                ctx.announce_session(v.str_at("thread_id"));
            }
            "turn.started" => {
                self.last_error = None;
                ctx.emit(Data::TurnStart(TurnStart::default()));
            }
            "item.started" | "item.updated" | "item.completed" => match v.get("item").filter(|i| i.is_object()) {
                Some(item) => self.item(ctx, raw, kind, item),
                None => ctx.invalid(raw, "item event without \"item\""),
            },
            "turn.completed" => {
                self.texts.clear();
                ctx.emit(Data::TurnEnd(TurnEnd {
                    ok: true,
                    usage: v.get("usage").and_then(usage_from),
                    ..TurnEnd::default()
                }));
            }
            "turn.failed" => {
                self.texts.clear();
                let reason = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "turn failed".to_string());
                ctx.emit(Data::TurnEnd(TurnEnd { ok: false, reason: Some(reason), ..TurnEnd::default() }));
            }
            "error" => {
                let m = v.str_at("message").unwrap_or("error").to_string();
                self.last_error = Some(m.clone());
                ctx.error("agent_error", m, raw, false);
            }
            "item.plan.delta" | "request_user_input" => {}
            STATUS_TYPE => ctx.status_value(&v),
            other => ctx.unknown(raw, other),
        }
    }

    /// Emits the part of a message's text not yet emitted under `id`:
    /// a delta is appended; an update or the final value replaces the text so
    /// far, so only its unseen suffix is new (the final value also forgets the id).
    fn text(&mut self, ctx: &mut Ctx, id: &str, text: &str, channel: Channel, mode: Piece) {
        let pos = self.texts.iter().position(|(i, _)| i == id);
        let rest = match (pos, mode) {
            (Some(p), Piece::Update | Piece::Final) => self.texts[p].1.unseen_suffix(text).to_string(),
            _ => text.to_string(),
        };
        match (pos, mode) {
            (Some(p), Piece::Final) => {
                self.texts.swap_remove(p);
            }
            (Some(p), _) => self.texts[p].1.push(&rest),
            (None, Piece::Final) => {}
            (None, _) => super::fields::push_bounded(&mut self.texts, (id.to_string(), Seen::of(&rest))),
        }
        if !rest.is_empty() {
            self.said |= channel == Channel::Text;
            ctx.emit(Data::TokenDelta(TokenDelta { text: rest, channel, message: id.to_string(), parent: None }));
        }
    }

    fn open_tool(&mut self, ctx: &mut Ctx, id: &str, name: String, args: Value) {
        if !self.open_tools.iter().any(|t| t == id) {
            super::fields::push_bounded(&mut self.open_tools, id.to_string());
            ctx.emit(tool_call(id.to_string(), name, args, None, None));
        }
    }

    /// Ends a tool: `outcome` is `(output, is_error, exit_code)`.
    fn close_tool(&mut self, ctx: &mut Ctx, id: &str, name: String, args: Value, outcome: (&str, bool, Option<i64>)) {
        match self.open_tools.iter().position(|t| t == id) {
            Some(p) => {
                self.open_tools.swap_remove(p);
            }
            None => ctx.emit(tool_call(id.to_string(), name, args, None, None)),
        }
        ctx.emit(tool_result(id.to_string(), outcome.0, outcome.1, outcome.2, None));
    }

    fn item(&mut self, ctx: &mut Ctx, raw: &[u8], kind: &str, item: &Value) {
        let id = item.str_at("id").unwrap_or("").to_string();
        // The short-lived 0.4x builds said `item_type` and `assistant_message`.
        let ty = item.str_at("type").or_else(|| item.str_at("item_type")).unwrap_or("");
        let done = kind == "item.completed";
        match ty {
            "agent_message" | "assistant_message" | "plan" | "reasoning" => {
                if kind == "item.started" {
                    return;
                }
                let channel = if ty == "reasoning" { Channel::Reasoning } else { Channel::Text };
                let mode = if done { Piece::Final } else { Piece::Update };
                self.text(ctx, &id, item.str_at("text").unwrap_or(""), channel, mode);
            }
            "error" => {
                if done {
                    let m = item.str_at("message").unwrap_or("warning").to_string();
                    ctx.error("agent_warning", m, raw, false);
                }
            }
            _ if id.is_empty() => ctx.missing_id(raw, &format!("{ty} item")),
            _ => {
                let (name, args) = tool_name_args(ty, item);
                // A search names its query only once it ran: the call waits for it.
                let no_query_yet = ty == "web_search" && item.str_at("query").is_none_or(str::is_empty);
                if kind == "item.started" && !no_query_yet {
                    self.open_tool(ctx, &id, name, args);
                } else if done {
                    let (out, is_error, code) = tool_outcome(ty, item);
                    self.close_tool(ctx, &id, name, args, (&out, is_error, code));
                }
            }
        }
    }

    fn legacy(&mut self, ctx: &mut Ctx, raw: &[u8], msg: &Value) {
        let Some(ty) = msg.str_at("type") else {
            return ctx.invalid(raw, "msg without a string \"type\"");
        };
        if !matches!(ty, "agent_message_delta" | "agent_message") {
            self.legacy_msg = None;
        }
        if !matches!(ty, "agent_reasoning_delta" | "agent_reasoning") {
            self.legacy_reasoning = None;
        }
        let call_id = msg.str_at("call_id").unwrap_or("").to_string();
        let tool_kind = ty.ends_with("_begin") || ty.ends_with("_end") || ty == "view_image_tool_call";
        if tool_kind && call_id.is_empty() {
            return ctx.missing_id(raw, &format!("msg/{ty}"));
        }
        match ty {
            "task_started" => {
                self.texts.clear();
                self.said = false;
                self.legacy_usage = None;
                ctx.emit(Data::TurnStart(TurnStart { model: msg.str_at("model").map(str::to_string), cwd: None }));
            }
            "agent_message_delta" | "agent_reasoning_delta" => {
                let (slot, channel) = if ty == "agent_message_delta" {
                    (&mut self.legacy_msg, Channel::Text)
                } else {
                    (&mut self.legacy_reasoning, Channel::Reasoning)
                };
                let id = slot.get_or_insert_with(|| ctx.line_id()).clone();
                self.text(ctx, &id, msg.str_at("delta").unwrap_or(""), channel, Piece::Delta);
            }
            "agent_message" | "agent_reasoning" => {
                let (slot, channel, key) = if ty == "agent_message" {
                    (&mut self.legacy_msg, Channel::Text, "message")
                } else {
                    (&mut self.legacy_reasoning, Channel::Reasoning, "text")
                };
                let id = slot.take().unwrap_or_else(|| ctx.line_id());
                self.text(ctx, &id, msg.str_at(key).unwrap_or(""), channel, Piece::Final);
            }
            "exec_command_begin" => {
                let args = serde_json::json!({ "command": msg.get("command").cloned().unwrap_or(Value::Null), "cwd": msg.get("cwd").cloned().unwrap_or(Value::Null) });
                self.open_tool(ctx, &call_id, "shell".into(), args);
            }
            "exec_command_end" => {
                let out = join_streams(msg.str_at("stdout").unwrap_or(""), msg.str_at("stderr").unwrap_or(""));
                let code = msg.i64_at("exit_code");
                let failed = msg.bool_at("success").map(|s| !s).unwrap_or(code != Some(0));
                self.close_tool(ctx, &call_id, "shell".into(), obj(), (&out, failed, code));
            }
            "patch_apply_begin" => {
                let args = serde_json::json!({ "changes": msg.get("changes").cloned().unwrap_or_else(obj), "auto_approved": msg.get("auto_approved").cloned().unwrap_or(Value::Null) });
                self.open_tool(ctx, &call_id, "apply_patch".into(), args);
            }
            "patch_apply_end" => {
                let out = join_streams(msg.str_at("stdout").unwrap_or(""), msg.str_at("stderr").unwrap_or(""));
                let failed = msg.bool_at("success") != Some(true);
                self.close_tool(ctx, &call_id, "apply_patch".into(), obj(), (&out, failed, None));
            }
            "mcp_tool_call_begin" => {
                let inv = msg.get("invocation").unwrap_or(msg);
                let name = mcp_name(inv.str_at("server"), inv.str_at("tool"));
                self.open_tool(ctx, &call_id, name, inv.get("arguments").cloned().unwrap_or_else(obj));
            }
            "mcp_tool_call_end" => {
                let inv = msg.get("invocation").unwrap_or(msg);
                let name = mcp_name(inv.str_at("server"), inv.str_at("tool"));
                let (out, failed) = match msg.get("result") {
                    Some(r) => match (r.get("Ok"), r.get("Err")) {
                        (Some(ok), _) => (mcp_content(ok.get("content")), ok.bool_at("isError") == Some(true)),
                        (None, Some(err)) => (value_text(err), true),
                        _ => (value_text(r), false),
                    },
                    None => (String::new(), false),
                };
                self.close_tool(ctx, &call_id, name, obj(), (&out, failed, None));
            }
            "web_search_begin" => {
                // The begin event carries no query (only the end does): the call waits for it, unless a build sent one.
                if let Some(q) = msg.str_at("query").filter(|q| !q.is_empty()) {
                    self.open_tool(ctx, &call_id, "web_search".into(), serde_json::json!({ "query": q }));
                }
            }
            "web_search_end" => {
                let q = msg.get("query").cloned().unwrap_or(Value::Null);
                let out = msg.str_at("query").unwrap_or("").to_string();
                let args = serde_json::json!({ "query": q });
                self.close_tool(ctx, &call_id, "web_search".into(), args, (&out, false, None));
            }
            "view_image_tool_call" => {
                let path = msg.str_at("path").unwrap_or("").to_string();
                let args = serde_json::json!({ "path": path });
                self.close_tool(ctx, &call_id, "view_image".into(), args, (&path, false, None));
            }
            "warning" => ctx.error("agent_warning", msg.str_at("message").unwrap_or("warning"), raw, false),
            k if LEGACY_CUSTOM.contains(&k) => {
                let mut v = msg.clone();
                if let Some(o) = v.as_object_mut() {
                    o.remove("type");
                }
                ctx.custom(k, v);
            }
            "token_count" => {
                let src = msg.pointer("/info/total_token_usage").unwrap_or(msg);
                if let Some(u) = usage_from(src) {
                    self.legacy_usage = Some(u);
                }
            }
            "task_complete" => {
                if let Some(last) = msg.str_at("last_agent_message").filter(|s| !s.is_empty()) {
                    // Only if no agent message carried it (it repeats the last one).
                    if !self.said {
                        let id = ctx.line_id();
                        ctx.emit(Data::TokenDelta(TokenDelta {
                            text: last.into(),
                            channel: Channel::Text,
                            message: id,
                            parent: None,
                        }));
                    }
                }
                self.said = false;
                ctx.emit(Data::TurnEnd(TurnEnd { ok: true, usage: self.legacy_usage.take(), ..TurnEnd::default() }));
            }
            "turn_aborted" => ctx.emit(Data::TurnEnd(TurnEnd {
                ok: false,
                reason: Some(format!("turn aborted ({})", msg.str_at("reason").unwrap_or("interrupted"))),
                ..TurnEnd::default()
            })),
            "error" => {
                let m = msg.str_at("message").unwrap_or("Unknown error occurred");
                ctx.error("agent_error", m, raw, true);
            }
            "stream_error" => {
                let m = msg.str_at("message").unwrap_or("stream error");
                ctx.error("agent_error", m, raw, false);
            }
            "agent_reasoning_raw_content"
            | "agent_reasoning_raw_content_delta"
            | "agent_reasoning_section_break"
            | "exec_command_output_delta"
            | "exec_approval_request"
            | "apply_patch_approval_request"
            | "plan_update"
            | "turn_diff"
            | "background_event"
            | "session_configured"
            | "shutdown_complete"
            | "get_history_entry_response"
            | "user_message"
            | "mcp_list_tools_response"
            | "mcp_startup_update"
            | "terminal_interaction"
            | "list_custom_prompts_response"
            | "list_skills_response"
            | "skills_update_available"
            | "raw_response_item"
            | "item_started"
            | "item_completed"
            | "agent_message_content_delta"
            | "reasoning_content_delta"
            | "reasoning_raw_content_delta" => {}
            other => ctx.unknown(raw, &format!("msg/{other}")),
        }
    }
}

/// Legacy kinds passed through as `custom` events (`runwire.<type>`).
const LEGACY_CUSTOM: [&str; 8] = [
    "context_compacted",
    "entered_review_mode",
    "exited_review_mode",
    "mcp_startup_complete",
    "elicitation_request",
    "deprecation_notice",
    "undo_started",
    "undo_completed",
];

fn join_streams(out: &str, err: &str) -> String {
    match (out.is_empty(), err.is_empty()) {
        (_, true) => out.to_string(),
        (true, false) => err.to_string(),
        (false, false) => format!("{out}\n{err}"),
    }
}

fn mcp_name(server: Option<&str>, tool: Option<&str>) -> String {
    format!("mcp__{}__{}", server.unwrap_or("unknown"), tool.unwrap_or("unknown"))
}

/// MCP result content: text parts joined; other parts as JSON.
fn mcp_content(c: Option<&Value>) -> String {
    match c {
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| p.str_at("text").map(str::to_string).unwrap_or_else(|| p.to_string()))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(v) => value_text(v),
        None => String::new(),
    }
}

fn tool_name_args(ty: &str, item: &Value) -> (String, Value) {
    match ty {
        "command_execution" => (
            "command_execution".into(),
            serde_json::json!({ "command": item.get("command").cloned().unwrap_or(Value::Null) }),
        ),
        "file_change" => (
            "file_change".into(),
            serde_json::json!({ "changes": item.get("changes").cloned().unwrap_or(Value::Null) }),
        ),
        "mcp_tool_call" => {
            (mcp_name(item.str_at("server"), item.str_at("tool")), item.get("arguments").cloned().unwrap_or_else(obj))
        }
        "web_search" => {
            let mut args = serde_json::json!({ "query": item.get("query").cloned().unwrap_or(Value::Null) });
            if let Some(a) = item.get("action").filter(|a| !a.is_null()) {
                args["action"] = a.clone();
            }
            ("web_search".into(), args)
        }
        "collab_tool_call" => (
            format!("collab__{}", item.str_at("tool").unwrap_or("unknown")),
            serde_json::json!({ "prompt": item.get("prompt").cloned().unwrap_or(Value::Null), "receiver_thread_ids": item.get("receiver_thread_ids").cloned().unwrap_or(Value::Null) }),
        ),
        _ => {
            // Unknown or list-like items (todo_list, dynamic_tool_call…): everything but bookkeeping.
            let mut args = item.as_object().cloned().unwrap_or_default();
            for k in ["id", "type", "item_type", "status"] {
                args.remove(k);
            }
            (ty.to_string(), Value::Object(args))
        }
    }
}

/// `(output, is_error, exit_code)` of a completed tool item.
fn tool_outcome(ty: &str, item: &Value) -> (String, bool, Option<i64>) {
    let status = item.str_at("status").unwrap_or("completed");
    let bad_status = matches!(status, "failed" | "declined");
    match ty {
        "command_execution" => {
            let code = item.i64_at("exit_code");
            // A command closed by the turn's end has no exit code: not a success.
            (item.str_at("aggregated_output").unwrap_or("").to_string(), bad_status || code != Some(0), code)
        }
        "mcp_tool_call" => match item.get("error").filter(|e| !e.is_null()) {
            Some(e) => (e.str_at("message").map(str::to_string).unwrap_or_else(|| value_text(e)), true, None),
            None => {
                let out = item.get("result").map(|r| mcp_content(r.get("content"))).unwrap_or_default();
                (out, bad_status, None)
            }
        },
        "file_change" => {
            let paths: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            format!("{} {}", c.str_at("kind").unwrap_or("update"), c.str_at("path").unwrap_or("?"))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (format!("{status}: {}", paths.join(", ")), bad_status, None)
        }
        "web_search" => {
            // What was searched (or opened): the query, else the action's URL or queries.
            let a = item.get("action").unwrap_or(&Value::Null);
            let out = [item.str_at("query"), a.str_at("query"), a.str_at("url")]
                .into_iter()
                .flatten()
                .find(|s| !s.is_empty())
                .map(str::to_string)
                .or_else(|| a.get("queries").filter(|q| !q.is_null()).map(value_text))
                .unwrap_or_else(|| status.to_string());
            (out, bad_status, None)
        }
        "todo_list" => {
            let items: Vec<String> = item
                .get("items")
                .and_then(Value::as_array)
                .map(|is| {
                    is.iter()
                        .map(|i| {
                            format!(
                                "[{}] {}",
                                if i.bool_at("completed") == Some(true) { "x" } else { " " },
                                i.str_at("text").unwrap_or("")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (items.join("\n"), bad_status, None)
        }
        _ => {
            let out = ["aggregated_output", "output", "result", "text"]
                .iter()
                .find_map(|k| item.get(*k).filter(|v| !v.is_null()).map(value_text))
                .unwrap_or_else(|| status.to_string());
            (out, bad_status, None)
        }
    }
}
