//! The commands a person's tool gives a live agent, whichever door they come
//! through: one [`Command`] (parsed once, checked by one [`Command::check`]),
//! one [`Reply`], one list of verb names ([`Verb`]) and of doors ([`Door`]).
//!
//! A live agent can be reached through several doors: the AG-UI resume
//! (`POST /agui`), the task routes of a session the server holds, the
//! control routes that pass a command to a run's supervisor
//! (`POST /runs/…/tasks/…/{verb}`), the supervisor's control socket,
//! `runwire-session`'s input lines, and a hub forwarding to a node. Each of
//! them reads its own wire shape (an HTTP body, a socket request line, a
//! session input line) into a `Command` here, so that every rule a command
//! is held to is written once, in this module:
//!
//! - a message or steer text is not blank, a steer at most [`MAX_TEXT`]
//!   bytes, a message at most [`MAX_MESSAGE`] ([`check_text`]);
//! - a steer that names the turn it expects is refused once another turn
//!   has begun (the session checks it: it knows its turns);
//! - an answer names its request by `request` on HTTP and by `id` on the
//!   session input ([`answer_body`] maps one to the other);
//! - an answer names a request by runwire's interrupt id ([`is_interrupt_id`]),
//!   minted by the session for each request of each agent process
//!   ([`new_interrupt_id`]): the agent's own id (codex and ACP number their
//!   requests 0, 1, 2… in every process) names a request only inside the
//!   one process that asked it, so a door that outlives the agent's process
//!   (the supervisor's socket and routes) takes runwire's id only
//!   ([`Command::check_bound`]);
//! - the session then applies the answer rules themselves (open, replay or
//!   conflict, what the agent's protocol can take: the offer), the same
//!   for every door, since every door ends in a session input.
//!
//! - a command under an idempotency key runs once on every door ([`keys`]).
//!
//! Pure: no IO but the kernel's randomness for new ids.

pub mod keys;
pub mod links;

use crate::pipeline::events::Scope;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Largest steer text, in bytes (every door).
pub const MAX_TEXT: usize = 64 * 1024;
/// Largest message text, in bytes: a message starts or joins a turn (a
/// prompt may carry a file), so it is bounded by the input line only.
pub const MAX_MESSAGE: usize = MAX_LINE;
/// Largest session input line accepted, in bytes (a long message JSON-escaped, or an
/// edited tool input).
pub const MAX_LINE: usize = 1024 * 1024;

/// Every interrupt id runwire mints starts so.
pub const INTERRUPT_PREFIX: &str = "rw-";

/// The verbs, by name. `grep` finds each name here and nowhere else as a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// A user message: starts a turn, or joins the running one.
    Message,
    /// A message under the steer rules (refused while a request is open).
    Steer,
    /// An answer to one open request.
    Answer,
    /// Several answers as one unit (an AG-UI resume): all or none.
    Answers,
    /// Interrupt the running turn; the session stays.
    Interrupt,
    /// Cancel open requests, then interrupt the running turn; the session stays.
    Stop,
    /// End the session.
    End,
    /// Kill the agent's process group.
    Kill,
    /// Hold a run: no new task starts.
    Pause,
    /// Let a held run go on.
    Resume,
    /// What every task is doing.
    Status,
}

