//! The messages of an AG-UI thread, durably: what its clients sent (their
//! ids, roles and content, as sent) and what the agent answered (assistant
//! text, tool calls, tool results, as AG-UI messages with the ids the
//! stream gave them), so a client that opens the thread anywhere gets them
//! (`MESSAGES_SNAPSHOT`, `serve::agui::common::Messages`).
//!
//! One append-only file a thread, `$HARNESS_HOME/serve/threads/<digest>.jsonl`
//! (spec/LAYOUT.md, "Thread messages"): each line `{"run": R, "message": M}`,
//! a message as it is (or has become) after run `R`'s input or event. The
//! thread is the fold of its lines ([`Thread::put`]): a message id seen
//! again replaces the earlier version where it stands; a new tool message
//! goes after the assistant message holding its call (and the tool
//! messages after it), anything else at the end: the order in which
//! `@ag-ui/client` 1.0.0 builds its messages from the same events.
//!
//! [`Thread`] is a state object with no IO: it takes messages and AG-UI
//! events and says which messages changed; the file IO is [`read`] and
//! [`Writer`].

use crate::pipeline::translate::AguiEvent;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest thread file read (a longer one is read to this size: the
/// thread's later messages are then missing from its snapshot).
pub const MAX_THREAD_FILE: u64 = 32 * 1024 * 1024;

/// Most lines of a thread file read (the same: later ones are missing).
/// A line of a few bytes is a message of a few hundred in memory: a file
/// of small messages is bounded by their number, not its size.
pub const MAX_THREAD_LINES: usize = 100_000;

/// The thread's file under `home` (the digest keeps any threadId a safe name).
pub fn path(home: &Path, thread_id: &str) -> PathBuf {
    let d = super::sha256::hex(thread_id.as_bytes());
    home.join("serve").join("threads").join(format!("{}.jsonl", &d[..32]))
}

/// One line of a thread's file.
#[derive(Debug, Clone)]
pub struct Line {
    /// The AG-UI runId that recorded it.
    pub run: String,
    /// A message of the run's input (else one the agent's stream made).
    pub input: bool,
    pub message: Value,
}

/// The file's lines; a damaged line (a torn last write, a message that
/// does not fit the schemas) is passed over.
pub fn read(file: &Path) -> Vec<Line> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(file) {
        let _ = f.take(MAX_THREAD_FILE).read_to_end(&mut bytes);
    }
    bytes
        .split(|&b| b == b'\n')
        .take(MAX_THREAD_LINES)
        .filter_map(|l| {
            let mut v: Value = serde_json::from_slice(l).ok()?;
            let run = v.get("run")?.as_str()?.to_string();
            let input = v.get("input").and_then(Value::as_bool).unwrap_or(false);
            let m = v.as_object_mut()?.remove("message")?;
            // A message that does not fit (a damaged or foreign line) would
            // fail every later client's snapshot: passed over.
            fits(&m).then_some(Line { run, input, message: m })
        })
        .collect()
}

/// Appends a run's message versions to the thread's file (one line each,
/// written whole with one `write`).
pub struct Writer {
    file: std::fs::File,
    run: String,
}

impl Writer {
    pub fn open(file: &Path, run: &str) -> std::io::Result<Writer> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
        Ok(Writer { file, run: run.to_string() })
    }

    /// `input`: a message of the run's input (as the client sent it).
    pub fn append(&mut self, m: &Value, input: bool) -> std::io::Result<()> {
        let mut line = if input {
            json!({"run": self.run, "input": true, "message": m})
        } else {
            json!({"run": self.run, "message": m})
        }
        .to_string()
        .into_bytes();
        line.push(b'\n');
        self.file.write_all(&line)
    }
}

/// A thread's messages, in order, built as `@ag-ui/client` builds them.
///
/// Kept as slots: a message, and the tool messages right after it (those
/// of its calls, and any placed at the end after it). A tool message joins
/// its call's slot and everything else starts one at the end, so placing a
/// message costs the same however long the thread is (a flat list took a
/// search and a reindex for each tool message: a thread of thousands of
/// them cost seconds of CPU per request).
#[derive(Debug, Default, Clone)]
pub struct Thread {
    slots: Vec<Slot>,
    /// Where each message is: its slot, and its place among the slot's tool
    /// messages (`None`: the slot's head).
    at: HashMap<String, (usize, Option<usize>)>,
    /// The slot whose head (an assistant message) holds each tool call.
    calls: HashMap<String, usize>,
}

