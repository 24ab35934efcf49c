//! What the session's parts share: an agent protocol's contract with the
//! session ([`Agent`], the [`Signal`]s it reports), and what a step of the
//! session is and says ([`Step`], [`Ack`], [`Phase`], [`Refused`],
//! [`Options`]). A leaf of `session::core`: the session, its input format
//! and the agents' protocols build on it; `mod.rs` re-exports it.

use crate::control::AnswerInput;
use crate::pipeline::events::{Decision, InputAnswer, InputRequest};
use std::fmt;

/// What one agent line means to the session (reported by an [`Agent`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Signal {
    /// The agent waits for a person. `expires_at` is filled by the session.
    Request(Box<InputRequest>),
    /// The agent withdrew a request it raised (claude `control_cancel_request`).
    Withdrawn(String),
    /// The agent is working on a turn.
    TurnActive,
    /// The turn ended (claude `result`).
    TurnEnded { ok: bool },
    /// The agent named its session (resumable id).
    SessionId(String),
    /// The agent refused a request of runwire's own that the session cannot
    /// go on without (codex `thread/start` / `thread/resume`, ACP
    /// `initialize`, `session/new`, `session/load`): the session ends with
    /// this reason (issue 26 case 4: it used to wait forever).
    Failed(String),
}

/// What a message sent while a turn runs does, in each protocol (runners
/// say so in their replies and records: [`crate::session::launch::AgentKind::mid_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MidTurn {
    /// It joins the running turn: claude takes it in at its next step,
    /// codex through `turn/steer`.
    Joins,
    /// The protocol cannot steer a running turn (ACP): the turn is cancelled
    /// (`session/cancel`; it ends `cancelled`) and the message is the next
    /// prompt, in the same session.
    CancelsAndPrompts,
}

/// One agent's interactive wire protocol, with no IO. Methods append the
/// lines to write to the agent (without newlines) to `to_agent`.
pub trait Agent {
    /// The agent's name (`claude`).
    fn name(&self) -> &'static str;
    /// Lines written once the process runs (claude: `initialize`).
    fn open(&mut self, to_agent: &mut Vec<Vec<u8>>);
    /// Reads one agent line; automatic replies (to requests runwire does not
    /// handle) go to `to_agent`.
    fn line(&mut self, line: &[u8], to_agent: &mut Vec<Vec<u8>>) -> Vec<Signal>;
    /// A user message, at any time (mid-turn too).
    fn message(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>);
    /// Closes `req` with `answer` (any decision: `cancelled` and `expired`
    /// tell the agent no). `mode`: the permission mode to continue a plan in.
    fn answer(&mut self, req: &InputRequest, answer: &InputAnswer, mode: Option<&str>, to_agent: &mut Vec<Vec<u8>>);
    /// Interrupts the running turn; the session stays.
    fn interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>);
    /// The agent still owes a turn: one runs, or a message sent is not yet
    /// settled into one (codex: a steer not yet answered, which becomes the
    /// next turn if refused). A turn's end does not make the session idle
    /// while this holds. `false` where the protocol cannot tell more than
    /// its turn ends say.
    fn working(&self) -> bool {
        false
    }
    /// What a message sent while a turn runs does in this protocol.
    fn mid_turn(&self) -> MidTurn {
        MidTurn::Joins
    }
    /// A message that joins a running turn may still become the next turn
    /// (codex refuses a steer that comes after the turn's end).
    fn steer_may_start_next(&self) -> bool {
        false
    }
    /// A message sent mid-turn is taken when the agent says so, into the
    /// running turn or as the next one ([`Ack::Pending`]; claude echoes it).
    fn pending_steer(&self) -> bool {
        false
    }
    /// Checks an answer's mode (plan approval) before anything is written.
    fn check_mode(&self, _mode: &str) -> Result<(), String> {
        Ok(())
    }
    /// The permission mode an approved plan is carried out in, as the
    /// agent is told it ([`Agent::answer`] of a plan approval): `mode` (an
    /// answer's) or the session's default, canonical. `None`: this protocol
    /// switches no mode on a plan's approval.
    fn plan_mode(&self, _mode: Option<&str>) -> Option<String> {
        None
    }
    /// Checks an answer against what this protocol can say (codex takes no
    /// edited input; allow-for-session only where the agent offered it)
    /// before anything is written.
    fn check_answer(&self, _req: &InputRequest, _answer: &AnswerInput) -> Result<(), String> {
        Ok(())
    }
    /// Whether the agent still waits for an answer to `req`. A protocol
    /// that answers its open requests itself when it cancels a turn (ACP:
    /// `cancelled` to each, as the protocol asks) says so here, and the
    /// session closes them as cancelled: an answer after that is refused,
    /// never recorded as given when nothing reached the agent.
    fn holds(&self, _req: &InputRequest) -> bool {
        true
    }
}

