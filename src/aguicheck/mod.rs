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

pub mod fetch;
mod patch;
mod schema;

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Where the official client gives up on one frame (`transform/sse.ts`,
/// `MAX_BUFFER_SIZE`): the same cap bounds what agui-check holds of a frame
/// or a line.
pub const MAX_FRAME: usize = 10 * 1024 * 1024;

/// Past this many ids tracked in one run, new ones are not recorded (memory
/// stays bounded whatever the input); a finding says so once.
const MAX_TRACKED: usize = 1_000_000;

/// One rule: its id, where it comes from, and what it asks.
pub struct Rule {
    pub id: &'static str,
    pub spec: &'static str,
    pub what: &'static str,
}

const VERIFY: &str = "@ag-ui/client 1.0.0 verifyEvents (src/verify/verify.ts)";

/// Every rule agui-check applies; `man/agui-check.1` lists the same.
pub const RULES: &[Rule] = &[
    Rule {
        id: "framing.crlf",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (a producer MUST frame the stream with LF); @ag-ui/client 1.0.0 src/transform/sse.ts splits frames on \"\\n\\n\" only",
        what: "a CR byte in an SSE stream",
    },
    Rule {
        id: "framing.not-json",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (each data payload is exactly one protocol event as a JSON object); @ag-ui/client 1.0.0 src/transform/sse.ts (JSON.parse of a frame fails the run)",
        what: "a frame's data (or a line of JSON lines) is not JSON",
    },
    Rule {
        id: "framing.not-object",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (each data payload is exactly one protocol event as a JSON object)",
        what: "a payload is JSON but not an object",
    },
    Rule {
        id: "framing.too-large",
        spec: "@ag-ui/client 1.0.0 src/transform/sse.ts (MAX_BUFFER_SIZE, 10 MiB: a longer frame fails the stream)",
        what: "a frame or line over 10 MiB",
    },
    Rule {
        id: "framing.unterminated",
        spec: "WHATWG HTML, Server-sent events, Interpreting an event stream (an event is dispatched at a blank line; at the end of the stream an unfinished one is discarded)",
        what: "the stream ends inside a frame (data lines with no blank line after them)",
    },
    Rule {
        id: "framing.id",
        spec: "WHATWG HTML, Server-sent events, Processing the field (an id containing U+0000 is ignored)",
        what: "an id: field holding a NUL character",
    },
    Rule {
        id: "schema.unknown-type",
        spec: "@ag-ui/core 1.0.0 EventType; @ag-ui/client 1.0.0 src/enforce/enforce.ts (an unknown type is dropped with a warning) and src/middleware/compatibility-boundary.ts (THINKING_* translated with a warning); AG-UI 1.0 spec, Processing",
        what: "an event type @ag-ui/core 1.0.0 does not define",
    },
    Rule {
        id: "schema.field",
        spec: "@ag-ui/core 1.0.0 EventSchemas (dist/schemas.mjs); @ag-ui/client 1.0.0 src/enforce/enforce.ts (a malformed known field is fatal); AG-UI 1.0 spec, The event model (absent means absent, never null)",
        what: "a required field missing, or a field of the wrong type or value (null included)",
    },
    Rule {
        id: "schema.unknown-key",
        spec: "@ag-ui/core 1.0.0 EventSchemas; @ag-ui/client 1.0.0 src/enforce/strip.ts (an unknown key is stripped with a warning)",
        what: "a key the event's (or a nested object's) schema does not name",
    },
    Rule {
        id: "schema.unknown-member",
        spec: "@ag-ui/core 1.0.0 EventSchemas (discriminated unions); @ag-ui/client 1.0.0 src/enforce/strip.ts (an unrecognised member is dropped with a warning); AG-UI 1.0 spec, Runs and Steps (a producer MUST NOT send an outcome value the schema does not describe)",
        what: "an outcome, message role, content part or patch op the schema does not name",
    },
    Rule {
        id: "run.first",
        spec: "AG-UI 1.0 spec, Runs and Steps, The run (a stream MUST begin with RUN_STARTED or RUN_ERROR); VERIFY",
        what: "the first event is neither RUN_STARTED nor RUN_ERROR",
    },
    Rule {
        id: "run.after-close",
        spec: "AG-UI 1.0 spec, Runs and Steps, After a run closes; VERIFY",
        what: "an event after RUN_FINISHED other than RUN_STARTED or RUN_ERROR, or after RUN_ERROR other than RUN_STARTED",
    },
    Rule {
        id: "run.nested",
        spec: "AG-UI 1.0 spec, Runs and Steps, Several runs on one stream (a RUN_STARTED while a run is active is a violation); VERIFY",
        what: "RUN_STARTED while a run is active",
    },
    Rule {
        id: "run.open-at-finish",
        spec: "AG-UI 1.0 spec, Runs and Steps (RUN_FINISHED requires everything the run opened to be closed), Subagents, Termination; VERIFY",
        what: "RUN_FINISHED with a text message, tool call, reasoning message or span, step or subagent still open",
    },
    Rule {
        id: "run.unterminated",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE (the producer closes the body after the last run's terminal event; a drop without one is a truncated run); runwire conformance/README.md check 4 (terminal)",
        what: "the stream ends with a run still active, or with no run at all",
    },
    Rule {
        id: "run.one-run",
        spec: "runwire conformance/README.md check 4 (exactly one RUN_FINISHED or RUN_ERROR, and it is the last event): only with --one-run",
        what: "more than one terminal event, or anything after the first one",
    },
    Rule {
        id: "run.protocol-version",
        spec: "AG-UI 1.0 spec, Versioning and Compatibility, Version negotiation (an implementation of this version MUST send its declaration, RUN_STARTED.protocolVersion; each replayed run declares its own, so only the last run's is required)",
        what: "the stream's last RUN_STARTED declares no protocolVersion",
    },
    Rule {
        id: "run.ids",
        spec: "AG-UI 1.0 spec, Runs and Steps (RUN_FINISHED closes the run RUN_STARTED opened) and Transports: HTTP + SSE (the requested run comes last, after any replayed runs); runwire conformance/live.mjs",
        what: "RUN_FINISHED names another threadId/runId than its RUN_STARTED; with --url, the last run is not the requested one",
    },
    Rule {
        id: "text.pairing",
        spec: "AG-UI 1.0 spec, Text messages and Streaming pattern; VERIFY (TEXT_MESSAGE_START/CONTENT/END)",
        what: "TEXT_MESSAGE_START for an open id, or CONTENT/END for an id not open",
    },
    Rule {
        id: "tool.pairing",
        spec: "AG-UI 1.0 spec, Tool calls; VERIFY (TOOL_CALL_START/ARGS/END)",
        what: "TOOL_CALL_START for an open id, or ARGS/END for an id not open",
    },
    Rule {
        id: "reasoning.pairing",
        spec: "AG-UI 1.0 spec, Reasoning; VERIFY (REASONING_START/END spans, REASONING_MESSAGE_START/CONTENT/END messages)",
        what: "a reasoning span or message opened twice, or continued or closed while not open",
    },
    Rule {
        id: "step.pairing",
        spec: "AG-UI 1.0 spec, Runs and Steps, Steps, and Subagents, Ownership (steps are per owner); VERIFY",
        what: "STEP_STARTED for a step its owner has open, or STEP_FINISHED for one its owner has not",
    },
    Rule {
        id: "chunk.sequence",
        spec: "AG-UI 1.0 spec, Streaming pattern (first chunks carry what opening requires; a conflicting continuation is fatal); @ag-ui/client 1.0.0 src/chunks/transform.ts",
        what: "a first *_CHUNK without its id (or tool name), a continuation that contradicts its opener, or an ambiguous untagged chunk",
    },
    Rule {
        id: "subagent.pairing",
        spec: "AG-UI 1.0 spec, Subagents, Lifecycle and Nesting; VERIFY (SUBAGENT_STARTED/FINISHED/ERROR)",
        what: "SUBAGENT_STARTED for an active or finished id or under a parent never started, or FINISHED/ERROR for an id not active",
    },
    Rule {
        id: "subagent.owner",
        spec: "AG-UI 1.0 spec, Subagents, Ownership (a continuation MUST agree with its opener; a tool call belongs to its message's owner); VERIFY",
        what: "a subagentRunId that disagrees with the owner of the message, tool call, reasoning or activity it continues",
    },
    Rule {
        id: "subagent.announce-late",
        spec: "AG-UI 1.0 spec, Subagents, Lifecycle (an announced invocation MUST be announced before any event attributed to it)",
        what: "SUBAGENT_STARTED after an event of the same run already carried its subagentRunId",
    },
    Rule {
        id: "message.held",
        spec: "AG-UI 1.0 spec, State, MESSAGES_SNAPSHOT (a held message absent from the snapshot is dropped); @ag-ui/client 1.0.0 src/apply/default.ts (\"No message found\", \"No tool call found\" warnings)",
        what: "a text or reasoning CONTENT/END, or a TOOL_CALL_ARGS/END, for a message or call a MESSAGES_SNAPSHOT has since dropped from the client",
    },
    Rule {
        id: "message.role",
        spec: "@ag-ui/client 1.0.0 src/apply/default.ts (its warnings: message ids are unique across activity, text and reasoning messages; a tool call's parentMessageId names an assistant message; a restarted call keeps its name)",
        what: "a text or reasoning event on an activity message's id, ACTIVITY_DELTA on another kind of message, a TOOL_CALL_START under a non-assistant parent message, or one renaming a call the client holds",
    },
    Rule {
        id: "state.delta-applies",
        spec: "AG-UI 1.0 spec, State, STATE_DELTA (the baseline is the input's state, then what the run's snapshots and deltas made of it) and Snapshots pattern (a patch that does not apply is warned about and skipped); @ag-ui/client 1.0.0 src/apply/default.ts (\"Failed to apply state patch\")",
        what: "a STATE_DELTA that does not apply to the state it amends, when that state is known (a STATE_SNAPSHOT, RUN_STARTED.input.state, or the state --url posted)",
    },
    Rule {
        id: "interrupt.id-unique",
        spec: "AG-UI 1.0 spec, Interrupts and Resume, Interrupting (each interrupt's id MUST be unique within the run)",
        what: "two interrupts of one RUN_FINISHED outcome with the same id",
    },
    Rule {
        id: "interrupt.suspended",
        spec: "@ag-ui/core 1.0.0 SubagentFinishedSuspendedOutcome (interruptIds: the run-level interrupts this subagent raised itself); AG-UI 1.0 spec, Subagents (a suspended invocation is paused awaiting outside input) and Interrupts and Resume (a producer MUST NOT report an interrupted run as success)",
        what: "a SUBAGENT_FINISHED suspended in a run that does not end with the interrupt outcome, or whose interruptIds name no interrupt of that outcome raised by the subagent",
    },
    Rule {
        id: "http.response",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (a run that starts answers 200 with Content-Type: text/event-stream)",
        what: "with --url: a status other than 200, or another Content-Type",
    },
    Rule {
        id: "limit.tracking",
        spec: "agui-check's own bound (memory stays bounded whatever the input)",
        what: "over 1,000,000 ids tracked in one run, or over 64 MiB of state: later ones go unchecked",
    },
];

/// The rule named `id` (every id agui-check reports is in [`RULES`]).
pub fn rule(id: &str) -> &'static Rule {
    RULES.iter().find(|r| r.id == id).unwrap_or(&RULES[RULES.len() - 1])
}

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
    tracked: usize,
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
    /// The messages the client holds (id → role), thread-wide as its
    /// reducer keeps them, and the tool calls in them (id → name); capped
    /// (then absent ones are not reported).
    held: HashMap<String, String>,
    calls: HashMap<String, String>,
    held_capped: bool,
}

