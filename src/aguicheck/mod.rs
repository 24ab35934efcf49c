//! `agui-check`: does a producer's stream follow AG-UI 1.0? A state object
//! with no IO: feed it the stream's bytes (SSE or JSON lines) or its events,
//! and it returns findings, each naming its rule ([`RULES`]) and where the
//! rule comes from.
//!
//! The rules are the official ones, restated: the shapes of `@ag-ui/core`
//! 1.0.0 (`schema`), the sequence checks of `@ag-ui/client` 1.0.0's
//! `verifyEvents` (`src/verify/verify.ts`) and chunk expansion
//! (`src/chunks/transform.ts`), and the MUSTs of the 1.0 specification pages
//! that neither enforces (transport framing, truncation, interrupt ids,
//! subagent announcement). A stream the official client rejects or warns
//! about is a stream with findings; the labelled corpus in
//! `conformance/producer-corpus/` holds agui-check to that.

mod apply;
pub mod fetch;
mod model;
mod patch;
mod rules;
mod schema;
pub mod stream;
mod verify;

use rules::VERIFY;
pub use rules::{rule, Rule, RULES};

use crate::util::bounded::Bounded;
use model::{activity_content, held, json_len, Authoritative, Call, Held, MAX_ACTIVITY};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Where the official client gives up on one frame (`transform/sse.ts`,
/// `MAX_BUFFER_SIZE`): the same cap bounds what agui-check holds of a frame
/// or a line.
pub const MAX_FRAME: usize = 10 * 1024 * 1024;

/// Past this many bytes of ids tracked in one run (each id counted for
/// every copy the checks keep, plus [`ENTRY`]), new ones are not recorded:
/// memory stays bounded whatever the input, and a finding says so once.
const MAX_TRACKED: usize = 32 * 1024 * 1024;

/// What one tracked id costs besides its bytes (its slot in a map).
const ENTRY: usize = 64;

/// The bytes of the client's messages modelled ([`Held`]: ids, roles and
/// activity contents), thread-wide: past it the oldest are forgotten.
const HELD_MEMORY: usize = 16 * 1024 * 1024;

/// The same for the tool calls in them ([`Call`]).
const CALL_MEMORY: usize = 8 * 1024 * 1024;

/// One finding: which rule, at which event (1-based; `None` for the stream
/// as a whole), the event's type when it has one, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub rule: &'static str,
    pub index: Option<u64>,
    pub event: Option<String>,
    pub message: String,
}

/// A finding as printed, its fields in this order.
#[derive(serde::Serialize)]
struct Printed<'a> {
    rule: &'a str,
    index: Option<u64>,
    event: Option<&'a str>,
    message: &'a str,
    spec: String,
}

impl Finding {
    /// The finding as agui-check prints it: one JSON object, on one line,
    /// `{rule, index, event, message, spec}` in that order.
    pub fn to_line(&self) -> String {
        let p = Printed {
            rule: self.rule,
            index: self.index,
            event: self.event.as_deref(),
            message: &self.message,
            spec: rule(self.rule).spec.replace("VERIFY", VERIFY),
        };
        serde_json::to_string(&p).unwrap_or_default()
    }

    /// The same, as a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::from_str(&self.to_line()).unwrap_or(Value::Null)
    }
}

/// What the checker is told beyond the stream.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// runwire's stricter rule: exactly one run, its terminal event last.
    pub one_run: bool,
    /// The request's `(threadId, runId)` (`--url`): the last run must be it.
    pub request: Option<(String, String)>,
    /// The state the request carried (`--url`): the first deltas' baseline.
    pub state: Option<Value>,
    /// The messages the request carried (`--url`): the client holds them.
    pub messages: Vec<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Nothing yet.
    Start,
    Active,
    Finished,
    Errored,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Reasoning,
}

/// An open `*_CHUNK` stream of one lane (an owner): what its opener said.
struct Lane {
    kind: Kind,
    id: String,
    role: Option<String>,
    name: Option<String>,
    parent: Option<String>,
}

type Owner = Option<String>;