/// A boxed protocol (chosen at run time, [`crate::session::launch::launch`]) is one too.
impl<T: Agent + ?Sized> Agent for Box<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn open(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        (**self).open(to_agent)
    }
    fn line(&mut self, line: &[u8], to_agent: &mut Vec<Vec<u8>>) -> Vec<Signal> {
        (**self).line(line, to_agent)
    }
    fn message(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        (**self).message(text, to_agent)
    }
    fn answer(&mut self, req: &InputRequest, answer: &InputAnswer, mode: Option<&str>, to_agent: &mut Vec<Vec<u8>>) {
        (**self).answer(req, answer, mode, to_agent)
    }
    fn interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        (**self).interrupt(to_agent)
    }
    fn working(&self) -> bool {
        (**self).working()
    }
    fn mid_turn(&self) -> MidTurn {
        (**self).mid_turn()
    }
    fn steer_may_start_next(&self) -> bool {
        (**self).steer_may_start_next()
    }
    fn pending_steer(&self) -> bool {
        (**self).pending_steer()
    }
    fn check_mode(&self, mode: &str) -> Result<(), String> {
        (**self).check_mode(mode)
    }
    fn plan_mode(&self, mode: Option<&str>) -> Option<String> {
        (**self).plan_mode(mode)
    }
    fn check_answer(&self, req: &InputRequest, answer: &AnswerInput) -> Result<(), String> {
        (**self).check_answer(req, answer)
    }
    fn holds(&self, req: &InputRequest) -> bool {
        (**self).holds(req)
    }
}

/// What the agent is told of a request cancelled by a stop (`stop`).
pub const STOPPED: &str = "The user stopped the turn.";

/// What the agent is told of a request cancelled by the session's end (`end`).
pub const ENDED: &str = "The session was ended.";

/// Why a request the agent's protocol cancelled with its turn is closed.
pub const INTERRUPTED: &str = "the turn was interrupted before an answer";

/// What a session input did, as the session saw it when it took it: the
/// acknowledgement a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ack {
    /// Taken (an answer sent, an interrupt, the end).
    #[default]
    Taken,
    /// It repeated an answer already given: nothing was sent again.
    Replay,
    /// No turn ran: the message started one.
    Started,
    /// Written into the running turn (a live steer). `may_start_next`: the
    /// agent may find the turn already over, and then runs it as the next
    /// turn (codex refuses a `turn/steer` that comes too late).
    Joined { may_start_next: bool },
    /// Sent while a turn runs: the agent takes it into that turn or, once
    /// it is over, runs it as the next turn; its echo on the stream says
    /// which (claude: the `user` line with its `uuid`, before or after the
    /// turn's `result`). The session stays mid-turn until it is taken.
    Pending,
    /// The running turn was interrupted; the message starts the next one.
    InterruptedThenStarted,
    /// The protocol cannot steer a running turn (ACP): it was cancelled and
    /// the message is the next prompt, in the same session.
    CancelledThenPrompted,
    /// `stop`: open requests were cancelled and the running turn interrupted.
    Stopped,
    /// `stop`: no turn was running and nothing was asked; nothing was sent.
    NothingRunning,
}