impl Verb {
    pub const ALL: [Verb; 11] = [
        Verb::Message,
        Verb::Steer,
        Verb::Answer,
        Verb::Answers,
        Verb::Interrupt,
        Verb::Stop,
        Verb::End,
        Verb::Kill,
        Verb::Pause,
        Verb::Resume,
        Verb::Status,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Message => "message",
            Verb::Steer => "steer",
            Verb::Answer => "answer",
            Verb::Answers => "answers",
            Verb::Interrupt => "interrupt",
            Verb::Stop => "stop",
            Verb::End => "end",
            Verb::Kill => "kill",
            Verb::Pause => "pause",
            Verb::Resume => "resume",
            Verb::Status => "status",
        }
    }

    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The verbs of `POST /runs/:id/tasks/:tid/{verb}` (one task's).
    pub const TASK_ROUTE: [Verb; 4] = [Verb::Steer, Verb::Kill, Verb::Answer, Verb::Stop];
    /// The verbs of `POST /runs/:id/{verb}` (the whole run's).
    pub const RUN_ROUTE: [Verb; 2] = [Verb::Pause, Verb::Resume];
    /// The verbs of the supervisor's control socket.
    pub const SUPERVISOR: [Verb; 7] =
        [Verb::Kill, Verb::Steer, Verb::Stop, Verb::Answer, Verb::Pause, Verb::Resume, Verb::Status];

    /// A verb that acts on one task (the supervisor's socket: `task` is required).
    pub fn needs_task(self) -> bool {
        matches!(self, Verb::Kill | Verb::Steer | Verb::Stop | Verb::Answer)
    }

    /// `a, b or c`: the names of `verbs`, for an error message.
    pub fn list(verbs: &[Verb]) -> String {
        verbs.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The way a command came in, for the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Door {
    /// The studio (a browser client of the task routes).
    Studio,
    /// `POST /agui`: a run's input or its `resume`.
    Agui,
    /// `POST /runs/:id/tasks/:tid/{verb}` or `POST /runs/:id/{verb}`.
    TaskRoute,
    /// The supervisor's unix control socket.
    SupervisorSocket,
    /// A line of `runwire-session`'s input.
    SessionInput,
    /// A hub forwarding to a node of the cluster.
    Hub,
    /// An approval link (`GET|POST /a/<token>`): one answer, no bearer token.
    Link,
}

impl Door {
    pub const ALL: [Door; 7] =
        [Door::Studio, Door::Agui, Door::TaskRoute, Door::SupervisorSocket, Door::SessionInput, Door::Hub, Door::Link];

    pub fn as_str(self) -> &'static str {
        match self {
            Door::Studio => "studio",
            Door::Agui => "agui",
            Door::TaskRoute => "task-route",
            Door::SupervisorSocket => "supervisor-socket",
            Door::SessionInput => "session-input",
            Door::Hub => "hub",
            Door::Link => "link",
        }
    }

    pub fn parse(s: &str) -> Option<Door> {
        Door::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

impl std::fmt::Display for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decisions a person can give (`expired` is the session's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    Answer,
    Cancelled,
}

impl From<Decision> for crate::pipeline::events::Decision {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Allow => crate::pipeline::events::Decision::Allow,
            Decision::Deny => crate::pipeline::events::Decision::Deny,
            Decision::Answer => crate::pipeline::events::Decision::Answer,
            Decision::Cancelled => crate::pipeline::events::Decision::Cancelled,
        }
    }
}

/// `{"type":"answer","id":…,"decision":…}` and its optional parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerInput {
    /// The request: runwire's interrupt id (`interrupt_id` of the
    /// `runwire.request` line, bound to the one agent process that asked),
    /// or, on the session's own input only, the agent's request id.
    pub id: String,
    pub decision: Decision,
    /// `allow` for this call only (default) or for the rest of the session.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<Scope>,
    /// `allow` with edits: the tool input to run instead (a full replacement).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub updated_input: Option<Map<String, Value>>,
    /// `answer`: question text -> chosen label, or a list of labels for a
    /// multi-select question.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub answers: Option<Map<String, Value>>,
    /// `deny`/`cancelled`: the reason the agent is told.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// `allow` of a plan: the permission mode to carry the plan out in
    /// (default: the session's `--plan-exit-mode`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
    /// The door the answer came through, for the journal: in-process only
    /// (a door of the server sets it), never a field of an input line.
    #[serde(skip)]
    pub door: Option<Door>,
}

/// One command, whatever its door. `who` is on [`Issued`], not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    Message {
        text: String,
    },
    /// `turn`: the turn the sender saw running ([`crate::session::Session::turn`]);
    /// a steer aimed at a turn that is over is refused with nothing sent.
    Steer {
        text: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupt: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u64>,
    },
    Answer {
        answer: AnswerInput,
    },
    Answers {
        answers: Vec<AnswerInput>,
    },
    Interrupt,
    Stop,
    End,
    Kill,
    Pause,
    Resume,
    Status,
}

/// A command with where it came from and who gave it: what is journaled.
#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    pub door: Door,
    /// Who asks (today the server's or the supervisor's name, or the socket
    /// request's `actor`).
    pub actor: String,
    pub task: Option<String>,
    pub command: Command,
}

