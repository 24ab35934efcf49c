//! Stage 1: an agent's raw JSON lines → `events/v1`.
//!
//! [`Normalizer`] is a state object with no IO: feed it one source line at a
//! time with [`Normalizer::push`]. Every event carries `seq`, the 1-based
//! ordinal of the source line that produced it (`"<line>.<k>"` when one line
//! produced several), so re-reading the same log from the start yields the
//! same ids in any process: this is what exact SSE resume rests on.
//!
//! Each dialect lives in its own module and keeps a table of the kinds it
//! knows; a known-irrelevant kind is skipped, an unknown kind or a non-JSON
//! line becomes one non-fatal `error` event, and the stream goes on.

mod acp;
mod claude;
mod codex;
mod codex_app;
mod cursor;
pub mod elicit;
pub mod lenient;
pub mod redact;

use crate::events::{Data, ErrorData, Event, Exit, Seq};
use crate::time::Clock;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// Which agent CLI wrote the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Adapter {
    /// `claude -p --output-format stream-json --verbose [--include-partial-messages]`
    Claude,
    /// `cursor-agent --print --output-format stream-json [--stream-partial-output]`
    Cursor,
    /// `codex exec --json` (current `thread/turn/item` and legacy `{id,msg}` formats)
    Codex,
}

impl Adapter {
    pub fn name(self) -> &'static str {
        match self {
            Adapter::Claude => "claude",
            Adapter::Cursor => "cursor",
            Adapter::Codex => "codex",
        }
    }
}

/// Stamps put on every event, and the fallback clock.
#[derive(Debug, Clone)]
pub struct Options {
    pub run: Option<String>,
    pub task: Option<String>,
    /// Time for lines that carry none of their own.
    pub clock: Clock,
}

impl Default for Options {
    fn default() -> Options {
        Options { run: None, task: None, clock: Clock::from_env() }
    }
}

enum Dialect {
    Claude(claude::Claude),
    Cursor(cursor::Cursor),
    Codex(codex::Codex),
    CodexApp(codex_app::CodexApp),
    Acp(acp::Acp),
}

/// What times a line that has neither an arrival time nor a time of its own.
#[derive(Debug, Clone, Copy)]
enum Untimed {
    /// A live pipe: the time it is read.
    ReadTime,
    /// A file: nothing (the previous `ts`; this before the first).
    Keep(i64),
}

/// The `ts` rule's state ([`Normalizer::push_at`]).
#[derive(Debug, Clone, Copy)]
struct Ts {
    last: Option<i64>,
    untimed: Untimed,
}

impl Ts {
    fn next(&mut self, candidate: Option<i64>, clock: Clock) -> i64 {
        let candidate = match (candidate, self.untimed) {
            (Some(c), _) => Some(c),
            (None, Untimed::ReadTime) => Some(clock.now_ms()),
            (None, Untimed::Keep(_)) => None,
        };
        let ts = match (self.last, candidate) {
            (Some(p), Some(c)) => p.max(c),
            (Some(p), None) => p,
            (None, Some(c)) => c,
            (None, None) => match self.untimed {
                Untimed::Keep(m) => m,
                Untimed::ReadTime => clock.now_ms(),
            },
        };
        self.last = Some(ts);
        ts
    }
}

/// The normalizer for one agent stream.
pub struct Normalizer {
    dialect: Dialect,
    /// The stream's format (print mode or JSON-RPC) is not known yet.
    detect: bool,
    opts: Options,
    line_no: u64,
    session: Option<String>,
    resume: Option<String>,
    scratch: Vec<Data>,
    /// Set by [`Normalizer::push_too_long`] for the line it pushes.
    too_long: Option<u64>,
    ts: Ts,
}

/// What a dialect sees while handling one line.
pub(crate) struct Ctx<'a> {
    pub out: &'a mut Vec<Data>,
    pub session: &'a mut Option<String>,
    /// The session a wrapper would resume ([`Normalizer::resume_session`]).
    pub resume: &'a mut Option<String>,
    /// The line's own time, when the dialect found one.
    pub ts_ms: Option<i64>,
    pub line_no: u64,
}

