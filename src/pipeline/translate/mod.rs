//! Stage 2: `events/v1` → AG-UI 1.0 events.
//!
//! [`Translator`] is a state object with no IO: feed it events with
//! [`Translator::push`], then call [`Translator::finish`] at end of input. Its
//! output always satisfies the official client's sequence rules (one
//! `RUN_STARTED` first, exactly one terminal event last, every START closed
//! before `RUN_FINISHED`, no `null` anywhere), whatever the input order, so a
//! killed agent's truncated log still yields a well-formed, failed run.

use crate::pipeline::events::{
    Channel, Data, ErrorData, Event, Exit, Subagent, ToolCall, ToolResult, TurnEnd, TurnStart,
};
use crate::util::bounded::Bounded;
use crate::util::hash::fnv1a64;
use std::collections::HashMap;

/// The protocol line declared in `RUN_STARTED` (not the crate version).
pub const PROTOCOL_VERSION: &str = "1.0";

/// `RUN_ERROR.message` when the input ends before the run reached an outcome.
pub const INCOMPLETE_MESSAGE: &str = "the agent's stream ended before the run finished";

mod subagents;
use subagents::{first_line, OpenSub, Slots, SubEnd};

/// Bytes of tool call ids each of the translator's memories of calls holds
/// at most (five of them: the filter stays under its 32 MB).
pub const TOOL_MEMORY: usize = 4 * 1024 * 1024;
mod wire;
pub use wire::*;

/// The outcome of a `turn_end`.
#[derive(Debug, Clone, PartialEq)]
enum TurnOutcome {
    Ok,
    /// With the agent's reason, when it gave one.
    Failed(Option<String>),
}

/// The AG-UI translator: see the module doc and `man/agui-translate.1`.
#[derive(Debug)]
pub struct Translator {
    opts: TranslateOptions,
    /// `(threadId, runId)`, fixed by the first event (or at finish).
    ids: Option<(String, String)>,
    terminated: bool,
    ignored: u64,
    last_ts: Option<i64>,
    /// The main agent's open text and reasoning.
    main: Slots,
    /// The memories of tool calls below are bounded ([`TOOL_MEMORY`] bytes
    /// each, the oldest calls forgotten first): a run of many calls, or of
    /// calls with huge ids, keeps the filter's memory bounded. A call
    /// forgotten is named as it was (its id is made from the agent's), but
    /// a restatement of it would be streamed again.
    tools_started: Bounded<()>,
    /// Agent tool id -> AG-UI toolCallId, for calls started in this run or
    /// adopted from an earlier run of the thread ([`Translator::adopt_tool_calls`]).
    tool_ids: Bounded<String>,
    /// AG-UI toolCallId -> the `parentMessageId` it was started with (a
    /// subagent it spawns names that message).
    tool_msgs: Bounded<String>,
    /// AG-UI toolCallId -> `subagentRunId`, for calls a subagent made (its
    /// results and the interrupts about it are the subagent's too).
    tool_owner: Bounded<String>,
    results_seen: Bounded<u32>,
    /// Subagents open, in the order they started (an enclosing one first).
    subs: Vec<OpenSub>,
    /// Invocation id -> (times it ended in this run, its latest `subagentRunId`):
    /// one that acts again after it ended (a background subagent) is a new
    /// invocation `<id>:<n>`, as AG-UI never reuses a `subagentRunId`.
    subs_ended: HashMap<String, (u32, String)>,
    /// The most recent `turn_end`'s outcome.
    last_turn_end: Option<TurnOutcome>,
    /// A turn started after the most recent `turn_end` (or with none before):
    /// if the input stops now, the run was cut off.
    turn_in_progress: bool,
    usage: Option<TokenUsage>,
}

impl Translator {
    pub fn new(opts: TranslateOptions) -> Translator {
        Translator {
            opts,
            ids: None,
            terminated: false,
            ignored: 0,
            last_ts: None,
            main: Slots::default(),
            tools_started: Bounded::new(TOOL_MEMORY),
            tool_ids: Bounded::new(TOOL_MEMORY),
            tool_msgs: Bounded::new(TOOL_MEMORY),
            tool_owner: Bounded::new(TOOL_MEMORY),
            results_seen: Bounded::new(TOOL_MEMORY),
            subs: Vec::new(),
            subs_ended: HashMap::new(),
            last_turn_end: None,
            turn_in_progress: false,
            usage: None,
        }
    }

    /// Input events that arrived after the terminal event and were dropped.
    pub fn ignored_after_terminal(&self) -> u64 {
        self.ignored
    }

    /// True once `RUN_FINISHED` or `RUN_ERROR` has been emitted.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// `(threadId, runId)` once known (after the first event or `finish`).
    pub fn ids(&self) -> Option<(&str, &str)> {
        self.ids.as_ref().map(|(t, r)| (t.as_str(), r.as_str()))
    }