#[derive(Debug, Clone)]
struct Slot {
    head: Value,
    tools: Vec<Value>,
}

fn id_of(m: &Value) -> Option<&str> {
    m.get("id").and_then(Value::as_str)
}

fn holds_call(m: &Value, call: &str) -> bool {
    m.get("role").and_then(Value::as_str) == Some("assistant")
        && m.get("toolCalls").and_then(Value::as_array).is_some_and(|c| c.iter().any(|t| id_of(t) == Some(call)))
}

/// The ids of the calls an assistant message holds.
fn calls_of(m: &Value) -> impl Iterator<Item = &str> {
    let assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
    m.get("toolCalls").and_then(Value::as_array).filter(|_| assistant).into_iter().flatten().filter_map(id_of)
}

impl Thread {
    /// The thread a file's lines make, leaving out what run `skip`'s
    /// stream made (not its input).
    pub fn from_lines(lines: Vec<Line>, skip: Option<&str>) -> Thread {
        let mut t = Thread::default();
        for l in lines {
            if l.input || Some(l.run.as_str()) != skip {
                t.put(l.message);
            }
        }
        t
    }

    /// The messages, in order.
    pub fn messages(&self) -> Vec<&Value> {
        self.slots.iter().flat_map(|s| std::iter::once(&s.head).chain(&s.tools)).collect()
    }

    pub fn has(&self, id: &str) -> bool {
        self.at.contains_key(id)
    }

    /// The slot whose head holds `call` now.
    fn slot_of_call(&self, call: &str) -> Option<usize> {
        self.calls.get(call).copied().filter(|&s| self.slots.get(s).is_some_and(|x| holds_call(&x.head, call)))
    }

