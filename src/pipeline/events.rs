//! `events/v1`: the neutral event schema every adapter normalizes into.
//!
//! One JSON object a line:
//! `{"v":"events/v1","run":R,"task":T,"session":S,"seq":12,"ts":"…","type":K,"data":{…}}`.
//! The contract (field by field) is `spec/events.schema.json`; this module is
//! its Rust mirror, used both to write (normalize) and to read (translate,
//! encode, serve) the stream.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

pub const VERSION: &str = "events/v1";

/// Position of an event in its source: the 1-based source line, and, when
/// that line produced several events, the 1-based index among them (`sub`
/// is 0 for a line that produced exactly one). Serialized as `12` or `"12.2"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq {
    pub line: u64,
    pub sub: u32,
}

impl Seq {
    /// Parses `12`, `"12"` or `"12.2"` (no sign, no leading zeros are
    /// required to be absent, but the parts must be decimal digits).
    pub fn parse(s: &str) -> Option<Seq> {
        let s = s.trim();
        let (l, sub) = match s.split_once('.') {
            Some((l, r)) => (l, r.parse::<u32>().ok().filter(|&k| k >= 1)?),
            None => (s, 0),
        };
        if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let line = l.parse::<u64>().ok()?;
        Some(Seq { line, sub })
    }

    /// Reads a seq from a JSON value (integer or string form).
    pub fn from_value(v: &Value) -> Option<Seq> {
        match v {
            Value::Number(n) => n.as_u64().map(|line| Seq { line, sub: 0 }),
            Value::String(s) => Seq::parse(s),
            _ => None,
        }
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sub == 0 {
            write!(f, "{}", self.line)
        } else {
            write!(f, "{}.{}", self.line, self.sub)
        }
    }
}

impl Serialize for Seq {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.sub == 0 {
            s.serialize_u64(self.line)
        } else {
            s.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Seq {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seq, D::Error> {
        let v = Value::deserialize(d)?;
        Seq::from_value(&v).ok_or_else(|| D::Error::custom("seq must be a positive integer or a \"line.k\" string"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Text,
    Reasoning,
}

/// Token counts in one neutral shape (each adapter maps its own names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cached_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_write_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reasoning_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cwd: Option<String>,
}

/// Who produced an event inside a subagent: the invocation, not the
/// subagent's definition (two runs of the same subagent type are two).
/// Boxed in the events that carry it, so an event of the main agent pays
/// one pointer for it and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subagent {
    /// The tool call (or the agent's item) that spawned the subagent.
    pub tool_call: String,
    /// This invocation, unique in the session (claude: the spawning
    /// tool_use id; codex: the subagent's thread id).
    pub id: String,
    /// Always given: the subagent's type or path, else the spawning tool's name.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    /// The enclosing subagent's `id`, for a subagent a subagent spawned.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent_id: Option<String>,
}

impl Subagent {
    /// An invocation known only by its spawning call (no type, no description).
    pub fn of_call(call: &str) -> Subagent {
        Subagent {
            tool_call: call.to_string(),
            id: call.to_string(),
            name: "subagent".to_string(),
            description: None,
            parent_id: None,
        }
    }
}

impl<'de> Deserialize<'de> for Subagent {
    /// The object form, or the bare tool call id events/v1 streams written
    /// before the identity grew (read as an invocation named `subagent`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Subagent, D::Error> {
        #[derive(Deserialize)]
        struct Full {
            tool_call: String,
            id: String,
            name: String,
            #[serde(default)]
            description: Option<String>,
            #[serde(default)]
            parent_id: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Call(String),
            Full(Full),
        }
        Ok(match Form::deserialize(d)? {
            Form::Call(c) => Subagent::of_call(&c),
            Form::Full(f) => Subagent {
                tool_call: f.tool_call,
                id: f.id,
                name: f.name,
                description: f.description,
                parent_id: f.parent_id,
            },
        })
    }
}

/// `parent` of an event: the subagent that produced it (absent: the main agent).
pub type Parent = Option<Box<Subagent>>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenDelta {
    pub text: String,
    pub channel: Channel,
    /// The source's message id (or a position-derived one where the source has none).
    pub message: String,
    /// The subagent this text belongs to.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Parent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub args: Value,
    /// The assistant message that carries the call, where the source names it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Parent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub id: String,
    pub output: String,
    pub is_error: bool,
    pub truncated: bool,
    /// Length in bytes of the whole output before any cut.
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Parent,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub ok: bool,
    /// Why the turn failed, in the agent's words where it gave any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_api_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub num_turns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    /// Human-readable sentence.
    pub reason: String,
    /// Machine-readable class: `not_json`, `unknown_kind`, `agent_error`,
    /// `agent_warning`, `api_retry`, `invalid_line`, `missing_id`,
    /// `orphan_delta`, `line_too_long`.
    pub code: String,
    /// The first few KiB of the raw source line (lossy UTF-8, secrets redacted).
    pub raw: String,
    pub fatal: bool,
}

/// An agent event that has no other type but that a viewer wants (progress,
/// retries, notifications): passed through under a `runwire.<kind>` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Custom {
    /// `runwire.<kind>`, e.g. `runwire.tool_progress`.
    pub name: String,
    /// The agent's fields, as it wrote them (any JSON).
    pub value: Value,
    /// The subagent the notice is about or came from.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Parent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exit {
    pub rc: i64,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
}

/// What a pending [`InputRequest`] asks of a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// May the agent run this tool call (as is, edited, or not at all)?
    ToolApproval,
    /// The agent asks one or more multiple-choice questions.
    Question,
    /// The agent presents a plan and waits for approval to carry it out.
    PlanApproval,
}

