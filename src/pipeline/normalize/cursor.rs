//! cursor-agent `stream-json`, with or without `--stream-partial-output`.
//!
//! | line | maps to |
//! |---|---|
//! | `system/init` | `turn_start` |
//! | `user` | skipped (the prompt echo) |
//! | `thinking/delta` | `token_delta` (reasoning) |
//! | `thinking/completed` | closes the reasoning message |
//! | `assistant` | `token_delta` (text), de-duplicated as below |
//! | `tool_call/started` | `tool_call` |
//! | `tool_call/completed` | `tool_result` (and the `tool_call` if `started` was never seen) |
//! | `result` | `turn_end` (its text only if nothing was said; `usage` read) |
//! | `connection/*`, `retry/starting`, `interaction_query`, `system/task_notification` | `custom` (`runwire.<type>`, or `runwire.<subtype>` for `system`) |
//!
//! Text forms: an `assistant` line with `timestamp_ms` and no `model_call_id`
//! is a partial-output delta; one with both is a whole segment when no deltas
//! came before it, else the buffered flush of text already streamed; one with
//! neither is the last segment, or (after deltas) the whole turn's text again.
//! Only text not yet emitted is emitted, so the mode needs no flag.

use super::ctx::{tool_call, tool_result, value_text, Ctx, STATUS_TYPE};
use super::fields::{unseen_suffix, ValueExt};
use crate::pipeline::events::{Channel, Data, TokenDelta, TurnEnd, TurnStart, Usage};
use serde_json::Value;

/// Past this, the turn's text is no longer kept for de-duplication (memory stays flat).
const TURN_TEXT_CAP: usize = 1 << 20;

#[derive(Default)]
pub(crate) struct Cursor {
    /// Open text message: id and the text streamed into it.
    text: Option<(String, String)>,
    /// Open reasoning message id.
    reasoning: Option<String>,
    /// Deltas (partial output) seen in this turn.
    partial: bool,
    /// All text emitted this turn, for the cumulative final line and `result`.
    turn_text: String,
    /// Tool calls started and not yet completed.
    open_tools: Vec<String>,
}

impl Cursor {
    fn say(&mut self, ctx: &mut Ctx, id: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.turn_text.len() < TURN_TEXT_CAP {
            self.turn_text.push_str(text);
        }
        ctx.emit(Data::TokenDelta(TokenDelta {
            text: text.to_string(),
            channel: Channel::Text,
            message: id.to_string(),
            parent: None,
        }));
    }

    pub(crate) fn line(&mut self, ctx: &mut Ctx, raw: &[u8]) {
        let Some(v) = ctx.value(raw) else { return };
        let Some(kind) = v.str_at("type") else {
            return ctx.invalid(raw, "no string \"type\"");
        };
        ctx.offer_session(v.str_at("session_id"));
        ctx.ts_ms = v.i64_at("timestamp_ms");
        let sub = v.str_at("subtype").unwrap_or("");
        if kind != "assistant" {
            // Any other event ends a streamed text segment.
            self.text = None;
        }
        if kind != "thinking" {
            self.reasoning = None;
        }
        if kind == "system" && sub != "init" {
            // A system line of a subtype not mapped yet still names the session.
            ctx.offer_resume(v.str_at("session_id"));
        }
        match (kind, sub) {
            ("system", "init") => {
                ctx.announce_session(v.str_at("session_id"));
                self.partial = false;
                self.turn_text.clear();
                self.open_tools.clear();
                ctx.emit(Data::TurnStart(TurnStart {
                    model: v.str_at("model").map(str::to_string),
                    cwd: v.str_at("cwd").map(str::to_string),
                }));
            }
            ("user", _) => {}
            ("thinking", "delta") => {
                let id = self.reasoning.get_or_insert_with(|| format!("R{}", ctx.line_no)).clone();
                let t = v.str_at("text").unwrap_or("");
                if !t.is_empty() {
                    ctx.emit(Data::TokenDelta(TokenDelta {
                        text: t.to_string(),
                        channel: Channel::Reasoning,
                        message: id,
                        parent: None,
                    }));
                }
            }
            ("thinking", "completed") => self.reasoning = None,
            ("assistant", _) => self.assistant(ctx, &v),
            ("tool_call", "started" | "completed") if v.str_at("call_id").is_none_or(str::is_empty) => {
                self.text = None;
                ctx.missing_id(raw, &format!("tool_call/{sub}"));
            }
            ("tool_call", "started") => {
                self.text = None;
                let (id, name, args) = tool_parts(&v);
                super::fields::push_bounded(&mut self.open_tools, id.clone());
                ctx.emit(tool_call(id, name, args, None, None));
            }
            ("tool_call", "completed") => {
                self.text = None;
                let (id, name, args) = tool_parts(&v);
                match self.open_tools.iter().position(|t| *t == id) {
                    Some(p) => {
                        self.open_tools.swap_remove(p);
                    }
                    None => ctx.emit(tool_call(id.clone(), name, args, None, None)),
                }
                let (out, is_error, exit_code) = tool_outcome(&v);
                ctx.emit(tool_result(id, &out, is_error, exit_code, None));
            }
            ("result", _) => {
                let ok = sub == "success" && v.bool_at("is_error") != Some(true);
                let text = v.str_at("result").unwrap_or("");
                if ok && self.turn_text.is_empty() && !text.is_empty() {
                    let id = ctx.line_id();
                    self.say(ctx, &id, text);
                }
                ctx.emit(Data::TurnEnd(TurnEnd {
                    ok,
                    reason: (!ok).then(|| if text.is_empty() { format!("({sub})") } else { format!("{text} ({sub})") }),
                    duration_ms: v.u64_at("duration_ms"),
                    duration_api_ms: v.u64_at("duration_api_ms"),
                    usage: v.get("usage").and_then(usage_from),
                    ..TurnEnd::default()
                }));
                self.turn_text.clear();
                self.partial = false;
            }
            (STATUS_TYPE, _) => ctx.status_value(&v),
            ("connection", "reconnecting" | "reconnected")
            | ("retry", "starting")
            | ("interaction_query", _)
            | ("system", "task_notification") => {
                let name = if kind == "system" { sub } else { kind }.to_string();
                let mut value = v.clone();
                if let Some(o) = value.as_object_mut() {
                    o.remove("type");
                    o.remove("session_id");
                    if kind == "system" {
                        o.remove("subtype");
                    }
                }
                ctx.custom(&name, value);
            }
            _ => ctx.unknown(raw, &if sub.is_empty() { kind.to_string() } else { format!("{kind}/{sub}") }),
        }
    }

