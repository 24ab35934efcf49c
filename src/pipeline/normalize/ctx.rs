//! What a dialect sees while it handles one line ([`Ctx`]) and the events it
//! builds most: kept apart from the `Normalizer` so that the dialects import
//! these, and the normalizer imports the dialects, without a cycle.

use super::fields::*;
use super::redact;
use crate::pipeline::events::{Data, ErrorData, Exit};
use crate::util::lenient;
use serde_json::Value;
use std::fmt;

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
    pub(super) fn skimmed(&mut self, line: &[u8], size: u64, cap: u64, left_out: bool) {
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
    pub(super) fn input_line(&mut self, raw: &[u8], request: bool) {
        let parsed = std::str::from_utf8(raw).map_err(serde::de::Error::custom).and_then(lenient::value);
        let mut v: Value = match parsed {
            Ok(v) => v,
            Err(e) => return self.unparsable(raw, e),
        };
        if let Some(o) = v.as_object_mut() {
            o.remove("type");
        }
        let data = if request {
            serde_json::from_value::<crate::pipeline::events::InputRequest>(v).map(|mut r| {
                if let Some(i) = r.input.as_mut() {
                    redact::redact_json(i);
                }
                Data::InputRequest(r)
            })
        } else {
            serde_json::from_value::<crate::pipeline::events::InputAnswer>(v).map(|mut a| {
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
    pub fn custom_in(&mut self, kind: &str, value: Value, parent: crate::pipeline::events::Parent) {
        self.emit(Data::Custom(crate::pipeline::events::Custom { name: format!("runwire.{kind}"), value, parent }));
    }
}

fn status_exit(ok: Option<bool>, rc: Option<i64>, detail: Option<&str>) -> Data {
    let rc = rc.unwrap_or(if ok == Some(true) { 0 } else { 1 });
    Data::Exit(Exit {
        rc,
        ok: ok.unwrap_or(rc == 0) && rc == 0,
        detail: detail.filter(|d| !d.is_empty()).map(str::to_string),
    })
}

/// A tool result event with redaction and the 64 KiB cap applied. Made
/// from a skimmed line, it is `truncated` with its original size when it
/// holds a string the skim cut.
pub(crate) fn tool_result(
    id: String,
    output: &str,
    is_error: bool,
    exit_code: Option<i64>,
    parent: crate::pipeline::events::Parent,
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
    Data::ToolResult(crate::pipeline::events::ToolResult { id, output, is_error, truncated, bytes, exit_code, parent })
}

/// A tool call event with secrets in its arguments redacted.
pub(crate) fn tool_call(
    id: String,
    name: String,
    mut args: Value,
    message: Option<String>,
    parent: crate::pipeline::events::Parent,
) -> Data {
    redact::redact_json(&mut args);
    Data::ToolCall(crate::pipeline::events::ToolCall { id, name, args, message, parent })
}

/// Compact text of a JSON value for tool output: strings as themselves.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn trim_eol(mut l: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    l
}

/// The wrapper contract's final status line
/// (`{"type":"runwire.status","ok":..,"rc":..,"session_id":..,"detail":..,"files":[..]}`).
pub const STATUS_TYPE: &str = "runwire.status";

/// An interactive session's status after a step
/// (`{"type":"runwire.session_status","seq":N,…}`, `session::input::StatusLine`):
/// for the runner that drives the session; no event in any dialect. A type
/// of its own: a wrapper's final [`STATUS_TYPE`] line is another thing.
pub const SESSION_STATUS_TYPE: &str = "runwire.session_status";

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
/// (`{"type":"runwire.session_status","seq":N,…}`, `session::input::StatusLine`),
/// as the session writes it: for its runner, no event. As the session
/// writes it the type comes first; a copy whose keys were reordered (a log
/// re-serialized) is read whole, which only a line naming the type costs.
/// A session's log written before the line had its own type has it as a
/// `runwire.status` with `seq` (a wrapper's final line has none): still
/// the session's, never read as the wrapper's exit.
pub fn is_session_status(line: &[u8]) -> bool {
    if line.starts_with(br#"{"type":"runwire.session_status","#)
        || line.starts_with(br#"{"type":"runwire.status","seq":"#)
    {
        return true;
    }
    if memchr::memmem::find(line, br#""runwire.session_status""#).is_none()
        && memchr::memmem::find(line, br#""runwire.status""#).is_none()
    {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: String,
        seq: Option<u64>,
    }
    serde_json::from_slice::<Typed>(line)
        .is_ok_and(|t| t.kind == SESSION_STATUS_TYPE || (t.kind == STATUS_TYPE && t.seq.is_some()))
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

/// `{"runwire.cut":`: how a skimmed line starts ([`crate::util::lines::Skim`]).
pub(super) const SKIM_PREFIX: &[u8] = b"{\"runwire.cut\":";

/// A string a skimmed line holds cut: its whole size, the bytes kept, and
/// the end of what was kept.
#[derive(serde::Deserialize)]
pub(super) struct Cut(pub u64, pub u64, pub String);

/// A skimmed line's head: `[SIZE, CAP, LEFT_OUT, CUTS]`.
#[derive(serde::Deserialize)]
pub(super) struct SkimHead {
    pub size: u64,
    pub cap: u64,
    pub left_out: bool,
    pub cuts: Vec<Cut>,
}

thread_local! {
    /// The cuts of the skimmed line being read, for the tool results made from it.
    pub(super) static CUTS: std::cell::RefCell<Vec<Cut>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A skimmed line's cuts and the line without them, as the original
/// object's members; `None` when it is not one.
pub(super) fn split_skim(line: &[u8]) -> Option<(SkimHead, Vec<u8>)> {
    let rest = &line[SKIM_PREFIX.len()..];
    let mut de = serde_json::Deserializer::from_slice(rest).into_iter::<SkimHead>();
    let cuts = de.next()?.ok()?;
    let after = &rest[de.byte_offset()..];
    let mut body = Vec::with_capacity(after.len() + 1);
    body.push(b'{');
    body.extend_from_slice(after.strip_prefix(b",").unwrap_or(after));
    Some((cuts, body))
}