impl fmt::Display for Ack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ack::Taken => "sent to the agent",
            Ack::Replay => "already decided the same way; not sent again",
            Ack::Started => "no turn was running: the message started one",
            Ack::Joined { may_start_next: false } => "written into the running turn (live steer)",
            Ack::Joined { may_start_next: true } => {
                "written into the running turn (live steer); should the agent find that turn already over, the message starts the next turn"
            }
            Ack::Pending => {
                "sent: the agent takes it into the running turn, or runs it as the next turn once that one ends; the stream shows which, and the run follows it"
            }
            Ack::InterruptedThenStarted => "the turn was interrupted and the message starts the next one",
            Ack::CancelledThenPrompted => {
                "ACP cannot steer a running turn: the turn was cancelled and the message prompts again, in the same session"
            }
            Ack::Stopped => "the turn was interrupted; the session stays",
            Ack::NothingRunning => "no turn is running; the session stays",
        })
    }
}

/// Session settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a request waits for an answer before it is denied.
    pub answer_timeout_ms: i64,
    /// Who the session's own decisions are by (`expired`, a turn's end).
    pub actor: String,
}

impl Default for Options {
    fn default() -> Options {
        Options { answer_timeout_ms: 300_000, actor: "runwire-session".into() }
    }
}

/// Where the session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// No turn running: the next message starts one.
    #[default]
    Idle,
    /// A turn is running (a message now joins it).
    Turn,
    /// `end` was asked (or the input ended and the session went idle): the
    /// agent's input is closed.
    Ended,
}

impl Phase {
    /// Its name on a status line.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Turn => "turn",
            Phase::Ended => "ended",
        }
    }
}

/// What one call produced. Apply in this order: write `output`, write
/// `to_agent`, journal `requested`/`answered`, then close the agent's input
/// if `close_agent_input`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Step {
    /// Lines for the session's output (no newlines).
    pub output: Vec<Vec<u8>>,
    /// Lines for the agent's input (no newlines).
    pub to_agent: Vec<Vec<u8>>,
    pub requested: Vec<InputRequest>,
    pub answered: Vec<InputAnswer>,
    /// Close the agent's input now (the session ends).
    pub close_agent_input: bool,
    /// The input repeated an answer already given: nothing was sent again.
    pub replayed: bool,
    /// What an input did (for the other calls: [`Ack::Taken`]).
    pub ack: Ack,
}

/// Why an input was refused. Nothing was written for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// No request with that id was raised in this session.
    Unknown(String),
    /// The request was already closed with a different answer.
    Decided { id: String, previous: Decision },
    /// The request expired (and was denied) before the answer came.
    Expired(String),
    /// The answer does not fit the request (wrong decision for its kind,
    /// answers to questions not asked, …).
    Invalid(String),
    /// The session has ended.
    Ended,
    /// A steer while the agent waits for an answer: answer it first.
    RequestOpen,
    /// A steer that names the turn it expects (`expected`) after another
    /// turn began (`now`): it was meant for a turn that is over.
    StaleTurn { expected: u64, now: u64 },
    /// The agent has not read what it was sent (`waiting` bytes wait) and
    /// this would overflow its input's queue: nothing was taken; try again
    /// later (an in-process caller's command only, `engine::Engine::command`).
    NotReading { waiting: usize },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Unknown(id) => write!(f, "no request {id:?} was raised in this session"),
            Refused::Decided { id, previous } => {
                write!(f, "request {id:?} was already decided ({}); a different answer is refused", previous.as_str())
            }
            Refused::Expired(id) => write!(f, "request {id:?} expired and was denied before this answer came"),
            Refused::Invalid(why) => f.write_str(why),
            Refused::Ended => f.write_str("the session has ended"),
            Refused::RequestOpen => f.write_str(
                "the agent is waiting for an answer to an open request; answer it before steering",
            ),
            Refused::StaleTurn { expected, now } => write!(
                f,
                "the steer was meant for turn {expected}, but turn {now} has begun since: nothing was sent"
            ),
            Refused::NotReading { waiting } => write!(
                f,
                "the agent is not reading its input ({waiting} bytes written to it wait unread); nothing was sent, try again later"
            ),
        }
    }
}