    fn assistant(&mut self, ctx: &mut Ctx, v: &Value) {
        let text: String = v
            .pointer("/message/content")
            .and_then(Value::as_array)
            .map(|parts| parts.iter().filter_map(|p| p.str_at("text")).collect())
            .unwrap_or_default();
        let has_ts = v.get("timestamp_ms").is_some();
        let has_mcid = v.get("model_call_id").is_some();
        match (has_ts, has_mcid) {
            (true, false) => {
                // A partial-output delta.
                self.partial = true;
                let (id, buf) = self.text.get_or_insert_with(|| (ctx.line_id(), String::new()));
                let id = id.clone();
                if buf.len() < TURN_TEXT_CAP {
                    buf.push_str(&text);
                }
                self.say(ctx, &id, &text);
            }
            (_, true) => {
                // Before a tool call: the flush of a streamed segment, or a whole segment.
                match self.text.take() {
                    Some((id, streamed)) if self.partial => {
                        let rest = unseen_suffix(&streamed, &text).to_string();
                        self.say(ctx, &id, &rest);
                    }
                    // A flush whose deltas were already closed by another event.
                    None if self.partial && self.turn_text.ends_with(text.as_str()) => {}
                    _ => {
                        let id = ctx.line_id();
                        self.say(ctx, &id, &text);
                    }
                }
            }
            (false, false) => {
                let streamed = self.text.take();
                if self.partial {
                    // The turn's whole text again (or the last segment's): only what is new.
                    let rest = if text.starts_with(self.turn_text.as_str()) {
                        unseen_suffix(&self.turn_text, &text).to_string()
                    } else if let Some((_, seg)) = &streamed {
                        unseen_suffix(seg, &text).to_string()
                    } else {
                        String::new()
                    };
                    let id = streamed.map(|(id, _)| id).unwrap_or_else(|| ctx.line_id());
                    self.say(ctx, &id, &rest);
                } else {
                    let id = ctx.line_id();
                    self.say(ctx, &id, &text);
                }
            }
        }
    }
}

/// cursor's token counts (`inputTokens`, `outputTokens`, `cacheReadTokens`,
/// `cacheWriteTokens`): its usage report lists the four as separate
/// buckets, so cached tokens are added into `input_tokens`, which counts
/// every input token in events/v1.
fn usage_from(u: &Value) -> Option<Usage> {
    let (read, write) = (u.u64_at("cacheReadTokens"), u.u64_at("cacheWriteTokens"));
    Some(Usage {
        input_tokens: u.u64_at("inputTokens")?.saturating_add(read.unwrap_or(0)).saturating_add(write.unwrap_or(0)),
        output_tokens: u.u64_at("outputTokens").unwrap_or(0),
        cached_input_tokens: read,
        cache_write_input_tokens: write,
        reasoning_tokens: u.u64_at("reasoningTokens"),
    })
}