/// The one rule for a message (`max` [`MAX_MESSAGE`]) or steer ([`MAX_TEXT`]) text.
pub fn check_text(text: &str, max: usize) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("text is empty".into());
    }
    if text.len() > max {
        return Err(format!("text is {} bytes, more than {max}", text.len()));
    }
    Ok(())
}

/// An answer names some request: a non-blank id of bounded length.
fn check_answer_id(id: &str) -> Result<(), String> {
    if id.trim().is_empty() {
        return Err("the request id is empty".into());
    }
    if id.len() > 1024 {
        return Err(format!("the request id is {} bytes, more than 1024", id.len()));
    }
    Ok(())
}

/// True for an id shaped like runwire's interrupt ids.
pub fn is_interrupt_id(id: &str) -> bool {
    id.strip_prefix(INTERRUPT_PREFIX).is_some_and(|rest| !rest.is_empty())
}

/// A new interrupt id: `rw-` and 128 random bits. Unguessable and unique
/// across processes, so an id names one request of one agent process and
/// nothing else, on every door.
pub fn new_interrupt_id() -> String {
    format!("{INTERRUPT_PREFIX}{}", random_hex(16))
}

/// `n` random bytes as hex: the kernel's randomness (`/dev/urandom`); where
/// that cannot be read, std's randomly keyed hasher over the time, the pid
/// and a counter.
pub fn random_hex(n: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_ok();
    if !ok {
        use std::hash::{BuildHasher, Hasher};
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        for chunk in buf.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
            );
            h.write_u32(std::process::id());
            h.write_u64(COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            let v = h.finish().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The HTTP answer body (`{request, decision, …}`: the session input's
/// answer with `request` naming the request) as the session input's answer
/// (`id`). `by` is set when the body has none.
pub fn answer_body(body: &[u8], by: &str) -> Result<AnswerInput, String> {
    const SHAPE: &str =
        "{request, decision: allow|deny|answer|cancelled, scope?, updated_input?, answers?, message?, mode?, by?}";
    let mut a = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(a)) => a,
        _ => return Err(format!("answer body: a JSON object {SHAPE} expected")),
    };
    let Some(rid) = a.remove("request") else {
        return Err("answer body: request (the request's interrupt id) is required".into());
    };
    a.insert("id".into(), rid);
    a.entry("by").or_insert_with(|| by.into());
    answer_object(a).map_err(|e| format!("answer body: {SHAPE} expected ({e})"))
}

/// The answer object of a socket request or a session input line (`id` names the request).
pub fn answer_object(a: Map<String, Value>) -> Result<AnswerInput, String> {
    serde_json::from_value::<AnswerInput>(Value::Object(a)).map_err(|e| e.to_string())
}

impl Command {
    pub fn verb(&self) -> Verb {
        match self {
            Command::Message { .. } => Verb::Message,
            Command::Steer { .. } => Verb::Steer,
            Command::Answer { .. } => Verb::Answer,
            Command::Answers { .. } => Verb::Answers,
            Command::Interrupt => Verb::Interrupt,
            Command::Stop => Verb::Stop,
            Command::End => Verb::End,
            Command::Kill => Verb::Kill,
            Command::Pause => Verb::Pause,
            Command::Resume => Verb::Resume,
            Command::Status => Verb::Status,
        }
    }

    /// The one validation every door runs (the session's own checks of an
    /// answer against its request come after, in the session).
    pub fn check(&self) -> Result<(), String> {
        match self {
            Command::Message { text } => check_text(text, MAX_MESSAGE),
            Command::Steer { text, .. } => check_text(text, MAX_TEXT),
            Command::Answer { answer } => check_answer_id(&answer.id),
            Command::Answers { answers } => {
                for (n, a) in answers.iter().enumerate() {
                    check_answer_id(&a.id)?;
                    if answers[..n].iter().any(|b| b.id == a.id) {
                        return Err(format!("request {:?} is answered twice in one input", a.id));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// [`Command::check`], and for an answer, that it names its request by
    /// runwire's interrupt id: a door that outlives one agent process (the
    /// supervisor's socket and the routes to it) cannot tell which
    /// process's request `"0"` is.
    pub fn check_bound(&self) -> Result<(), String> {
        self.check()?;
        let ids: Vec<&str> = match self {
            Command::Answer { answer } => vec![&answer.id],
            Command::Answers { answers } => answers.iter().map(|a| a.id.as_str()).collect(),
            _ => vec![],
        };
        match ids.into_iter().find(|id| !is_interrupt_id(id)) {
            Some(id) => Err(format!(
                "answer: request {id:?} is not a runwire interrupt id: name the request by its interrupt_id (the task log's runwire.request line, the journal's requested record), never the agent's own id, which another process of the task may reuse; nothing was sent"
            )),
            None => Ok(()),
        }
    }

    /// A control route's command from its verb and body (empty when none
    /// was sent): steer `{msg, interrupt?, turn?}`, answer [`answer_body`].
    pub fn from_route(verb: Verb, body: &[u8], by: &str) -> Result<Command, String> {
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
            crate::util::lenient::unique_keys(body).map_err(|e| format!("{verb} body: {e}"))?;
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct SteerBody {
            msg: String,
            #[serde(default)]
            interrupt: bool,
            #[serde(default)]
            turn: Option<u64>,
        }
        let c = match verb {
            Verb::Steer => {
                let b = serde_json::from_slice::<SteerBody>(body).map_err(|e| {
                    format!("steer body: {e} (expected {{\"msg\": string, \"interrupt\"?: bool, \"turn\"?: number}})")
                })?;
                Command::Steer { text: b.msg, interrupt: b.interrupt, turn: b.turn }
            }
            Verb::Answer => Command::Answer { answer: answer_body(body, by)? },
            v if Verb::TASK_ROUTE.contains(&v) || Verb::RUN_ROUTE.contains(&v) => {
                if !body.is_empty() && !matches!(serde_json::from_slice::<Value>(body), Ok(Value::Object(_))) {
                    return Err("the body must be a JSON object".into());
                }
                Command::plain(v).expect("a verb without a body")
            }
            v => return Err(format!("{v} is not a route's verb")),
        };
        c.check().map_err(|e| format!("{} body: {e}", verb))?;
        Ok(c)
    }

    /// The command as given by `person` (the name of the caller's named
    /// token): an answer's `by` is theirs whatever its body said, so no
    /// one answers in another's name.
    pub fn by_person(self, person: &str) -> Command {
        match self {
            Command::Answer { mut answer } => {
                answer.by = Some(person.into());
                Command::Answer { answer }
            }
            Command::Answers { mut answers } => {
                answers.iter_mut().for_each(|a| a.by = Some(person.into()));
                Command::Answers { answers }
            }
            c => c,
        }
    }

    /// A verb that takes nothing but its name.
    pub(crate) fn plain(v: Verb) -> Option<Command> {
        Some(match v {
            Verb::Interrupt => Command::Interrupt,
            Verb::Stop => Command::Stop,
            Verb::End => Command::End,
            Verb::Kill => Command::Kill,
            Verb::Pause => Command::Pause,
            Verb::Resume => Command::Resume,
            Verb::Status => Command::Status,
            _ => return None,
        })
    }
}

/// The reply to a command, on every door (a socket's reply line, a route's
/// body). `ok: false` is a refusal with its reason in `detail`; nothing was
/// done for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    pub detail: String,
    /// The task's (or the run's) state, where the door knows it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub state: Option<String>,
    /// An answer: whether anything reached the agent (`false`: an identical
    /// replay, acknowledged with nothing sent).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sent: Option<bool>,
    /// A steer taken into the running session (no kill, no resume).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub live: Option<bool>,
    /// Why, as a word a client can act on: [`BAD_REQUEST`], [`NOT_READING`],
    /// [`SUPERVISOR_BUSY`], [`LATE`], [`KEY_CONFLICT`], [`KEY_RUNNING`].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code: Option<String>,
    /// The first reply of this command's idempotency key, again: nothing
    /// was run this time ([`keys`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replayed: Option<bool>,
}

/// [`Reply::code`]: the command itself is wrong (HTTP 400).
pub const BAD_REQUEST: &str = "bad_request";
/// [`Reply::code`]: the agent does not read its input; try again (HTTP 503).
pub const NOT_READING: &str = "agent_not_reading";
/// [`Reply::code`]: the supervisor took no more callers, nothing was read
/// or done; try again (HTTP 503, `Retry-After`).
pub const SUPERVISOR_BUSY: &str = "supervisor_busy";
/// [`Reply::code`]: the command came after its caller's deadline (the
/// supervisor was stopped or busy until then): nothing was done (HTTP 504,
/// as a hub's forward that ran out: it will not run later either).
pub const LATE: &str = "late";
/// [`Reply::code`]: the idempotency key names another command (HTTP 422).
pub const KEY_CONFLICT: &str = "idempotency_key_conflict";
/// [`Reply::code`]: the idempotency key's command still runs; retry for its reply (HTTP 409).
pub const KEY_RUNNING: &str = "idempotency_key_running";

impl Reply {
    pub fn ok(detail: impl Into<String>, state: Option<String>) -> Reply {
        Reply { ok: true, detail: detail.into(), state, ..Reply::default() }
    }
    pub fn refuse(detail: impl Into<String>, state: Option<String>) -> Reply {
        Reply { ok: false, detail: detail.into(), state, ..Reply::default() }
    }
    /// The refusal of a command naming a task its run does not have (a
    /// supervisor's, a steer inbox's: one text).
    pub fn no_task(task: &str) -> Reply {
        Reply::refuse(format!("no task {task:?} in this run"), None)
    }
    /// The refusal of a steer of a task in a terminal `state`.
    pub fn terminal_task(task: &str, state: &str) -> Reply {
        Reply::refuse(format!("task {task} is {state}: a terminal task cannot be steered"), Some(state.into()))
    }
    /// A refusal of a command that is wrong in itself.
    pub fn bad(detail: impl Into<String>) -> Reply {
        Reply { code: Some(BAD_REQUEST.into()), ..Reply::refuse(detail, None) }
    }
    /// A caller the supervisor could not take: nothing read, nothing done.
    pub fn busy(detail: impl Into<String>) -> Reply {
        Reply { code: Some(SUPERVISOR_BUSY.into()), ..Reply::refuse(detail, None) }
    }
    /// An answer taken: sent, or (`sent == false`) an identical replay.
    pub fn answered(sent: bool, detail: impl Into<String>, state: Option<String>) -> Reply {
        Reply { sent: Some(sent), ..Reply::ok(detail, state) }
    }

    /// The HTTP status a route answers this reply with.
    pub fn http_status(&self) -> u16 {
        match (self.ok, self.code.as_deref()) {
            (true, _) => 200,
            (false, Some(BAD_REQUEST)) => 400,
            (false, Some(NOT_READING | SUPERVISOR_BUSY)) => 503,
            (false, Some(LATE)) => 504,
            (false, Some(KEY_CONFLICT)) => 422,
            (false, _) => 409,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::input::Input;

    #[test]
    fn every_verb_and_door_has_one_name() {
        for v in Verb::ALL {
            assert_eq!(Verb::parse(v.as_str()), Some(v));
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
        for d in Door::ALL {
            assert_eq!(Door::parse(d.as_str()), Some(d));
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
        assert_eq!(Verb::parse("shout"), None);
    }

    #[test]
    fn one_text_rule_on_every_door() {
        let blank = Command::from_route(Verb::Steer, br#"{"msg":"  "}"#, "t").unwrap_err();
        assert!(blank.contains("empty"), "{blank}");
        let req =
            crate::supervise::socket::Request { verb: "steer".into(), msg: Some(" \n".into()), ..Default::default() };
        assert!(Command::from_request(&req).unwrap_err().contains("empty"));
        assert!(Input::parse(br#"{"type":"steer","text":"\t"}"#).unwrap_err().contains("empty"));
        let big = "x".repeat(MAX_TEXT + 1);
        let long = Command::from_route(Verb::Steer, serde_json::json!({"msg": big}).to_string().as_bytes(), "t");
        assert!(long.unwrap_err().contains("more than"));
        let ok = Command::from_route(Verb::Steer, br#"{"msg":"go left","interrupt":true,"turn":2}"#, "t").unwrap();
        assert_eq!(ok, Command::Steer { text: "go left".into(), interrupt: true, turn: Some(2) });
    }

    #[test]
    fn the_answer_body_names_its_request_and_bound_doors_take_runwires_ids_only() {
        let c = Command::from_route(Verb::Answer, br#"{"request":"rw-ab12","decision":"allow"}"#, "srv").unwrap();
        let Command::Answer { answer } = &c else { panic!("{c:?}") };
        assert_eq!((answer.id.as_str(), answer.by.as_deref()), ("rw-ab12", Some("srv")));
        assert!(c.check_bound().is_ok());
        let raw = Command::from_route(Verb::Answer, br#"{"request":"0","decision":"allow"}"#, "srv").unwrap();
        assert!(raw.check().is_ok());
        assert!(raw.check_bound().unwrap_err().contains("not a runwire interrupt id"));
        let e = Command::from_route(Verb::Answer, br#"{"decision":"allow"}"#, "srv").unwrap_err();
        assert!(e.contains("request"), "{e}");
        let e = Command::from_route(Verb::Answer, br#"{"request":"rw-a","decision":"maybe"}"#, "srv").unwrap_err();
        assert!(e.contains("unknown variant"), "{e}");
        let twice = Command::Answers { answers: vec![answer.clone(), answer.clone()] };
        assert!(twice.check().unwrap_err().contains("twice"));
    }

    /// A key given twice reads one way and acts another: refused on every
    /// door that takes a command (a route's body, a session input line, the
    /// supervisor socket's request, an AG-UI run's body), nothing sent.
    #[test]
    fn a_key_given_twice_is_refused_on_every_door() {
        let body = br#"{"request":"rw-0123456789abcdef","decision":"deny","decision":"allow"}"#;
        assert!(Command::from_route(Verb::Answer, body, "ana").unwrap_err().contains("\"decision\" appears twice"));
        let line = br#"{"type":"answer","id":"0","decision":"deny","message":"no","decision":"allow"}"#;
        assert!(crate::session::core::Input::parse_keyed(line).unwrap_err().contains("appears twice"));
        let line = br#"{"type":"message","type":"end"}"#;
        assert!(crate::session::core::Input::parse_keyed(line).is_err());
        let run = br#"{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"resolved","payload":{"approved":false,"approved":true}}]}"#;
        assert!(crate::serve::agui::parse_input(run).unwrap_err().contains("appears twice"));
    }

    #[test]
    fn commands_round_trip_as_serde_and_as_session_input() {
        for c in [
            Command::Message { text: "hi".into() },
            Command::Steer { text: "go".into(), interrupt: true, turn: Some(3) },
            Command::Stop,
            Command::Interrupt,
            Command::End,
        ] {
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(serde_json::from_value::<Command>(v).unwrap(), c);
            let i = c.clone().into_input("ana").unwrap();
            assert_eq!(Command::from_input(&i), c);
        }
        assert!(Command::Kill.into_input("ana").is_none());
        assert!(serde_json::from_str::<Command>(r#"{"verb":"steer","text":"x","bogus":1}"#).is_err());
    }

    #[test]
    fn the_socket_request_round_trips_with_door_and_actor() {
        let c = Command::from_route(Verb::Steer, br#"{"msg":"go","turn":4}"#, "srv").unwrap();
        let i = Issued { door: Door::TaskRoute, actor: "runwire-serve".into(), task: Some("a".into()), command: c };
        let req = i.to_request().unwrap();
        assert_eq!((req.verb.as_str(), req.door.as_deref(), req.turn), ("steer", Some("task-route"), Some(4)));
        assert_eq!(Issued::from_request(&req).unwrap(), i);
        let bare = crate::supervise::socket::Request { verb: "pause".into(), ..Default::default() };
        let b = Issued::from_request(&bare).unwrap();
        assert_eq!((b.door, b.actor.as_str(), b.command), (Door::SupervisorSocket, "control", Command::Pause));
        let unknown = crate::supervise::socket::Request { verb: "message".into(), ..Default::default() };
        assert!(Issued::from_request(&unknown).unwrap_err().contains("unknown verb"));
    }

    #[test]
    fn replies_map_to_http_statuses() {
        assert_eq!(Reply::ok("x", None).http_status(), 200);
        assert_eq!(Reply::refuse("x", None).http_status(), 409);
        assert_eq!(Reply::bad("x").http_status(), 400);
        let r = Reply::answered(false, "replay", None);
        assert_eq!(serde_json::to_value(&r).unwrap(), serde_json::json!({"ok":true,"detail":"replay","sent":false}));
    }

    #[test]
    fn interrupt_ids_are_runwires_and_unique() {
        let (a, b) = (new_interrupt_id(), new_interrupt_id());
        assert!(is_interrupt_id(&a) && a.len() == 3 + 32 && a != b);
        assert!(!is_interrupt_id("0") && !is_interrupt_id("rw-"));
    }
}
