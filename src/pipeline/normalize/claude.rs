//! Claude Code `stream-json`, with or without `--include-partial-messages`.
//!
//! Kinds (see `spec/adapters.md`):
//!
//! | line | maps to |
//! |---|---|
//! | `system/init` | `turn_start` (and the session id) |
//! | `system/api_retry` | `error` (`api_retry`, not fatal) |
//! | `system/{hook_started,hook_progress,hook_response,status,thinking_tokens,task_*,compact_boundary,commands_changed}` | skipped |
//! | `stream_event` text/thinking deltas | `token_delta` |
//! | `stream_event` tool_use block | `tool_call` at its `content_block_stop` if no `assistant` line gave it first |
//! | `stream_event` `error` | `error` (`agent_error`, not fatal) |
//! | `assistant` | text / thinking / tool_use blocks not already streamed |
//! | `user` `tool_result` blocks | `tool_result` |
//! | `result` | `turn_end` (plus the final text, only if no assistant text held it) |
//! | `rate_limit_event`, `control_*`, `command_lifecycle`, `keep_alive` | skipped |
//! | `tool_progress`, `tool_use_summary`, `auth_status`, `prompt_suggestion`, `conversation_reset`, and the `system` notices in [`CUSTOM_SYSTEM`] | `custom` (`runwire.<kind>`) |
//! | `system/{mirror_error,session_writes_lost}` | `error` (`agent_warning`, not fatal) |
//!
//! Every member of the Agent SDK's `SDKMessage` union (0.3.328) is in
//! `spec/adapters.md` with its mapping.
//!
//! Partial messages send text twice (deltas, then the whole block on an
//! `assistant` line that shares the `message.id`): the k-th assistant line of
//! a streamed message is the final value of its k-th block, so only the part
//! not already streamed is emitted.

use super::ctx::{tool_call, tool_result, Ctx, STATUS_TYPE};
use super::fields::{Lenient, Scalar, Seen};
use crate::pipeline::events::{Channel, Data, Parent, Subagent, TokenDelta, TurnEnd, TurnStart};
use crate::util::lenient;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

mod content;
mod stream;
use content::{parse_usage, raw_value, result_text};

#[derive(Deserialize, Default)]
struct Line<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Scalar<'a>,
    #[serde(borrow, default)]
    subtype: Scalar<'a>,
    #[serde(borrow, default)]
    session_id: Scalar<'a>,
    #[serde(borrow, default)]
    timestamp: Scalar<'a>,
    #[serde(borrow, default)]
    parent_tool_use_id: Scalar<'a>,
    #[serde(borrow, default)]
    message: Lenient<Message<'a>>,
    #[serde(borrow, default)]
    event: Lenient<StreamEvent<'a>>,
    #[serde(borrow, default)]
    model: Scalar<'a>,
    #[serde(borrow, default)]
    cwd: Scalar<'a>,
    #[serde(borrow, default)]
    is_error: Scalar<'a>,
    #[serde(borrow, default)]
    duration_ms: Scalar<'a>,
    #[serde(borrow, default)]
    duration_api_ms: Scalar<'a>,
    #[serde(borrow, default)]
    num_turns: Scalar<'a>,
    #[serde(borrow, default)]
    result: Scalar<'a>,
    #[serde(borrow, default)]
    total_cost_usd: Scalar<'a>,
    #[serde(borrow, default)]
    cost_usd: Scalar<'a>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    terminal_reason: Scalar<'a>,
    #[serde(borrow, default)]
    errors: Option<&'a RawValue>,
    #[serde(borrow, default)]
    api_error_status: Scalar<'a>,
    #[serde(borrow, default)]
    attempt: Scalar<'a>,
    #[serde(borrow, default)]
    max_retries: Scalar<'a>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ok: Scalar<'a>,
    #[serde(borrow, default)]
    rc: Scalar<'a>,
    #[serde(borrow, default)]
    detail: Scalar<'a>,
    #[serde(borrow, default)]
    error_code: Scalar<'a>,
}

#[derive(Deserialize, Default)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Scalar<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Scalar<'a>,
    #[serde(borrow, default)]
    text: Scalar<'a>,
    #[serde(borrow, default)]
    thinking: Scalar<'a>,
    #[serde(borrow, default)]
    id: Scalar<'a>,
    #[serde(borrow, default)]
    name: Scalar<'a>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_use_id: Scalar<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    is_error: Scalar<'a>,
}