    /// Tool calls an earlier run of the same thread streamed (agent id ->
    /// AG-UI toolCallId): their results in this run name the original
    /// toolCallId, and the calls are not emitted again (an interrupted run
    /// resumed in a new run, as AG-UI's interrupt pattern asks).
    pub fn adopt_tool_calls<'a>(&mut self, calls: impl IntoIterator<Item = (&'a String, &'a String)>) {
        for (raw, id) in calls {
            self.tools_started.insert(id.clone(), ());
            self.tool_ids.insert(raw.clone(), id.clone());
        }
    }

    /// Agent tool id -> AG-UI toolCallId of the calls this run streamed or
    /// adopted (the most recent, within the translator's bound).
    pub fn tool_calls(&self) -> &Bounded<String> {
        &self.tool_ids
    }

    /// The `subagentRunId` of the subagent that made a call (AG-UI toolCallId), if one did.
    pub fn tool_call_subagent(&self, tool_call_id: &str) -> Option<&str> {
        self.tool_owner.get(tool_call_id).map(String::as_str)
    }

    /// Emits `RUN_STARTED` now if nothing has been emitted yet (a run whose
    /// first output is not from the agent).
    pub fn begin(&mut self, ts: Option<i64>) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        if self.ids.is_none() && !self.terminated {
            self.last_ts = ts.or(self.last_ts);
            self.start(None, ts, &mut out);
        }
        out
    }

    /// A `runwire.*` `CUSTOM` event of the caller's own (after `RUN_STARTED`).
    pub fn custom(&mut self, name: &'static str, value: serde_json::Value, ts: Option<i64>) -> Vec<AguiEvent> {
        if self.terminated {
            return Vec::new();
        }
        let mut out = self.begin(ts);
        out.push(AguiEvent::Custom { name, value: CustomValue::Json(value), subagent_run_id: None, timestamp: ts });
        out
    }

    /// Ends the run now with `outcome` (closing what is open), whatever the
    /// turn state: the caller knows why the run stops. An interrupt about a
    /// call a subagent made is that subagent's (`subagentRunId`), and the
    /// subagent ends `suspended` with the ids of its interrupts; every other
    /// open subagent is suspended too (the whole agent waits), or, for a
    /// cancelled run, ends with `SUBAGENT_ERROR`.
    pub fn end_with(&mut self, outcome: RunOutcome, ts: Option<i64>) -> Vec<AguiEvent> {
        if self.terminated {
            return Vec::new();
        }
        let ts = ts.or(self.last_ts);
        let mut out = self.begin(ts);
        self.close_open(ts, &mut out);
        let outcome = match outcome {
            RunOutcome::Interrupt { mut interrupts } => {
                let mut waits: Vec<(String, Vec<String>)> = Vec::new();
                for i in interrupts.iter_mut().filter_map(serde_json::Value::as_object_mut) {
                    let owner = i
                        .get("toolCallId")
                        .and_then(serde_json::Value::as_str)
                        .and_then(|t| self.tool_owner.get(t))
                        .cloned();
                    let Some(owner) = owner else { continue };
                    if !i.contains_key("subagentRunId") {
                        i.insert("subagentRunId".into(), owner.clone().into());
                    }
                    let id = i.get("id").and_then(serde_json::Value::as_str).map(str::to_string);
                    match waits.iter_mut().find(|(o, _)| *o == owner) {
                        Some((_, ids)) => ids.extend(id),
                        None => waits.push((owner, id.into_iter().collect())),
                    }
                }
                while let Some(i) = self.subs.len().checked_sub(1) {
                    self.close_agent(Some(i), ts, &mut out);
                    let s = self.subs.remove(i);
                    let ids = waits.iter().find(|(o, _)| *o == s.run_id).map(|(_, ids)| ids.clone());
                    let interrupt_ids = ids.filter(|i| !i.is_empty());
                    self.ended(&s.raw, &s.run_id);
                    out.push(AguiEvent::SubagentFinished {
                        subagent_run_id: s.run_id,
                        outcome: Some(SubagentOutcome::Suspended { interrupt_ids }),
                        timestamp: ts,
                    });
                }
                RunOutcome::Interrupt { interrupts }
            }
            RunOutcome::Cancelled => {
                self.end_subs(None, SubEnd::Error("the run was cancelled", "cancelled"), ts, &mut out);
                RunOutcome::Cancelled
            }
        };
        let (thread_id, run_id) = self.ids.clone().unwrap_or_default();
        let end = AguiEvent::RunFinished {
            thread_id,
            run_id,
            usage: self.usage.clone().map(|u| vec![u]),
            outcome: Some(outcome),
            timestamp: ts,
        };
        self.terminate(end, &mut out);
        out
    }

    /// Ends the run now as a success (the caller saw its work complete).
    pub fn end_with_success(&mut self, ts: Option<i64>) -> Vec<AguiEvent> {
        if self.terminated {
            return Vec::new();
        }
        let ts = ts.or(self.last_ts);
        let mut out = self.begin(ts);
        self.close_open(ts, &mut out);
        let end = self.finished(ts);
        self.terminate(end, &mut out);
        out
    }

    /// Ends the run now with `RUN_ERROR` (`message`, `code`).
    pub fn end_with_error(&mut self, message: String, code: &'static str, ts: Option<i64>) -> Vec<AguiEvent> {
        if self.terminated {
            return Vec::new();
        }
        let ts = ts.or(self.last_ts);
        let mut out = self.begin(ts);
        self.close_open(ts, &mut out);
        let end = self.run_error(message, code, ts);
        self.terminate(end, &mut out);
        out
    }

    /// Translates one input event.
    pub fn push(&mut self, ev: &Event) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        if self.terminated {
            self.ignored += 1;
            return out;
        }
        let ts = Some(ev.ts_ms);
        self.last_ts = ts;
        if self.ids.is_none() {
            self.start(Some(ev), ts, &mut out);
        }
        match &ev.data {
            Data::TokenDelta(d) => {
                if d.text.is_empty() {
                    // Nothing to show; opening or closing anything for it
                    // would only add noise.
                    return out;
                }
                let who = d.parent.as_deref().map(|p| self.enter(p, ts, &mut out));
                self.delta(who, &d.message, d.channel, &d.text, ts, &mut out);
            }
            Data::ToolCall(c) => {
                let who = c.parent.as_deref().map(|p| self.enter(p, ts, &mut out));
                self.close_agent(who, ts, &mut out);
                self.tool_call(who, c, ts, &mut out);
            }
            Data::ToolResult(r) => {
                let who = r.parent.as_deref().map(|p| self.enter(p, ts, &mut out));
                self.close_agent(who, ts, &mut out);
                // The spawning call's result: its subagents are done.
                self.end_subs(
                    Some(&r.id),
                    if r.is_error { SubEnd::Error(&r.output, "tool_error") } else { SubEnd::Success },
                    ts,
                    &mut out,
                );
                // Its own subagent may have ended just now (indexes moved): found again.
                let who = who.and(r.parent.as_deref()).and_then(|p| self.subs.iter().position(|s| s.raw == p.id));
                self.tool_result(who, r, ts, &mut out);
            }
            Data::TurnStart(t) => {
                self.close_open(ts, &mut out);
                // A turn that began while subagents of the last one were open: they were cut off.
                self.end_subs(
                    None,
                    SubEnd::Error("a new turn began before the subagent finished", "cut_off"),
                    ts,
                    &mut out,
                );
                self.turn_start(t, ts, &mut out);
            }
            Data::TurnEnd(t) => {
                self.close_open(ts, &mut out);
                // A subagent ends with the turn that spawned it, at the latest.
                let end = match &t.reason {
                    _ if t.ok => SubEnd::Success,
                    Some(r) => SubEnd::Error(r, "turn_failed"),
                    None => SubEnd::Error("the agent's turn failed", "turn_failed"),
                };
                self.end_subs(None, end, ts, &mut out);
                self.turn_end(t, ts, &mut out);
            }
            Data::Error(e) => {
                self.close_open(ts, &mut out);
                self.error(e, ts, &mut out);
            }
            Data::Exit(x) => {
                self.close_open(ts, &mut out);
                self.exit(x, ts, &mut out);
            }
            // A side note (progress, a retry): it closes nothing, so text
            // streamed around it stays one message.
            Data::Custom(c) => {
                let sub = c.parent.as_deref().map(|p| self.enter(p, ts, &mut out)).map(|i| self.subs[i].run_id.clone());
                out.push(AguiEvent::Passthrough {
                    name: c.name.clone(),
                    value: wire_value(&c.value),
                    subagent_run_id: sub,
                    timestamp: ts,
                })
            }
            Data::InputRequest(r) => {
                self.close_open(ts, &mut out);
                let sub = self.owner_of_raw(r.tool_call_id.as_deref());
                let value = CustomValue::InputRequest(r.clone());
                out.push(AguiEvent::Custom {
                    name: "runwire.input_request",
                    value,
                    subagent_run_id: sub,
                    timestamp: ts,
                });
            }
            Data::InputAnswer(a) => {
                self.close_open(ts, &mut out);
                let value = CustomValue::InputAnswer(a.clone());
                out.push(AguiEvent::Custom {
                    name: "runwire.input_answer",
                    value,
                    subagent_run_id: None,
                    timestamp: ts,
                });
            }
        }
        out
    }

    /// Ends the stream: closes what is open and emits the terminal event if
    /// none was emitted yet (`RUN_STARTED` first for an empty input).
    pub fn finish(&mut self) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        if self.terminated {
            return out;
        }
        let ts = self.last_ts;
        if self.ids.is_none() {
            self.start(None, ts, &mut out);
        }
        self.close_open(ts, &mut out);
        let end = match (self.last_turn_end.clone(), self.turn_in_progress) {
            (Some(TurnOutcome::Ok), false) => self.finished(ts),
            (Some(TurnOutcome::Failed(reason)), false) => self.failed_turn(reason, ts),
            // No outcome at all: a killed agent's log (or an empty one). The
            // client would take a stream without a terminal as success.
            _ => self.run_error(INCOMPLETE_MESSAGE.to_string(), "incomplete", ts),
        };
        self.terminate(end, &mut out);
        out
    }

    fn start(&mut self, first: Option<&Event>, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let hash = format!("{:016x}", fnv1a64(first.map(Event::to_json).unwrap_or_default().as_bytes()));
        let run_id = self.opts.run_id.clone().unwrap_or_else(|| format!("run-{hash}"));
        let thread_id = self
            .opts
            .thread_id
            .clone()
            .or_else(|| first.and_then(|e| e.run.clone()))
            .unwrap_or_else(|| format!("thread-{hash}"));
        out.push(AguiEvent::RunStarted {
            thread_id: thread_id.clone(),
            run_id: run_id.clone(),
            protocol_version: PROTOCOL_VERSION,
            timestamp: ts,
        });
        self.ids = Some((thread_id, run_id));
    }

    /// `<runId>:<kind>:<id>`: repeated runs in one thread never share an id.
    fn ns(&self, kind: &str, id: &str) -> String {
        let run = self.ids.as_ref().map(|(_, r)| r.as_str()).unwrap_or_default();
        format!("{run}:{kind}:{id}")
    }

    fn slots(&mut self, who: Option<usize>) -> &mut Slots {
        match who {
            None => &mut self.main,
            Some(i) => &mut self.subs[i].slots,
        }
    }

    fn sub_id(&self, who: Option<usize>) -> Option<String> {
        who.map(|i| self.subs[i].run_id.clone())
    }

    /// A message's AG-UI id: `<runId>:<kind>:<message>` for the main agent,
    /// `<runId>:<kind>:<subagent>/<message>` for a subagent's, so a message
    /// id two agents use stays two messages (AG-UI gives a message one owner).
    fn msg_id(&self, kind: &str, who: Option<usize>, message: &str) -> String {
        match who {
            None => self.ns(kind, message),
            Some(i) => self.ns(kind, &format!("{}/{message}", self.subs[i].key)),
        }
    }

    fn delta(
        &mut self,
        who: Option<usize>,
        message: &str,
        channel: Channel,
        text: &str,
        ts: Option<i64>,
        out: &mut Vec<AguiEvent>,
    ) {
        let sub = self.sub_id(who);
        match channel {
            Channel::Text => {
                self.close_reasoning(who, ts, out);
                let id = self.msg_id("m", who, message);
                if self.slots(who).text.as_deref() != Some(id.as_str()) {
                    self.close_text(who, ts, out);
                    out.push(AguiEvent::TextMessageStart {
                        message_id: id.clone(),
                        role: "assistant",
                        subagent_run_id: sub.clone(),
                        timestamp: ts,
                    });
                    let slots = self.slots(who);
                    slots.text = Some(id.clone());
                    slots.turn_text = Some(id.clone());
                }
                out.push(AguiEvent::TextMessageContent {
                    message_id: id,
                    delta: text.to_string(),
                    subagent_run_id: sub,
                    timestamp: ts,
                });
            }
            Channel::Reasoning => {
                self.close_text(who, ts, out);
                let id = self.msg_id("r", who, message);
                if self.slots(who).reasoning.as_deref() != Some(id.as_str()) {
                    self.close_reasoning(who, ts, out);
                    out.push(AguiEvent::ReasoningStart {
                        message_id: id.clone(),
                        subagent_run_id: sub.clone(),
                        timestamp: ts,
                    });
                    out.push(AguiEvent::ReasoningMessageStart {
                        message_id: id.clone(),
                        role: "reasoning",
                        subagent_run_id: sub.clone(),
                        timestamp: ts,
                    });
                    self.slots(who).reasoning = Some(id.clone());
                }
                out.push(AguiEvent::ReasoningMessageContent {
                    message_id: id,
                    delta: text.to_string(),
                    subagent_run_id: sub,
                    timestamp: ts,
                });
            }
        }
    }

    fn close_text(&mut self, who: Option<usize>, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let sub = self.sub_id(who);
        if let Some(id) = self.slots(who).text.take() {
            out.push(AguiEvent::TextMessageEnd { message_id: id, subagent_run_id: sub, timestamp: ts });
        }
    }

    fn close_reasoning(&mut self, who: Option<usize>, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let sub = self.sub_id(who);
        if let Some(id) = self.slots(who).reasoning.take() {
            out.push(AguiEvent::ReasoningMessageEnd {
                message_id: id.clone(),
                subagent_run_id: sub.clone(),
                timestamp: ts,
            });
            out.push(AguiEvent::ReasoningEnd { message_id: id, subagent_run_id: sub, timestamp: ts });
        }
    }

    /// What one agent has open (a tool call of its own ends its text).
    fn close_agent(&mut self, who: Option<usize>, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        self.close_text(who, ts, out);
        self.close_reasoning(who, ts, out);
    }

    /// Tool calls are emitted START/ARGS/END at once, so only text and
    /// reasoning can be open between events: every agent's is closed.
    fn close_open(&mut self, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        self.close_agent(None, ts, out);
        for i in 0..self.subs.len() {
            self.close_agent(Some(i), ts, out);
        }
    }

    fn tool_call(&mut self, who: Option<usize>, c: &ToolCall, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let id = self.tool_ids.get(&c.id).cloned().unwrap_or_else(|| self.ns("t", &c.id));
        self.tool_ids.insert(c.id.clone(), id.clone());
        if self.tools_started.insert(id.clone(), ()).is_some() {
            // Some agents restate a call (e.g. once streamed, once final):
            // a second START for the same id would only duplicate the card.
            return;
        }
        // A subagent's call defaults to its own text, never the main agent's
        // (a call belongs to the message that carries it).
        let parent = match &c.message {
            Some(m) => Some(self.msg_id("m", who, m)),
            None => self.slots(who).turn_text.clone(),
        };
        if let Some(p) = &parent {
            self.tool_msgs.insert(id.clone(), p.clone());
        }
        let sub = self.sub_id(who);
        if let Some(s) = &sub {
            self.tool_owner.insert(id.clone(), s.clone());
        }
        let args = serde_json::to_string(&c.args).unwrap_or_else(|_| "{}".to_string());
        out.push(AguiEvent::ToolCallStart {
            tool_call_id: id.clone(),
            tool_call_name: c.name.clone(),
            parent_message_id: parent,
            subagent_run_id: sub.clone(),
            timestamp: ts,
        });
        out.push(AguiEvent::ToolCallArgs {
            tool_call_id: id.clone(),
            delta: args,
            subagent_run_id: sub.clone(),
            timestamp: ts,
        });
        out.push(AguiEvent::ToolCallEnd { tool_call_id: id, subagent_run_id: sub, timestamp: ts });
    }

    fn tool_result(&mut self, who: Option<usize>, r: &ToolResult, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let call = self.tool_ids.get(&r.id).cloned().unwrap_or_else(|| self.ns("t", &r.id));
        let n = self.results_seen.get(&r.id).copied().unwrap_or(0) + 1;
        self.results_seen.insert(r.id.clone(), n);
        let mut message_id = self.ns("tr", &r.id);
        if n > 1 {
            // Result message ids must stay unique (the client's reducer does
            // not de-duplicate them).
            message_id = format!("{message_id}:{n}");
        }
        // The result of a subagent's call is the subagent's, even when the
        // event names none (a result restated later), while it is open.
        let sub = self.sub_id(who).or_else(|| {
            let owner = self.tool_owner.get(&call)?;
            self.subs.iter().any(|s| &s.run_id == owner).then(|| owner.clone())
        });
        out.push(AguiEvent::ToolCallResult {
            message_id,
            tool_call_id: call.clone(),
            content: r.output.clone(),
            role: "tool",
            subagent_run_id: sub.clone(),
            timestamp: ts,
        });
        let value = CustomValue::ToolResult(ToolResultValue {
            tool_call_id: call,
            is_error: r.is_error,
            truncated: r.truncated,
            bytes: r.bytes,
            exit_code: r.exit_code,
        });
        out.push(AguiEvent::Custom { name: "runwire.tool_result", value, subagent_run_id: sub, timestamp: ts });
    }

    fn turn_start(&mut self, t: &TurnStart, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        self.main.turn_text = None;
        self.turn_in_progress = true;
        let value = CustomValue::TurnStart(TurnStartValue { model: t.model.clone(), cwd: t.cwd.clone() });
        out.push(AguiEvent::Custom { name: "runwire.turn_start", value, subagent_run_id: None, timestamp: ts });
    }

    fn turn_end(&mut self, t: &TurnEnd, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        self.main.turn_text = None;
        self.turn_in_progress = false;
        self.last_turn_end = Some(if t.ok { TurnOutcome::Ok } else { TurnOutcome::Failed(t.reason.clone()) });
        let usage = t.usage.as_ref().map(TokenUsage::from_usage);
        if let Some(u) = &usage {
            self.usage.get_or_insert_with(TokenUsage::default).add(u);
        }
        let value = CustomValue::TurnEnd(TurnEndValue {
            ok: t.ok,
            reason: t.reason.clone(),
            cost_usd: t.cost_usd.filter(|c| c.is_finite()),
            usage,
            duration_ms: t.duration_ms,
            num_turns: t.num_turns,
        });
        out.push(AguiEvent::Custom { name: "runwire.turn_end", value, subagent_run_id: None, timestamp: ts });
    }

    fn error(&mut self, e: &ErrorData, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        if e.fatal {
            let end = self.run_error(e.reason.clone(), "agent_error", ts);
            self.terminate(end, out);
        } else {
            let value =
                CustomValue::Error(ErrorValue { reason: e.reason.clone(), code: e.code.clone(), raw: e.raw.clone() });
            out.push(AguiEvent::Custom { name: "runwire.error", value, subagent_run_id: None, timestamp: ts });
        }
    }

    fn exit(&mut self, x: &Exit, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        let end = if x.rc != 0 {
            let message = match &x.detail {
                Some(d) => format!("the agent exited with status {}: {d}", x.rc),
                None => format!("the agent exited with status {}", x.rc),
            };
            self.run_error(message, "exit_nonzero", ts)
        } else if let Some(TurnOutcome::Failed(reason)) = self.last_turn_end.clone() {
            self.failed_turn(reason, ts)
        } else {
            self.finished(ts)
        };
        self.terminate(end, out);
    }

    fn finished(&self, ts: Option<i64>) -> AguiEvent {
        let (thread_id, run_id) = self.ids.clone().unwrap_or_default();
        AguiEvent::RunFinished {
            thread_id,
            run_id,
            usage: self.usage.clone().map(|u| vec![u]),
            outcome: None,
            timestamp: ts,
        }
    }

    fn failed_turn(&self, reason: Option<String>, ts: Option<i64>) -> AguiEvent {
        let message = reason.unwrap_or_else(|| "the agent's last turn failed".to_string());
        self.run_error(message, "turn_failed", ts)
    }

    fn run_error(&self, message: String, code: &'static str, ts: Option<i64>) -> AguiEvent {
        AguiEvent::RunError { message, code, usage: self.usage.clone().map(|u| vec![u]), timestamp: ts }
    }

    /// The one way a run ends: no subagent is left open (a run that ends
    /// well ends them well; one that fails, or was cut off, fails them with
    /// its own message).
    fn terminate(&mut self, end: AguiEvent, out: &mut Vec<AguiEvent>) {
        if !self.subs.is_empty() {
            let ts = self.last_ts;
            self.close_open(ts, out);
            match &end {
                AguiEvent::RunError { message, code, .. } => {
                    let message = format!("the run ended before the subagent finished: {message}");
                    self.end_subs(None, SubEnd::Error(&message, code), ts, out);
                }
                _ => self.end_subs(None, SubEnd::Success, ts, out),
            }
        }
        out.push(end);
        self.terminated = true;
    }
}

