//! The session input format (`spec/SESSION-INPUT.md`,
//! `spec/session-input.schema.json`): one JSON object a line, written by a
//! person's tool (the server, a script) to an interactive session. The same
//! format drives every agent; each agent's protocol object turns it into its
//! own wire lines.

use super::types::{Ack, Phase, Refused};
use crate::control::Command;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest input line accepted, in bytes (defined with the command, whose
/// message it bounds).
pub use crate::control::MAX_LINE;
/// The answer line and its decisions are the command's ([`crate::control`]).
pub use crate::control::{AnswerInput, Decision};

/// The optional field of every input line that names its command for
/// retries ([`LineKeys`]).
pub const KEY_FIELD: &str = "idempotency_key";

/// One line of session input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Input {
    /// A user message: starts a turn, or joins the running one (claude
    /// takes a message mid-turn into the turn: a live steer).
    Message(MessageInput),
    /// An answer to a pending request.
    Answer(AnswerInput),
    /// Interrupt the current turn; the session stays for the next message.
    Interrupt(Who),
    /// End the session: pending requests are cancelled, a running turn is
    /// interrupted, the agent's input is closed and it exits.
    End(Who),
    /// Stop the running turn, keeping the session: open requests are
    /// cancelled (the agent is told so: [`super::STOPPED`]), then the
    /// turn is interrupted. Nothing happens when no turn runs and nothing
    /// is asked.
    Stop(Who),
    /// A message under the steer rules: refused while a request is open
    /// (answer it first); with `interrupt`, the running turn is
    /// interrupted first and the message starts the next.
    Steer(SteerInput),
    /// Several answers as one unit (an AG-UI resume): every one is checked
    /// before any is written, then all are written as one piece, or none
    /// is. In-process only (the server's): not a line of the input format.
    #[serde(skip)]
    Answers(Vec<AnswerInput>),
}

/// `{"type":"steer","text":…,"interrupt"?:bool,"turn"?:N}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerInput {
    pub text: String,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub interrupt: bool,
    /// The turn the sender saw (the session's [`super::Session::turn`]):
    /// once another turn has begun, the steer is refused and nothing is
    /// sent (it was meant for a turn that is over).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
}

