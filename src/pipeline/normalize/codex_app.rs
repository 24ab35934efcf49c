//! `codex app-server`: the JSON-RPC 2.0 stream an interactive codex session
//! prints on stdout (notifications, the server's own requests, and the
//! responses to the client's requests), as the session tool logs it.
//!
//! | line | maps to |
//! |---|---|
//! | response with `result.thread.id` (`thread/start`, `thread/resume`, `thread/fork`) | the session id; no event |
//! | other responses | skipped |
//! | error response | `error` (`agent_error`, not fatal) |
//! | `thread/started` | the session id; no event (a subagent's thread, `parentThreadId`, never replaces it) |
//! | `turn/started` | `turn_start` |
//! | `item/agentMessage/delta`, `item/plan/delta` | `token_delta` (text) |
//! | `item/reasoning/summaryTextDelta`, `item/reasoning/textDelta` | `token_delta` (reasoning) |
//! | `item/completed` `agentMessage` / `plan` / `reasoning` | `token_delta`: what the deltas missed |
//! | `item/started` of a tool item | `tool_call` |
//! | `item/completed` of a tool item | `tool_result` (and `tool_call` if never started) |
//! | `item/*` `subAgentActivity` | `custom` `runwire.subagent` (a subagent started, acted, ended); its `started` also the `tool_call` `collab__spawnAgent` it names (the item's id is the `spawn_agent` call's), whose `tool_result` comes when the subagent's turn ends (its last message), it is `interrupted`, or the session's turn ends |
//! | `turn/completed` | `turn_end` (`interrupted` and `failed` are not ok; usage: this turn's share of the thread total) |
//! | anything of a subagent's thread | as above with `parent` = the item that started the subagent; its turns yield no turn events |
//! | `error` | `error` (`agent_error`, not fatal: codex retries, and a turn that gives up ends with `turn/completed`) |
//! | `warning`, `configWarning`, `guardianWarning`, `deprecationNotice` | `custom` `runwire.notice` (level `warning`) |
//! | a notification in no list here (a newer codex) | `custom` `runwire.notice` (level `info`): shown, never an error |
//! | server requests (approvals, `item/tool/call`, …) | skipped: the session answers them and logs a `runwire.request` line |
//! | `mcpServer/elicitation/request` runwire cannot represent | `custom` `runwire.notice` (level `warning`): why the session declined it |
//!
//! Everything else the protocol defines is skipped on purpose and listed in
//! [`SKIPPED`]. `spec/adapters.md` has the full table, checked against the
//! schema codex 0.169.0 generates (`fixtures/codex-schema/`).

use super::ctx::{tool_call, tool_result, value_text, Ctx, STATUS_TYPE};
use super::fields::ValueExt;
use crate::pipeline::events::{Channel, Data, Parent, Subagent, TokenDelta, TurnEnd, TurnStart, Usage};
use serde_json::{json, Value};

/// Notifications known and skipped on purpose (bookkeeping, account and
/// transport state, echoes of what the client sent, raw model items that the
/// `item/*` notifications already carry, output streams whose whole value
/// comes with `item/completed`).
pub(crate) const SKIPPED: &[&str] = &[
    "thread/status/changed",
    "thread/readState/changed",
    "thread/reverted",
    "thread/section/changed",
    "thread/attachment/updated",
    "thread/prediction/updated",
    "thread/queue/changed",
    "project/changed",
    "thread/project/updated",
    "thread/environment/connected",
    "thread/environment/disconnected",
    "thread/archived",
    "thread/unarchived",
    "thread/deleted",
    "thread/closed",
    "thread/name/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
    "thread/settings/updated",
    "thread/tokenUsage/updated",
    "thread/compacted",
    "thread/realtime/started",
    "thread/realtime/itemAdded",
    "thread/realtime/item/started",
    "thread/realtime/item/transcript/delta",
    "thread/realtime/item/completed",
    "thread/realtime/transcript/delta",
    "thread/realtime/transcript/done",
    "thread/realtime/outputAudio/delta",
    "thread/realtime/sdp",
    "thread/realtime/error",
    "thread/realtime/closed",
    "skills/changed",
    "hook/started",
    "hook/completed",
    "turn/diff/updated",
    "turn/plan/updated",
    "turn/moderationMetadata",
    "item/autoApprovalReview/started",
    "item/autoApprovalReview/completed",
    "autoApprovalReview/strictReviewRequired",
    "item/reasoning/summaryPartAdded",
    "item/commandExecution/outputDelta",
    "item/commandExecution/terminalInteraction",
    "item/fileChange/outputDelta",
    "item/fileChange/patchUpdated",
    "item/mcpToolCall/progress",
    "rawResponseItem/completed",
    "rawResponse/completed",
    "command/exec/outputDelta",
    "process/outputDelta",
    "process/exited",
    // The session closes the request it names (a `runwire.answer` line).
    "serverRequest/resolved",
    "mcpServer/oauthLogin/completed",
    "mcpServer/startupStatus/updated",
    "mcpServer/event/stream/notification",
    "account/updated",
    "account/gatewayOAuth/changed",
    "account/rateLimits/updated",
    "account/login/completed",
    "app/list/updated",
    "remoteControl/status/changed",
    "externalAgentConfig/import/progress",
    "externalAgentConfig/import/completed",
    "fs/changed",
    "model/rerouted",
    "model/verification",
    "modelProvider/authRecoveryStarted",
    "modelProvider/authRecoveryCompleted",
    "model/safetyBuffering/updated",
    "fuzzyFileSearch/sessionUpdated",
    "fuzzyFileSearch/sessionCompleted",
    "windows/worldWritableWarning",
    "windowsSandbox/setupCompleted",
];