/// The translator's subagents: an AG-UI 1.0 subagent per events/v1
/// invocation (`parent`), opened with `SUBAGENT_STARTED` before its first
/// event and ended (`SUBAGENT_FINISHED` / `SUBAGENT_ERROR`) when its
/// spawning call returns, its turn ends, or the run stops.
impl Translator {
    /// The open subagent an event of `p` belongs to (its index in
    /// `subs`), opened now with `SUBAGENT_STARTED` if it is not: named as
    /// the event names it, under the call that spawned it and that call's
    /// message, inside the subagent that made that call (or the one
    /// `parent_id` names).
    fn enter(&mut self, p: &Subagent, ts: Option<i64>, out: &mut Vec<AguiEvent>) -> usize {
        if let Some(i) = self.subs.iter().position(|s| s.raw == p.id) {
            return i;
        }
        let key = match self.subs_ended.get(&p.id) {
            Some((n, _)) => format!("{}:{}", p.id, n + 1),
            None => p.id.clone(),
        };
        let run_id = self.ns("sa", &key);
        let call = self.tool_ids.get(&p.tool_call).filter(|c| self.tools_started.contains_key(c)).cloned();
        let outer_of = |raw: &str| {
            self.subs
                .iter()
                .find(|s| s.raw == raw)
                .map(|s| s.run_id.clone())
                .or_else(|| self.subs_ended.get(raw).map(|(_, r)| r.clone()))
        };
        let outer = match &p.parent_id {
            Some(o) => outer_of(o),
            None => call.as_ref().and_then(|c| self.tool_owner.get(c)).cloned(),
        };
        out.push(AguiEvent::SubagentStarted {
            subagent_run_id: run_id.clone(),
            name: p.name.clone(),
            description: p.description.clone(),
            parent_subagent_run_id: outer.clone(),
            parent_message_id: call.as_ref().and_then(|c| self.tool_msgs.get(c)).cloned(),
            parent_tool_call_id: call,
            timestamp: ts,
        });
        self.subs.push(OpenSub {
            raw: p.id.clone(),
            run_id,
            call: p.tool_call.clone(),
            outer,
            key,
            slots: Slots::default(),
        });
        self.subs.len() - 1
    }