    /// Takes a message version: replaces the one with its id where it
    /// stands, or places a new one (a tool result after its call's
    /// message and the tool messages after it, else at the end).
    pub fn put(&mut self, m: Value) {
        let Some(id) = id_of(&m).map(str::to_string) else { return };
        if let Some(&(s, k)) = self.at.get(&id) {
            match k {
                Some(k) => self.slots[s].tools[k] = m,
                None => {
                    for c in calls_of(&m) {
                        self.calls.insert(c.to_string(), s);
                    }
                    self.slots[s].head = m;
                }
            }
            return;
        }
        let tool = m.get("role").and_then(Value::as_str) == Some("tool");
        let slot = match tool.then(|| m.get("toolCallId").and_then(Value::as_str)).flatten() {
            Some(call) => self.slot_of_call(call),
            None => None,
        };
        // A tool message with no call here goes at the end: after the last
        // slot's tool messages, which is where it stands in the flat order.
        let slot = slot.or_else(|| tool.then(|| self.slots.len().checked_sub(1)).flatten());
        match slot {
            Some(s) => {
                self.at.insert(id, (s, Some(self.slots[s].tools.len())));
                self.slots[s].tools.push(m);
            }
            None => {
                let s = self.slots.len();
                for c in calls_of(&m) {
                    self.calls.insert(c.to_string(), s);
                }
                self.at.insert(id, (s, None));
                self.slots.push(Slot { head: m, tools: Vec::new() });
            }
        }
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Value> {
        let (s, k) = *self.at.get(id)?;
        let slot = self.slots.get_mut(s)?;
        match k {
            Some(k) => slot.tools.get_mut(k),
            None => Some(&mut slot.head),
        }
    }

    /// The message with id `id`, as it stands.
    pub fn get(&self, id: &str) -> Option<&Value> {
        let (s, k) = *self.at.get(id)?;
        let slot = self.slots.get(s)?;
        match k {
            Some(k) => slot.tools.get(k),
            None => Some(&slot.head),
        }
    }

    /// Applies one event as `@ag-ui/client` 1.0.0's `defaultApplyEvents`
    /// does for text messages, tool calls and tool results; returns the
    /// message to record when the event opened, grew a call into or closed
    /// one (text deltas and argument deltas are recorded at the end: the
    /// message's or call's END, or, for a run that stops before it, the
    /// run's end, as `serve::agui::common::Messages` records what is open).
    pub fn apply(&mut self, e: &AguiEvent) -> Option<Value> {
        match e {
            AguiEvent::TextMessageStart { message_id, role, .. } => {
                if self.has(message_id) {
                    return None;
                }
                let mut m = json!({"id": message_id, "role": role, "content": ""});
                copy_extras(e, &mut m, &["name", "subagentRunId"]);
                self.put(m.clone());
                Some(m)
            }
            AguiEvent::TextMessageContent { message_id, delta, .. } => {
                // Grown in place: a long message takes many deltas.
                match self.get_mut(message_id)?.get_mut("content") {
                    Some(Value::String(s)) => s.push_str(delta),
                    _ => self.get_mut(message_id)?["content"] = Value::String(delta.clone()),
                }
                None
            }
            AguiEvent::TextMessageEnd { message_id, .. } => self.get_mut(message_id).map(|m| m.clone()),
            AguiEvent::ToolCallStart { tool_call_id, tool_call_name, parent_message_id, .. } => {
                if self.slot_of_call(tool_call_id).is_some() {
                    return None;
                }
                let sub = extra(e, "subagentRunId");
                // The client's rule: the parent when it is an assistant
                // message, else a new assistant message (named by the
                // parent id, or by the call when the parent id is taken).
                let target = match parent_message_id {
                    Some(p) => match self.get(p) {
                        Some(m) if m.get("role").and_then(Value::as_str) == Some("assistant") => p.clone(),
                        Some(_) => tool_call_id.clone(),
                        None => p.clone(),
                    },
                    None => tool_call_id.clone(),
                };
                if !self.has(&target) {
                    let mut m = json!({"id": target, "role": "assistant", "toolCalls": []});
                    if let Some(s) = sub {
                        m["subagentRunId"] = s;
                    }
                    self.put(m);
                }
                let slot = self.at.get(&target).map(|&(s, _)| s)?;
                self.calls.insert(tool_call_id.clone(), slot);
                let m = self.get_mut(&target)?;
                let call = json!({"id": tool_call_id, "type": "function", "function": {"name": tool_call_name, "arguments": ""}});
                match m.get_mut("toolCalls").and_then(Value::as_array_mut) {
                    Some(calls) => calls.push(call),
                    None => m["toolCalls"] = json!([call]),
                }
                Some(m.clone())
            }
            AguiEvent::ToolCallArgs { tool_call_id, delta, .. } => {
                match self.call_mut(tool_call_id)?.get_mut("arguments") {
                    Some(Value::String(s)) => s.push_str(delta),
                    _ => self.call_mut(tool_call_id)?["arguments"] = Value::String(delta.clone()),
                }
                None
            }
            AguiEvent::ToolCallEnd { tool_call_id, .. } => {
                self.slot_of_call(tool_call_id).map(|s| self.slots[s].head.clone())
            }
            AguiEvent::ToolCallResult { message_id, tool_call_id, content, role, .. } => {
                let mut m = json!({"id": message_id, "toolCallId": tool_call_id, "role": role, "content": content});
                copy_extras(e, &mut m, &["subagentRunId"]);
                self.put(m.clone());
                Some(m)
            }
            _ => None,
        }
    }

    /// The assistant message that holds tool call `call`, as it stands.
    pub fn holder(&self, call: &str) -> Option<&Value> {
        self.slot_of_call(call).map(|s| &self.slots[s].head)
    }

    fn call_mut(&mut self, call: &str) -> Option<&mut Value> {
        let s = self.slot_of_call(call)?;
        let m = &mut self.slots[s].head;
        let c = m.get_mut("toolCalls")?.as_array_mut()?.iter_mut().find(|t| id_of(t) == Some(call))?;
        c.get_mut("function")
    }
}

/// A field the event carries beyond those this branch names (the
/// subagent's `subagentRunId`, a message `name`), read off its wire form.
fn extra(e: &AguiEvent, key: &str) -> Option<Value> {
    match serde_json::to_value(e).ok()? {
        Value::Object(mut o) => o.remove(key).filter(|v| !v.is_null()),
        _ => None,
    }
}

fn copy_extras(e: &AguiEvent, m: &mut Value, keys: &[&str]) {
    let Ok(Value::Object(o)) = serde_json::to_value(e) else { return };
    for k in keys {
        if let (Some(v), Some(obj)) = (o.get(*k).filter(|v| !v.is_null()), m.as_object_mut()) {
            obj.insert((*k).to_string(), v.clone());
        }
    }
}

/// The snapshots that leave a client holding `held` (its input's message
/// ids) with exactly the thread `t`, given how `@ag-ui/client` 1.0.0
/// applies one (it keeps the messages it holds where they stand, drops
/// those the snapshot does not name, appends the others in order):
/// - none when the client holds every message of the thread;
/// - the thread, when everything the client lacks comes after all it holds;
/// - else first the thread up to the first message it holds after one it
///   lacks (which drops that one and those after it, e.g. a fresh client's
///   new message, and gives it what comes before), then the thread (which
///   appends them again, each in its place).
pub fn snapshots<M: std::borrow::Borrow<Value>>(t: &[M], held: &[String]) -> Vec<Vec<Value>> {
    let held: std::collections::HashSet<&str> = held.iter().map(String::as_str).collect();
    let holds = |m: &M| id_of(m.borrow()).is_some_and(|id| held.contains(id));
    let owned = |ms: &[M]| ms.iter().map(|m| m.borrow().clone()).collect::<Vec<Value>>();
    let Some(k) = t.iter().position(|m| !holds(m)) else { return Vec::new() };
    match t[k..].iter().position(holds) {
        Some(p) => vec![owned(&t[..k + p]), owned(t)],
        None => vec![owned(t)],
    }
}

/// A message of a `RunAgentInput` as recorded: as sent, without a
/// `subagentRunId: null` (the client strips it too); `None` when it does
/// not fit `@ag-ui/core` 1.0.0's message schemas ([`fits`]): a snapshot
/// that carried it would fail every later client of the thread.
pub fn input_message(m: &Value) -> Option<Value> {
    let Value::Object(o) = m else { return None };
    if !fits(m) {
        return None;
    }
    let o: Map<String, Value> = o
        .iter()
        .filter(|(k, v)| !(k.as_str() == "subagentRunId" && v.is_null()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Value::Object(o))
}

/// Whether `m` fits the `Message` schemas of `@ag-ui/core` 1.0.0
/// (schemas.d.ts: `UserMessageSchema`, `AssistantMessageSchema`,
/// `ToolMessageSchema`, the developer and system ones) for the keys they
/// name; other keys are allowed (the schemas are loose). Activity and
/// reasoning messages are not thread messages.
pub fn fits(m: &Value) -> bool {
    let s = |k: &str| m.get(k).is_some_and(Value::is_string);
    let opt = |k: &str, ok: fn(&Value) -> bool| m.get(k).is_none_or(ok);
    let common = s("id")
        && opt("name", Value::is_string)
        && opt("encryptedValue", Value::is_string)
        && opt("metadata", Value::is_object)
        && opt("subagentRunId", |v| v.is_string() || v.is_null());
    if !common {
        return false;
    }
    match m.get("role").and_then(Value::as_str) {
        Some("user") => m.get("content").is_some_and(content_fits),
        Some("tool") => m.get("content").is_some_and(content_fits) && s("toolCallId"),
        Some("developer" | "system") => s("content"),
        Some("assistant") => {
            opt("content", Value::is_string)
                && opt("toolCalls", |v| {
                    v.as_array().is_some_and(|calls| {
                        calls.iter().all(|c| {
                            c.get("id").is_some_and(Value::is_string)
                                && c.get("type").and_then(Value::as_str) == Some("function")
                                && c.get("function").is_some_and(|f| {
                                    f.get("name").is_some_and(Value::is_string)
                                        && f.get("arguments").is_some_and(Value::is_string)
                                })
                        })
                    })
                })
        }
        _ => false,
    }
}

/// A user or tool message's content: a string, or text and media parts.
fn content_fits(c: &Value) -> bool {
    let part = |p: &Value| match p.get("type").and_then(Value::as_str) {
        Some("text") => p.get("text").is_some_and(Value::is_string),
        Some("image" | "audio" | "video" | "document") => p.get("source").is_some_and(|src| {
            src.get("value").is_some_and(Value::is_string)
                && match src.get("type").and_then(Value::as_str) {
                    Some("data") => src.get("mimeType").is_some_and(Value::is_string),
                    Some("url" | "file") => true,
                    _ => false,
                }
        }),
        _ => false,
    };
    match c {
        Value::String(_) => true,
        Value::Array(parts) => parts.iter().all(part),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<M: std::borrow::Borrow<Value>>(t: &[M]) -> Vec<&str> {
        t.iter().filter_map(|m| id_of(m.borrow())).collect()
    }

    #[test]
    fn events_build_messages_as_the_client_does() {
        let mut t = Thread::default();
        t.put(json!({"id": "u1", "role": "user", "content": "hi"}));
        let start = AguiEvent::TextMessageStart {
            message_id: "a1".into(),
            role: "assistant",
            subagent_run_id: None,
            timestamp: None,
        };
        assert!(t.apply(&start).is_some());
        t.apply(&AguiEvent::TextMessageContent {
            message_id: "a1".into(),
            delta: "he".into(),
            subagent_run_id: None,
            timestamp: None,
        });
        t.apply(&AguiEvent::TextMessageContent {
            message_id: "a1".into(),
            delta: "y".into(),
            subagent_run_id: None,
            timestamp: None,
        });
        let end = t
            .apply(&AguiEvent::TextMessageEnd { message_id: "a1".into(), subagent_run_id: None, timestamp: None })
            .unwrap();
        assert_eq!(end["content"], "hey");
        let call = AguiEvent::ToolCallStart {
            tool_call_id: "c1".into(),
            tool_call_name: "Bash".into(),
            parent_message_id: Some("a1".into()),
            subagent_run_id: None,
            timestamp: None,
        };
        t.apply(&call);
        t.apply(&AguiEvent::ToolCallArgs {
            tool_call_id: "c1".into(),
            delta: "{}".into(),
            subagent_run_id: None,
            timestamp: None,
        });
        let m = t
            .apply(&AguiEvent::ToolCallEnd { tool_call_id: "c1".into(), subagent_run_id: None, timestamp: None })
            .unwrap();
        assert_eq!(m["toolCalls"][0]["function"]["arguments"], "{}");
        t.apply(&AguiEvent::TextMessageStart {
            message_id: "a2".into(),
            role: "assistant",
            subagent_run_id: None,
            timestamp: None,
        });
        let r = AguiEvent::ToolCallResult {
            message_id: "r1".into(),
            tool_call_id: "c1".into(),
            content: "ok".into(),
            role: "tool",
            subagent_run_id: None,
            timestamp: None,
        };
        t.apply(&r);
        // The result goes right after its call's message, before a2.
        assert_eq!(ids(&t.messages()), ["u1", "a1", "r1", "a2"]);
    }

    /// The slots place every message where `@ag-ui/client`'s flat list
    /// does (a tool message after its call's message and the tool messages
    /// after it, else at the end; a known id replaced where it stands),
    /// over a long pseudo-random thread of calls, results of old and new
    /// calls, results of unknown calls, users' messages and new versions.
    #[test]
    fn slots_order_messages_as_the_clients_flat_list_does() {
        fn flat_put(v: &mut Vec<Value>, m: Value) {
            let id = id_of(&m).unwrap().to_string();
            if let Some(i) = v.iter().position(|x| id_of(x) == Some(&id)) {
                v[i] = m;
                return;
            }
            let call = (m["role"] == "tool").then(|| m["toolCallId"].as_str()).flatten().map(str::to_string);
            match call.and_then(|c| v.iter().position(|x| holds_call(x, &c))) {
                Some(f) => {
                    let mut i = f + 1;
                    while i < v.len() && v[i]["role"] == "tool" {
                        i += 1;
                    }
                    v.insert(i, m);
                }
                None => v.push(m),
            }
        }
        let (mut t, mut flat) = (Thread::default(), Vec::new());
        let mut x: u64 = 7;
        let mut next = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut calls = 0u64;
        for i in 0..3000u64 {
            let m = match next(6) {
                0 => json!({"id": format!("u{i}"), "role": "user", "content": "hi"}),
                1 => {
                    calls += 1;
                    let c = |k: u64| json!({"id": format!("c{k}"), "type": "function", "function": {"name": "f", "arguments": "{}"}});
                    json!({"id": format!("a{i}"), "role": "assistant", "toolCalls": [c(calls), c(calls + 1000)]})
                }
                2 | 3 => json!({"id": format!("t{i}"), "role": "tool", "content": "r",
                    "toolCallId": format!("c{}", if calls == 0 { 0 } else { 1 + next(calls + 2) })}),
                4 => json!({"id": format!("t{i}"), "role": "tool", "content": "r", "toolCallId": "nobody"}),
                _ => json!({"id": format!("u{}", next(i + 1)), "role": "user", "content": "again"}),
            };
            t.put(m.clone());
            flat_put(&mut flat, m);
        }
        assert_eq!(t.messages().into_iter().cloned().collect::<Vec<_>>(), flat);
    }

    #[test]
    fn the_fold_keeps_first_places_and_last_versions() {
        let l = |run: &str, input: bool, message: Value| Line { run: run.into(), input, message };
        let lines = vec![
            l("r1", true, json!({"id": "u1", "role": "user", "content": "a"})),
            l("r1", false, json!({"id": "a1", "role": "assistant", "content": ""})),
            l("r2", true, json!({"id": "u2", "role": "user", "content": "b"})),
            l("r1", false, json!({"id": "a1", "role": "assistant", "content": "done"})),
        ];
        let t = Thread::from_lines(lines.clone(), None);
        assert_eq!(ids(&t.messages()), ["u1", "a1", "u2"]);
        assert_eq!(t.messages()[1]["content"], "done");
        // Without what r1's stream made; its input stays.
        assert_eq!(ids(&Thread::from_lines(lines, Some("r1")).messages()), ["u1", "u2"]);
    }

    /// What a snapshot carries must pass the official schemas: what does
    /// not fit them is not recorded.
    #[test]
    fn only_messages_that_fit_the_schemas_are_recorded() {
        for ok in [
            json!({"id": "1", "role": "user", "content": "hi"}),
            json!({"id": "1", "role": "user", "content": [{"type": "text", "text": "a"},
                {"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}]}),
            json!({"id": "1", "role": "assistant"}),
            json!({"id": "1", "role": "assistant", "content": "x", "toolCalls":
                [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"id": "1", "role": "tool", "toolCallId": "c", "content": "r"}),
            json!({"id": "1", "role": "system", "content": "s", "extra": 1, "subagentRunId": null}),
        ] {
            assert!(input_message(&ok).is_some(), "{ok}");
        }
        for bad in [
            json!({"role": "user", "content": "no id"}),
            json!({"id": 1, "role": "user", "content": "x"}),
            json!({"id": "1", "role": "user", "content": 5}),
            json!({"id": "1", "role": "user", "content": [{"type": "image", "source": {}}]}),
            json!({"id": "1", "role": "user"}),
            json!({"id": "1", "role": "assistant", "content": 5}),
            json!({"id": "1", "role": "assistant", "toolCalls": [{"id": "c", "function": {"name": "f"}}]}),
            json!({"id": "1", "role": "tool", "content": "r"}),
            json!({"id": "1", "role": "system"}),
            json!({"id": "1", "role": "reasoning", "content": "r"}),
            json!({"id": "1", "role": "user", "content": "x", "name": 3}),
            json!("x"),
        ] {
            assert!(input_message(&bad).is_none(), "{bad}");
        }
        assert!(input_message(&json!({"id": "1", "role": "user", "content": "x", "subagentRunId": null}))
            .is_some_and(|m| m.get("subagentRunId").is_none()));
    }

    /// The client's rule, applied to the snapshots, gives the thread.
    #[test]
    fn snapshots_leave_any_client_with_the_thread() {
        let apply = |held: &[&str], snaps: &[Vec<Value>]| -> Vec<String> {
            let mut c: Vec<String> = held.iter().map(|s| s.to_string()).collect();
            for s in snaps {
                let named: Vec<String> = ids(s).iter().map(|s| s.to_string()).collect();
                c.retain(|id| named.contains(id));
                for id in named {
                    if !c.contains(&id) {
                        c.push(id);
                    }
                }
            }
            c
        };
        let t: Vec<Value> =
            ["u1", "a1", "u2", "a2", "u3"].iter().map(|id| json!({"id": id, "role": "user", "content": id})).collect();
        for held in [
            &["u3"][..],
            &["u1", "u3"],
            &["u1", "a1", "u3"],
            &["u1", "a1", "u2", "a2", "u3"],
            &["u1", "a1"],
            &[],
            &["a2", "u3"],
            &["a1"],
            &["u1", "u2", "u3"],
            &["a1", "a2"],
        ] {
            let held_s: Vec<String> = held.iter().map(|s| s.to_string()).collect();
            let snaps = snapshots(&t, &held_s);
            let want: Vec<String> = ids(&t).iter().map(|s| s.to_string()).collect();
            let got = if snaps.is_empty() { held_s.clone() } else { apply(held, &snaps) };
            assert_eq!(got, want, "held {held:?}");
        }
        assert!(snapshots(&t, &ids(&t).iter().map(|s| s.to_string()).collect::<Vec<_>>()).is_empty());
    }
}