/// Requests the server sends the client. The session answers them; the
/// ones a person decides are logged by the session as `runwire.request` /
/// `runwire.answer` lines, so the request line itself yields nothing.
pub(crate) const SERVER_REQUESTS: &[&str] = &[
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
    "item/tool/requestUserInput",
    "item/tool/call",
    "mcpServer/elicitation/request",
    "account/chatgptAuthTokens/refresh",
    "attestation/generate",
    "currentTime/read",
    "applyPatchApproval",
    "execCommandApproval",
];

/// Notifications a person should see but that are no errors: codex goes on.
pub(crate) const WARNINGS: &[&str] = &["warning", "configWarning", "guardianWarning", "deprecationNotice"];

/// Item types whose text is streamed by deltas (not tools).
const TEXT_ITEMS: &[&str] = &["agentMessage", "plan", "reasoning"];
/// Item types that are neither text nor tools: the prompt echo, hook
/// prompts, review-mode markers, context compaction.
const SKIPPED_ITEMS: &[&str] =
    &["userMessage", "hookPrompt", "enteredReviewMode", "exitedReviewMode", "contextCompaction"];

#[derive(Default)]
pub(crate) struct CodexApp {
    /// Tool item ids whose `tool_call` was emitted and whose result was not.
    open_tools: Vec<String>,
    /// Text streamed so far per item id.
    texts: Vec<(String, super::fields::Seen)>,
    /// The thread's cumulative usage as last reported, and as it stood when
    /// the current turn started: a turn's usage is the difference.
    total: Option<Usage>,
    turn_base: Option<Usage>,
    /// The last `error` message, the fallback reason of a failed turn.
    last_error: Option<String>,
    /// The session's own thread (the client's `thread/start` / `resume` /
    /// `fork`), and subagents' threads with the item that started each.
    main: Option<String>,
    subs: Vec<(String, Subagent)>,
    /// Spawns streamed as a `tool_call` (a `subAgentActivity` `started`
    /// names the `spawn_agent` call by its id) whose subagent has not
    /// finished: (call id, the subagent's thread, the thread it was spawned in).
    spawns: Vec<(String, String, Parent)>,
    /// Every spawn streamed so far (a later notice of it is no new call).
    spawned: Vec<String>,
}

fn usage_from(v: &Value) -> Option<Usage> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    Some(Usage {
        input_tokens: n("inputTokens")?,
        output_tokens: n("outputTokens").unwrap_or(0),
        cached_input_tokens: n("cachedInputTokens"),
        cache_write_input_tokens: n("cacheWriteInputTokens"),
        reasoning_tokens: n("reasoningOutputTokens"),
    })
}

fn usage_minus(a: &Usage, b: Option<&Usage>) -> Usage {
    let Some(b) = b else { return a.clone() };
    let sub = |x: Option<u64>, y: Option<u64>| x.map(|x| x.saturating_sub(y.unwrap_or(0)));
    Usage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cached_input_tokens: sub(a.cached_input_tokens, b.cached_input_tokens),
        cache_write_input_tokens: sub(a.cache_write_input_tokens, b.cache_write_input_tokens),
        reasoning_tokens: sub(a.reasoning_tokens, b.reasoning_tokens),
    }
}