    /// Records that an invocation ended (a later event of it opens a new one).
    fn ended(&mut self, raw: &str, run_id: &str) {
        let e = self.subs_ended.entry(raw.to_string()).or_insert((0, String::new()));
        e.0 += 1;
        e.1 = run_id.to_string();
    }

    /// Ends open subagents: those `call` spawned (and the ones inside
    /// them), or, with `None`, every one; the innermost first, each with
    /// its open text closed.
    fn end_subs(&mut self, call: Option<&str>, how: SubEnd, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        if self.subs.is_empty() {
            return;
        }
        let mut doomed: Vec<String> = Vec::new();
        for s in &self.subs {
            let hit = match call {
                None => true,
                Some(c) => s.call == c || s.outer.as_ref().is_some_and(|o| doomed.contains(o)),
            };
            if hit {
                doomed.push(s.run_id.clone());
            }
        }
        while let Some(run_id) = doomed.pop() {
            let Some(i) = self.subs.iter().position(|s| s.run_id == run_id) else { continue };
            self.close_agent(Some(i), ts, out);
            let s = self.subs.remove(i);
            self.ended(&s.raw, &s.run_id);
            out.push(match how {
                SubEnd::Success => AguiEvent::SubagentFinished {
                    subagent_run_id: s.run_id,
                    outcome: Some(SubagentOutcome::Success),
                    timestamp: ts,
                },
                SubEnd::Error(message, code) => AguiEvent::SubagentError {
                    subagent_run_id: s.run_id,
                    message: first_line(message, "the subagent failed"),
                    code: code.to_string(),
                    timestamp: ts,
                },
            });
        }
    }