impl InputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::ToolApproval => "tool_approval",
            InputKind::Question => "question",
            InputKind::PlanApproval => "plan_approval",
        }
    }
}

/// One choice of a [`Question`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOption {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
}

/// One question of a `question` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// The question text; answers are keyed by it.
    pub question: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub header: Option<String>,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    #[serde(default)]
    pub multi_select: bool,
    /// Besides its options, the question takes an answer in the person's
    /// own words (claude's "Other", codex's `isOther`). Absent: choices
    /// only (a question that lists no options takes any text anyway).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub free_text: bool,
}

/// `input_request`: the agent waits for a person (also the body of the raw
/// `runwire.request` log line the session writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// The request id, unique within the session (claude: the control request id).
    pub id: String,
    /// runwire's interrupt id for this request (`rw-` and 128 random bits),
    /// minted by the session when the agent asks: it names this request of
    /// this agent process and no other (codex and ACP number their requests
    /// 0, 1, 2… in every process). Answers name the request by it on every
    /// door that outlives a process (`crate::control`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt_id: Option<String>,
    pub kind: InputKind,
    /// The tool call this request concerns (already streamed as a `tool_call`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    /// The tool call's input, as the agent would run it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub input: Option<Value>,
    /// The agent's own suggestions (claude: `permission_suggestions`), verbatim.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suggestions: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub questions: Option<Vec<Question>>,
    /// Why the agent asks, or the plan, in its words.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// RFC 3339: when an unanswered request is denied (fail closed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<String>,
    /// `false`: the agent goes on working while it waits (codex
    /// `isBlocking: false`); the request is cancelled at the turn's end if
    /// unanswered. Absent: the agent waits for the answer.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub blocking: Option<bool>,
}

/// How an [`InputRequest`] was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    /// The questions were answered (`answers`).
    Answer,
    /// Withdrawn (by the agent, an interrupt, the session's end, or a client abandoning it): the agent was told no.
    Cancelled,
    /// Nobody answered before `expires_at`: denied.
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Answer => "answer",
            Decision::Cancelled => "cancelled",
            Decision::Expired => "expired",
        }
    }
}

/// How far an `allow` reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Once,
    Session,
    /// A grant the agent saves beyond the session (codex execpolicy or
    /// network amendments, ACP `allow_always`, claude rules saved to its
    /// settings): "always, saved by the agent".
    Always,
}

impl Scope {
    /// The word on the wire (`once`, `session`, `always`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Session => "session",
            Scope::Always => "always",
        }
    }
}

/// `input_answer`: a request was answered or closed (also the body of the
/// raw `runwire.answer` log line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputAnswer {
    pub id: String,
    /// runwire's interrupt id of the request closed (its `input_request`'s
    /// `interrupt_id`), set by the session.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt_id: Option<String>,
    pub decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<Scope>,
    /// The input the tool runs with instead of the agent's (a full replacement).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub updated_input: Option<Value>,
    /// Question text -> chosen label or, where the question takes it
    /// ([`Question::free_text`]), the person's own text (several answers of
    /// a multi-select joined by ", ").
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub answers: Option<serde_json::Map<String, Value>>,
    /// The reason given to the agent with a deny.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// `allow` of a plan: the permission mode the session switched the
    /// agent to, to carry the plan out in (the answer's `mode`, else the
    /// session's `--plan-exit-mode`), as the agent was told it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<String>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
    /// RFC 3339: when the answer was given.
    pub at: String,
    /// The door the answer came through (the journal's `door`), when a
    /// door of this process said: not part of the event's wire shape.
    #[serde(skip)]
    pub door: Option<String>,
}