impl Ctx<'_> {
    pub fn emit(&mut self, d: Data) {
        self.out.push(d);
    }

    /// Records the session id unless one is already known.
    pub fn offer_session(&mut self, s: Option<&str>) {
        if self.session.is_none() {
            if let Some(s) = s.filter(|s| !s.is_empty()) {
                *self.session = Some(s.to_string());
            }
        }
    }

    /// A line of the engine's own names its session before the line that
    /// announces it (claude runs its SessionStart hooks in the session it was
    /// given, before `system/init`): resumable, unless something named one.
    pub fn offer_resume(&mut self, s: Option<&str>) {
        if self.resume.is_none() {
            self.announce_session(s);
        }
    }

    /// The engine itself names its session (claude/cursor `system/init`,
    /// codex `thread.started`): that id can be resumed. The latest one wins,
    /// as a resumed or forked run names its own.
    pub fn announce_session(&mut self, s: Option<&str>) {
        if let Some(s) = s.filter(|s| !s.is_empty()) {
            *self.resume = Some(s.to_string());
        }
    }

    /// The wrapper's status line, the same in every dialect: its `exit`
    /// event, and its `session_id`, which is the envelope's session when no
    /// earlier line named one and the resumable session in any case (the
    /// wrapper contract makes it the id to resume; `null` names none).
    pub fn status_line(&mut self, ok: Option<bool>, rc: Option<i64>, session_id: Option<&str>, detail: Option<&str>) {
        self.offer_session(session_id);
        self.announce_session(session_id);
        self.emit(status_exit(ok, rc, detail));
    }

    /// A message id for sources that have none: the line that opened it.
    pub fn line_id(&self) -> String {
        format!("L{}", self.line_no)
    }

    pub fn error(&mut self, code: &str, reason: impl Into<String>, raw: &[u8], fatal: bool) {
        self.emit(Data::Error(ErrorData {
            reason: reason.into(),
            code: code.to_string(),
            raw: redact::raw_excerpt(raw),
            fatal,
        }));
    }

    /// After a skimmed line was read: when it did not fit the stream
    /// format as read, its events give way to the one report of its size;
    /// when strings other than tool results were cut, or members left out,
    /// that report follows its events.
    fn skimmed(&mut self, line: &[u8], size: u64, cap: u64, left_out: bool) {
        let uncut = CUTS.with(|c| std::mem::take(&mut *c.borrow_mut())).is_empty();
        if self.out.iter().any(|d| matches!(d, Data::Error(_))) {
            self.out.clear();
            self.error(
                "line_too_long",
                format!("line of {size} bytes is over the {cap}-byte line cap; skipped"),
                line,
                false,
            );
        } else if !uncut || left_out {
            let reason = format!(
                "line of {size} bytes is over the {cap}-byte line cap; read with its long strings cut to {} bytes",
                redact::MAX_OUTPUT
            );
            self.error("line_too_long", reason, line, false);
        }
    }

    /// A line that is not JSON at all (stderr merged in, a banner, binary junk).
    pub fn not_json(&mut self, raw: &[u8], err: &serde_json::Error) {
        self.error("not_json", format!("line is not JSON ({err})"), raw, false);
    }

    /// A JSON line of a kind no dialect table names. The interactive
    /// session's own lines (`runwire.request`, `runwire.answer`, `runwire.idle`) are the same
    /// in every dialect and no dialect knows them, so they land here.
    pub fn unknown(&mut self, raw: &[u8], kind: &str) {
        match kind {
            REQUEST_TYPE => self.input_line(raw, true),
            ANSWER_TYPE => self.input_line(raw, false),
            // Skipped on purpose wherever it is read (see `idle_inputs`).
            IDLE_TYPE | ACK_TYPE => {}
            _ => self.error("unknown_kind", format!("unknown event kind {kind:?}"), raw, false),
        }
    }

    /// A session's `runwire.request` / `runwire.answer` line: its
    /// `input_request` / `input_answer` event, inputs redacted like tool
    /// call arguments.
    fn input_line(&mut self, raw: &[u8], request: bool) {
        let parsed = std::str::from_utf8(raw).map_err(serde::de::Error::custom).and_then(lenient::value);
        let mut v: Value = match parsed {
            Ok(v) => v,
            Err(e) => return self.unparsable(raw, e),
        };
        if let Some(o) = v.as_object_mut() {
            o.remove("type");
        }
        let data = if request {
            serde_json::from_value::<crate::events::InputRequest>(v).map(|mut r| {
                if let Some(i) = r.input.as_mut() {
                    redact::redact_json(i);
                }
                Data::InputRequest(r)
            })
        } else {
            serde_json::from_value::<crate::events::InputAnswer>(v).map(|mut a| {
                if let Some(i) = a.updated_input.as_mut() {
                    redact::redact_json(i);
                }
                Data::InputAnswer(a)
            })
        };
        match data {
            Ok(d) => self.emit(d),
            Err(e) => self.invalid(raw, e),
        }
    }

    /// A JSON line whose shape does not fit the dialect (wrong field types).
    pub fn invalid(&mut self, raw: &[u8], err: impl fmt::Display) {
        self.error("invalid_line", format!("line does not fit the stream format ({err})"), raw, false);
    }

    /// The line as text. JSON is UTF-8, so a line that is not is reported as
    /// not JSON. Validating the whole line once (a fast, mostly-ASCII scan)
    /// and parsing from `&str` is cheaper than letting the parser validate
    /// every string it borrows.
    pub fn text<'l>(&mut self, raw: &'l [u8]) -> Option<&'l str> {
        match std::str::from_utf8(raw) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error("not_json", format!("line is not JSON: not UTF-8 ({e})"), raw, false);
                None
            }
        }
    }

    /// The line as a JSON value, for the dialects that read it so; a line
    /// that is not JSON is reported and gives `None`.
    pub(crate) fn value(&mut self, raw: &[u8]) -> Option<Value> {
        let text = self.text(raw)?;
        match lenient::value(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.not_json(raw, &e);
                None
            }
        }
    }

    /// [`Ctx::status_line`] for a dialect that read the line as a `Value`.
    pub(crate) fn status_value(&mut self, v: &Value) {
        self.status_line(v.bool_at("ok"), v.i64_at("rc"), v.str_at("session_id"), v.str_at("detail"));
    }

    /// Tells a bad line apart: not JSON at all, or JSON of an unexpected shape.
    pub fn unparsable(&mut self, raw: &[u8], err: serde_json::Error) {
        if std::str::from_utf8(raw).is_ok_and(lenient::is_json) {
            self.invalid(raw, err)
        } else {
            self.not_json(raw, &err)
        }
    }

    /// A tool result (or call) that names no tool: visible, never an event with an empty id.
    pub fn missing_id(&mut self, raw: &[u8], what: &str) {
        self.error("missing_id", format!("{what} without a tool id"), raw, false);
    }

    /// An agent event passed through as `custom` (`runwire.<kind>`).
    pub fn custom(&mut self, kind: &str, value: Value) {
        self.custom_in(kind, value, None);
    }

    /// [`Ctx::custom`] for a notice a subagent gave (or that is about one).
    pub fn custom_in(&mut self, kind: &str, value: Value, parent: crate::events::Parent) {
        self.emit(Data::Custom(crate::events::Custom { name: format!("runwire.{kind}"), value, parent }));
    }
}