    /// The `subagentRunId` of the subagent that made an agent's tool call.
    fn owner_of_raw(&self, call: Option<&str>) -> Option<String> {
        let id = self.tool_ids.get(call?)?;
        self.tool_owner.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::events::{Seq, Subagent, TokenDelta, Usage};

    fn ev(seq: u64, data: Data) -> Event {
        Event { run: None, task: None, session: None, seq: Seq { line: seq, sub: 0 }, ts_ms: 1000 + seq as i64, data }
    }

    fn delta(seq: u64, msg: &str, channel: Channel, text: &str) -> Event {
        ev(seq, Data::TokenDelta(TokenDelta { text: text.into(), channel, message: msg.into(), parent: None }))
    }

    fn types(out: &[AguiEvent]) -> Vec<String> {
        out.iter().map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string()).collect()
    }

    fn opts() -> TranslateOptions {
        TranslateOptions { thread_id: Some("T".into()), run_id: Some("R".into()) }
    }

    #[test]
    fn a_typed_frame_is_what_the_encoder_makes_of_its_json() {
        let mut enc = crate::pipeline::encode::Encoder::new(crate::pipeline::encode::SseOptions::default());
        let e = AguiEvent::TextMessageContent {
            message_id: "m".into(),
            delta: "a\r\nb \"q\" \u{2028}".into(),
            subagent_run_id: None,
            timestamp: None,
        };
        assert_eq!(Some(e.to_frame()), enc.push(e.to_json().as_bytes()).unwrap());
        assert!(!e.to_frame().trim_end_matches("\n\n").contains(['\r', '\n']));
    }