/// The `type` plus its `data`.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    TurnStart(TurnStart),
    TokenDelta(TokenDelta),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    TurnEnd(TurnEnd),
    Error(ErrorData),
    Exit(Exit),
    Custom(Custom),
    InputRequest(InputRequest),
    InputAnswer(InputAnswer),
}

impl Data {
    pub fn type_name(&self) -> &'static str {
        match self {
            Data::TurnStart(_) => "turn_start",
            Data::TokenDelta(_) => "token_delta",
            Data::ToolCall(_) => "tool_call",
            Data::ToolResult(_) => "tool_result",
            Data::TurnEnd(_) => "turn_end",
            Data::Error(_) => "error",
            Data::Exit(_) => "exit",
            Data::Custom(_) => "custom",
            Data::InputRequest(_) => "input_request",
            Data::InputAnswer(_) => "input_answer",
        }
    }

    fn serialize_data<S: serde::ser::SerializeMap>(&self, m: &mut S) -> Result<(), S::Error> {
        match self {
            Data::TurnStart(d) => m.serialize_entry("data", d),
            Data::TokenDelta(d) => m.serialize_entry("data", d),
            Data::ToolCall(d) => m.serialize_entry("data", d),
            Data::ToolResult(d) => m.serialize_entry("data", d),
            Data::TurnEnd(d) => m.serialize_entry("data", d),
            Data::Error(d) => m.serialize_entry("data", d),
            Data::Exit(d) => m.serialize_entry("data", d),
            Data::Custom(d) => m.serialize_entry("data", d),
            Data::InputRequest(d) => m.serialize_entry("data", d),
            Data::InputAnswer(d) => m.serialize_entry("data", d),
        }
    }

    /// Builds typed data from a `type` name and its raw `data` object.
    pub fn from_parts(kind: &str, data: &str) -> Result<Data, String> {
        fn p<'a, T: Deserialize<'a>>(s: &'a str) -> Result<T, String> {
            serde_json::from_str(s).map_err(|e| format!("data: {e}"))
        }
        Ok(match kind {
            "turn_start" => Data::TurnStart(p(data)?),
            "token_delta" => Data::TokenDelta(p(data)?),
            "tool_call" => Data::ToolCall(p(data)?),
            "tool_result" => Data::ToolResult(p(data)?),
            "turn_end" => Data::TurnEnd(p(data)?),
            "error" => Data::Error(p(data)?),
            "exit" => Data::Exit(p(data)?),
            "custom" => Data::Custom(p(data)?),
            "input_request" => Data::InputRequest(p(data)?),
            "input_answer" => Data::InputAnswer(p(data)?),
            other => return Err(format!("type: unknown event type {other:?}")),
        })
    }
}

/// One `events/v1` record.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub run: Option<String>,
    pub task: Option<String>,
    pub session: Option<String>,
    pub seq: Seq,
    /// Epoch milliseconds; written as RFC 3339 UTC.
    pub ts_ms: i64,
    pub data: Data,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("v", VERSION)?;
        if let Some(r) = &self.run {
            m.serialize_entry("run", r)?;
        }
        if let Some(t) = &self.task {
            m.serialize_entry("task", t)?;
        }
        if let Some(se) = &self.session {
            m.serialize_entry("session", se)?;
        }
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("ts", &*cached_ts(self.ts_ms))?;
        m.serialize_entry("type", self.data.type_name())?;
        self.data.serialize_data(&mut m)?;
        m.end()
    }
}

/// Writes events as compact JSON lines, byte for byte what `serde_json`
/// writes for [`Event`], but faster on a long stream: the envelope's constant
/// part (`v`, `run`, `task`, `session`) is escaped once and reused while it
/// does not change, and the commonest record (`token_delta`) is written by
/// hand. `normalize-events` spends most of its output time here.
#[derive(Default)]
pub struct Writer {
    key: (Option<String>, Option<String>, Option<String>),
    prefix: Vec<u8>,
    ts: Option<(i64, String)>,
}