impl Input {
    /// About how many bytes it makes on the agent's input (its own JSON,
    /// plus the agent protocol's envelope): what a bounded input queue
    /// checks before taking it.
    pub fn size(&self) -> usize {
        const ENVELOPE: usize = 512;
        match self {
            Input::Message(MessageInput { text, .. }) | Input::Steer(SteerInput { text, .. }) => text.len() + ENVELOPE,
            Input::Answers(all) => all.iter().map(|a| Input::Answer(a.clone()).size()).sum(),
            other => serde_json::to_vec(other).map_or(0, |v| v.len()) + ENVELOPE,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    pub text: String,
    /// Who wrote it (for the record; not sent to the agent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Who {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
}

impl Input {
    /// Parses one input line; the error names what is wrong. A line with an
    /// `idempotency_key` is refused here: [`Input::parse_keyed`] is for a
    /// reader that keeps the key's promise.
    pub fn parse(line: &[u8]) -> Result<Input, String> {
        match Input::parse_keyed(line)? {
            (_, Some(_)) => Err(format!("{KEY_FIELD}: not taken here")),
            (input, None) => Ok(input),
        }
    }

    /// Parses one input line and its optional `idempotency_key`
    /// ([`LineKeys`]); the error names what is wrong.
    pub fn parse_keyed(line: &[u8]) -> Result<(Input, Option<String>), String> {
        if line.len() > MAX_LINE {
            return Err(format!("line is longer than {MAX_LINE} bytes"));
        }
        let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
        let mut v: Value = serde_json::from_str(text.trim()).map_err(|e| format!("not JSON: {e}"))?;
        crate::util::lenient::unique_keys(text.trim().as_bytes())?;
        let kind = v.get("type").and_then(Value::as_str).map(str::to_string);
        let key = match v.as_object_mut().and_then(|o| o.remove(KEY_FIELD)) {
            None => None,
            Some(Value::String(k)) if crate::control::keys::valid(&k) => Some(k),
            Some(_) => return Err(format!("{KEY_FIELD}: {}", crate::control::keys::invalid_text())),
        };
        let input: Input = serde_json::from_value(v).map_err(|e| match &kind {
            Some(k) => format!("a {k:?} line: {e}"),
            None => format!("{e}"),
        })?;
        // The one rule every door applies (`crate::control`).
        crate::control::Command::from_input(&input)
            .check()
            .map_err(|e| format!("a {:?} line: {e}", kind.as_deref().unwrap_or_default()))?;
        Ok((input, key))
    }

    /// The line this input is written as (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("inputs serialize infallibly")
    }
}

/// The session's reply to one line of its input stream (`runwire-session`'s
/// stdin or `--input`), written into its output after the line's own
/// lines: `{"type":"runwire.ack","line":N,"ack":…,"detail":…}` with what
/// the line did ([`super::Ack`]: its name and its text), or
/// `{"type":"runwire.ack","line":N,"refused":…}` with why nothing was done,
/// and `"invalid":true` when the line is wrong in itself ([`Refusal`]).
/// `line` is the line's number in the input (blank lines counted), so a
/// writer that counts its lines knows which reply is whose: how a runner
/// that writes the input (the supervisor) reports what really happened
/// without a copy of the session's rules. An in-process caller gets the
/// [`super::Ack`] itself and no line. No event: `normalize-events` skips it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckLine {
    #[serde(rename = "type")]
    kind: String,
    pub line: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ack: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub refused: Option<String>,
    /// A refused line that is wrong in itself ([`Refusal::invalid`]): the
    /// same line is refused again whenever it comes (HTTP's 400, where a
    /// door passes it on), not for the state the session is in (409).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub invalid: Option<bool>,
    /// A keyed line whose key was seen with the same line: the first line's
    /// reply again, and nothing was done this time ([`LineKeys`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replayed: Option<bool>,
}

/// Why an input line did nothing, as its reply says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub why: String,
    /// The line is wrong in itself: an answer that does not fit its request
    /// or the agent's protocol ([`Refused::Invalid`]), a line not read.
    /// Otherwise it was refused for the session's state (a request decided,
    /// expired or unknown, a steer while one is open, the session ended).
    pub invalid: bool,
}

impl Refusal {
    /// A refusal for the session's state.
    pub fn refused(why: impl Into<String>) -> Refusal {
        Refusal { why: why.into(), invalid: false }
    }

    /// A refusal of a line wrong in itself.
    pub fn invalid(why: impl Into<String>) -> Refusal {
        Refusal { why: why.into(), invalid: true }
    }
}

impl From<&Refused> for Refusal {
    fn from(r: &Refused) -> Refusal {
        Refusal { why: r.to_string(), invalid: matches!(r, Refused::Invalid(_)) }
    }
}

impl AckLine {
    /// The reply to input line `line`: what it did, or why it was refused.
    pub fn new(line: u64, what: Result<Ack, Refusal>) -> AckLine {
        let kind = crate::pipeline::normalize::ACK_TYPE.to_string();
        match what {
            Ok(a) => AckLine {
                kind,
                line,
                ack: Some(ack_name(a).into()),
                detail: Some(a.to_string()),
                refused: None,
                invalid: None,
                replayed: None,
            },
            Err(r) => AckLine {
                kind,
                line,
                ack: None,
                detail: None,
                refused: Some(r.why),
                invalid: r.invalid.then_some(true),
                replayed: None,
            },
        }
    }