impl CodexApp {
    pub(crate) fn line(&mut self, ctx: &mut Ctx, raw: &[u8]) {
        let Some(v) = ctx.value(raw) else { return };
        if let Some(ty) = v.str_at("type") {
            // Lines of runwire's own (the wrapper's status line, the session's
            // request / answer lines) share the log.
            return match ty {
                STATUS_TYPE => ctx.status_value(&v),
                other => ctx.unknown(raw, other),
            };
        }
        let Some(method) = v.str_at("method") else {
            return self.response(ctx, raw, &v);
        };
        if v.get("id").is_some_and(|id| !id.is_null()) {
            // A request of a newer codex: the session refused it at once.
            if !SERVER_REQUESTS.contains(&method) {
                notice(ctx, "info", method, None, None);
            }
            // An MCP elicitation runwire cannot put to a person: the session
            // declined it at once, and the log says why.
            if method == "mcpServer/elicitation/request" {
                let p = v.get("params").unwrap_or(&Value::Null);
                if let Some(why) = super::elicit::refusal(p) {
                    let server = p.str_at("serverName").unwrap_or("an MCP server");
                    let text = format!("declined {server}'s elicitation: {why}");
                    notice(ctx, "warning", method, Some(p), Some(&text));
                }
            }
            return;
        }
        let p = v.get("params").unwrap_or(&Value::Null);
        let parent = self.parent(p);
        match method {
            // A subagent's turn that ends is its work done: the call that
            // spawned it returns (the session's own turn goes on).
            "turn/completed" if parent.is_some() => {
                let t = p.str_at("threadId").unwrap_or("");
                self.spawn_done(ctx, Some(t), p.get("turn").unwrap_or(&Value::Null));
            }
            // A subagent's own turns are part of the session's turn.
            "turn/started" if parent.is_some() => {}
            "thread/started" if self.main.is_some() => {}
            // A subagent's thread can be announced before the session's own
            // (or without one): it never becomes the session.
            "thread/started" if p.pointer("/thread/parentThreadId").is_some_and(|t| !t.is_null()) => {}
            "thread/started" => self.thread(ctx, p.get("thread")),
            "turn/started" => {
                self.last_error = None;
                self.texts.clear();
                self.turn_base = self.total.clone();
                ctx.emit(Data::TurnStart(TurnStart::default()));
            }
            "turn/completed" => self.turn_completed(ctx, p.get("turn").unwrap_or(&Value::Null)),
            // A subagent's thread counts its own tokens (not added to the session's).
            "thread/tokenUsage/updated" if parent.is_some() => {}
            "thread/tokenUsage/updated" => {
                if let Some(u) = p.pointer("/tokenUsage/total").and_then(usage_from) {
                    self.total = Some(u);
                }
            }
            "item/agentMessage/delta" | "item/plan/delta" => self.delta(ctx, p, Channel::Text, parent),
            "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
                self.delta(ctx, p, Channel::Reasoning, parent)
            }
            "item/started" | "item/completed" => match p.get("item").filter(|i| i.is_object()) {
                Some(item) => {
                    self.note_subagent(item, &parent);
                    self.item(ctx, raw, method == "item/completed", item, parent)
                }
                None => ctx.invalid(raw, "item notification without \"item\""),
            },
            "error" => {
                let m = p
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .or_else(|| p.str_at("message"))
                    .unwrap_or("error")
                    .to_string();
                self.last_error = Some(m.clone());
                ctx.error("agent_error", m, raw, false);
            }
            m if WARNINGS.contains(&m) => {
                let text = p.str_at("message").or_else(|| p.str_at("summary")).unwrap_or(method);
                notice(ctx, "warning", method, Some(p), Some(text));
            }
            m if SKIPPED.contains(&m) => {}
            // Newer codex builds add notifications: shown, never an error.
            other => notice(ctx, "info", other, Some(p), None),
        }
    }

    fn thread(&mut self, ctx: &mut Ctx, thread: Option<&Value>) {
        if thread.and_then(|t| t.get("parentThreadId")).is_some_and(|t| !t.is_null()) {
            return;
        }
        // A resumed or forked thread names its own id: the latest one wins.
        if let Some(id) = thread.and_then(|t| t.str_at("id")).filter(|t| !t.is_empty()) {
            *ctx.session = Some(id.to_string());
            ctx.announce_session(Some(id));
            self.main = Some(id.to_string());
        }
    }

    /// The subagent whose thread a notification of another thread comes
    /// from: the item that started it, the thread as the invocation (or the
    /// thread alone when no item said so). `None` for the session's own thread.
    fn parent(&self, p: &Value) -> Parent {
        let t = p.str_at("threadId")?;
        if self.main.as_deref().is_none_or(|m| m == t) {
            return None;
        }
        Some(Box::new(
            self.subs.iter().find(|(th, _)| th == t).map_or_else(|| Subagent::of_call(t), |(_, s)| s.clone()),
        ))
    }

    /// Remembers the threads a subagent item starts, named by the agent's
    /// path (`/root/read_readme` → `read_readme`), else the item's tool;
    /// `within` is the subagent whose thread the item is in (nesting).
    fn note_subagent(&mut self, item: &Value, within: &Parent) {
        let id = item.str_at("id").unwrap_or("");
        let mut threads: Vec<&str> = item.str_at("agentThreadId").into_iter().collect();
        threads.extend(
            item.get("receiverThreadIds").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str),
        );
        for t in threads {
            if !self.subs.iter().any(|(th, _)| th == t) {
                let path = item.str_at("agentPath").filter(|p| !p.is_empty());
                let name = path
                    .map(|p| p.rsplit('/').find(|s| !s.is_empty()).unwrap_or(p))
                    .or_else(|| item.str_at("tool").filter(|t| !t.is_empty()))
                    .unwrap_or("subagent");
                let sub = Subagent {
                    tool_call: id.to_string(),
                    id: t.to_string(),
                    name: name.to_string(),
                    description: path.map(str::to_string),
                    parent_id: within.as_deref().map(|w| w.id.clone()),
                };
                super::fields::push_bounded(&mut self.subs, (t.to_string(), sub));
            }
        }
    }

    /// Streams the `spawn_agent` call a `subAgentActivity` `started` names,
    /// once (a codex that also sends it as a `collabAgentToolCall` item
    /// streamed it already).
    fn spawn(&mut self, ctx: &mut Ctx, id: &str, item: &Value, within: &Parent) {
        let Some(t) = item.str_at("agentThreadId") else { return };
        if id.is_empty() || self.spawned.iter().any(|s| s == id) || self.open_tools.iter().any(|s| s == id) {
            return;
        }
        super::fields::push_bounded(&mut self.spawned, id.to_string());
        super::fields::push_bounded(&mut self.spawns, (id.to_string(), t.to_string(), within.clone()));
        let args = json!({ "agent_path": item.get("agentPath"), "receiver_thread_ids": [t] });
        ctx.emit(tool_call(id.to_string(), "collab__spawnAgent".into(), args, None, within.clone()));
    }

    /// The spawns of subagent `thread` (or, with `None`, every one still
    /// open) return: with the subagent's last message, failed unless
    /// `turn.status` is `completed`.
    fn spawn_done(&mut self, ctx: &mut Ctx, thread: Option<&str>, turn: &Value) {
        let status = turn.str_at("status").unwrap_or("completed");
        let answer = turn
            .get("items")
            .and_then(Value::as_array)
            .and_then(|items| items.iter().rev().find(|i| i.str_at("type") == Some("agentMessage")))
            .and_then(|i| i.str_at("text"));
        let mut i = 0;
        while i < self.spawns.len() {
            if thread.is_some_and(|t| self.spawns[i].1 != t) {
                i += 1;
                continue;
            }
            let (id, _, within) = self.spawns.remove(i);
            let out = match (answer, status) {
                (Some(a), "completed") => a.to_string(),
                (_, s) => s.to_string(),
            };
            ctx.emit(tool_result(id, &out, status != "completed", None, within));
        }
    }

    /// A response to one of the client's requests.
    fn response(&mut self, ctx: &mut Ctx, raw: &[u8], v: &Value) {
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let m = err.str_at("message").map(str::to_string).unwrap_or_else(|| value_text(err));
            return ctx.error("agent_error", m, raw, false);
        }
        match v.get("result") {
            Some(r) if v.get("id").is_some() => self.thread(ctx, r.get("thread")),
            _ => ctx.invalid(raw, "neither a method nor a response"),
        }
    }

    fn turn_completed(&mut self, ctx: &mut Ctx, turn: &Value) {
        // Spawns still open end with the session's turn, at the latest.
        self.spawn_done(ctx, None, turn);
        self.texts.clear();
        let status = turn.str_at("status").unwrap_or("completed");
        let ok = status == "completed";
        let reason = (!ok).then(|| {
            turn.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| (status == "failed").then(|| self.last_error.clone()).flatten())
                .unwrap_or_else(|| status.to_string())
        });
        let usage = self.total.as_ref().map(|t| usage_minus(t, self.turn_base.as_ref()));
        self.turn_base = self.total.clone();
        ctx.emit(Data::TurnEnd(TurnEnd {
            ok,
            reason,
            usage,
            duration_ms: turn.u64_at("durationMs"),
            ..TurnEnd::default()
        }));
    }

    fn delta(&mut self, ctx: &mut Ctx, p: &Value, channel: Channel, parent: Parent) {
        let id = p.str_at("itemId").unwrap_or("").to_string();
        let d = p.str_at("delta").unwrap_or("");
        if d.is_empty() {
            return;
        }
        match self.texts.iter_mut().find(|(i, _)| *i == id) {
            Some((_, t)) => t.push(d),
            None => super::fields::push_bounded(&mut self.texts, (id.clone(), super::fields::Seen::of(d))),
        }
        ctx.emit(Data::TokenDelta(TokenDelta { text: d.to_string(), channel, message: id, parent }));
    }

    fn item(&mut self, ctx: &mut Ctx, raw: &[u8], done: bool, item: &Value, parent: Parent) {
        let id = item.str_at("id").unwrap_or("").to_string();
        let ty = item.str_at("type").unwrap_or("");
        if SKIPPED_ITEMS.contains(&ty) {
            return;
        }
        if ty == "subAgentActivity" {
            // Bookkeeping of a subagent (its thread's items carry the work):
            // a notice when it changes. Its `started` names the
            // `spawn_agent` call that started it (the item's id is that
            // call's): streamed as that call, so the subagent sits under
            // it (`parentToolCallId`); the call returns when the subagent's
            // turn ends (or it is interrupted, or the session's turn ends).
            // The notice is the subagent's own (its `started` opens it for
            // a viewer before its first event).
            let t = item.str_at("agentThreadId");
            match item.str_at("kind") {
                Some("started") => self.spawn(ctx, &id, item, &parent),
                Some("completed") if done => self.spawn_done(ctx, t, &json!({"status": "completed"})),
                Some("interrupted") if done => self.spawn_done(ctx, t, &json!({"status": "interrupted"})),
                _ => {}
            }
            if done {
                let mut v = item.clone();
                if let Some(o) = v.as_object_mut() {
                    o.remove("type");
                }
                let t = item.str_at("agentThreadId");
                let sub = t.and_then(|t| self.subs.iter().find(|(th, _)| th == t)).map(|(_, s)| Box::new(s.clone()));
                ctx.custom_in("subagent", v, sub.or(parent));
            }
            return;
        }
        if TEXT_ITEMS.contains(&ty) {
            if !done {
                return;
            }
            let (text, channel) = match ty {
                "reasoning" => (reasoning_text(item), Channel::Reasoning),
                _ => (item.str_at("text").unwrap_or("").to_string(), Channel::Text),
            };
            let streamed = self.texts.iter().position(|(i, _)| *i == id).map(|p| self.texts.swap_remove(p).1);
            let rest = streamed.unwrap_or_default().unseen_suffix(&text);
            if !rest.is_empty() {
                ctx.emit(Data::TokenDelta(TokenDelta { text: rest.to_string(), channel, message: id, parent }));
            }
            return;
        }
        if id.is_empty() {
            return ctx.invalid(raw, "item without an id");
        }
        let (name, args) = tool_name_args(ty, item);
        if !done {
            if !self.open_tools.contains(&id) {
                super::fields::push_bounded(&mut self.open_tools, id.clone());
                ctx.emit(tool_call(id, name, args, None, parent));
            }
            return;
        }
        match self.open_tools.iter().position(|t| *t == id) {
            Some(p) => {
                self.open_tools.swap_remove(p);
            }
            None => ctx.emit(tool_call(id.clone(), name, args, None, parent.clone())),
        }
        let (out, is_error, code) = tool_outcome(ty, item);
        ctx.emit(tool_result(id, &out, is_error, code, parent));
    }
}