#[derive(Deserialize, Default)]
struct StreamEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Scalar<'a>,
    #[serde(borrow, default)]
    index: Scalar<'a>,
    #[serde(borrow, default)]
    message: Lenient<Message<'a>>,
    #[serde(borrow, default)]
    content_block: Lenient<Block<'a>>,
    #[serde(borrow, default)]
    delta: Lenient<Delta<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Scalar<'a>,
    #[serde(borrow, default)]
    text: Scalar<'a>,
    #[serde(borrow, default)]
    thinking: Scalar<'a>,
    #[serde(borrow, default)]
    partial_json: Scalar<'a>,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Kind {
    Text,
    Thinking,
    Tool,
    Other,
}

/// One content block of a message being streamed.
#[derive(Debug)]
struct SBlock {
    index: i64,
    kind: Kind,
    /// Text streamed so far (text and thinking).
    seen: Seen,
    /// The tool input JSON streamed so far, up to the line cap.
    input: String,
    /// Bytes of tool input streamed past the cap (not kept).
    input_over: usize,
    tool_id: String,
    tool_name: String,
    tool_emitted: bool,
}

/// A message whose `message_start` was seen and whose `message_stop` was not.
#[derive(Debug)]
struct Stream {
    id: String,
    parent: Option<String>,
    blocks: std::collections::VecDeque<SBlock>,
    /// Blocks forgotten from the front of `blocks` (a message of very many
    /// blocks keeps only the latest [`MAX_BLOCKS`]).
    dropped: usize,
    /// How many blocks the `assistant` lines for this id have delivered.
    assistant_seen: usize,
}

#[derive(Default)]
pub(crate) struct Claude {
    streams: Vec<Stream>,
    /// The final text of the main agent's latest text block, to tell whether
    /// `result.result` adds anything.
    last_text: Seen,
    /// The subagents the agent spawned (Task / Agent calls), newest last,
    /// at most [`MAX_SPAWNS`]: the identity a line's `parent_tool_use_id` names.
    spawns: Vec<Subagent>,
    /// The session's cost so far as its last `result` said it, and that
    /// session's id: Claude Code's `total_cost_usd` is a running total (of
    /// the process, and of an earlier process of a session it resumed and
    /// restored), so a turn's own cost is what it adds ([`turn_cost`]).
    cost_so_far: Option<(String, f64)>,
}

/// A turn's own cost from the session's running total `total` and the
/// total the session's last turn said (`so_far`). A total below the last
/// is a new count (a process that did not restore the session's cost):
/// the turn's cost is all of it. Rounded to 1e-10 USD, so that a
/// difference of two totals reads as the turn's figure, not as 0.00014000000000000001.
fn turn_cost(total: f64, so_far: Option<f64>) -> f64 {
    let cost = match so_far {
        Some(prev) if total >= prev => total - prev,
        _ => total,
    };
    (cost * 1e10).round() / 1e10
}

/// Spawning calls remembered (a real session has a handful; past this the
/// oldest is forgotten, and a late line of it is named by its call alone).
const MAX_SPAWNS: usize = 256;

/// The tool call id a line's subagent identity is keyed by.
fn key(p: &Parent) -> Option<&str> {
    p.as_deref().map(|s| s.tool_call.as_str())
}

fn text_event(text: &str, channel: Channel, message: &str, parent: &Parent) -> Option<Data> {
    (!text.is_empty()).then(|| {
        Data::TokenDelta(TokenDelta {
            text: text.to_string(),
            channel,
            message: message.to_string(),
            parent: parent.clone(),
        })
    })
}

/// The kinds skipped whole (control protocol, rate limits, hooks, progress),
/// recognised from the line's leading `"type"` (and `"subtype"`) without
/// parsing the rest: they are a third of a partial-messages log's bytes.
const SKIPPED: [&str; 6] = [
    "control_request",
    "control_response",
    "control_cancel_request",
    "command_lifecycle",
    "rate_limit_event",
    "keep_alive",
];
const SKIPPED_SYSTEM: [&str; 9] = [
    "hook_started",
    "hook_response",
    "status",
    "thinking_tokens",
    "task_started",
    "task_progress",
    "task_updated",
    "task_notification",
    "compact_boundary",
];