    /// The reply to line `line` under its key ([`LineKeys::before`]'s answer).
    pub fn keyed(line: u64, what: Keyed) -> AckLine {
        match what {
            Keyed::Replay(first) => AckLine { replayed: Some(true), ..AckLine::new(line, first) },
            Keyed::Refused(why) => AckLine::new(line, Err(Refusal::refused(why))),
        }
    }

    /// The line (no newline).
    pub fn to_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("acks serialize infallibly")
    }

    /// An output line read as an ack; `None` for any other line.
    pub fn parse(line: &[u8]) -> Option<AckLine> {
        if !crate::pipeline::normalize::is_ack(line) {
            return None;
        }
        serde_json::from_slice::<AckLine>(line).ok().filter(|a| a.kind == crate::pipeline::normalize::ACK_TYPE)
    }
}

/// What a keyed line's key says when the line is not to be applied.
#[derive(Debug, Clone, PartialEq)]
pub enum Keyed {
    /// The same line under its key again: the first line's reply.
    Replay(Result<Ack, Refusal>),
    /// Another line under the key (or, never on a line, one still running).
    Refused(String),
}

/// A session's idempotency keys for its input lines: the one rule
/// ([`crate::control::keys`]) over what each line's reply said. The lines
/// are applied one at a time, so a key is never running when its retry is
/// read; every reply is kept, refusals included (a line is queued, never
/// refused as "not run, try again"). A line refused as unreadable has no key.
#[derive(Default)]
pub struct LineKeys(crate::control::keys::Keys<Result<Ack, Refusal>>);

impl LineKeys {
    /// Before keyed line `input` is applied: `None` to apply it (then
    /// [`LineKeys::after`]), else its reply without applying it.
    pub fn before(&self, key: &str, input: &Input) -> Option<Keyed> {
        use crate::control::keys::{conflict_text, fingerprint, running_text, Claim};
        match self.0.claim(key, fingerprint(&[input.to_line().as_bytes()]), false) {
            Claim::Run => None,
            Claim::Replay(first) => Some(Keyed::Replay(first)),
            Claim::Conflict => Some(Keyed::Refused(conflict_text(key))),
            Claim::Running => Some(Keyed::Refused(running_text(key))),
        }
    }

    /// What the keyed line did.
    pub fn after(&self, key: &str, what: &Result<Ack, Refusal>) {
        let size = what.as_ref().err().map_or(0, |r| r.why.len()) + 16;
        self.0.done(key, what.clone(), size);
    }
}

#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(flatten)]
    body: &'a T,
}

/// `{"type":"runwire.request", …}` (no newline).
pub fn request_line(r: &crate::pipeline::events::InputRequest) -> Vec<u8> {
    serde_json::to_vec(&Tagged { kind: crate::pipeline::normalize::REQUEST_TYPE, body: r })
        .expect("requests serialize infallibly")
}

/// `{"type":"runwire.answer", …}` (no newline).
pub fn answer_line(a: &crate::pipeline::events::InputAnswer) -> Vec<u8> {
    serde_json::to_vec(&Tagged { kind: crate::pipeline::normalize::ANSWER_TYPE, body: a })
        .expect("answers serialize infallibly")
}

/// `{"type":"runwire.idle","inputs":N}` (no newline): the session is idle
/// with `inputs` session input lines read and applied.
pub fn idle_line(inputs: u64) -> Vec<u8> {
    format!(r#"{{"type":"{}","inputs":{inputs}}}"#, crate::pipeline::normalize::IDLE_TYPE).into_bytes()
}

/// One open request on a [`StatusLine`]: runwire's interrupt id (what every
/// door answers it by), the agent's own id, and the agent process it was
/// raised in (its generation: an answer for another process's request is refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    pub interrupt_id: Option<String>,
    pub id: String,
    pub generation: u64,
}