/// A `custom` `runwire.notice`: something codex said that is not an
/// error (a warning, a deprecation, a notification of a newer build).
fn notice(ctx: &mut Ctx, level: &str, method: &str, params: Option<&Value>, text: Option<&str>) {
    let mut v = json!({ "level": level, "method": method });
    if let Some(t) = text {
        v["message"] = json!(t);
    }
    if let Some(p) = params.filter(|p| !p.is_null()) {
        // Redacted like tool arguments: a notice of an unknown kind may carry anything.
        let mut p = p.clone();
        super::redact::redact_json(&mut p);
        v["params"] = p;
    }
    ctx.custom("notice", v);
}

/// Reasoning summaries (or, when a provider sends it, the raw reasoning).
fn reasoning_text(item: &Value) -> String {
    let join = |k: &str| -> String {
        item.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n\n"))
            .unwrap_or_default()
    };
    let s = join("summary");
    if s.is_empty() {
        join("content")
    } else {
        s
    }
}

fn tool_name_args(ty: &str, item: &Value) -> (String, Value) {
    let field = |k: &str| item.get(k).cloned().unwrap_or(Value::Null);
    match ty {
        "commandExecution" => ("command_execution".into(), json!({ "command": field("command"), "cwd": field("cwd") })),
        "fileChange" => ("file_change".into(), json!({ "changes": field("changes") })),
        "mcpToolCall" => (
            format!(
                "mcp__{}__{}",
                item.str_at("server").unwrap_or("unknown"),
                item.str_at("tool").unwrap_or("unknown")
            ),
            item.get("arguments").cloned().unwrap_or_else(|| json!({})),
        ),
        "dynamicToolCall" => (
            item.str_at("tool").unwrap_or("dynamic_tool").to_string(),
            item.get("arguments").cloned().unwrap_or_else(|| json!({})),
        ),
        "webSearch" => ("web_search".into(), json!({ "query": field("query") })),
        "collabAgentToolCall" => (
            format!("collab__{}", item.str_at("tool").unwrap_or("unknown")),
            json!({ "prompt": field("prompt"), "receiver_thread_ids": field("receiverThreadIds") }),
        ),
        "imageView" => ("image_view".into(), json!({ "path": field("path") })),
        "imageGeneration" => ("image_generation".into(), json!({ "revised_prompt": field("revisedPrompt") })),
        "sleep" => ("sleep".into(), json!({ "duration_ms": field("durationMs") })),
        // The output of a function call codex made on its own (its name says which).
        "functionCallOutput" => (
            match item.str_at("namespace") {
                Some(ns) if !ns.is_empty() => format!("{ns}__{}", item.str_at("name").unwrap_or("function")),
                _ => item.str_at("name").unwrap_or("function").to_string(),
            },
            json!({}),
        ),
        _ => {
            // Other and future tool items:
            // everything but bookkeeping, so new codex builds still show up.
            let mut args = item.as_object().cloned().unwrap_or_default();
            for k in ["id", "type", "status"] {
                args.remove(k);
            }
            (ty.to_string(), Value::Object(args))
        }
    }
}