/// The content blocks of one streamed message remembered at most (a real
/// message has a handful; this bounds a hostile one).
const MAX_BLOCKS: usize = 1024;
/// Blocks whose text is kept whole (up to [`Seen::KEEP`]); later ones are
/// remembered by length and hash, so a message's memory stays bounded.
const KEPT_BLOCKS: usize = 16;

/// Kinds passed through as `custom` events (`runwire.<type>`): each carries
/// something a viewer wants and has no other event type.
const CUSTOM: [&str; 5] =
    ["tool_progress", "tool_use_summary", "auth_status", "prompt_suggestion", "conversation_reset"];
/// `system` subtypes passed through as `custom` events (`runwire.<subtype>`).
const CUSTOM_SYSTEM: [&str; 14] = [
    "notification",
    "files_persisted",
    "permission_denied",
    "informational",
    "model_refusal_fallback",
    "model_refusal_no_fallback",
    "local_command_output",
    "control_request_progress",
    "worker_shutting_down",
    "session_state_changed",
    "memory_recall",
    "elicitation_complete",
    "plugin_install",
    "background_tasks_changed",
];

/// A `custom` event carrying the line's own fields, less the envelope
/// (`type`, `subtype`, `uuid`, `session_id`) every line repeats; a
/// subagent's (`parent_tool_use_id`) is attributed to it.
fn custom(ctx: &mut Ctx, kind: &str, text: &str, parent: Parent) {
    let mut v = lenient::value(text).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        for k in ["type", "subtype", "uuid", "session_id"] {
            o.remove(k);
        }
    }
    ctx.custom_in(kind, v, parent);
}

/// True for a line of a skipped kind. Only the leading keys are read, so the
/// rest is not validated; a line cut short (no closing brace) is still
/// parsed in full and reported.
fn skippable(raw: &[u8]) -> bool {
    fn leading_str<'a>(b: &'a [u8], key: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
        let rest = b.strip_prefix(key)?;
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        (rest[end] == b'"').then(|| (&rest[..end], &rest[end + 1..]))
    }
    if raw.last() != Some(&b'}') {
        return false;
    }
    let Some((kind, rest)) = leading_str(raw, b"{\"type\":\"") else { return false };
    if SKIPPED.iter().any(|k| k.as_bytes() == kind) {
        return true;
    }
    match kind {
        b"system" => leading_str(rest, b",\"subtype\":\"")
            .is_some_and(|(sub, _)| SKIPPED_SYSTEM.iter().any(|k| k.as_bytes() == sub)),
        // Usage snapshots and pings change no state (cost and usage come from `result`).
        b"stream_event" => {
            leading_str(rest, b",\"event\":{\"type\":\"").is_some_and(|(ev, _)| ev == b"message_delta" || ev == b"ping")
        }
        _ => false,
    }
}

impl Claude {
    pub(crate) fn line(&mut self, ctx: &mut Ctx, raw: &[u8]) {
        // Until a session is known, a skipped `system` line (a hook) is read
        // for the session it names; after that, the fast path.
        if skippable(raw) && (ctx.resume.is_some() || !raw.starts_with(b"{\"type\":\"system\"")) {
            return;
        }
        let Some(text) = ctx.text(raw) else { return };
        let mut repaired = None;
        let (l, text): (Line, &str) = match lenient::from_str(text, &mut repaired) {
            Ok(parsed) => parsed,
            Err(e) => return ctx.unparsable(raw, e),
        };
        ctx.ts_ms = l.timestamp.as_str().and_then(crate::util::time::parse_rfc3339_ms);
        // Only a subagent's line pays for an identity: the main agent's have none.
        let parent = match l.parent_tool_use_id.as_str() {
            Some(call) if !call.is_empty() => Some(Box::new(self.identity(call))),
            _ => None,
        };
        let kind = match l.kind.as_str() {
            Some(k) => k,
            None => return ctx.invalid(raw, "no string \"type\""),
        };
        if kind != "system" {
            ctx.offer_session(l.session_id.as_str());
        } else if l.subtype.as_str() != Some("init") {
            ctx.offer_resume(l.session_id.as_str());
        }
        match kind {
            "system" => self.system(ctx, raw, &l, text),
            "stream_event" => match l.event.0 {
                Some(ev) => self.stream_event(ctx, raw, ev, parent),
                None => ctx.invalid(raw, "stream_event without an \"event\" object"),
            },
            "assistant" => match l.message.0 {
                Some(m) => self.assistant(ctx, raw, m, parent),
                None => ctx.invalid(raw, "assistant line without a \"message\" object"),
            },
            "user" => match l.message.0 {
                Some(m) => self.user(ctx, raw, m, parent),
                None => ctx.invalid(raw, "user line without a \"message\" object"),
            },
            "result" => self.result(ctx, &l),
            k if CUSTOM.contains(&k) => custom(ctx, k, text, parent),
            STATUS_TYPE => ctx.status_line(l.ok.as_bool(), l.rc.as_i64(), l.session_id.as_str(), l.detail.as_str()),
            "rate_limit_event"
            | "control_request"
            | "control_response"
            | "control_cancel_request"
            | "command_lifecycle"
            | "keep_alive" => {}
            other => ctx.unknown(raw, other),
        }
    }