impl Writer {
    /// Appends `ev` as one JSON line (with its `\n`) to `out`.
    pub fn write(&mut self, ev: &Event, out: &mut Vec<u8>) {
        if self.prefix.is_empty() || self.key.0 != ev.run || self.key.1 != ev.task || self.key.2 != ev.session {
            self.key = (ev.run.clone(), ev.task.clone(), ev.session.clone());
            self.prefix.clear();
            self.prefix.extend_from_slice(br#"{"v":"events/v1""#);
            for (name, v) in [("run", &ev.run), ("task", &ev.task), ("session", &ev.session)] {
                if let Some(v) = v {
                    self.prefix.extend_from_slice(format!(",\"{name}\":").as_bytes());
                    json_str(&mut self.prefix, v);
                }
            }
            self.prefix.extend_from_slice(br#","seq":"#);
        }
        out.extend_from_slice(&self.prefix);
        if ev.seq.sub == 0 {
            out.extend_from_slice(ev.seq.line.to_string().as_bytes());
        } else {
            out.extend_from_slice(format!("\"{}.{}\"", ev.seq.line, ev.seq.sub).as_bytes());
        }
        out.extend_from_slice(br#","ts":""#);
        match &self.ts {
            Some((ms, text)) if *ms == ev.ts_ms => out.extend_from_slice(text.as_bytes()),
            _ => {
                let text = crate::util::time::format_ms(ev.ts_ms);
                out.extend_from_slice(text.as_bytes());
                self.ts = Some((ev.ts_ms, text));
            }
        }
        out.extend_from_slice(br#"","type":""#);
        out.extend_from_slice(ev.data.type_name().as_bytes());
        out.extend_from_slice(br#"","data":"#);
        match &ev.data {
            Data::TokenDelta(d) => {
                out.extend_from_slice(br#"{"text":"#);
                json_str(out, &d.text);
                out.extend_from_slice(match d.channel {
                    Channel::Text => br#","channel":"text","message":"#.as_slice(),
                    Channel::Reasoning => br#","channel":"reasoning","message":"#.as_slice(),
                });
                json_str(out, &d.message);
                if let Some(p) = &d.parent {
                    out.extend_from_slice(br#","parent":"#);
                    // Writing into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut *out, p);
                }
                out.push(b'}');
            }
            other => {
                let mut w = &mut *out;
                let _ = match other {
                    Data::TurnStart(d) => serde_json::to_writer(&mut w, d),
                    Data::TokenDelta(d) => serde_json::to_writer(&mut w, d),
                    Data::ToolCall(d) => serde_json::to_writer(&mut w, d),
                    Data::ToolResult(d) => serde_json::to_writer(&mut w, d),
                    Data::TurnEnd(d) => serde_json::to_writer(&mut w, d),
                    Data::Error(d) => serde_json::to_writer(&mut w, d),
                    Data::Exit(d) => serde_json::to_writer(&mut w, d),
                    Data::Custom(d) => serde_json::to_writer(&mut w, d),
                    Data::InputRequest(d) => serde_json::to_writer(&mut w, d),
                    Data::InputAnswer(d) => serde_json::to_writer(&mut w, d),
                };
            }
        }
        out.extend_from_slice(b"}\n");
    }
}

/// A JSON string literal, escaped exactly as serde_json escapes it.
fn json_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Consecutive events mostly share a timestamp: format each instant once.
fn cached_ts(ms: i64) -> std::rc::Rc<str> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(i64, std::rc::Rc<str>)>> = const { std::cell::RefCell::new(None) };
    }
    LAST.with(|c| {
        let mut c = c.borrow_mut();
        match &*c {
            Some((m, s)) if *m == ms => s.clone(),
            _ => {
                let s: std::rc::Rc<str> = crate::util::time::format_ms(ms).into();
                *c = Some((ms, s.clone()));
                s
            }
        }
    })
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    v: &'a str,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    session: Option<String>,
    seq: Seq,
    ts: std::borrow::Cow<'a, str>,
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    data: &'a RawValue,
}

impl Event {
    /// Parses one `events/v1` line, naming the offending field on failure.
    pub fn parse(line: &[u8]) -> Result<Event, String> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
        let w: WireEvent =
            serde_json::from_str(text.trim_end()).map_err(|e| format!("not an events/v1 object: {e}"))?;
        if w.v != VERSION {
            return Err(format!("v: expected {VERSION:?}, found {:?}", w.v));
        }
        let ts_ms = crate::util::time::parse_rfc3339_ms(&w.ts)
            .ok_or_else(|| format!("ts: not an RFC 3339 time: {:?}", w.ts))?;
        let data = Data::from_parts(&w.kind, w.data.get())?;
        Ok(Event { run: w.run, task: w.task, session: w.session, seq: w.seq, ts_ms, data })
    }

    /// Compact JSON, one line, no trailing newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("events serialize infallibly")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_orders_line_then_sub() {
        let s = |x| Seq::parse(x).unwrap();
        assert!(s("12") < s("12.1"));
        assert!(s("12.1") < s("12.2"));
        assert!(s("12.10") > s("12.9"));
        assert!(s("12.2") < s("13"));
        assert_eq!(Seq::parse("12.0"), None);
        assert_eq!(Seq::parse("-1"), None);
        assert_eq!(Seq::parse("a.1"), None);
        assert_eq!(s("7.3").to_string(), "7.3");
    }

    #[test]
    fn event_round_trips() {
        let e = Event {
            run: Some("r".into()),
            task: None,
            session: Some("s".into()),
            seq: Seq { line: 3, sub: 2 },
            ts_ms: 1_000,
            data: Data::TokenDelta(TokenDelta {
                text: "hi\n".into(),
                channel: Channel::Text,
                message: "m".into(),
                parent: None,
            }),
        };
        let j = e.to_json();
        assert_eq!(
            j,
            r#"{"v":"events/v1","run":"r","session":"s","seq":"3.2","ts":"1970-01-01T00:00:01.000Z","type":"token_delta","data":{"text":"hi\n","channel":"text","message":"m"}}"#
        );
        assert_eq!(Event::parse(j.as_bytes()).unwrap(), e);
    }

    #[test]
    fn the_fast_writer_writes_what_serde_writes() {
        let mut w = Writer::default();
        let mut out = Vec::new();
        let mk = |run: Option<&str>, session: Option<&str>, sub, data| Event {
            run: run.map(String::from),
            task: None,
            session: session.map(String::from),
            seq: Seq { line: 7, sub },
            ts_ms: 1_788_000_000_123,
            data,
        };
        let delta = |parent: Option<&str>| {
            Data::TokenDelta(TokenDelta {
                text: "a \"quote\"\n\u{1}é".into(),
                channel: Channel::Reasoning,
                message: "m\\1".into(),
                parent: parent.map(|p| {
                    let mut s = Subagent::of_call(p);
                    s.description = Some("a \"quoted\" task".into());
                    s.parent_id = Some("toolu_0".into());
                    Box::new(s)
                }),
            })
        };
        let evs = [
            mk(None, None, 0, delta(None)),
            mk(Some("r\"1"), None, 1, delta(Some("toolu_1"))),
            mk(Some("r\"1"), Some("s"), 2, Data::Exit(Exit { rc: 3, ok: false, detail: None })),
            mk(None, Some("s"), 0, Data::TurnEnd(TurnEnd { ok: true, cost_usd: Some(0.1), ..TurnEnd::default() })),
        ];
        for e in &evs {
            out.clear();
            w.write(e, &mut out);
            assert_eq!(String::from_utf8(out.clone()).unwrap(), format!("{}\n", e.to_json()));
        }
    }

    #[test]
    fn a_bare_parent_of_an_older_stream_reads_as_an_invocation_of_its_call() {
        let line = br#"{"v":"events/v1","seq":1,"ts":"1970-01-01T00:00:00.000Z","type":"token_delta","data":{"text":"x","channel":"text","message":"m","parent":"toolu_1"}}"#;
        let Data::TokenDelta(d) = Event::parse(line).unwrap().data else { panic!() };
        assert_eq!(d.parent.as_deref(), Some(&Subagent::of_call("toolu_1")));
        let bad = br#"{"v":"events/v1","seq":1,"ts":"1970-01-01T00:00:00.000Z","type":"token_delta","data":{"text":"x","channel":"text","message":"m","parent":{"id":"i"}}}"#;
        assert!(Event::parse(bad).unwrap_err().starts_with("data:"));
    }

    #[test]
    fn parse_names_the_bad_field() {
        let bad = br#"{"v":"events/v1","seq":1,"ts":"x","type":"exit","data":{"rc":0,"ok":true}}"#;
        assert!(Event::parse(bad).unwrap_err().starts_with("ts:"));
        let bad = br#"{"v":"events/v1","seq":1,"ts":"1970-01-01T00:00:00Z","type":"nope","data":{}}"#;
        assert!(Event::parse(bad).unwrap_err().starts_with("type:"));
    }
}