/// Past about this much state, deltas go unchecked (memory stays bounded).
const MAX_STATE: usize = 64 * 1024 * 1024;

fn s<'a>(ev: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    ev.get(k).and_then(Value::as_str)
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
            held: HashMap::new(),
            calls: HashMap::new(),
            held_capped: false,
        };
        c.hold_messages(&messages, false);
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

    /// One payload's bytes: parsed, then checked as [`Checker::event`] does.
    pub fn payload(&mut self, bytes: &[u8]) -> Vec<Finding> {
        match serde_json::from_slice::<Value>(bytes) {
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
            if self.run.lanes.contains_key(&lane) || self.track(out, ty) {
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

    fn track(&mut self, out: &mut Vec<Finding>, ty: &str) -> bool {
        self.run.tracked += 1;
        if self.run.tracked <= MAX_TRACKED {
            return true;
        }
        if !self.limit_reported {
            self.limit_reported = true;
            out.push(self.at(
                "limit.tracking",
                Some(ty),
                format!("over {MAX_TRACKED} ids in one run: later ids go unchecked"),
            ));
        }
        false
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

    fn seed_owners(&mut self, messages: Option<&Value>, authoritative: bool, out: &mut Vec<Finding>, ty: &str) {
        let Some(msgs) = messages.and_then(Value::as_array) else { return };
        for m in msgs {
            let Some(id) = m.get("id").and_then(Value::as_str) else { continue };
            let owner: Owner = m.get("subagentRunId").and_then(Value::as_str).map(str::to_string);
            if !self.track(out, ty) {
                return;
            }
            let bucket = match m.get("role").and_then(Value::as_str) {
                Some("reasoning") => &mut self.run.own_reasoning,
                Some("activity") => &mut self.run.own_activity,
                _ => &mut self.run.own_message,
            };
            if authoritative || !bucket.contains_key(id) {
                bucket.insert(id.to_string(), owner.clone());
            }
            for tc in m.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
                if let Some(tid) = tc.get("id").and_then(Value::as_str) {
                    if authoritative || !self.run.own_tool.contains_key(tid) {
                        self.run.own_tool.insert(tid.to_string(), owner.clone());
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
            self.apply(ty, ev, out);
        }
    }

    /// The sequence checks of `verifyEvents`, plus the spec's own.
    fn verify(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let at = |c: &Checker, rule, m: String| c.at(rule, Some(ty), m);
        // The run lifecycle first, as verify.ts orders it.
        if self.phase == Phase::Errored && ty != "RUN_STARTED" {
            return out.push(at(
                self,
                "run.after-close",
                format!("{ty} after RUN_ERROR: only RUN_STARTED may follow it"),
            ));
        }
        if self.phase == Phase::Finished && ty != "RUN_STARTED" && ty != "RUN_ERROR" {
            return out.push(at(
                self,
                "run.after-close",
                format!("{ty} after RUN_FINISHED: only RUN_STARTED (a new run) or a late RUN_ERROR may follow it"),
            ));
        }
        if self.phase == Phase::Start && ty != "RUN_STARTED" && ty != "RUN_ERROR" {
            out.push(at(self, "run.first", format!("the stream begins with {ty}, not RUN_STARTED or RUN_ERROR")));
            // Read on as if a run had started, to check what follows.
            self.phase = Phase::Active;
        }
        if self.opts.one_run && self.terminals > 0 {
            out.push(at(
                self,
                "run.one-run",
                format!("{ty} after the run's terminal event: --one-run allows one run, its terminal last"),
            ));
        }
        let tag: Owner = s(ev, "subagentRunId").map(str::to_string);
        if let Some(t) = &tag {
            if !matches!(ty, "SUBAGENT_STARTED" | "SUBAGENT_FINISHED" | "SUBAGENT_ERROR")
                && self.run.tagged.len() < MAX_TRACKED
            {
                self.run.tagged.insert(t.clone());
            }
        }
        let id = |k: &str| s(ev, k).unwrap_or_default().to_string();
        match ty {
            "RUN_STARTED" => {
                if self.phase == Phase::Active {
                    return out.push(at(self, "run.nested", "RUN_STARTED while a run is active".into()));
                }
                self.run = Run::default();
                self.phase = Phase::Active;
                let ids = s(ev, "threadId").zip(s(ev, "runId")).map(|(t, r)| (t.to_string(), r.to_string()));
                self.run.ids = ids.clone();
                self.last_run = ids;
                self.undeclared = (!ev.contains_key("protocolVersion")).then_some(self.n);
                let input = ev.get("input").and_then(|i| i.get("messages"));
                self.seed_owners(input, false, out, ty);
                // The input's state is the run's baseline (null means absent).
                if let Some(st) = ev.get("input").and_then(|i| i.get("state")).filter(|s| !s.is_null()) {
                    self.set_state(st.clone());
                }
            }
            "RUN_FINISHED" => {
                let mut open = Vec::new();
                let mut steps: Vec<String> = Vec::new();
                for (o, names) in &self.run.steps {
                    for n in names {
                        steps.push(match o {
                            Some(o) => format!("{n} (subagent '{o}')"),
                            None => n.clone(),
                        });
                    }
                }
                let list = |set: &HashSet<String>| {
                    let mut v: Vec<&str> = set.iter().map(String::as_str).collect();
                    v.sort_unstable();
                    v.join(", ")
                };
                steps.sort();
                for (what, names) in [
                    ("steps", steps.join(", ")),
                    ("text messages", list(&self.run.text)),
                    ("reasoning messages", list(&self.run.reasoning)),
                    ("reasoning spans", list(&self.run.spans)),
                    ("tool calls", list(&self.run.tools)),
                    ("subagents", list(&self.run.subagents)),
                ] {
                    if !names.is_empty() {
                        open.push(format!("{what} {names}"));
                    }
                }
                if !open.is_empty() {
                    out.push(at(
                        self,
                        "run.open-at-finish",
                        format!("RUN_FINISHED while still active: {}", open.join("; ")),
                    ));
                }
                let ids = (id("threadId"), id("runId"));
                if let Some(started) = &self.run.ids {
                    if *started != ids {
                        out.push(at(
                            self,
                            "run.ids",
                            format!(
                                "RUN_FINISHED names thread {:?} run {:?}, but the run started as thread {:?} run {:?}",
                                ids.0, ids.1, started.0, started.1
                            ),
                        ));
                    }
                }
                if let Some(ints) = ev.get("outcome").and_then(|o| o.get("interrupts")).and_then(Value::as_array) {
                    let mut seen = HashSet::new();
                    for i in ints {
                        if let Some(iid) = i.get("id").and_then(Value::as_str) {
                            if !seen.insert(iid) {
                                out.push(at(
                                    self,
                                    "interrupt.id-unique",
                                    format!("interrupt id {iid:?} appears twice in the run's outcome"),
                                ));
                            }
                        }
                    }
                }
                let outcome = ev.get("outcome");
                let interrupted = outcome.and_then(|o| o.get("type")).and_then(Value::as_str) == Some("interrupt");
                let raised: HashMap<&str, Option<&str>> = outcome
                    .and_then(|o| o.get("interrupts"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|i| Some((i.get("id")?.as_str()?, i.get("subagentRunId").and_then(Value::as_str))))
                    .collect();
                for (sid, ids) in &self.run.suspended {
                    if !interrupted {
                        out.push(at(
                            self,
                            "interrupt.suspended",
                            format!("subagent '{sid}' finished suspended, awaiting input, but the run does not end with the interrupt outcome"),
                        ));
                        continue;
                    }
                    for iid in ids {
                        match raised.get(iid.as_str()) {
                            None => out.push(at(
                                self,
                                "interrupt.suspended",
                                format!(
                                    "subagent '{sid}' names interrupt {iid:?}, which the run's outcome does not carry"
                                ),
                            )),
                            Some(Some(by)) if *by != sid => out.push(at(
                                self,
                                "interrupt.suspended",
                                format!("subagent '{sid}' names interrupt {iid:?}, raised by subagent '{by}'"),
                            )),
                            Some(_) => {}
                        }
                    }
                }
                self.phase = Phase::Finished;
                self.terminals += 1;
            }
            "RUN_ERROR" => {
                self.phase = Phase::Errored;
                self.terminals += 1;
            }
            "TEXT_MESSAGE_START" => {
                let mid = id("messageId");
                if self.run.text.contains(&mid) {
                    return out.push(at(
                        self,
                        "text.pairing",
                        format!("TEXT_MESSAGE_START for '{mid}', a text message already open"),
                    ));
                }
                let existing = self.run.own_message.get(&mid).cloned();
                if let Some(f) = self.tag_error(ty, &tag, existing.as_ref(), "message", &mid) {
                    return out.push(f);
                }
                if self.track(out, ty) {
                    self.run.text.insert(mid.clone());
                    if existing.is_none() {
                        self.run.own_message.insert(mid, tag);
                    }
                }
            }
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => {
                let mid = id("messageId");
                if !self.run.text.contains(&mid) && self.run.tracked <= MAX_TRACKED {
                    return out.push(at(
                        self,
                        "text.pairing",
                        format!("{ty} for '{mid}', no text message open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_message.get(&mid), "message", &mid) {
                    return out.push(f);
                }
                if ty == "TEXT_MESSAGE_END" {
                    self.run.text.remove(&mid);
                }
            }
            "TOOL_CALL_START" => {
                let tid = id("toolCallId");
                if self.run.tools.contains(&tid) {
                    return out.push(at(
                        self,
                        "tool.pairing",
                        format!("TOOL_CALL_START for '{tid}', a tool call already open"),
                    ));
                }
                let mut inherited: Option<Owner> = None;
                if let Some(parent) = s(ev, "parentMessageId") {
                    if let Some(po) = self.run.own_message.get(parent) {
                        if tag.is_some() && tag != *po {
                            let m = format!(
                                "TOOL_CALL_START '{tid}' has subagentRunId {}, but its parent message '{parent}' belongs to {}",
                                owner_name(&tag),
                                owner_name(po)
                            );
                            return out.push(at(self, "subagent.owner", m));
                        }
                        inherited = Some(po.clone());
                    }
                }
                let existing = self.run.own_tool.get(&tid).cloned();
                if let Some(ex) = &existing {
                    if let Some(f) = self.tag_error(ty, &tag, Some(ex), "tool call", &tid) {
                        return out.push(f);
                    }
                    if tag.is_none() && inherited.as_ref().is_some_and(|i| i != ex) {
                        let m = format!(
                            "tool call '{tid}' belongs to {} but its parent message to another owner",
                            owner_name(ex)
                        );
                        return out.push(at(self, "subagent.owner", m));
                    }
                }
                if self.track(out, ty) {
                    self.run.tools.insert(tid.clone());
                    if existing.is_none() {
                        let o = if tag.is_some() { tag } else { inherited.unwrap_or(None) };
                        self.run.own_tool.insert(tid, o);
                    }
                }
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let tid = id("toolCallId");
                if !self.run.tools.contains(&tid) && self.run.tracked <= MAX_TRACKED {
                    return out.push(at(
                        self,
                        "tool.pairing",
                        format!("{ty} for '{tid}', no tool call open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_tool.get(&tid), "tool call", &tid) {
                    return out.push(f);
                }
                if ty == "TOOL_CALL_END" {
                    self.run.tools.remove(&tid);
                }
            }
            "TOOL_CALL_RESULT" => {
                // It mints a tool message: its id is on record, the newest minter owning it.
                if !self.track(out, ty) {
                    return;
                }
                self.run.own_message.insert(id("messageId"), tag);
            }
            "STEP_STARTED" => {
                let name = id("stepName");
                if self.run.steps.get(&tag).is_some_and(|n| n.contains(&name)) {
                    return out.push(at(
                        self,
                        "step.pairing",
                        format!("step {name:?} is already open for {}", owner_name(&tag)),
                    ));
                }
                if self.track(out, ty) {
                    self.run.steps.entry(tag).or_default().insert(name);
                }
            }
            "STEP_FINISHED" => {
                let name = id("stepName");
                if !self.run.steps.get_mut(&tag).is_some_and(|n| n.remove(&name)) {
                    let other =
                        self.run.steps.iter().find(|(o, n)| **o != tag && n.contains(&name)).map(|(o, _)| o.clone());
                    let m = match other {
                        Some(o) => format!(
                            "STEP_FINISHED for {name:?} attributed to {}, but the step is open under {}: a step is finished by whoever started it",
                            owner_name(&tag),
                            owner_name(&o)
                        ),
                        None => format!("STEP_FINISHED for {name:?}, a step that was not started"),
                    };
                    out.push(at(self, "step.pairing", m));
                }
            }
            "ACTIVITY_SNAPSHOT" => {
                let mid = id("messageId");
                let new = !self.run.own_activity.contains_key(&mid);
                if (new || ev.get("replace") != Some(&Value::Bool(false))) && self.track(out, ty) {
                    self.run.own_activity.insert(mid, tag);
                }
            }
            "ACTIVITY_DELTA" => {
                let mid = id("messageId");
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_activity.get(&mid), "activity", &mid) {
                    out.push(f);
                }
            }
            "REASONING_START" | "REASONING_MESSAGE_START" => {
                let mid = id("messageId");
                let span = ty == "REASONING_START";
                let open = if span { &self.run.spans } else { &self.run.reasoning };
                if open.contains(&mid) {
                    let what = if span { "reasoning span" } else { "reasoning message" };
                    return out.push(at(self, "reasoning.pairing", format!("{ty} for '{mid}', a {what} already open")));
                }
                let existing = self.run.own_reasoning.get(&mid).cloned();
                if let Some(f) = self.tag_error(ty, &tag, existing.as_ref(), "reasoning message", &mid) {
                    return out.push(f);
                }
                if self.track(out, ty) {
                    if span { &mut self.run.spans } else { &mut self.run.reasoning }.insert(mid.clone());
                    if existing.is_none() {
                        self.run.own_reasoning.insert(mid, tag);
                    }
                }
            }
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" | "REASONING_END" => {
                let mid = id("messageId");
                let span = ty == "REASONING_END";
                let open = if span { &self.run.spans } else { &self.run.reasoning };
                if !open.contains(&mid) && self.run.tracked <= MAX_TRACKED {
                    let what = if span { "reasoning span" } else { "reasoning message" };
                    return out.push(at(
                        self,
                        "reasoning.pairing",
                        format!("{ty} for '{mid}', no {what} open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_reasoning.get(&mid), "reasoning message", &mid) {
                    return out.push(f);
                }
                if ty != "REASONING_MESSAGE_CONTENT" {
                    if span { &mut self.run.spans } else { &mut self.run.reasoning }.remove(&mid);
                }
            }
            "REASONING_ENCRYPTED_VALUE" => {
                let eid = id("entityId");
                let owner = match s(ev, "subtype") {
                    Some("tool-call") => self.run.own_tool.get(&eid),
                    _ => self.run.own_message.get(&eid).or_else(|| self.run.own_reasoning.get(&eid)),
                };
                if let Some(f) = self.tag_error(ty, &tag, owner, "entity", &eid) {
                    out.push(f);
                }
            }
            "SUBAGENT_STARTED" => {
                let sid = id("subagentRunId");
                if self.run.subagents.contains(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!("SUBAGENT_STARTED for '{sid}', a subagent already active"),
                    ));
                }
                if self.run.closed_subagents.contains(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!(
                            "SUBAGENT_STARTED for '{sid}', which already finished in this run: ids are per invocation"
                        ),
                    ));
                }
                if let Some(p) = s(ev, "parentSubagentRunId") {
                    if !self.run.subagents.contains(p) && !self.run.closed_subagents.contains(p) {
                        return out.push(at(
                            self,
                            "subagent.pairing",
                            format!(
                                "SUBAGENT_STARTED '{sid}' names parentSubagentRunId '{p}', not started in this run"
                            ),
                        ));
                    }
                }
                if self.run.tagged.contains(&sid) {
                    out.push(at(
                        self,
                        "subagent.announce-late",
                        format!("SUBAGENT_STARTED for '{sid}' after events already attributed to it"),
                    ));
                }
                if self.track(out, ty) {
                    self.run.subagents.insert(sid);
                }
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let sid = id("subagentRunId");
                if !self.run.subagents.remove(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!("{ty} for '{sid}', no subagent active under that id"),
                    ));
                }
                let outcome = ev.get("outcome");
                if outcome.and_then(|o| o.get("type")).and_then(Value::as_str) == Some("suspended")
                    && self.run.suspended.len() < MAX_TRACKED
                {
                    let ids = outcome
                        .and_then(|o| o.get("interruptIds"))
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                        .unwrap_or_default();
                    self.run.suspended.push((sid.clone(), ids));
                }
                self.run.closed_subagents.insert(sid);
            }
            "MESSAGES_SNAPSHOT" => self.seed_owners(ev.get("messages"), true, out, ty),
            "STATE_SNAPSHOT" => self.set_state(ev.get("snapshot").cloned().unwrap_or(Value::Null)),
            "STATE_DELTA" => {
                let (Some(st), Some(delta)) = (&self.state, ev.get("delta").and_then(Value::as_array)) else { return };
                match patch::apply(st, delta) {
                    Ok(next) => {
                        self.state_bytes += serde_json::to_string(delta).map_or(0, |d| d.len());
                        self.state = Some(next);
                        if self.state_bytes > MAX_STATE {
                            self.state = None;
                            if !self.limit_reported {
                                self.limit_reported = true;
                                out.push(at(
                                    self,
                                    "limit.tracking",
                                    "over 64 MiB of state: later deltas go unchecked".into(),
                                ));
                            }
                        }
                    }
                    Err(e) => out.push(at(
                        self,
                        "state.delta-applies",
                        format!("the patch does not apply to the state (the client warns and skips it): {e}"),
                    )),
                }
            }
            _ => {}
        }
    }

    /// Notes a message the client now holds, unless the cap is reached.
    fn hold(&mut self, id: &str, role: &str) {
        if self.held.len() < MAX_TRACKED || self.held.contains_key(id) {
            self.held.insert(id.to_string(), role.to_string());
        } else {
            self.held_capped = true;
        }
    }

    fn hold_messages(&mut self, msgs: &[Value], replace: bool) {
        for m in msgs {
            let (Some(id), Some(role)) = (m.get("id").and_then(Value::as_str), m.get("role").and_then(Value::as_str))
            else {
                continue;
            };
            if replace || !self.held.contains_key(id) {
                self.hold(id, role);
            }
            for tc in m.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
                if let (Some(tid), Some(name)) =
                    (tc.get("id").and_then(Value::as_str), tc.pointer("/function/name").and_then(Value::as_str))
                {
                    if self.calls.len() < MAX_TRACKED {
                        self.calls.insert(tid.to_string(), name.to_string());
                    }
                }
            }
        }
    }

    /// What the client's reducer does with an event the sequence checks
    /// passed, as far as it can go wrong: a continuation for a message or
    /// tool call it no longer holds, or an id held by a message of another
    /// kind. It warns, and drops or redirects the event.
    fn apply(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let id = |k: &str| s(ev, k).unwrap_or_default().to_string();
        let role_of = |c: &Checker, id: &str| c.held.get(id).cloned();
        let mut find = |c: &Checker, rule: &'static str, m: String| out.push(c.at(rule, Some(ty), m));
        match ty {
            "RUN_STARTED" => {
                if let Some(msgs) = ev.get("input").and_then(|i| i.get("messages")).and_then(Value::as_array) {
                    self.hold_messages(msgs, false);
                }
            }
            "MESSAGES_SNAPSHOT" => {
                let msgs = ev.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
                let has = |r: &str| msgs.iter().any(|m| m.get("role").and_then(Value::as_str) == Some(r));
                let (activity, reasoning) = (has("activity"), has("reasoning"));
                // Kept: client-only messages of a kind the snapshot does not carry.
                self.held.retain(|_, role| (role == "activity" && !activity) || (role == "reasoning" && !reasoning));
                self.calls.clear();
                self.held_capped = false;
                self.hold_messages(&msgs, true);
            }
            "TEXT_MESSAGE_START" | "REASONING_MESSAGE_START" => {
                let mid = id("messageId");
                match role_of(self, &mid).as_deref() {
                    Some("activity") => find(
                        self,
                        "message.role",
                        format!("{ty} for '{mid}', an activity message's id: the client drops the event"),
                    ),
                    Some(_) => {}
                    None => {
                        let role = if ty == "REASONING_MESSAGE_START" {
                            "reasoning"
                        } else {
                            s(ev, "role").unwrap_or("assistant")
                        };
                        self.hold(&mid, role);
                    }
                }
            }
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" | "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" => {
                let mid = id("messageId");
                match role_of(self, &mid).as_deref() {
                    Some("activity") => find(
                        self,
                        "message.role",
                        format!("{ty} for '{mid}', an activity message's id: the client drops the event"),
                    ),
                    Some(_) => {}
                    None if !self.held_capped => find(
                        self,
                        "message.held",
                        format!("{ty} for '{mid}', a message the client no longer holds (a MESSAGES_SNAPSHOT without it dropped it)"),
                    ),
                    None => {}
                }
            }
            "TOOL_CALL_START" => {
                let (tid, name) = (id("toolCallId"), id("toolCallName"));
                if let Some(was) = self.calls.get(&tid) {
                    if *was != name {
                        let m = format!(
                            "TOOL_CALL_START for '{tid}', a call the client holds as {was:?}: it renames it {name:?}"
                        );
                        find(self, "message.role", m);
                    }
                    return;
                }
                let mut holder = s(ev, "parentMessageId").unwrap_or(&tid).to_string();
                if let Some(parent) = s(ev, "parentMessageId") {
                    match role_of(self, parent).as_deref() {
                        Some("assistant") | None => {}
                        Some(role) => {
                            find(
                                self,
                                "message.role",
                                format!("TOOL_CALL_START '{tid}' names parentMessageId '{parent}', a {role} message, not the assistant's: the client files the call elsewhere"),
                            );
                            holder = tid.clone();
                        }
                    }
                }
                if role_of(self, &holder).is_none() {
                    self.hold(&holder, "assistant");
                }
                if self.calls.len() < MAX_TRACKED {
                    self.calls.insert(tid, name);
                } else {
                    self.held_capped = true;
                }
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let tid = id("toolCallId");
                if !self.calls.contains_key(&tid) && !self.held_capped {
                    find(
                        self,
                        "message.held",
                        format!("{ty} for '{tid}', a tool call the client no longer holds (a MESSAGES_SNAPSHOT without its message dropped it)"),
                    );
                }
            }
            "TOOL_CALL_RESULT" => self.hold(&id("messageId"), "tool"),
            "ACTIVITY_SNAPSHOT" => {
                let mid = id("messageId");
                if role_of(self, &mid).is_none() {
                    self.hold(&mid, "activity");
                }
            }
            "ACTIVITY_DELTA" => {
                let mid = id("messageId");
                if let Some(role) = role_of(self, &mid).filter(|r| r != "activity") {
                    find(
                        self,
                        "message.role",
                        format!("ACTIVITY_DELTA for '{mid}', a {role} message: the client drops it"),
                    );
                }
            }
            _ => {}
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
            Phase::Start => out.push(end("run.unterminated", "the stream holds no event".into())),
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

/// How the input is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Sse,
    Jsonl,
}

/// A whole input, bytes in as they come: SSE frames or JSON lines (told, or
/// read off the first non-blank byte: `{` is JSON lines), checked as they
/// complete. Holds at most one frame or line ([`MAX_FRAME`]).
pub struct Stream {
    format: Option<Format>,
    checker: Checker,
    line: Vec<u8>,
    /// The line in hand is over the cap: skip to its end.
    skipping: bool,
    /// The SSE frame's data lines so far, joined with LF.
    data: Vec<u8>,
    has_data: bool,
    frame_too_large: bool,
    cr_reported: bool,
    prev_cr: bool,
    /// Leading whitespace read before the framing was known.
    pending: Vec<u8>,
}

impl Stream {
    pub fn new(format: Option<Format>, opts: Options) -> Stream {
        Stream {
            format,
            checker: Checker::new(opts),
            line: Vec::new(),
            skipping: false,
            data: Vec::new(),
            has_data: false,
            frame_too_large: false,
            cr_reported: false,
            prev_cr: false,
            pending: Vec::new(),
        }
    }

    /// The checker (for its event count).
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// More bytes of the input; the findings they complete.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.format.is_none() {
            // Whitespace only so far could be SSE blank lines or empty JSON
            // lines: kept until a byte decides, or [`MAX_FRAME`] of it
            // (then it is SSE), so memory stays bounded.
            self.pending.extend_from_slice(bytes);
            let head = &self.pending[..self.pending.len().min(MAX_FRAME)];
            self.format = match head.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(first) if head[first] == b'{' => Some(Format::Jsonl),
                Some(_) => Some(Format::Sse),
                None if head.len() == MAX_FRAME => Some(Format::Sse),
                None => return out,
            };
            let pending = std::mem::take(&mut self.pending);
            return self.feed(&pending);
        }
        while !bytes.is_empty() {
            // SSE ends a line at LF, CR or CRLF; JSON lines at LF (a CR before it is dropped).
            let sse = self.format == Some(Format::Sse);
            let end = bytes.iter().position(|&b| b == b'\n' || (sse && b == b'\r'));
            let (chunk, rest, done) = match end {
                Some(i) => (&bytes[..i], &bytes[i + 1..], Some(bytes[i])),
                None => (bytes, &b""[..], None),
            };
            if sse
                && (done == Some(b'\r') || (chunk.is_empty() && done == Some(b'\n') && self.prev_cr))
                && !self.cr_reported
            {
                self.cr_reported = true;
                let f = Finding {
                    rule: "framing.crlf",
                    index: Some(self.checker.events() + 1),
                    event: None,
                    message: "a CR byte in the stream: AG-UI's SSE binding frames with LF only".into(),
                };
                out.push(f);
            }
            if !self.skipping {
                if self.line.len() + chunk.len() > MAX_FRAME {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            bytes = rest;
            if let Some(b) = done {
                // An LF right after a CR ends nothing: CRLF is one line end.
                let crlf_tail = b == b'\n' && self.prev_cr && chunk.is_empty();
                self.prev_cr = b == b'\r';
                if crlf_tail {
                    continue;
                }
                let line = std::mem::take(&mut self.line);
                let too_long = std::mem::replace(&mut self.skipping, false);
                self.line_done(&line, too_long, &mut out);
            } else {
                self.prev_cr = false;
            }
        }
        out
    }

    fn line_done(&mut self, line: &[u8], too_long: bool, out: &mut Vec<Finding>) {
        if self.format == Some(Format::Jsonl) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if too_long {
                out.push(self.checker.unreadable("framing.too-large", format!("a line over {MAX_FRAME} bytes")));
            } else if !line.iter().all(u8::is_ascii_whitespace) {
                out.extend(self.checker.payload(line));
            }
            return;
        }
        if line.is_empty() && !too_long {
            return self.dispatch(out);
        }
        if too_long {
            self.frame_too_large = true;
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.has_data = true;
                if self.data.len() + value.len() > MAX_FRAME {
                    self.frame_too_large = true;
                    self.data.clear();
                } else if !self.frame_too_large {
                    self.data.extend_from_slice(value);
                }
            }
            b"id" if value.contains(&0) => out.push(Finding {
                rule: "framing.id",
                index: Some(self.checker.events() + 1),
                event: None,
                message: "an id: field holding NUL: EventSource ignores it, so a reconnecting client would not resume from it".into(),
            }),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Finding>) {
        if std::mem::replace(&mut self.frame_too_large, false) {
            out.push(self.checker.unreadable("framing.too-large", format!("a frame over {MAX_FRAME} bytes")));
        } else if self.has_data {
            out.extend(self.checker.payload(&self.data));
        }
        self.data.clear();
        self.has_data = false;
    }

    /// The end of the input.
    pub fn finish(&mut self) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.format.is_none() && !self.pending.is_empty() {
            // Whitespace only: read as SSE, whose line ends it checks.
            self.format = Some(Format::Sse);
            let pending = std::mem::take(&mut self.pending);
            out.extend(self.feed(&pending));
        }
        if !self.line.is_empty() || self.skipping {
            let line = std::mem::take(&mut self.line);
            let too_long = std::mem::replace(&mut self.skipping, false);
            self.line_done(&line, too_long, &mut out);
        }
        if self.format == Some(Format::Sse) && (self.has_data || self.frame_too_large) {
            out.push(Finding {
                rule: "framing.unterminated",
                index: Some(self.checker.events() + 1),
                event: None,
                message: "the stream ends inside a frame: its data lines have no blank line after them".into(),
            });
            // The official client still reads the trailing frame: check its event too.
            self.dispatch(&mut out);
        }
        out.extend(self.checker.finish());
        out
    }
}

/// Checks a whole input at once.
pub fn check_bytes(input: &[u8], format: Option<Format>, opts: Options) -> Vec<Finding> {
    let mut s = Stream::new(format, opts);
    let mut out = s.feed(input);
    out.extend(s.finish());
    out
}

/// Checks events already parsed (a test's, or a producer's in memory).
pub fn check_events(events: &[Value], opts: Options) -> Vec<Finding> {
    let mut c = Checker::new(opts);
    let mut out: Vec<Finding> = events.iter().flat_map(|e| c.event(e)).collect();
    out.extend(c.finish());
    out
}

#[cfg(test)]
mod tests {
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