impl Normalizer {
    pub fn new(adapter: Adapter, opts: Options) -> Normalizer {
        let dialect = match adapter {
            Adapter::Claude => Dialect::Claude(claude::Claude::default()),
            Adapter::Cursor => Dialect::Cursor(cursor::Cursor::default()),
            Adapter::Codex => Dialect::Codex(codex::Codex::default()),
        };
        // codex and cursor also run as interactive sessions (`codex
        // app-server`, `cursor-agent acp`), whose JSON-RPC streams are told
        // apart from the print-mode ones by their first line.
        let detect = matches!(adapter, Adapter::Codex | Adapter::Cursor);
        let ts = Ts { last: None, untimed: Untimed::ReadTime };
        Normalizer {
            dialect,
            detect,
            opts,
            line_no: 0,
            session: None,
            resume: None,
            scratch: Vec::new(),
            too_long: None,
            ts,
        }
    }

    /// Reading a file, not a live pipe: a line that nothing times keeps the
    /// previous `ts`, and `before_first_ms` (the file's modification time)
    /// before any line was timed; the read time is never used.
    pub fn for_file(&mut self, before_first_ms: i64) {
        self.ts.untimed = Untimed::Keep(before_first_ms);
    }

    /// The `ts` of the latest line (for an event made up after the source,
    /// such as a synthetic exit, which must not go back in time).
    pub fn last_ts(&self) -> Option<i64> {
        self.ts.last
    }

    /// The number of source lines consumed so far.
    pub fn lines(&self) -> u64 {
        self.line_no
    }

    /// The session id captured so far: the one stamped on events, taken
    /// from the first line that carried one (any kind of line).
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The session a wrapper could `--resume`, as the wrapper contract
    /// (§6) defines it: the status line's `session_id` when it names one,
    /// else the latest the engine announced itself (claude/cursor
    /// `system/init`, codex `thread.started`; before init, the first claude
    /// or cursor `system` line naming one). Narrower than [`session`]:
    /// an id merely carried by another line (claude's `result` after a
    /// failed resume) is not confirmed and is not resumable.
    ///
    /// [`session`]: Normalizer::session
    pub fn resume_session(&self) -> Option<&str> {
        self.resume.as_deref()
    }

    /// Consumes one source line (with or without its line ending) and returns
    /// the events it produced, numbered by the line's ordinal. Its time is
    /// unknown: [`push_at`](Normalizer::push_at) with `None`.
    pub fn push(&mut self, line: &[u8]) -> Vec<Event> {
        self.push_at(line, None)
    }

    /// [`push`](Normalizer::push) for a line that arrived at `arrival_ms`
    /// (when known: the arrival-time sidecar, `crate::arrival`). Every
    /// event of the line gets `ts = max(previous ts, candidate)`, where the
    /// candidate is the arrival time, else the line's own timestamp, else
    /// the read time (a live pipe) or none (a file, [`for_file`]: the
    /// previous `ts` is kept). So `ts` never goes backwards, and re-reading a
    /// file from line 1 gives the same `ts` in any process.
    ///
    /// [`for_file`]: Normalizer::for_file
    pub fn push_at(&mut self, line: &[u8], arrival_ms: Option<i64>) -> Vec<Event> {
        self.line_no += 1;
        let mut line = trim_eol(line);
        if self.line_no == 1 {
            line = line.strip_prefix(lenient::BOM).unwrap_or(line);
        }
        let too_long = self.too_long.take();
        // A line skimmed for being over a cap (`crate::lines`): read as the
        // original, its cut strings known to `tool_result`.
        let body;
        let skimmed = too_long.is_none() && line.starts_with(SKIM_PREFIX);
        let mut skim = None;
        if skimmed {
            match split_skim(line) {
                Some((head, b)) => {
                    body = b;
                    line = &body;
                    CUTS.with(|c| *c.borrow_mut() = head.cuts);
                    skim = Some((head.size, head.cap, head.left_out));
                }
                None => skim = None,
            }
        }
        if too_long.is_none() && line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        if self.detect && too_long.is_none() {
            self.detect_protocol(line);
        }
        let mut ctx = Ctx {
            out: &mut self.scratch,
            session: &mut self.session,
            resume: &mut self.resume,
            ts_ms: None,
            line_no: self.line_no,
        };
        // The session's own lines, written by runwire with `type` first:
        // read here, before a dialect's table can mistake their fields
        // (`message` is a string here, an object in claude's lines).
        if let Some(size) = too_long {
            ctx.error("line_too_long", crate::lines::Line::too_long_reason(size), line, false);
        } else if idle_inputs(line).is_some() || is_ack(line) || is_session_status(line) {
            // The session's word to its runner (idle, or what an input line
            // did): no event
            // (its line number is still used, so `seq` stays positional).
        } else if let Some(request) = session_line(line) {
            // ACP binds a request to its tool call, and a denial to the turn
            // it may end (issue 26 case 7): the dialect sees it first.
            if let Dialect::Acp(d) = &mut self.dialect {
                d.session_line(&mut ctx, line, request);
            }
            ctx.input_line(line, request);
        } else {
            match &mut self.dialect {
                Dialect::Claude(d) => d.line(&mut ctx, line),
                Dialect::Cursor(d) => d.line(&mut ctx, line),
                Dialect::Codex(d) => d.line(&mut ctx, line),
                Dialect::CodexApp(d) => d.line(&mut ctx, line),
                Dialect::Acp(d) => d.line(&mut ctx, line),
            }
        }
        if let Some((size, cap, left_out)) = skim {
            ctx.skimmed(line, size, cap, left_out);
        }
        let ts_ms = self.ts.next(arrival_ms.or(ctx.ts_ms), self.opts.clock);
        let n = self.scratch.len();
        self.scratch
            .drain(..)
            .enumerate()
            .map(|(k, data)| Event {
                run: self.opts.run.clone(),
                task: self.opts.task.clone(),
                session: self.session.clone(),
                seq: Seq { line: self.line_no, sub: if n == 1 { 0 } else { k as u32 + 1 } },
                ts_ms,
                data,
            })
            .collect()
    }