/// `(output, is_error, exit_code)` of a completed tool item.
fn tool_outcome(ty: &str, item: &Value) -> (String, bool, Option<i64>) {
    let status = item.str_at("status").unwrap_or("completed");
    let bad = matches!(status, "failed" | "declined" | "interrupted");
    match ty {
        "commandExecution" => {
            let code = item.i64_at("exitCode");
            let out = item.str_at("aggregatedOutput").unwrap_or("").to_string();
            // A declined or interrupted command has no exit code: not a success.
            (out, bad || code.is_some_and(|c| c != 0) || (code.is_none() && status != "completed"), code)
        }
        "fileChange" => {
            let paths: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let kind = c.pointer("/kind/type").and_then(Value::as_str).or_else(|| c.str_at("kind"));
                            format!("{} {}", kind.unwrap_or("update"), c.str_at("path").unwrap_or("?"))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (format!("{status}: {}", paths.join(", ")), bad, None)
        }
        "mcpToolCall" => match item.get("error").filter(|e| !e.is_null()) {
            Some(e) => (e.str_at("message").map(str::to_string).unwrap_or_else(|| value_text(e)), true, None),
            None => (item.pointer("/result/content").map(content_text).unwrap_or_default(), bad, None),
        },
        "dynamicToolCall" => (
            item.get("contentItems").map(content_text).unwrap_or_default(),
            bad || item.bool_at("success") == Some(false),
            None,
        ),
        "imageGeneration" => match item.get("failure").filter(|f| !f.is_null()) {
            Some(f) => (f.str_at("type").map(str::to_string).unwrap_or_else(|| value_text(f)), true, None),
            None => (item.str_at("savedPath").or_else(|| item.str_at("fileId")).unwrap_or("").to_string(), bad, None),
        },
        "functionCallOutput" => (item.get("output").map(content_text).unwrap_or_default(), bad, None),
        "webSearch" => {
            let n = item.get("results").and_then(Value::as_array).map_or(0, Vec::len);
            (format!("{n} results"), bad, None)
        }
        _ => (String::new(), bad, None),
    }
}