/// The session's status after a step that changed it, as `runwire-session`
/// writes it in its output (`{"type":"runwire.session_status","seq":N,…}`,
/// spec/SESSION-INPUT.md): for the runner that drives it, so it never has
/// to infer the session's state from the agent's lines. The field names are
/// [`crate::session::engine::Status`]'s. No event: `normalize-events` skips it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusLine {
    #[serde(rename = "type")]
    kind: String,
    /// This line's number among the session's output lines (1-based, every
    /// line counted, status lines included): every line numbered lower was
    /// written before it, in the order the session decided them.
    pub seq: u64,
    /// `idle`, `turn` or `ended` ([`super::Phase`]).
    pub phase: String,
    pub turn: u64,
    pub turns_ended: u64,
    /// Open requests, oldest first.
    pub open: Vec<OpenRequest>,
    pub session_id: Option<String>,
    /// Session input lines applied so far (refused and unreadable ones
    /// included): a writer that wrote as many knows each was taken.
    pub applied: u64,
    /// The agent's exit code, on the last line once it is over.
    pub exit: Option<i64>,
}

impl StatusLine {
    /// A status line without its number (the loop numbers it as it writes it).
    pub fn new(
        phase: Phase,
        turn: u64,
        turns_ended: u64,
        open: Vec<OpenRequest>,
        session_id: Option<String>,
        applied: u64,
        exit: Option<i64>,
    ) -> StatusLine {
        let kind = crate::pipeline::normalize::SESSION_STATUS_TYPE.to_string();
        StatusLine { kind, seq: 0, phase: phase.as_str().into(), turn, turns_ended, open, session_id, applied, exit }
    }

    /// The line (no newline).
    pub fn to_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("status lines serialize infallibly")
    }

    /// An output line read as a session status line; `None` for any other
    /// line (a wrapper's final `runwire.status` line included).
    pub fn parse(line: &[u8]) -> Option<StatusLine> {
        if !crate::pipeline::normalize::is_session_status(line) {
            return None;
        }
        serde_json::from_slice::<StatusLine>(line)
            .ok()
            .filter(|a| a.kind == crate::pipeline::normalize::SESSION_STATUS_TYPE)
    }

    /// The same status, whatever the line's number.
    pub fn same_as(&self, other: &StatusLine) -> bool {
        StatusLine { seq: other.seq, ..self.clone() } == *other
    }
}

/// An [`super::Ack`]'s name on an ack line.
pub fn ack_name(a: Ack) -> &'static str {
    match a {
        Ack::Taken => "taken",
        Ack::Replay => "replay",
        Ack::Started => "started",
        Ack::Joined { .. } => "joined",
        Ack::Pending => "pending",
        Ack::InterruptedThenStarted => "interrupted_then_started",
        Ack::CancelledThenPrompted => "cancelled_then_prompted",
        Ack::Stopped => "stopped",
        Ack::NothingRunning => "nothing_running",
    }
}

/// The session's own door: a session input as the one command every door
/// reads into ([`crate::control`]), and back.
impl Command {
    /// A session input as a command (the session's own door).
    pub fn from_input(i: &Input) -> Command {
        match i {
            Input::Message(m) => Command::Message { text: m.text.clone() },
            Input::Steer(s) => Command::Steer { text: s.text.clone(), interrupt: s.interrupt, turn: s.turn },
            Input::Answer(a) => Command::Answer { answer: a.clone() },
            Input::Answers(all) => Command::Answers { answers: all.clone() },
            Input::Interrupt(_) => Command::Interrupt,
            Input::End(_) => Command::End,
            Input::Stop(_) => Command::Stop,
        }
    }