    /// The first line that tells decides, for good: a JSON object without a
    /// `type` that carries `jsonrpc`, `method`, or an `id` with a `result` or
    /// `error`, is JSON-RPC (codex app-server, ACP); one with a `type` (other
    /// than runwire's own lines), or codex's legacy `msg` or preamble, is the
    /// print mode. Lines that do not tell (not JSON, runwire's own) leave it open.
    fn detect_protocol(&mut self, line: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Probe<'a> {
            #[serde(rename = "type", borrow, default)]
            ty: Option<Cow<'a, str>>,
            #[serde(default)]
            jsonrpc: Option<IgnoredAny>,
            #[serde(default)]
            method: Option<IgnoredAny>,
            #[serde(default)]
            id: Option<IgnoredAny>,
            #[serde(default)]
            result: Option<IgnoredAny>,
            #[serde(default)]
            error: Option<IgnoredAny>,
        }
        let Ok(text) = std::str::from_utf8(line) else { return };
        let mut slot = None;
        let Ok((p, _)) = lenient::from_str::<Probe>(text, &mut slot) else { return };
        let rpc = match p.ty.as_deref() {
            Some(t) if t.starts_with("runwire.") => return,
            Some(_) => false,
            None => {
                p.jsonrpc.is_some()
                    || p.method.is_some()
                    || (p.id.is_some() && (p.result.is_some() || p.error.is_some()))
            }
        };
        self.detect = false;
        if rpc {
            self.dialect = match self.dialect {
                Dialect::Codex(_) => Dialect::CodexApp(codex_app::CodexApp::default()),
                _ => Dialect::Acp(acp::Acp::default()),
            };
        }
    }

    /// Consumes a source line too long to be read whole (see
    /// [`crate::lines::MAX_LINE`]), given by its first bytes and its size: one
    /// non-fatal `error` event (`line_too_long`) numbered like any line.
    pub fn push_too_long(&mut self, head: &[u8], size: u64) -> Vec<Event> {
        self.push_too_long_at(head, size, None)
    }

    /// [`push_too_long`](Normalizer::push_too_long) for a line that arrived
    /// at `arrival_ms` (see [`push_at`](Normalizer::push_at)).
    pub fn push_too_long_at(&mut self, head: &[u8], size: u64, arrival_ms: Option<i64>) -> Vec<Event> {
        self.too_long = Some(size);
        self.push_at(head, arrival_ms)
    }

    /// Ends the stream. Normalization never invents events at the end: a
    /// followed file may still grow, and a stream that stopped short is for
    /// the consumer to judge (agui-translate reports it as incomplete).
    pub fn finish(&mut self) -> Vec<Event> {
        Vec::new()
    }
}

/// `Some(true)` for a `runwire.request` line, `Some(false)` for a
/// `runwire.answer` line, as the session writes them (`type` first).
fn session_line(line: &[u8]) -> Option<bool> {
    let rest = line.strip_prefix(b"{\"type\":\"runwire.")?;
    let (request, rest) = match rest {
        [b'r', b'e', b'q', b'u', b'e', b's', b't', b'"', rest @ ..] => (true, rest),
        [b'a', b'n', b's', b'w', b'e', b'r', b'"', rest @ ..] => (false, rest),
        _ => return None,
    };
    matches!(rest.first(), Some(b',' | b'}')).then_some(request)
}

fn trim_eol(mut l: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    l
}

/// The wrapper contract's final status line
/// (`{"type":"runwire.status","ok":..,"rc":..,"session_id":..,"detail":..,"files":[..]}`).
pub const STATUS_TYPE: &str = "runwire.status";

/// An interactive session's pending request line (`{"type":"runwire.request", …InputRequest}`).
pub const REQUEST_TYPE: &str = "runwire.request";

/// An interactive session's answer line (`{"type":"runwire.answer", …InputAnswer}`).
pub const ANSWER_TYPE: &str = "runwire.answer";

/// An interactive session's idle line (`{"type":"runwire.idle","inputs":N}`):
/// no turn runs or is owed, no request waits, and the first N session input
/// lines are applied. For the runner that writes the input (it closes the
/// input on it); no event in any dialect.
pub const IDLE_TYPE: &str = "runwire.idle";

/// An interactive session's reply to one line of its input stream
/// (`{"type":"runwire.ack","line":N,…}`, `session::input::AckLine`): for
/// the runner that writes the input; no event in any dialect.
pub const ACK_TYPE: &str = "runwire.ack";