/// What one run has open and who owns what (`verify.ts` keeps the same, per run).
#[derive(Default)]
struct Run {
    ids: Option<(String, String)>,
    text: HashSet<String>,
    tools: HashSet<String>,
    spans: HashSet<String>,
    reasoning: HashSet<String>,
    own_message: HashMap<String, Owner>,
    own_tool: HashMap<String, Owner>,
    own_activity: HashMap<String, Owner>,
    own_reasoning: HashMap<String, Owner>,
    steps: HashMap<Owner, HashSet<String>>,
    subagents: HashSet<String>,
    closed_subagents: HashSet<String>,
    tagged: HashSet<String>,
    lanes: HashMap<Owner, Lane>,
    /// The bytes tracked so far, and whether [`MAX_TRACKED`] was passed
    /// (then ids go unrecorded, and a missing one is not reported).
    tracked: usize,
    over: bool,
    /// Subagents that finished suspended: id and the interrupt ids they named.
    suspended: Vec<(String, Vec<String>)>,
}

/// The checker: events in, findings out.
pub struct Checker {
    opts: Options,
    n: u64,
    phase: Phase,
    terminals: u64,
    run: Run,
    limit_reported: bool,
    /// The `(threadId, runId)` of the last run started.
    last_run: Option<(String, String)>,
    /// The last RUN_STARTED's index, when it declared no protocolVersion.
    undeclared: Option<u64>,
    /// The consumer's state as the stream has made it, when known; and
    /// about how many bytes went into it (past [`MAX_STATE`] it is dropped).
    state: Option<Value>,
    state_bytes: usize,
    /// The messages the client holds (the first under each id, the one its
    /// reducer's lookups find), thread-wide as its reducer keeps them, and
    /// the tool calls in them; bounded by bytes, the oldest forgotten first
    /// (then absent ones are not reported).
    held: Bounded<Held>,
    calls: Bounded<Call>,
    held_capped: bool,
    /// The last message's place in the client's list (creation order).
    seq: u64,
}

/// Past about this much state, deltas go unchecked (memory stays bounded).
const MAX_STATE: usize = 64 * 1024 * 1024;

fn s<'a>(ev: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    ev.get(k).and_then(Value::as_str)
}

/// `text` with each `\\uXXXX` escape of a lone surrogate (one JavaScript
/// strings hold and Rust strings cannot) written `\\ufffd`; a pair is kept.
fn lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let unit = |i: usize| -> Option<u16> {
        let hex = b.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let high = |u: u16| (0xD800..0xDC00).contains(&u);
    let low = |u: u16| (0xDC00..0xE000).contains(&u);
    let mut out: Option<String> = None;
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit(i) {
            Some(u) if high(u) && unit(i + 6).is_some_and(low) => i += 12,
            Some(u) if high(u) || low(u) => {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..i]);
                o.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            // Another escape: its two bytes (an escaped backslash among them).
            _ => i += 2,
        }
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

fn owner_name(o: &Owner) -> String {
    o.as_ref().map_or("(the parent agent)".to_string(), |s| format!("'{s}'"))
}

impl Checker {
    pub fn new(opts: Options) -> Checker {
        let state = opts.state.clone().filter(|s| !s.is_null());
        let messages = opts.messages.clone();
        let mut c = Checker {
            opts,
            n: 0,
            phase: Phase::Start,
            terminals: 0,
            run: Run::default(),
            limit_reported: false,
            last_run: None,
            undeclared: None,
            state,
            state_bytes: 0,
            held: Bounded::new(HELD_MEMORY),
            calls: Bounded::new(CALL_MEMORY),
            held_capped: false,
            seq: 0,
        };
        c.hold_messages(&messages);
        c
    }

    /// Events seen so far.
    pub fn events(&self) -> u64 {
        self.n
    }

    fn at(&self, rule: &'static str, ty: Option<&str>, message: String) -> Finding {
        Finding { rule, index: Some(self.n), event: ty.map(str::to_string), message }
    }

    /// A payload that could not be read as an event (framing findings count
    /// it as an event of the stream, so indexes stay those of the frames).
    pub fn unreadable(&mut self, rule: &'static str, message: String) -> Finding {
        self.n += 1;
        self.at(rule, None, message)
    }