/// The tool's kind key: the one ending in `ToolCall` (or `function`), never
/// bookkeeping siblings such as `toolCallId`.
fn tool_kind(tc: &Value) -> Option<(&str, &Value)> {
    tc.as_object()?
        .iter()
        .find(|(k, _)| k.ends_with("ToolCall") || k.as_str() == "function")
        .map(|(k, v)| (k.as_str(), v))
}

fn tool_parts(v: &Value) -> (String, String, Value) {
    let id = v.str_at("call_id").unwrap_or("").to_string();
    let tc = v.get("tool_call").unwrap_or(&Value::Null);
    match tool_kind(tc) {
        Some(("function", f)) => {
            let name = f.str_at("name").unwrap_or("function").to_string();
            let args = match f.get("arguments") {
                Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
                Some(a) => a.clone(),
                None => Value::Object(Default::default()),
            };
            (id, name, args)
        }
        Some(("mcpToolCall", body)) => {
            // Named like claude's and codex's MCP tools: mcp__<server>__<tool>.
            let a = body.get("args").unwrap_or(&Value::Null);
            let server = a.str_at("providerIdentifier").or_else(|| a.str_at("serverName")).unwrap_or("unknown");
            let tool = a.str_at("toolName").or_else(|| a.str_at("name")).unwrap_or("unknown");
            let args = a.get("args").cloned().unwrap_or_else(|| Value::Object(Default::default()));
            (id, format!("mcp__{server}__{tool}"), args)
        }
        Some((k, body)) => {
            let name = k.strip_suffix("ToolCall").unwrap_or(k).to_string();
            (id, name, body.get("args").cloned().unwrap_or_else(|| Value::Object(Default::default())))
        }
        None => (id, "unknown".to_string(), tc.clone()),
    }
}

/// `(output, is_error, exit_code)` of a completed tool call.
fn tool_outcome(v: &Value) -> (String, bool, Option<i64>) {
    let tc = v.get("tool_call").unwrap_or(&Value::Null);
    let Some((_, body)) = tool_kind(tc) else { return (String::new(), false, None) };
    let Some(result) = body.get("result") else {
        return ("(no result)".to_string(), false, None);
    };
    // `success` is the one good outcome; any other variant (`failure`,
    // `error`, `rejected`, `permissionDenied`, `timeout`…) is a failure.
    let variant = result.as_object().and_then(|o| {
        o.iter().find(|(k, v)| v.is_object() && !matches!(k.as_str(), "isBackground")).map(|(k, v)| (k.as_str(), v))
    });
    let (outcome, failed) = match (result.get("success"), variant) {
        (Some(s), _) => (s, false),
        (None, Some((k, v))) => {
            if !matches!(k, "failure" | "error") {
                // A variant with no output of its own (`rejected`): say which, and why when given.
                let has_output =
                    ["stdout", "stderr", "content", "message", "error"].iter().any(|f| v.get(*f).is_some());
                if !has_output {
                    let why = v.str_at("reason").filter(|r| !r.is_empty());
                    let text = match why {
                        Some(r) => format!("{k}: {r}"),
                        None => k.to_string(),
                    };
                    return (text, true, None);
                }
            }
            (v, true)
        }
        _ => (result, false),
    };
    let exit_code = outcome.i64_at("exitCode");
    if outcome.get("stdout").is_some() || outcome.get("stderr").is_some() {
        let out = outcome.str_at("stdout").unwrap_or("");
        let err = outcome.str_at("stderr").unwrap_or("");
        let text = match (out.is_empty(), err.is_empty()) {
            (_, true) => out.to_string(),
            (true, false) => err.to_string(),
            (false, false) => format!("{out}\n{err}"),
        };
        return (text, failed || exit_code.is_some_and(|c| c != 0), exit_code);
    }
    let text = ["content", "resultForModel", "message", "text", "error"]
        .iter()
        .find_map(|k| outcome.str_at(k).map(str::to_string))
        .or_else(|| outcome.get("content").and_then(Value::as_array).map(|parts| mcp_parts(parts)))
        .unwrap_or_else(|| value_text(outcome));
    (text, failed || outcome.bool_at("isError") == Some(true), exit_code)
}

/// MCP result content (`[{"text":{"text":…}}]` or `[{"type":"text","text":…}]`):
/// text parts joined, other parts as their JSON.
fn mcp_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .map(|p| {
            p.str_at("text")
                .or_else(|| p.get("text").and_then(|t| t.str_at("text")))
                .map(str::to_string)
                .unwrap_or_else(|| p.to_string())
        })
        .collect::<Vec<_>>()
        .join("\n")
}