/// True for a session's `runwire.ack` line, as the session writes it.
pub fn is_ack(line: &[u8]) -> bool {
    line.starts_with(br#"{"type":"runwire.ack","#)
}

/// True for an interactive session's status line
/// (`{"type":"runwire.status","seq":N,…}`, `session::input::StatusLine`),
/// as the session writes it: for its runner, no event (a wrapper's final
/// `runwire.status` line has no `seq`). As the session writes it `seq`
/// follows `type`; a copy whose keys were reordered (a log re-serialized)
/// is read whole, which only a line naming the type costs.
pub fn is_session_status(line: &[u8]) -> bool {
    if line.starts_with(br#"{"type":"runwire.status","seq":"#) {
        return true;
    }
    if memchr::memmem::find(line, br#""runwire.status""#).is_none() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: String,
        seq: Option<u64>,
    }
    serde_json::from_slice::<Typed>(line).is_ok_and(|t| t.kind == STATUS_TYPE && t.seq.is_some())
}

/// The input count of a session's `runwire.idle` line, as the session
/// writes it (`{"type":"runwire.idle","inputs":N}`); `None` for any other line.
pub fn idle_inputs(line: &[u8]) -> Option<u64> {
    let rest = trim_eol(line).strip_prefix(br#"{"type":"runwire.idle","inputs":"#)?;
    let digits = rest.strip_suffix(b"}")?;
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn status_exit(ok: Option<bool>, rc: Option<i64>, detail: Option<&str>) -> Data {
    let rc = rc.unwrap_or(if ok == Some(true) { 0 } else { 1 });
    Data::Exit(Exit {
        rc,
        ok: ok.unwrap_or(rc == 0) && rc == 0,
        detail: detail.filter(|d| !d.is_empty()).map(str::to_string),
    })
}

/// How much of `final_text` was not yet streamed, when a whole message arrives
/// after its deltas: the unseen suffix when the streamed text is a prefix of
/// it, nothing when it repeats (or contradicts, which an append-only stream
/// cannot retract) what was already sent.
pub(crate) fn unseen_suffix<'a>(streamed: &str, final_text: &'a str) -> &'a str {
    if streamed.is_empty() {
        return final_text;
    }
    final_text.strip_prefix(streamed).unwrap_or_default()
}

/// Open things (tools, messages) a dialect tracks at most: real streams
/// have a few at a time; this bounds a hostile one. Past it the oldest is
/// forgotten (its late result then restates its call, which is harmless).
pub(crate) const MAX_OPEN: usize = 4096;

/// `v.push(x)`, forgetting the oldest entry past [`MAX_OPEN`].
pub(crate) fn push_bounded<T>(v: &mut Vec<T>, x: T) {
    if v.len() >= MAX_OPEN {
        v.remove(0);
    }
    v.push(x);
}

/// Text already emitted for one message, remembered without keeping all of
/// it: up to [`Seen::KEEP`] bytes are kept as they are; past that only the
/// length and an FNV-1a hash of the whole, so a message streamed in a
/// million deltas costs no more memory than a short one, and the whole
/// value arriving afterwards is still compared with what was streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    len: usize,
    /// The text, while it is at most `KEEP` bytes.
    kept: Option<String>,
    /// FNV-1a of the whole text, once it is longer.
    hash: u64,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen { len: 0, kept: Some(String::new()), hash: crate::hash::FNV_OFFSET }
    }
}

impl Seen {
    pub const KEEP: usize = 64 << 10;

    /// Remembers `text` as all of it.
    pub fn of(text: &str) -> Seen {
        let mut s = Seen::default();
        s.push(text);
        s
    }

    /// Remembers by length and hash from the first byte on.
    pub fn hashed() -> Seen {
        Seen { kept: None, ..Seen::default() }
    }

    /// Appends `t` to what was emitted.
    pub fn push(&mut self, t: &str) {
        self.len += t.len();
        if let Some(k) = &mut self.kept {
            if k.len() + t.len() <= Self::KEEP {
                k.push_str(t);
                return;
            }
            self.hash = crate::hash::fnv1a64(k.as_bytes());
            self.kept = None;
        }
        self.hash = crate::hash::fnv1a64_extend(self.hash, t.as_bytes());
    }

    /// [`unseen_suffix`] against the remembered text: the part of `full`
    /// past what was emitted when that is a prefix of it, else nothing.
    pub fn unseen_suffix<'a>(&self, full: &'a str) -> &'a str {
        match &self.kept {
            Some(k) => unseen_suffix(k, full),
            None => match full.get(..self.len) {
                Some(p) if crate::hash::fnv1a64(p.as_bytes()) == self.hash => &full[self.len..],
                _ => "",
            },
        }
    }

    /// True when `text` is in what was emitted (while it is kept whole), or
    /// equals all of it (past that).
    pub fn holds(&self, text: &str) -> bool {
        match &self.kept {
            Some(k) => k.contains(text),
            None => text.len() == self.len && crate::hash::fnv1a64(text.as_bytes()) == self.hash,
        }
    }
}

/// A JSON value read leniently: a field of an unexpected type becomes
/// `Other` instead of failing the whole line.
#[derive(Debug, Default, Clone)]
pub(crate) enum Scalar<'a> {
    #[default]
    Absent,
    Str(Cow<'a, str>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Other,
}