    /// The session input this command is (`None`: the verb is not one a
    /// session takes: kill, pause, resume, status). `by` is who gave it.
    pub fn into_input(self, by: &str) -> Option<Input> {
        let by = Some(by.to_string());
        Some(match self {
            Command::Message { text } => Input::Message(MessageInput { text, by }),
            Command::Steer { text, interrupt, turn } => Input::Steer(SteerInput { text, interrupt, turn, by }),
            Command::Answer { mut answer } => {
                answer.by = answer.by.or(by);
                Input::Answer(answer)
            }
            Command::Answers { answers } => Input::Answers(answers),
            Command::Interrupt => Input::Interrupt(Who { by }),
            Command::Stop => Input::Stop(Who { by }),
            Command::End => Input::End(Who { by }),
            Command::Kill | Command::Pause | Command::Resume | Command::Status => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_and_round_trips() {
        for l in [
            r#"{"type":"message","text":"hi"}"#,
            r#"{"type":"message","text":"hi","by":"ana"}"#,
            r#"{"type":"answer","id":"r1","decision":"allow"}"#,
            r#"{"type":"answer","id":"r1","decision":"allow","scope":"session"}"#,
            r#"{"type":"answer","id":"r1","decision":"allow","updated_input":{"command":"ls"}}"#,
            r#"{"type":"answer","id":"r1","decision":"deny","message":"no"}"#,
            r#"{"type":"answer","id":"r1","decision":"answer","answers":{"Tabs?":"spaces"}}"#,
            r#"{"type":"answer","id":"r1","decision":"cancelled"}"#,
            r#"{"type":"interrupt"}"#,
            r#"{"type":"end","by":"cron"}"#,
            r#"{"type":"stop","by":"ana"}"#,
            r#"{"type":"steer","text":"go left"}"#,
            r#"{"type":"steer","text":"go left","interrupt":true,"by":"ana"}"#,
        ] {
            let i = Input::parse(l.as_bytes()).unwrap_or_else(|e| panic!("{l}: {e}"));
            assert_eq!(Input::parse(i.to_line().as_bytes()).unwrap(), i);
        }
    }

    #[test]
    fn ack_lines_round_trip_and_name_what_happened() {
        let a = AckLine::new(3, Ok(super::super::Ack::Stopped));
        let line = a.to_line();
        assert!(line.starts_with(br#"{"type":"runwire.ack","line":3,"ack":"stopped","detail":"#), "{line:?}");
        assert_eq!(AckLine::parse(&line), Some(a));
        let r = AckLine::new(4, Err(Refusal::refused("no")));
        assert_eq!(r.to_line(), br#"{"type":"runwire.ack","line":4,"refused":"no"}"#);
        assert_eq!(AckLine::parse(&r.to_line()), Some(r));
        // An answer that does not fit its request says so: a door passes it on as 400.
        let bad = Refused::Invalid("request \"0\": ACP takes no updated_input".into());
        let r = AckLine::new(5, Err(Refusal::from(&bad)));
        assert_eq!(
            r.to_line(),
            br#"{"type":"runwire.ack","line":5,"refused":"request \"0\": ACP takes no updated_input","invalid":true}"#
        );
        assert_eq!(AckLine::parse(&r.to_line()), Some(r));
        let r = AckLine::new(6, Err(Refusal::from(&Refused::Expired("0".into()))));
        assert_eq!(r.invalid, None);
        assert_eq!(AckLine::parse(br#"{"type":"runwire.idle","inputs":1}"#), None);
    }

    #[test]
    fn status_lines_round_trip_and_are_told_from_a_wrappers_status() {
        let open = vec![OpenRequest { interrupt_id: Some("rw-1".into()), id: "r1".into(), generation: 1 }];
        let mut s = StatusLine::new(super::super::Phase::Turn, 2, 1, open, Some("th".into()), 3, None);
        s.seq = 9;
        let line = s.to_line();
        assert_eq!(
            String::from_utf8_lossy(&line),
            r#"{"type":"runwire.session_status","seq":9,"phase":"turn","turn":2,"turns_ended":1,"open":[{"interrupt_id":"rw-1","id":"r1","generation":1}],"session_id":"th","applied":3,"exit":null}"#
        );
        assert_eq!(StatusLine::parse(&line), Some(s.clone()));
        assert!(s.same_as(&StatusLine { seq: 10, ..s.clone() }));
        assert!(!s.same_as(&StatusLine { applied: 4, ..s.clone() }));
        assert_eq!(StatusLine::parse(br#"{"type":"runwire.status","ok":true,"rc":0}"#), None);
        // A copy with its keys reordered is still the session's, and a
        // wrapper's reordered one still is not.
        let is = crate::pipeline::normalize::is_session_status;
        assert!(is(br#"{"applied":1,"seq":2,"type":"runwire.session_status"}"#));
        assert!(!is(br#"{"ok":true,"rc":0,"type":"runwire.status"}"#));
        // A log written before the line had its own type: still skipped as
        // the session's, but no runner reads it as a status any more.
        let old = br#"{"type":"runwire.status","seq":9,"phase":"idle","turn":1,"turns_ended":1,"open":[],"session_id":null,"applied":0,"exit":null}"#;
        assert!(is(old) && is(br#"{"applied":1,"seq":2,"type":"runwire.status"}"#));
        assert_eq!(StatusLine::parse(old), None);
    }

    #[test]
    fn a_keyed_line_is_applied_once() {
        let (steer, key) = Input::parse_keyed(br#"{"type":"steer","text":"go","idempotency_key":"k1"}"#).unwrap();
        assert_eq!(key.as_deref(), Some("k1"));
        assert_eq!(steer.to_line(), r#"{"type":"steer","text":"go"}"#, "the key is no part of the input");
        assert!(Input::parse(br#"{"type":"end","idempotency_key":"k1"}"#).unwrap_err().contains("not taken here"));
        assert!(Input::parse_keyed(br#"{"type":"end","idempotency_key":""}"#).unwrap_err().contains("printable"));
        let keys = LineKeys::default();
        assert_eq!(keys.before("k1", &steer), None);
        keys.after("k1", &Ok(super::super::Ack::Started));
        assert_eq!(keys.before("k1", &steer), Some(Keyed::Replay(Ok(super::super::Ack::Started))));
        let (other, _) = Input::parse_keyed(br#"{"type":"steer","text":"gone","idempotency_key":"k1"}"#).unwrap();
        let Some(Keyed::Refused(why)) = keys.before("k1", &other) else { panic!("another line under the key") };
        assert!(why.contains("\"k1\""), "{why}");
        // A line refused as wrong in itself is refused so again under its key.
        assert_eq!(keys.before("k2", &steer), None);
        keys.after("k2", &Err(Refusal::invalid("not one of the choices")));
        let Some(Keyed::Replay(Err(first))) = keys.before("k2", &steer) else { panic!("replayed") };
        assert!(first.invalid, "{first:?}");
        assert_eq!(AckLine::keyed(8, Keyed::Replay(Err(first))).invalid, Some(true));
        let replay = AckLine::keyed(7, Keyed::Replay(Ok(super::super::Ack::Started)));
        let line = String::from_utf8(replay.to_line()).unwrap();
        assert!(
            line.starts_with(r#"{"type":"runwire.ack","line":7,"ack":"started","#)
                && line.ends_with(r#","replayed":true}"#)
        );
        assert_eq!(AckLine::parse(line.as_bytes()), Some(replay));
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let e = |l: &str| Input::parse(l.as_bytes()).unwrap_err();
        assert!(e("nope").starts_with("not JSON"));
        assert!(e(r#"{"type":"shout"}"#).contains("unknown variant"));
        assert!(e(r#"{"type":"answer","id":"r","decision":"expired"}"#).contains("unknown variant"));
        assert!(e(r#"{"type":"answer","id":"r","decision":"allow","bogus":1}"#).contains("unknown field"));
        assert!(e(r#"{"type":"message","text":"  "}"#).contains("empty"));
        assert!(e(r#"{"type":"message"}"#).contains("text"));
    }
}