    /// One payload's bytes: parsed as the client parses them, then checked
    /// as [`Checker::event`] does. The client decodes the stream with
    /// `TextDecoder` (an invalid UTF-8 sequence becomes U+FFFD) and parses
    /// with `JSON.parse`, which takes a lone surrogate escape (`"\ud800"`):
    /// so do these, a lone surrogate read as U+FFFD.
    pub fn payload(&mut self, bytes: &[u8]) -> Vec<Finding> {
        let text = String::from_utf8_lossy(bytes);
        let text = lone_surrogates(&text);
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => self.event(&v),
            Err(e) => vec![self.unreadable("framing.not-json", format!("not JSON: {e}"))],
        }
    }

    /// One event.
    pub fn event(&mut self, v: &Value) -> Vec<Finding> {
        let Some(ev) = v.as_object() else {
            let what = match v {
                Value::Null => "null",
                Value::Array(_) => "an array",
                _ => "not an object",
            };
            return vec![self.unreadable("framing.not-object", format!("the payload is {what}, not an event object"))];
        };
        self.n += 1;
        let mut out = Vec::new();
        let ty = s(ev, "type").map(str::to_string);
        let problems = schema::check_event(ev);
        let unknown = problems.iter().any(|p| p.rule == "schema.unknown-type");
        for p in problems {
            out.push(self.at(p.rule, ty.as_deref(), p.message));
        }
        if unknown {
            // The client drops the event: it never reaches the sequence checks.
            // A malformed known event fails the client's run; it is still read
            // on here, so what follows is not reported as fallout of it.
            return out;
        }
        let ty = ty.unwrap_or_default();
        self.expand(&ty, ev, &mut out);
        out
    }

    /// Chunk expansion (`chunks/transform.ts`), then the sequence checks.
    fn expand(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let tag = s(ev, "subagentRunId").map(str::to_string);
        match ty {
            "TEXT_MESSAGE_CHUNK" => return self.chunk(Kind::Text, ty, ev, tag, out),
            "TOOL_CALL_CHUNK" => return self.chunk(Kind::Tool, ty, ev, tag, out),
            "REASONING_MESSAGE_CHUNK" => return self.chunk(Kind::Reasoning, ty, ev, tag, out),
            "RUN_STARTED" | "RUN_FINISHED" | "RUN_ERROR" | "MESSAGES_SNAPSHOT" => {
                let lanes: Vec<Owner> = self.run.lanes.keys().cloned().collect();
                for l in lanes {
                    self.close_lane(&l, out);
                }
            }
            "RAW" | "ACTIVITY_SNAPSHOT" | "ACTIVITY_DELTA" | "REASONING_ENCRYPTED_VALUE" | "SUBAGENT_STARTED" => {}
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                if let Some(t) = &tag {
                    self.close_lane(&Some(t.clone()), out);
                }
            }
            _ => self.close_lane(&tag, out),
        }
        self.sequence(ty, ev, out);
    }

    fn close_lane(&mut self, lane: &Owner, out: &mut Vec<Finding>) {
        let Some(l) = self.run.lanes.remove(lane) else { return };
        let (ty, key) = match l.kind {
            Kind::Text => ("TEXT_MESSAGE_END", "messageId"),
            Kind::Tool => ("TOOL_CALL_END", "toolCallId"),
            Kind::Reasoning => ("REASONING_MESSAGE_END", "messageId"),
        };
        let mut m = Map::new();
        m.insert("type".into(), ty.into());
        m.insert(key.into(), l.id.into());
        if let Some(t) = lane {
            m.insert("subagentRunId".into(), t.clone().into());
        }
        self.sequence(ty, &m, out);
    }

    /// Which lane a chunk continues (`transform.ts`'s owner resolution).
    fn lane_of(&self, kind: Kind, id: Option<&str>, tag: &Owner, ty: &str) -> Result<Owner, String> {
        if let Some(id) = id {
            if let Some((owner, _)) = self.run.lanes.iter().find(|(_, l)| l.kind == kind && l.id == id) {
                if tag.is_some() && tag != owner {
                    return Err(format!(
                        "{ty} continues '{id}' with subagentRunId {}, but its open stream belongs to {}",
                        owner_name(tag),
                        owner_name(owner)
                    ));
                }
                return Ok(owner.clone());
            }
            return Ok(tag.clone());
        }
        if tag.is_some() {
            return Ok(tag.clone());
        }
        if self.run.lanes.get(&None).is_some_and(|l| l.kind == kind) {
            return Ok(None);
        }
        let open: Vec<&Owner> = self.run.lanes.iter().filter(|(_, l)| l.kind == kind).map(|(o, _)| o).collect();
        match open.as_slice() {
            [] => Ok(None),
            [one] => Ok((*one).clone()),
            more => {
                Err(format!("{ty} carries neither an id nor a subagentRunId, but {} lanes have one open", more.len()))
            }
        }
    }

    fn chunk(&mut self, kind: Kind, ty: &str, ev: &Map<String, Value>, tag: Owner, out: &mut Vec<Finding>) {
        let id_key = if kind == Kind::Tool { "toolCallId" } else { "messageId" };
        let id = s(ev, id_key).map(str::to_string);
        let lane = match self.lane_of(kind, id.as_deref(), &tag, ty) {
            Ok(l) => l,
            Err(m) => return out.push(self.at("chunk.sequence", Some(ty), m)),
        };
        let continues =
            self.run.lanes.get(&lane).is_some_and(|l| l.kind == kind && id.as_ref().is_none_or(|i| *i == l.id));
        let (open_ty, content_ty) = match kind {
            Kind::Text => ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"),
            Kind::Tool => ("TOOL_CALL_START", "TOOL_CALL_ARGS"),
            Kind::Reasoning => ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"),
        };
        let lane_id;
        if continues {
            let l = &self.run.lanes[&lane];
            lane_id = l.id.clone();
            let checks: &[(&str, &Option<String>)] = match kind {
                Kind::Text => &[("role", &l.role), ("name", &l.name)],
                Kind::Tool => &[("toolCallName", &l.name), ("parentMessageId", &l.parent)],
                Kind::Reasoning => &[],
            };
            for (field, was) in checks {
                if let Some(now) = s(ev, field) {
                    if was.as_deref() != Some(now) {
                        let m = format!(
                            "{ty} '{lane_id}' says {field} {now:?}, but its open stream's {field} is {}",
                            was.as_ref().map_or("absent".to_string(), |w| format!("{w:?}"))
                        );
                        return out.push(self.at("chunk.sequence", Some(ty), m));
                    }
                }
            }
        } else {
            self.close_lane(&lane, out);
            let Some(new_id) = id else {
                return out.push(self.at(
                    "chunk.sequence",
                    Some(ty),
                    format!("the first {ty} of a stream must have a {id_key}"),
                ));
            };
            let name_key = if kind == Kind::Tool { "toolCallName" } else { "name" };
            if kind == Kind::Tool && s(ev, name_key).is_none() {
                return out.push(self.at(
                    "chunk.sequence",
                    Some(ty),
                    format!("the first {ty} must have a toolCallName"),
                ));
            }
            let role = match kind {
                Kind::Text => Some(s(ev, "role").unwrap_or("assistant").to_string()),
                Kind::Reasoning => Some("reasoning".to_string()),
                Kind::Tool => None,
            };
            let l = Lane {
                kind,
                id: new_id.clone(),
                role: role.clone(),
                name: s(ev, name_key).map(str::to_string),
                parent: s(ev, "parentMessageId").map(str::to_string),
            };
            let mut m = Map::new();
            m.insert("type".into(), open_ty.into());
            m.insert(id_key.into(), new_id.clone().into());
            if let Some(r) = role {
                m.insert("role".into(), r.into());
            }
            if let Some(n) = &l.name {
                m.insert(name_key.into(), n.clone().into());
            }
            if let Some(p) = &l.parent {
                m.insert("parentMessageId".into(), p.clone().into());
            }
            if let Some(t) = &tag {
                m.insert("subagentRunId".into(), t.clone().into());
            }
            // Lanes are per owner, and owners are the producer's to invent: counted.
            let cost = [&lane, &l.name, &l.parent].iter().map(|o| o.as_ref().map_or(0, String::len)).sum::<usize>()
                + l.id.len();
            if self.run.lanes.contains_key(&lane) || self.track(out, ty, cost) {
                self.run.lanes.insert(lane.clone(), l);
            }
            lane_id = new_id;
            self.sequence(open_ty, &m, out);
        }
        if ev.contains_key("delta") || ev.contains_key("rawEvent") {
            let mut m = Map::new();
            m.insert("type".into(), content_ty.into());
            m.insert(id_key.into(), lane_id.into());
            m.insert("delta".into(), s(ev, "delta").unwrap_or("").into());
            if let Some(t) = &tag {
                m.insert("subagentRunId".into(), t.clone().into());
            }
            self.sequence(content_ty, &m, out);
        }
    }

    /// Whether `bytes` more of ids may be recorded in this run (each copy
    /// kept counted by the caller); past [`MAX_TRACKED`], no.
    fn track(&mut self, out: &mut Vec<Finding>, ty: &str, bytes: usize) -> bool {
        if self.run.over {
            return false;
        }
        self.run.tracked += bytes + ENTRY;
        if self.run.tracked <= MAX_TRACKED {
            return true;
        }
        self.run.over = true;
        let m = format!(
            "over {} MiB of ids tracked in one run: later ids go unrecorded, and events naming them unchecked",
            MAX_TRACKED >> 20
        );
        self.limit(out, ty, m);
        false
    }

    /// A `limit.tracking` finding, the first time only.
    fn limit(&mut self, out: &mut Vec<Finding>, ty: &str, message: String) {
        if !self.limit_reported {
            self.limit_reported = true;
            out.push(self.at("limit.tracking", Some(ty), message));
        }
    }

    /// The bytes the checker's memory of the stream is accounted at (ids
    /// tracked in the run, the client's messages and tool calls modelled,
    /// the state): bounded whatever the input.
    pub fn accounted_bytes(&self) -> usize {
        self.run.tracked + self.held.bytes() + self.calls.bytes() + self.state.as_ref().map_or(0, |_| self.state_bytes)
    }

    fn tag_error(&self, ty: &str, tag: &Owner, owner: Option<&Owner>, what: &str, id: &str) -> Option<Finding> {
        let owner = owner?;
        (tag.is_some() && tag != owner).then(|| {
            self.at(
                "subagent.owner",
                Some(ty),
                format!(
                    "subagentRunId {} does not match the {what} '{id}' opener's {}",
                    owner_name(tag),
                    owner_name(owner)
                ),
            )
        })
    }

    fn bucket(&mut self, role: Option<&str>) -> &mut HashMap<String, Owner> {
        match role {
            Some("reasoning") => &mut self.run.own_reasoning,
            Some("activity") => &mut self.run.own_activity,
            _ => &mut self.run.own_message,
        }
    }

    fn seed_owners(&mut self, messages: Option<&Value>, authoritative: bool, out: &mut Vec<Finding>, ty: &str) {
        let Some(msgs) = messages.and_then(Value::as_array) else { return };
        for m in msgs {
            let Some(id) = m.get("id").and_then(Value::as_str) else { continue };
            let owner: Owner = m.get("subagentRunId").and_then(Value::as_str).map(str::to_string);
            let owner_len = owner.as_ref().map_or(0, String::len);
            let role = m.get("role").and_then(Value::as_str);
            // A new id is counted; one already recorded is only overwritten.
            if self.bucket(role).contains_key(id) {
                if authoritative {
                    self.bucket(role).insert(id.to_string(), owner.clone());
                }
            } else if self.track(out, ty, id.len() + owner_len) {
                self.bucket(role).insert(id.to_string(), owner.clone());
            } else {
                return;
            }
            for tc in m.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
                if let Some(tid) = tc.get("id").and_then(Value::as_str) {
                    if self.run.own_tool.contains_key(tid) {
                        if authoritative {
                            self.run.own_tool.insert(tid.to_string(), owner.clone());
                        }
                    } else if self.track(out, ty, tid.len() + owner_len) {
                        self.run.own_tool.insert(tid.to_string(), owner.clone());
                    } else {
                        return;
                    }
                }
            }
        }
    }

    /// One (schema-valid, chunk-expanded) event: the sequence checks, then,
    /// for an event they pass, what applying it to the client's messages
    /// would do (`apply/default.ts`).
    fn sequence(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let before = out.len();
        self.verify(ty, ev, out);
        if out.len() == before {
            let forgotten = self.held.forgotten() + self.calls.forgotten();
            self.apply(ty, ev, out);
            if self.held.forgotten() + self.calls.forgotten() > forgotten {
                self.held_capped = true;
                let m = format!(
                    "over {} MiB of the client's messages (or {} MiB of its tool calls) modelled: the oldest are forgotten, and events naming them unchecked",
                    HELD_MEMORY >> 20,
                    CALL_MEMORY >> 20
                );
                self.limit(out, ty, m);
            }
        }
    }

    fn set_state(&mut self, st: Value) {
        self.state_bytes = serde_json::to_string(&st).map_or(0, |s| s.len());
        self.state = (self.state_bytes <= MAX_STATE).then_some(st);
    }

    /// The end of the stream: closes what chunk streams left open (as the
    /// client does) and reports a run that never ended.
    pub fn finish(&mut self) -> Vec<Finding> {
        let mut out = Vec::new();
        let lanes: Vec<Owner> = self.run.lanes.keys().cloned().collect();
        for l in lanes {
            self.close_lane(&l, &mut out);
        }
        let end = |rule, m: String| Finding { rule, index: None, event: None, message: m };
        match self.phase {
            Phase::Start if self.n == 0 => out.push(end("run.unterminated", "the stream holds no event".into())),
            // Events came, none of a run (each reported as it came).
            Phase::Start => out.push(end("run.unterminated", "the stream holds no run: no RUN_STARTED".into())),
            Phase::Active => out.push(end(
                "run.unterminated",
                "the stream ends with its run still active (no RUN_FINISHED or RUN_ERROR): a truncated run".into(),
            )),
            _ => {}
        }
        if let Some(i) = self.undeclared {
            out.push(Finding {
                rule: "run.protocol-version",
                index: Some(i),
                event: Some("RUN_STARTED".into()),
                message:
                    "the run declares no protocolVersion: a 1.0 producer states the version it speaks on RUN_STARTED"
                        .into(),
            });
        }
        if let (Some(want), Some(last)) = (&self.opts.request, &self.last_run) {
            if want != last {
                out.push(end(
                    "run.ids",
                    format!(
                        "the last run is thread {:?} run {:?}, not the requested thread {:?} run {:?}",
                        last.0, last.1, want.0, want.1
                    ),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::stream::{check_bytes, Stream};
    use super::*;

    fn rules(input: &str) -> Vec<&'static str> {
        check_bytes(input.as_bytes(), None, Options::default()).iter().map(|f| f.rule).collect()
    }

    #[test]
    fn a_clean_stream_has_no_findings_in_either_framing() {
        let sse = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n\n: hi\n\nid: 2\ndata: {\"type\":\"RUN_FINISHED\",\n\
                   data: \"threadId\":\"t\",\"runId\":\"r\"}\n\n";
        assert_eq!(rules(sse), Vec::<&str>::new());
        let jsonl = "{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n\n{\"type\":\"RUN_ERROR\",\"message\":\"x\"}\n";
        assert_eq!(rules(jsonl), Vec::<&str>::new());
    }

    #[test]
    fn framing_findings() {
        assert_eq!(rules("data: {\"type\":\"RUN_ERROR\",\"message\":\"x\"}\r\n\r\n"), ["framing.crlf"]);
        assert_eq!(rules("data: {\"type\":\"RUN_ERROR\",\"message\":\"x\"}\n"), ["framing.unterminated"]);
        assert_eq!(rules("data: nope\n\n"), ["framing.not-json", "run.unterminated"]);
        assert_eq!(rules(""), ["run.unterminated"]);
    }

    /// The end of a stream with no run says which: no event at all, or
    /// events and no run; an event with no type is named as such.
    #[test]
    fn a_stream_with_no_run_says_what_it_held() {
        let messages = |input: &str| -> Vec<String> {
            check_bytes(input.as_bytes(), None, Options::default()).into_iter().map(|f| f.message).collect()
        };
        assert!(messages("").contains(&"the stream holds no event".to_string()));
        let unknown = messages("{\"type\":\"NOPE\"}\n");
        assert!(unknown.contains(&"the stream holds no run: no RUN_STARTED".to_string()), "{unknown:?}");
        let untyped = messages("{\"x\":1}\n");
        assert!(untyped.iter().any(|m| m.starts_with("the stream begins with an event with no type")), "{untyped:?}");
    }

    #[test]
    fn a_cr_before_anything_is_found_however_the_reads_fall() {
        let input = b"\r\ndata: {\"type\":\"RUN_ERROR\",\"message\":\"x\"}\n\n";
        let whole = check_bytes(input, None, Options::default());
        assert_eq!(whole.iter().map(|f| f.rule).collect::<Vec<_>>(), ["framing.crlf"]);
        let mut s = Stream::new(None, Options::default());
        let mut cut: Vec<Finding> = input.chunks(1).flat_map(|c| s.feed(c)).collect();
        cut.extend(s.finish());
        assert_eq!(whole, cut);
    }

    /// One leading byte order mark is dropped, however the reads fall and
    /// whichever the framing; a second one, or one later, is not.
    #[test]
    fn a_leading_bom_is_dropped_however_the_reads_fall() {
        let sse = "\u{feff}data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n\n\
                   data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
        let jsonl =
            "\u{feff}{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n\
                     {\"type\":\"RUN_ERROR\",\"message\":\"x\"}\n";
        for input in [sse, jsonl] {
            assert_eq!(rules(input), Vec::<&str>::new(), "{input:?}");
            let mut s = Stream::new(None, Options::default());
            let mut cut: Vec<Finding> = input.as_bytes().chunks(1).flat_map(|c| s.feed(c)).collect();
            cut.extend(s.finish());
            assert_eq!(cut, vec![], "{input:?} a byte at a time");
        }
        // A second one is the first line's: its data: field is not one.
        assert_eq!(rules(&format!("\u{feff}{sse}")), ["run.first"]);
        // A BOM alone, or its first bytes alone, is a stream with no event.
        assert_eq!(rules("\u{feff}"), ["run.unterminated"]);
        assert_eq!(check_bytes(b"\xEF\xBB", None, Options::default()).len(), 1);
    }

    /// What `JSON.parse` takes after `TextDecoder`: lone surrogate escapes
    /// and bytes that are not UTF-8 (each read as U+FFFD); pairs stay pairs.
    #[test]
    fn lone_surrogates_and_bad_utf8_read_as_the_client_reads_them() {
        assert_eq!(
            lone_surrogates(r#"{"a":"\ud800 \ud83d\ude00 \\ud800 \udc00\ud800"}"#),
            r#"{"a":"\ufffd \ud83d\ude00 \\ud800 \ufffd\ufffd"}"#
        );
        assert_eq!(lone_surrogates(r#""\ud800\"#), r#""\ufffd\"#);
        let mut c = Checker::new(Options::default());
        let start = [
            &br#"{"type":"RUN_STARTED","threadId":"t\ud800","runId":"r"#[..],
            b"\xff\xe2\x82",
            br#"","protocolVersion":"1.0"}"#,
        ]
        .concat();
        assert_eq!(c.payload(&start), vec![]);
        assert_eq!(c.last_run, Some(("t\u{fffd}".to_string(), "r\u{fffd}\u{fffd}".to_string())));
    }

    /// The checker's memory is accounted in bytes and stays under its
    /// bounds, however long the ids; reaching one is said once.
    #[test]
    fn memory_is_bounded_by_bytes() {
        let mut c = Checker::new(Options::default());
        let mut found =
            c.event(&serde_json::json!({"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}));
        let pad = "x".repeat(16 * 1024);
        for i in 0..3_000 {
            let id = format!("m{i}-{pad}");
            found.extend(c.event(&serde_json::json!({"type":"TEXT_MESSAGE_START","messageId":id})));
            found.extend(c.event(&serde_json::json!({"type":"TOOL_CALL_START","toolCallId":format!("c{i}-{pad}"),"toolCallName":"f","parentMessageId":id})));
        }
        let bound = MAX_TRACKED + HELD_MEMORY + CALL_MEMORY + 4 * (16 * 1024 + 256);
        assert!(c.accounted_bytes() <= bound, "{} > {bound}", c.accounted_bytes());
        let limits: Vec<&Finding> = found.iter().filter(|f| f.rule == "limit.tracking").collect();
        assert_eq!(limits.len(), 1, "{found:?}");
        assert!(limits[0].message.contains("MiB"), "{}", limits[0].message);
    }

    #[test]
    fn chunks_expand_as_the_client_expands_them() {
        let s = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}
{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"x","delta":"{}"}
{"type":"RUN_FINISHED","threadId":"t","runId":"r"}
"#;
        assert_eq!(rules(s), Vec::<&str>::new());
        let s = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}
{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}
{"type":"RUN_FINISHED","threadId":"t","runId":"r"}
"#;
        assert_eq!(rules(s), ["chunk.sequence"]);
    }
}