impl<'a> Scalar<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::Int(i) => Some(i as f64),
            Scalar::Float(f) if f.is_finite() => Some(f),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::Int(i) => Some(i),
            Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(f as i64),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|i| u64::try_from(i).ok())
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map(Scalar::Int).unwrap_or(Scalar::Float(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Absent)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Absent)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                Scalar::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A nested object read leniently: any other JSON value (a string where an
/// object was expected, say) is dropped as `None` instead of failing the
/// whole line. `T`'s own fields must be lenient too ([`Scalar`], raw values).
#[derive(Debug)]
pub(crate) struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(a)).map(|t| Lenient(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                Lenient::deserialize(d)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Helpers for the dialects that read lines as `serde_json::Value`.
pub(crate) trait ValueExt {
    fn str_at(&self, key: &str) -> Option<&str>;
    fn i64_at(&self, key: &str) -> Option<i64>;
    fn u64_at(&self, key: &str) -> Option<u64>;
    fn bool_at(&self, key: &str) -> Option<bool>;
}

impl ValueExt for Value {
    fn str_at(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }
    fn i64_at(&self, key: &str) -> Option<i64> {
        let v = self.get(key)?;
        v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
    }
    fn u64_at(&self, key: &str) -> Option<u64> {
        self.i64_at(key).and_then(|i| u64::try_from(i).ok())
    }
    fn bool_at(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }
}

/// `{"runwire.cut":`: how a skimmed line starts ([`crate::lines::Skim`]).
const SKIM_PREFIX: &[u8] = b"{\"runwire.cut\":";

/// A string a skimmed line holds cut: its whole size, the bytes kept, and
/// the end of what was kept.
#[derive(serde::Deserialize)]
struct Cut(u64, u64, String);

/// A skimmed line's head: `[SIZE, CAP, LEFT_OUT, CUTS]`.
#[derive(serde::Deserialize)]
struct SkimHead {
    size: u64,
    cap: u64,
    left_out: bool,
    cuts: Vec<Cut>,
}

thread_local! {
    /// The cuts of the skimmed line being read, for the tool results made from it.
    static CUTS: std::cell::RefCell<Vec<Cut>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A skimmed line's cuts and the line without them, as the original
/// object's members; `None` when it is not one.
fn split_skim(line: &[u8]) -> Option<(SkimHead, Vec<u8>)> {
    let rest = &line[SKIM_PREFIX.len()..];
    let mut de = serde_json::Deserializer::from_slice(rest).into_iter::<SkimHead>();
    let cuts = de.next()?.ok()?;
    let after = &rest[de.byte_offset()..];
    let mut body = Vec::with_capacity(after.len() + 1);
    body.push(b'{');
    body.extend_from_slice(after.strip_prefix(b",").unwrap_or(after));
    Some((cuts, body))
}

/// A tool result event with redaction and the 64 KiB cap applied. Made
/// from a skimmed line, it is `truncated` with its original size when it
/// holds a string the skim cut.
pub(crate) fn tool_result(
    id: String,
    output: &str,
    is_error: bool,
    exit_code: Option<i64>,
    parent: crate::events::Parent,
) -> Data {
    let (output_kept, mut truncated, mut bytes) = redact::tool_output(output);
    CUTS.with(|c| {
        c.borrow_mut().retain(|Cut(size, kept, tail)| {
            let held = !tail.is_empty() && memchr::memmem::find(output.as_bytes(), tail.as_bytes()).is_some();
            if held {
                truncated = true;
                bytes += size.saturating_sub(*kept);
            }
            !held
        })
    });
    let output = output_kept;
    Data::ToolResult(crate::events::ToolResult { id, output, is_error, truncated, bytes, exit_code, parent })
}

/// A tool call event with secrets in its arguments redacted.
pub(crate) fn tool_call(
    id: String,
    name: String,
    mut args: Value,
    message: Option<String>,
    parent: crate::events::Parent,
) -> Data {
    redact::redact_json(&mut args);
    Data::ToolCall(crate::events::ToolCall { id, name, args, message, parent })
}

/// Compact text of a JSON value for tool output: strings as themselves.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Channel, Data};

    fn run(adapter: Adapter, lines: &[&str]) -> Vec<Event> {
        let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
        let mut out: Vec<Event> = lines.iter().flat_map(|l| n.push(l.as_bytes())).collect();
        out.extend(n.finish());
        out
    }

    #[test]
    fn ts_is_arrival_else_own_else_read_time_and_never_goes_back() {
        let own = |t: &str| {
            format!(
                r#"{{"type":"user","timestamp":"{t}","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t","content":"x"}}]}}}}"#
            )
        };
        let plain =
            r#"{"type":"assistant","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"a"}]}}"#;
        let ts = |n: &mut Normalizer, line: &str, at: Option<i64>| n.push_at(line.as_bytes(), at)[0].ts_ms;
        // A live pipe: read time (the clock, 7) for a line with nothing else.
        let mut live = Normalizer::new(Adapter::Claude, Options { clock: Clock::Fixed(7), ..Options::default() });
        assert_eq!(ts(&mut live, plain, None), 7);
        assert_eq!(ts(&mut live, &own("1970-01-01T00:00:01.000Z"), None), 1000);
        assert_eq!(ts(&mut live, plain, None), 1000, "the read time is earlier: kept");
        assert_eq!(ts(&mut live, &own("1970-01-01T00:00:05.000Z"), Some(2000)), 2000, "arrival wins");
        // A file: no read time; the file time before the first timed line.
        let mut file = Normalizer::new(Adapter::Claude, Options { clock: Clock::Fixed(99_999), ..Options::default() });
        file.for_file(500);
        assert_eq!(ts(&mut file, plain, None), 500);
        assert_eq!(ts(&mut file, plain, Some(3000)), 3000);
        assert_eq!(ts(&mut file, plain, None), 3000);
        assert_eq!(ts(&mut file, plain, Some(2500)), 3000, "never back");
        assert_eq!(file.last_ts(), Some(3000));
    }

    fn texts(evs: &[Event]) -> Vec<(String, Channel)> {
        evs.iter()
            .filter_map(|e| match &e.data {
                Data::TokenDelta(d) => Some((d.text.clone(), d.channel)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claude_final_block_adds_only_what_the_deltas_missed() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello"}]}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0}}"#,
                r#"{"type":"stream_event","event":{"type":"message_stop"}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"Hello"}"#,
            ],
        );
        assert_eq!(texts(&evs), vec![("Hel".into(), Channel::Text), ("lo".into(), Channel::Text)]);
    }

    #[test]
    fn claude_tool_input_comes_from_the_stream_when_no_assistant_line_does() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"ls\"}"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
            ],
        );
        let calls: Vec<_> = evs.iter().filter(|e| matches!(e.data, Data::ToolCall(_))).collect();
        assert_eq!(calls.len(), 1);
        match &calls[0].data {
            Data::ToolCall(c) => {
                assert_eq!(c.args, serde_json::json!({"command":"ls"}));
                assert_eq!(c.message.as_deref(), Some("m1"));
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn claude_result_text_is_emitted_only_when_nothing_said_it() {
        let said = run(
            Adapter::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"All done."}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"All done."}"#,
            ],
        );
        assert_eq!(texts(&said).len(), 1);
        let unsaid =
            run(Adapter::Claude, &[r#"{"type":"result","subtype":"success","is_error":false,"result":"Only here."}"#]);
        assert_eq!(texts(&unsaid), vec![("Only here.".into(), Channel::Text)]);
        assert_eq!(unsaid[0].seq, Seq { line: 1, sub: 1 });
        assert_eq!(unsaid[1].seq, Seq { line: 1, sub: 2 });
    }

    #[test]
    fn claude_failure_is_read_from_is_error_subtype_and_terminal_reason() {
        for line in [
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in"}"#,
            r#"{"type":"result","subtype":"error_max_turns","is_error":false}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"terminal_reason":"aborted_tools"}"#,
        ] {
            let evs = run(Adapter::Claude, &[line]);
            assert!(matches!(&evs.last().unwrap().data, Data::TurnEnd(t) if !t.ok && t.reason.is_some()), "{line}");
        }
    }

    #[test]
    fn cursor_flush_after_a_closing_event_is_not_repeated() {
        let evs = run(
            Adapter::Cursor,
            &[
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi "}]},"timestamp_ms":1}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"you"}]},"timestamp_ms":2}"#,
                r#"{"type":"thinking","subtype":"completed","timestamp_ms":3}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi you"}]},"model_call_id":"x","timestamp_ms":4}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi you"}]}}"#,
            ],
        );
        assert_eq!(texts(&evs), vec![("Hi ".into(), Channel::Text), ("you".into(), Channel::Text)]);
    }

    #[test]
    fn codex_item_updates_replace_rather_than_append() {
        let evs = run(
            Adapter::Codex,
            &[
                r#"{"type":"item.updated","item":{"id":"item_3","type":"agent_message","text":"Wor"}}"#,
                r#"{"type":"item.updated","item":{"id":"item_3","type":"agent_message","text":"Working"}}"#,
                r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Working."}}"#,
            ],
        );
        assert_eq!(texts(&evs).into_iter().map(|t| t.0).collect::<String>(), "Working.");
    }

    #[test]
    fn the_session_idle_line_is_skipped_in_every_dialect_and_keeps_seq_positional() {
        const IDLE: &str = r#"{"type":"runwire.idle","inputs":3}"#;
        const STATUS: &str = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":"","files":[]}"#;
        // The print-mode dialects, and the JSON-RPC ones a first line selects
        // (codex app-server, ACP); the idle line first leaves detection open.
        let cases: [(Adapter, &[&str]); 5] = [
            (Adapter::Claude, &[IDLE, IDLE, STATUS]),
            (Adapter::Cursor, &[IDLE, IDLE, STATUS]),
            (Adapter::Codex, &[IDLE, IDLE, STATUS]),
            (Adapter::Codex, &[IDLE, r#"{"id":1,"result":{}}"#, STATUS]),
            (Adapter::Cursor, &[IDLE, r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#, STATUS]),
        ];
        for (a, lines) in cases {
            let mut n = Normalizer::new(a, Options { clock: Clock::Fixed(0), ..Default::default() });
            let mut evs = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                let got = n.push(l.as_bytes());
                if *l == IDLE {
                    assert!(got.is_empty(), "{a:?} line {i}: {got:?}");
                }
                evs.extend(got);
            }
            assert!(evs.iter().all(|e| !matches!(e.data, Data::Error(_))), "{a:?}: {evs:?}");
            let exit = evs.iter().find(|e| matches!(e.data, Data::Exit(_))).expect("the status line's exit");
            assert_eq!(exit.seq.line, 3, "{a:?}");
        }
        assert_eq!(idle_inputs(IDLE.as_bytes()), Some(3));
        assert_eq!(idle_inputs(b"{\"type\":\"runwire.idle\",\"inputs\":0}\r\n"), Some(0));
        for not in [
            r#"{"type":"runwire.idle","inputs":-1}"#,
            r#"{"type":"runwire.idle","inputs":""}"#,
            r#"{"type":"runwire.idle","inputs":1,"x":2}"#,
            r#"{"type":"runwire.idle","inputs":99999999999999999999}"#,
            r#"{"type":"runwire.answer","inputs":1}"#,
        ] {
            assert_eq!(idle_inputs(not.as_bytes()), None, "{not}");
        }
    }

    #[test]
    fn the_status_line_is_the_exit_event_in_every_dialect() {
        for a in [Adapter::Claude, Adapter::Cursor, Adapter::Codex] {
            let evs = run(
                a,
                &[r#"{"type":"runwire.status","ok":false,"rc":124,"session_id":null,"detail":"timeout","files":[]}"#],
            );
            assert!(
                matches!(&evs[0].data, Data::Exit(x) if x.rc == 124 && !x.ok && x.detail.as_deref() == Some("timeout")),
                "{a:?}"
            );
        }
    }

    fn resume_after(adapter: Adapter, lines: &[&str]) -> (Option<String>, Option<String>) {
        let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
        for l in lines {
            n.push(l.as_bytes());
        }
        (n.resume_session().map(str::to_string), n.session().map(str::to_string))
    }

    const STATUS_NULL: &str =
        r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":null,"detail":"x","files":[]}"#;
    const STATUS_S9: &str = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":"s9","detail":"","files":[]}"#;

    #[test]
    fn the_engine_announces_the_resumable_session_and_the_status_line_wins() {
        let cases: [(Adapter, &str); 3] = [
            (Adapter::Claude, r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#),
            (Adapter::Cursor, r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#),
            (Adapter::Codex, r#"{"type":"thread.started","thread_id":"s1"}"#),
        ];
        for (a, init) in cases {
            assert_eq!(resume_after(a, &[]), (None, None), "{a:?}");
            assert_eq!(resume_after(a, &[init]), (Some("s1".into()), Some("s1".into())), "{a:?}");
            // null names no session: the announced one stays.
            assert_eq!(resume_after(a, &[init, STATUS_NULL]).0.as_deref(), Some("s1"), "{a:?}");
            // The wrapper's id is the one to resume; the envelope keeps the stream's.
            assert_eq!(resume_after(a, &[init, STATUS_S9]), (Some("s9".into()), Some("s1".into())), "{a:?}");
            // A session only the status line names (cursor's create-chat id
            // after a turn that failed before init): both take it.
            assert_eq!(resume_after(a, &[STATUS_S9]), (Some("s9".into()), Some("s9".into())), "{a:?}");
        }
    }

    #[test]
    fn an_id_another_line_merely_carries_is_stamped_but_not_resumable() {
        // claude after a failed --resume: only a result line, with an id no init confirmed.
        let result = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s7"}"#;
        assert_eq!(resume_after(Adapter::Claude, &[result, STATUS_NULL]), (None, Some("s7".into())));
        // A cursor user line is no line of the engine's own naming its session.
        let user = r#"{"type":"user","message":{"role":"user","content":[]},"session_id":"s1"}"#;
        assert_eq!(resume_after(Adapter::Cursor, &[user]), (None, Some("s1".into())));
    }

    #[test]
    fn claude_hooks_name_the_session_before_init_and_init_has_the_last_word() {
        // A turn that hangs after its SessionStart hooks can be steered: the
        // hooks run in the session claude was given. They stay skipped: no events.
        let hook = r#"{"type":"system","subtype":"hook_started","hook_id":"h","session_id":"s1"}"#;
        let hook2 = r#"{"type":"system","subtype":"hook_response","hook_id":"h","session_id":"s2"}"#;
        let init = r#"{"type":"system","subtype":"init","session_id":"s3","model":"m"}"#;
        assert!(run(Adapter::Claude, &[hook, hook2]).is_empty());
        assert_eq!(resume_after(Adapter::Claude, &[hook, hook2]), (Some("s1".into()), None));
        assert_eq!(resume_after(Adapter::Claude, &[hook, init, hook2]), (Some("s3".into()), Some("s3".into())));
    }

    #[test]
    fn a_cut_or_malformed_status_line_is_an_error_and_names_no_session() {
        let cut = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":"s9","det"#;
        let odd = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":7,"detail":"d","files":[]}"#;
        for a in [Adapter::Claude, Adapter::Cursor, Adapter::Codex] {
            let evs = run(a, &[cut]);
            assert!(matches!(&evs[..], [e] if matches!(&e.data, Data::Error(x) if x.code == "not_json")), "{a:?}");
            assert_eq!(resume_after(a, &[cut]), (None, None), "{a:?}");
            // A session id that is not a string is no session; the exit stands.
            assert!(matches!(&run(a, &[odd])[0].data, Data::Exit(x) if x.ok && x.detail.as_deref() == Some("d")));
            assert_eq!(resume_after(a, &[odd]), (None, None), "{a:?}");
        }
    }

    #[test]
    fn claude_usage_counts_cached_input_inside_input_tokens() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":6,"cache_creation_input_tokens":1582,"cache_read_input_tokens":87563,"output_tokens":258}}"#,
            ],
        );
        match &evs[0].data {
            Data::TurnEnd(t) => {
                let u = t.usage.as_ref().unwrap();
                assert_eq!(
                    (u.input_tokens, u.cached_input_tokens, u.cache_write_input_tokens),
                    (89151, Some(87563), Some(1582))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