    fn system(&mut self, ctx: &mut Ctx, raw: &[u8], l: &Line, text: &str) {
        match l.subtype.as_str().unwrap_or("") {
            "init" => {
                // init names the session authoritatively (a resumed or forked run may differ from earlier lines).
                if let Some(s) = l.session_id.as_str().filter(|s| !s.is_empty()) {
                    *ctx.session = Some(s.to_string());
                }
                ctx.announce_session(l.session_id.as_str());
                self.streams.clear();
                self.last_text = Seen::default();
                ctx.emit(Data::TurnStart(TurnStart {
                    model: l.model.as_str().map(str::to_string),
                    cwd: l.cwd.as_str().map(str::to_string),
                }));
            }
            "api_retry" => {
                let err = l.error.map(|e| e.get().trim_matches('"').to_string()).unwrap_or_default();
                let reason = match (l.attempt.as_i64(), l.max_retries.as_i64()) {
                    (Some(a), Some(m)) => format!("API request retried ({a}/{m}) {err}"),
                    _ => format!("API request retried {err}"),
                };
                ctx.error("api_retry", reason.trim_end(), raw, false);
            }
            k if SKIPPED_SYSTEM.contains(&k) || k == "hook_progress" || k == "commands_changed" => {}
            k @ ("mirror_error" | "session_writes_lost") => {
                let what = l.error.map(|e| e.get().trim_matches('"').to_string());
                let what = what.or_else(|| l.error_code.as_str().map(str::to_string)).unwrap_or_default();
                ctx.error("agent_warning", format!("{k} {what}").trim_end().to_string(), raw, false);
            }
            k if CUSTOM_SYSTEM.contains(&k) => custom(ctx, k, text, None),
            other => ctx.unknown(raw, &format!("system/{other}")),
        }
    }

    /// The subagent a `parent_tool_use_id` names: the spawning call's type
    /// and description when it was seen, else the call alone.
    fn identity(&self, call: &str) -> Subagent {
        self.spawns.iter().rev().find(|s| s.tool_call == call).cloned().unwrap_or_else(|| Subagent::of_call(call))
    }

    /// Remembers a call that spawns a subagent (`Task`, `Agent`, or any
    /// call naming a `subagent_type`): its lines will name it.
    fn note_spawn(&mut self, id: &str, name: &str, args: &Value, parent: &Parent) {
        let ty = args.get("subagent_type").and_then(Value::as_str).filter(|t| !t.is_empty());
        if ty.is_none() && name != "Task" && name != "Agent" {
            return;
        }
        if self.spawns.len() >= MAX_SPAWNS {
            self.spawns.remove(0);
        }
        self.spawns.push(Subagent {
            tool_call: id.to_string(),
            id: id.to_string(),
            name: ty.unwrap_or(if name.is_empty() { "subagent" } else { name }).to_string(),
            description: args.get("description").and_then(Value::as_str).map(str::to_string),
            parent_id: parent.as_deref().map(|p| p.id.clone()),
        });
    }

    fn stream_mut(&mut self, parent: &Parent) -> Option<&mut Stream> {
        // The newest open message of this agent (main or one subagent) receives the deltas.
        let k = key(parent);
        self.streams.iter_mut().rev().find(|s| s.parent.as_deref() == k)
    }