    #[test]
    fn serializes_camel_case_without_nulls() {
        let e = AguiEvent::ToolCallStart {
            tool_call_id: "t".into(),
            tool_call_name: "Bash".into(),
            parent_message_id: None,
            subagent_run_id: None,
            timestamp: Some(5),
        };
        assert_eq!(e.to_json(), r#"{"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"Bash","timestamp":5}"#);
        let e = AguiEvent::RunStarted {
            thread_id: "a".into(),
            run_id: "b".into(),
            protocol_version: PROTOCOL_VERSION,
            timestamp: None,
        };
        assert_eq!(e.to_json(), r#"{"type":"RUN_STARTED","threadId":"a","runId":"b","protocolVersion":"1.0"}"#);
    }

    #[test]
    fn default_ids_derive_from_the_first_event() {
        let first = delta(1, "m", Channel::Text, "hi");
        let hash = format!("{:016x}", fnv1a64(first.to_json().as_bytes()));
        let mut t = Translator::new(TranslateOptions::default());
        let out = t.push(&first);
        assert_eq!(
            out[0],
            AguiEvent::RunStarted {
                thread_id: format!("thread-{hash}"),
                run_id: format!("run-{hash}"),
                protocol_version: "1.0",
                timestamp: Some(1001)
            }
        );
        let mut with_run = first.clone();
        with_run.run = Some("job-7".into());
        let mut t = Translator::new(TranslateOptions { run_id: Some("R".into()), ..Default::default() });
        assert_eq!(t.ids(), None);
        t.push(&with_run);
        assert_eq!(t.ids(), Some(("job-7", "R")));
    }

    #[test]
    fn text_closes_before_tool_and_tool_names_its_parent() {
        let mut t = Translator::new(opts());
        let mut out = t.push(&delta(1, "m1", Channel::Text, "a"));
        out.extend(t.push(&delta(2, "m1", Channel::Text, "b")));
        out.extend(t.push(&ev(
            3,
            Data::ToolCall(ToolCall {
                id: "c1".into(),
                name: "Bash".into(),
                args: serde_json::json!({"cmd": "ls"}),
                message: None,
                parent: None,
            }),
        )));
        assert_eq!(
            types(&out),
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END"
            ]
        );
        assert_eq!(
            out[5],
            AguiEvent::ToolCallStart {
                tool_call_id: "R:t:c1".into(),
                tool_call_name: "Bash".into(),
                parent_message_id: Some("R:m:m1".into()),
                subagent_run_id: None,
                timestamp: Some(1003)
            }
        );
        assert_eq!(
            out[6],
            AguiEvent::ToolCallArgs {
                tool_call_id: "R:t:c1".into(),
                delta: r#"{"cmd":"ls"}"#.into(),
                subagent_run_id: None,
                timestamp: Some(1003)
            }
        );
    }

    #[test]
    fn repeated_results_get_suffixed_message_ids() {
        let mut t = Translator::new(opts());
        let res = |seq| {
            ev(
                seq,
                Data::ToolResult(ToolResult {
                    id: "c1".into(),
                    output: "ok".into(),
                    is_error: false,
                    truncated: false,
                    bytes: 2,
                    exit_code: None,
                    parent: None,
                }),
            )
        };
        let a = t.push(&res(1));
        let b = t.push(&res(2));
        let c = t.push(&res(3));
        let mid = |o: &[AguiEvent]| match o.iter().find(|e| matches!(e, AguiEvent::ToolCallResult { .. })) {
            Some(AguiEvent::ToolCallResult { message_id, .. }) => message_id.clone(),
            _ => panic!("no result"),
        };
        assert_eq!(mid(&a), "R:tr:c1");
        assert_eq!(mid(&b), "R:tr:c1:2");
        assert_eq!(mid(&c), "R:tr:c1:3");
        assert_eq!(
            a.last().unwrap().to_json(),
            r#"{"type":"CUSTOM","name":"runwire.tool_result","value":{"toolCallId":"R:t:c1","isError":false,"truncated":false,"bytes":2},"timestamp":1001}"#
        );
    }

    #[test]
    fn reasoning_is_a_balanced_span() {
        let mut t = Translator::new(opts());
        let mut out = t.push(&delta(1, "m1", Channel::Reasoning, "think"));
        out.extend(t.push(&delta(2, "m1", Channel::Text, "say")));
        out.extend(t.finish());
        assert_eq!(
            types(&out),
            [
                "RUN_STARTED",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_ERROR"
            ]
        );
        assert_eq!(
            out.last().unwrap().to_json(),
            r#"{"type":"RUN_ERROR","message":"the agent's stream ended before the run finished","code":"incomplete","timestamp":1002}"#
        );
    }

    #[test]
    fn empty_input_is_an_incomplete_run() {
        let mut t = Translator::new(TranslateOptions::default());
        let out = t.finish();
        assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
        assert_eq!(
            out[0].to_json(),
            r#"{"type":"RUN_STARTED","threadId":"thread-cbf29ce484222325","runId":"run-cbf29ce484222325","protocolVersion":"1.0"}"#
        );
        assert!(t.finish().is_empty());
    }

    #[test]
    fn outcome_follows_exit_then_last_turn() {
        let turn_end = |seq, ok: bool| {
            ev(seq, Data::TurnEnd(TurnEnd { ok, reason: (!ok).then(|| "boom".to_string()), ..Default::default() }))
        };
        let exit = |seq, rc| ev(seq, Data::Exit(Exit { rc, ok: rc == 0, detail: None }));
        let last = |evs: Vec<Event>| {
            let mut t = Translator::new(opts());
            let mut out: Vec<AguiEvent> = evs.iter().flat_map(|e| t.push(e)).collect();
            out.extend(t.finish());
            out.last().unwrap().to_json()
        };
        assert_eq!(
            last(vec![turn_end(1, true), exit(2, 0)]),
            r#"{"type":"RUN_FINISHED","threadId":"T","runId":"R","timestamp":1002}"#
        );
        assert_eq!(
            last(vec![turn_end(1, true), exit(2, 1)]),
            r#"{"type":"RUN_ERROR","message":"the agent exited with status 1","code":"exit_nonzero","timestamp":1002}"#
        );
        assert_eq!(
            last(vec![turn_end(1, false), exit(2, 0)]),
            r#"{"type":"RUN_ERROR","message":"boom","code":"turn_failed","timestamp":1002}"#
        );
        assert_eq!(
            last(vec![turn_end(1, true)]),
            r#"{"type":"RUN_FINISHED","threadId":"T","runId":"R","timestamp":1001}"#
        );
        let restarted = || vec![turn_end(1, false), ev(2, Data::TurnStart(TurnStart::default()))];
        assert!(last(restarted()).contains(r#""code":"incomplete""#));
        // An exit still judges by the last turn_end, even with a turn cut off after it.
        let exited = restarted().into_iter().chain([exit(3, 0)]).collect();
        assert!(last(exited).contains(r#""code":"turn_failed""#));
    }

    #[test]
    fn usage_accumulates_over_turns() {
        let mut t = Translator::new(opts());
        let u = |i, o| Usage { input_tokens: i, output_tokens: o, reasoning_tokens: Some(1), ..Default::default() };
        t.push(&ev(1, Data::TurnEnd(TurnEnd { ok: true, usage: Some(u(10, 2)), ..Default::default() })));
        t.push(&ev(2, Data::TurnEnd(TurnEnd { ok: true, usage: Some(u(5, 3)), ..Default::default() })));
        let out = t.push(&ev(3, Data::Exit(Exit { rc: 0, ok: true, detail: None })));
        assert_eq!(
            out.last().unwrap().to_json(),
            r#"{"type":"RUN_FINISHED","threadId":"T","runId":"R","usage":[{"inputTokens":15,"outputTokens":5,"reasoningTokens":2,"totalTokens":20}],"timestamp":1003}"#
        );
    }

    #[test]
    fn custom_events_pass_through_without_closing_the_open_message() {
        let mut t = Translator::new(opts());
        let custom = crate::pipeline::events::Custom {
            name: "runwire.tool_progress".into(),
            value: serde_json::json!({"tool_use_id": "t1", "elapsed_time_seconds": 2.5, "parent_tool_use_id": null, "x-y": [1, null]}),
            parent: None,
        };
        let mut out = t.push(&delta(1, "m", Channel::Text, "a"));
        out.extend(t.push(&ev(2, Data::Custom(custom))));
        out.extend(t.push(&delta(3, "m", Channel::Text, "b")));
        assert_eq!(
            types(&out),
            ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "CUSTOM", "TEXT_MESSAGE_CONTENT"]
        );
        assert_eq!(
            out[3].to_json(),
            r#"{"type":"CUSTOM","name":"runwire.tool_progress","value":{"elapsedTimeSeconds":2.5,"toolUseId":"t1","xY":[1]},"timestamp":1002}"#
        );
    }

    #[test]
    fn nothing_follows_the_terminal_event() {
        let mut t = Translator::new(opts());
        let fatal = ErrorData { reason: "dead".into(), code: "agent_error".into(), raw: String::new(), fatal: true };
        t.push(&delta(1, "m", Channel::Text, "x"));
        let out = t.push(&ev(2, Data::Error(fatal)));
        assert_eq!(types(&out), ["TEXT_MESSAGE_END", "RUN_ERROR"]);
        assert!(t.push(&delta(3, "m", Channel::Text, "y")).is_empty());
        assert!(t.push(&ev(4, Data::Exit(Exit { rc: 0, ok: true, detail: None }))).is_empty());
        assert!(t.finish().is_empty());
        assert_eq!(t.ignored_after_terminal(), 2);
    }
    fn sub(call: &str, id: &str) -> Option<Box<Subagent>> {
        Some(Box::new(Subagent {
            tool_call: call.into(),
            id: id.into(),
            name: "Explore".into(),
            description: None,
            parent_id: None,
        }))
    }

    fn call(seq: u64, id: &str, parent: Option<Box<Subagent>>) -> Event {
        ev(
            seq,
            Data::ToolCall(ToolCall {
                id: id.into(),
                name: "Bash".into(),
                args: serde_json::json!({}),
                message: None,
                parent,
            }),
        )
    }

    fn result(seq: u64, id: &str, is_error: bool, output: &str, parent: Option<Box<Subagent>>) -> Event {
        ev(
            seq,
            Data::ToolResult(ToolResult {
                id: id.into(),
                output: output.into(),
                is_error,
                truncated: false,
                bytes: output.len() as u64,
                exit_code: None,
                parent,
            }),
        )
    }

    fn json(out: &[AguiEvent]) -> Vec<serde_json::Value> {
        out.iter().map(|e| serde_json::to_value(e).unwrap()).collect()
    }

    #[test]
    fn a_run_that_stops_on_a_subagents_interrupt_suspends_it_with_the_interrupt_ids() {
        let mut t = Translator::new(opts());
        let mut out = t.push(&call(1, "task1", None));
        out.extend(t.push(&call(2, "b1", sub("task1", "task1"))));
        out.extend(t.push(&call(3, "task2", None)));
        out.extend(t.push(&delta(4, "m9", Channel::Text, "other")));
        out.extend(t.push(&ev(
            5,
            Data::TokenDelta(TokenDelta {
                text: "x".into(),
                channel: Channel::Text,
                message: "m".into(),
                parent: sub("task2", "task2"),
            }),
        )));
        assert_eq!(t.tool_call_subagent("R:t:b1"), Some("R:sa:task1"));
        let interrupts = vec![
            serde_json::json!({"id": "rw-1", "reason": "tool_call", "toolCallId": "R:t:b1"}),
            serde_json::json!({"id": "rw-2", "reason": "input_required"}),
        ];
        out.extend(t.end_with(RunOutcome::Interrupt { interrupts }, Some(9)));
        let j = json(&out);
        crate_verify(&j);
        let fin: Vec<&serde_json::Value> = j.iter().filter(|e| e["type"] == "SUBAGENT_FINISHED").collect();
        assert_eq!(fin.len(), 2);
        let of = |s: &str| fin.iter().find(|e| e["subagentRunId"] == s).unwrap()["outcome"].clone();
        assert_eq!(of("R:sa:task1"), serde_json::json!({"type": "suspended", "interruptIds": ["rw-1"]}));
        // Suspended too (the whole agent waits), with no interrupt of its own.
        assert_eq!(of("R:sa:task2"), serde_json::json!({"type": "suspended"}));
        let end = j.last().unwrap();
        assert_eq!(end["outcome"]["interrupts"][0]["subagentRunId"], "R:sa:task1");
        assert!(end["outcome"]["interrupts"][1].get("subagentRunId").is_none());
    }

    #[test]
    fn a_failed_spawning_call_is_a_subagent_error_and_a_late_event_a_new_invocation() {
        let mut t = Translator::new(opts());
        let mut out = t.push(&call(1, "task1", None));
        out.extend(t.push(&call(2, "b1", sub("task1", "task1"))));
        out.extend(t.push(&result(3, "task1", true, "\nAgent crashed: out of memory\nmore", None)));
        // A background subagent that acts after its call returned.
        out.extend(t.push(&result(4, "b1", false, "ok", sub("task1", "task1"))));
        out.extend(t.push(&ev(5, Data::TurnEnd(TurnEnd { ok: true, ..Default::default() }))));
        out.extend(t.finish());
        let j = json(&out);
        crate_verify(&j);
        let err = j.iter().find(|e| e["type"] == "SUBAGENT_ERROR").unwrap();
        assert_eq!(err["message"], "Agent crashed: out of memory");
        let started: Vec<&str> = j
            .iter()
            .filter(|e| e["type"] == "SUBAGENT_STARTED")
            .map(|e| e["subagentRunId"].as_str().unwrap())
            .collect();
        assert_eq!(started, ["R:sa:task1", "R:sa:task1:2"]);
        let res = j.iter().find(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "R:t:b1").unwrap();
        assert_eq!(res["subagentRunId"], "R:sa:task1:2");
        // The turn's end ends the second one, well.
        let fin = j.iter().find(|e| e["type"] == "SUBAGENT_FINISHED").unwrap();
        assert_eq!(
            (fin["subagentRunId"].as_str(), fin["outcome"]["type"].as_str()),
            (Some("R:sa:task1:2"), Some("success"))
        );
    }

    #[test]
    fn a_cancelled_run_ends_its_subagents_with_an_error() {
        let mut t = Translator::new(opts());
        let mut out = t.push(&ev(
            1,
            Data::TokenDelta(TokenDelta {
                text: "x".into(),
                channel: Channel::Reasoning,
                message: "m".into(),
                parent: sub("c", "c"),
            }),
        ));
        out.extend(t.end_with(RunOutcome::Cancelled, None));
        let j = json(&out);
        crate_verify(&j);
        let tail: Vec<&str> = j.iter().rev().take(4).map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(tail, ["RUN_FINISHED", "SUBAGENT_ERROR", "REASONING_END", "REASONING_MESSAGE_END"]);
        assert_eq!(j[j.len() - 2]["code"], "cancelled");
    }

    /// The crate's own checks of a stream with subagents: every subagent
    /// that started ends before the terminal event, and every event
    /// attributed to one comes while it is open.
    fn crate_verify(j: &[serde_json::Value]) {
        let mut open = std::collections::HashSet::new();
        for (i, e) in j.iter().enumerate() {
            let ty = e["type"].as_str().unwrap();
            match ty {
                "SUBAGENT_STARTED" => assert!(open.insert(e["subagentRunId"].as_str().unwrap().to_string()), "{i}"),
                "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                    assert!(open.remove(e["subagentRunId"].as_str().unwrap()), "{i}")
                }
                "RUN_FINISHED" | "RUN_ERROR" => assert!(open.is_empty(), "{i}: {open:?} open at the end"),
                _ => {
                    if let Some(s) = e["subagentRunId"].as_str() {
                        assert!(open.contains(s), "{i}: {e} outside its subagent");
                    }
                }
            }
        }
    }
}