/// Text of a content list (`[{type:"text"|"inputText", text}]`); other
/// blocks as compact JSON.
fn content_text(v: &Value) -> String {
    match v.as_array() {
        Some(items) => items
            .iter()
            .map(|b| b.str_at("text").map(str::to_string).unwrap_or_else(|| value_text(b)))
            .collect::<Vec<_>>()
            .join("\n"),
        None => value_text(v),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::events::{Data, Event};
    use crate::pipeline::normalize::{Adapter, Normalizer, Options};
    use crate::util::time::Clock;
    use serde_json::json;

    fn normalizer() -> Normalizer {
        Normalizer::new(Adapter::Codex, Options { clock: Clock::Fixed(0), ..Options::default() })
    }

    #[test]
    fn a_subagents_thread_announced_first_never_becomes_the_session() {
        let mut n = normalizer();
        n.push(br#"{"method":"thread/started","params":{"thread":{"id":"sub","parentThreadId":"th"}}}"#);
        assert_eq!(n.session(), None);
        n.push(br#"{"id":2,"result":{"thread":{"id":"th"}}}"#);
        n.push(br#"{"method":"thread/started","params":{"thread":{"id":"sub2","parentThreadId":"th"}}}"#);
        assert_eq!(n.session(), Some("th"));
        // The subagent's text is its own (parented), not the session's.
        let ev =
            n.push(br#"{"method":"item/agentMessage/delta","params":{"threadId":"sub","itemId":"m","delta":"x"}}"#);
        let Data::TokenDelta(d) = &ev[0].data else { panic!("{ev:?}") };
        let p = d.parent.as_deref().expect("a subagent's text has a parent");
        // No item said what started it: the thread is both the call and the invocation.
        assert_eq!((p.tool_call.as_str(), p.id.as_str(), p.name.as_str()), ("sub", "sub", "subagent"));
    }

    #[test]
    fn a_deprecation_notice_is_a_warning_notice_with_its_text_and_params() {
        let mut n = normalizer();
        let ev = n.push(br#"{"method":"deprecationNotice","params":{"summary":"full history is deprecated","details":"use excludeTurns"}}"#);
        let [e] = &ev[..] else { panic!("{ev:?}") };
        let Data::Custom(c) = &e.data else { panic!("{e:?}") };
        assert_eq!(c.name, "runwire.notice");
        assert_eq!(
            c.value,
            json!({"level": "warning", "method": "deprecationNotice", "message": "full history is deprecated",
                   "params": {"summary": "full history is deprecated", "details": "use excludeTurns"}})
        );
    }

    /// An elicitation runwire asks a person yields nothing here (the
    /// session logs it as a request); one it declined at once says why.
    #[test]
    fn an_elicitation_runwire_cannot_ask_is_a_warning_saying_why() {
        let mut n = normalizer();
        let url = br#"{"method":"mcpServer/elicitation/request","id":3,"params":{"threadId":"th","serverName":"docs","mode":"url","message":"Log in","url":"https://x.test","elicitationId":"e1"}}"#;
        assert!(n.push(url).is_empty());
        let verify = br#"{"method":"mcpServer/elicitation/request","id":4,"params":{"threadId":"th","serverName":"bank","mode":"openai/userVerification","title":"t","description":"d","challenge":"c"}}"#;
        let ev = n.push(verify);
        let [e] = &ev[..] else { panic!("{ev:?}") };
        let Data::Custom(c) = &e.data else { panic!("{e:?}") };
        assert_eq!((c.name.as_str(), c.value["level"].as_str()), ("runwire.notice", Some("warning")));
        let m = c.value["message"].as_str().unwrap();
        assert!(m.starts_with("declined bank's elicitation: a device verification"), "{m}");
    }

    #[test]
    fn subagent_activity_is_a_notice_and_its_thread_is_parented_to_it() {
        let mut n = normalizer();
        n.push(br#"{"id":2,"result":{"thread":{"id":"th"}}}"#);
        let item =
            r#"{"type":"subAgentActivity","id":"s1","kind":"started","agentPath":"/root/a","agentThreadId":"sub"}"#;
        // Its start is the spawn_agent call it names (the item's id), the session's own call.
        let ev = n.push(format!(r#"{{"method":"item/started","params":{{"item":{item}}}}}"#).as_bytes());
        let [Event { data: Data::ToolCall(call), .. }] = &ev[..] else { panic!("{ev:?}") };
        assert_eq!((call.id.as_str(), call.name.as_str(), call.parent.is_none()), ("s1", "collab__spawnAgent", true));
        let ev = n.push(format!(r#"{{"method":"item/completed","params":{{"item":{item}}}}}"#).as_bytes());
        // The notice is the subagent's own: it names the invocation it is about.
        let [e] = &ev[..] else { panic!("{ev:?}") };
        let Data::Custom(c) = &e.data else { panic!("{ev:?}") };
        assert_eq!((c.name.as_str(), c.value["agentThreadId"].as_str()), ("runwire.subagent", Some("sub")));
        assert_eq!(c.parent.as_deref().map(|p| p.id.as_str()), Some("sub"));
        let ev =
            n.push(br#"{"method":"item/agentMessage/delta","params":{"threadId":"sub","itemId":"m","delta":"x"}}"#);
        let Data::TokenDelta(d) = &ev[0].data else { panic!("{ev:?}") };
        let p = d.parent.as_deref().expect("parented");
        assert_eq!(
            (p.tool_call.as_str(), p.id.as_str(), p.name.as_str(), p.description.as_deref(), p.parent_id.as_deref()),
            ("s1", "sub", "a", Some("/root/a"), None)
        );
        // A subagent it spawns is nested in it.
        let inner =
            r#"{"type":"subAgentActivity","id":"s2","kind":"started","agentPath":"/root/a/b","agentThreadId":"sub2"}"#;
        n.push(format!(r#"{{"method":"item/started","params":{{"threadId":"sub","item":{inner}}}}}"#).as_bytes());
        let ev =
            n.push(br#"{"method":"item/agentMessage/delta","params":{"threadId":"sub2","itemId":"m2","delta":"y"}}"#);
        let Data::TokenDelta(d) = &ev[0].data else { panic!("{ev:?}") };
        let p = d.parent.as_deref().expect("parented");
        assert_eq!((p.name.as_str(), p.id.as_str(), p.parent_id.as_deref()), ("b", "sub2", Some("sub")));
        // The inner subagent's turn ends: its spawn (a call of the outer one) returns its answer.
        let done = br#"{"method":"turn/completed","params":{"threadId":"sub2","turn":{"id":"t","status":"completed","items":[{"type":"agentMessage","id":"m2","text":"y"}]}}}"#;
        let ev = n.push(done);
        let [Event { data: Data::ToolResult(r), .. }] = &ev[..] else { panic!("{ev:?}") };
        assert_eq!((r.id.as_str(), r.output.as_str(), r.is_error), ("s2", "y", false));
        assert_eq!(r.parent.as_deref().map(|p| p.id.as_str()), Some("sub"));
        // The session's turn ends: the outer spawn, still open, returns (as failed, the turn was).
        let ev = n.push(
            br#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t0","status":"interrupted"}}}"#,
        );
        let Data::ToolResult(r) = &ev[0].data else { panic!("{ev:?}") };
        assert_eq!((r.id.as_str(), r.output.as_str(), r.is_error), ("s1", "interrupted", true));
        assert!(matches!(ev[1].data, Data::TurnEnd(_)), "{ev:?}");
    }

    #[test]
    fn an_image_generation_that_failed_is_a_failed_tool() {
        let mut n = normalizer();
        let ev = n.push(br#"{"method":"item/completed","params":{"item":{"type":"imageGeneration","id":"g1","status":"failed","failure":{"type":"usageLimitExceeded","limitId":"l"}}}}"#);
        assert!(matches!(&ev[0].data, Data::ToolCall(c) if c.name == "image_generation"), "{ev:?}");
        assert!(matches!(&ev[1].data, Data::ToolResult(r) if r.is_error), "{ev:?}");
    }
}