    fn assistant(&mut self, ctx: &mut Ctx, raw: &[u8], m: Message, parent: Parent) {
        let id = m.id.as_str().map(str::to_string).unwrap_or_else(|| ctx.line_id());
        let mut slot = None;
        let blocks: Vec<Block> = match m.content {
            Some(c) if c.get().starts_with('"') => {
                let text = lenient::value(c.get()).ok();
                let text = text.as_ref().and_then(Value::as_str).unwrap_or_default();
                return self.whole_text(ctx, text, Channel::Text, &id, &parent);
            }
            Some(c) => match lenient::from_str::<Vec<Lenient<Block>>>(c.get(), &mut slot) {
                Ok((b, _)) => b.into_iter().filter_map(|b| b.0).collect(),
                Err(e) => return ctx.invalid(raw, e),
            },
            None => Vec::new(),
        };
        let is_main = parent.is_none();
        let stream_pos = self.streams.iter().position(|s| s.id == id);
        for blk in blocks {
            let kind = blk.kind.as_str().unwrap_or("");
            let streamed = stream_pos.and_then(|p| {
                let s = &mut self.streams[p];
                let k = s.assistant_seen;
                s.assistant_seen += 1;
                match kind {
                    "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                        let tid = blk.id.as_str().unwrap_or("");
                        s.blocks.iter_mut().find(|b| b.kind == Kind::Tool && b.tool_id == tid)
                    }
                    _ => k.checked_sub(s.dropped).and_then(|i| s.blocks.get_mut(i)),
                }
            });
            match kind {
                "text" | "thinking" => {
                    let (channel, want, text) = if kind == "text" {
                        (Channel::Text, Kind::Text, blk.text.as_str().unwrap_or(""))
                    } else {
                        (Channel::Reasoning, Kind::Thinking, blk.thinking.as_str().unwrap_or(""))
                    };
                    match streamed.filter(|b| b.kind == want) {
                        Some(b) => {
                            let rest = b.seen.unseen_suffix(text);
                            if let Some(e) = text_event(rest, channel, &id, &parent) {
                                ctx.emit(e);
                            }
                            b.seen.push(rest);
                            if is_main && channel == Channel::Text {
                                self.last_text = b.seen.clone();
                            }
                        }
                        None => self.whole_text(ctx, text, channel, &id, &parent),
                    }
                }
                "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                    if blk.id.as_str().is_none_or(str::is_empty) {
                        ctx.missing_id(raw, kind);
                        continue;
                    }
                    if let Some(b) = &streamed {
                        if b.tool_emitted {
                            continue;
                        }
                    }
                    if let Some(b) = streamed {
                        b.tool_emitted = true;
                    }
                    let (tid, name) = (blk.id.as_str().unwrap_or(""), blk.name.as_str().unwrap_or(""));
                    let args = raw_value(blk.input);
                    self.note_spawn(tid, name, &args, &parent);
                    ctx.emit(tool_call(tid.to_string(), name.to_string(), args, Some(id.clone()), parent.clone()));
                }
                "redacted_thinking" | "image" | "document" => {}
                k if k.ends_with("_tool_result") => {
                    let Some(tid) = blk.tool_use_id.as_str().filter(|id| !id.is_empty()) else {
                        ctx.missing_id(raw, k);
                        continue;
                    };
                    let out = result_text(blk.content);
                    // A server tool's failure is a result block whose content is an `*_error` object.
                    let is_error = blk.is_error.as_bool().unwrap_or(false)
                        || blk.content.is_some_and(|c| c.get().contains("_tool_result_error\""));
                    ctx.emit(tool_result(tid.into(), &out, is_error, None, parent.clone()));
                }
                other => ctx.unknown(raw, &format!("assistant/{other}")),
            }
        }
    }

    /// Text that was never streamed: emitted whole.
    fn whole_text(&mut self, ctx: &mut Ctx, text: &str, channel: Channel, id: &str, parent: &Parent) {
        if parent.is_none() && channel == Channel::Text && !text.is_empty() {
            self.last_text = Seen::of(text);
        }
        if let Some(e) = text_event(text, channel, id, parent) {
            ctx.emit(e);
        }
    }

    fn user(&mut self, ctx: &mut Ctx, raw: &[u8], m: Message, parent: Parent) {
        // A plain string is a prompt (subagent or replayed input): not an agent event.
        let Some(c) = m.content.filter(|c| c.get().starts_with('[')) else { return };
        let mut slot = None;
        let blocks: Vec<Lenient<Block>> = match lenient::from_str(c.get(), &mut slot) {
            Ok((b, _)) => b,
            Err(e) => return ctx.invalid(raw, e),
        };
        for b in blocks.into_iter().filter_map(|b| b.0) {
            if b.kind.as_str() == Some("tool_result") {
                let Some(id) = b.tool_use_id.as_str().filter(|id| !id.is_empty()) else {
                    ctx.missing_id(raw, "tool_result");
                    continue;
                };
                let out = result_text(b.content);
                ctx.emit(tool_result(
                    id.to_string(),
                    &out,
                    b.is_error.as_bool().unwrap_or(false),
                    None,
                    parent.clone(),
                ));
            }
        }
    }

    /// The cost of the turn `l` ends ([`turn_cost`]), and the session's
    /// running total remembered for the next.
    fn turn_cost(&mut self, l: &Line) -> Option<f64> {
        let total = l.total_cost_usd.as_f64().or_else(|| l.cost_usd.as_f64()).filter(|c| *c >= 0.0 && c.is_finite())?;
        let session = l.session_id.as_str().unwrap_or_default();
        let so_far = self.cost_so_far.as_ref().filter(|(s, _)| s == session).map(|(_, t)| *t);
        self.cost_so_far = Some((session.to_string(), total));
        Some(turn_cost(total, so_far))
    }

    fn result(&mut self, ctx: &mut Ctx, l: &Line) {
        self.streams.clear();
        let subtype = l.subtype.as_str().unwrap_or("");
        let terminal = l.terminal_reason.as_str();
        // Neither subtype nor is_error alone tells failure (an API error arrives as subtype "success").
        let failed =
            l.is_error.as_bool() == Some(true) || subtype != "success" || terminal.is_some_and(|t| t != "completed");
        let text = l.result.as_str().unwrap_or("");
        if !failed && !text.is_empty() && !self.last_text.holds(text) {
            ctx.emit(Data::TokenDelta(TokenDelta {
                text: text.to_string(),
                channel: Channel::Text,
                message: ctx.line_id(),
                parent: None,
            }));
        }
        let reason = failed.then(|| {
            let errors: Vec<String> = l
                .errors
                .and_then(|e| lenient::value(e.get()).ok())
                .and_then(|v| if let Value::Array(a) = v { Some(a) } else { None })
                .unwrap_or_default()
                .iter()
                .map(super::ctx::value_text)
                .filter(|s| !s.is_empty())
                .collect();
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(text.to_string());
            }
            if !errors.is_empty() {
                parts.push(errors.join("; "));
            }
            if let Some(status) = l.api_error_status.as_i64() {
                parts.push(format!("API status {status}"));
            }
            let label = match terminal {
                Some(t) if t != "completed" => format!("{subtype}/{t}"),
                _ => subtype.to_string(),
            };
            parts.push(format!("({label})"));
            parts.join(" ")
        });
        self.last_text = Seen::default();
        ctx.emit(Data::TurnEnd(TurnEnd {
            ok: !failed,
            reason,
            cost_usd: self.turn_cost(l),
            usage: parse_usage(l.usage),
            duration_ms: l.duration_ms.as_u64(),
            duration_api_ms: l.duration_api_ms.as_u64(),
            num_turns: l.num_turns.as_u64(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::events::Data;
    use crate::pipeline::normalize::{Adapter, Normalizer, Options};

    /// Claude Code's `total_cost_usd` is the session's running total: a
    /// turn costs what it adds; a total below the last starts a new count
    /// (a process that did not restore it); another session is its own.
    #[test]
    fn a_turns_cost_is_what_it_adds_to_the_sessions_running_total() {
        let result = |session: &str, total: f64| {
            format!(
                r#"{{"type":"result","subtype":"success","is_error":false,"session_id":"{session}","total_cost_usd":{total},"usage":{{"input_tokens":1,"output_tokens":1}}}}"#
            )
        };
        let lines =
            [result("a", 0.00014), result("a", 0.00028), result("a", 0.0001), result("b", 0.5), result("a", 0.0003)];
        let mut n = Normalizer::new(Adapter::Claude, Options::default());
        let costs: Vec<f64> = lines
            .iter()
            .flat_map(|l| n.push(l.as_bytes()))
            .filter_map(|e| match e.data {
                Data::TurnEnd(t) => t.cost_usd,
                _ => None,
            })
            .collect();
        assert_eq!(costs, [0.00014, 0.00014, 0.0001, 0.5, 0.0003]);
    }
}
