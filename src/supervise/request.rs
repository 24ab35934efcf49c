//! The supervisor socket's request line ([`Request`]): its wire shape, the
//! deadline a caller sets on it, and the command it reads as, the one
//! every door reads into ([`crate::control`]). The socket itself, both
//! ends, is [`super::socket`].

use crate::control::Reply;
pub use crate::control::LATE;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One control request: the socket's wire shape, read into a
/// [`crate::control::Command`] by [`crate::control::Command::from_request`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// One of [`crate::control::Verb::SUPERVISOR`].
    pub verb: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub msg: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt: Option<bool>,
    /// `steer`: the turn the sender saw (refused once another began).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub turn: Option<u64>,
    /// The door the command came through ([`crate::control::Door`]), when a
    /// server passes it on (default `supervisor-socket`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub door: Option<String>,
    /// Who asks, for the journal's `actor` (default `control`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub actor: Option<String>,
    /// `answer`: the answer to a pending request of an interactive task, as
    /// the session input's answer line without its `type`
    /// (`{"id":…,"decision":…}`, spec/SESSION-INPUT.md), `id` naming the
    /// request by runwire's interrupt id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub answer: Option<serde_json::Value>,
    /// The command's idempotency key ([`crate::control::keys`]): the same
    /// key with the same request gets the first reply again (`"replayed":
    /// true`) and runs nothing; with another request it is refused.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub idempotency_key: Option<String>,
    /// The latest moment the command may start, in `CLOCK_MONOTONIC`
    /// milliseconds of this machine (the socket is local, so caller and
    /// supervisor share the clock): [`super::socket::call`] sets it a little before it
    /// stops waiting, and the supervisor refuses a command it takes later
    /// ([`LATE`]) with nothing done. So a caller that gave up on a stopped
    /// or stalled supervisor never has its command run behind its back when
    /// that supervisor runs again.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub deadline: Option<u64>,
}

/// `CLOCK_MONOTONIC` now, in milliseconds: the clock of [`Request::deadline`].
pub fn monotonic_ms() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| (t.tv_sec() as u64).saturating_mul(1000).saturating_add(t.tv_nsec() as u64 / 1_000_000))
}

/// Whether `req` came past its deadline: its caller has stopped waiting
/// (or is about to), so it must not start.
pub fn past_deadline(req: &Request) -> bool {
    req.deadline.is_some_and(|d| monotonic_ms() > d)
}

/// The refusal of a command taken past its caller's deadline ([`Request::deadline`]).
pub fn late() -> Reply {
    Reply {
        code: Some(LATE.into()),
        ..Reply::refuse(
            "the caller had stopped waiting before the supervisor could take this command (the supervisor was stopped \
             or busy): nothing was done",
            None,
        )
    }
}

/// How long before a caller stops waiting its command may still start: the
/// last second is left for the reply to come back (half the wait when it
/// is shorter than two seconds).
pub(super) fn start_budget(timeout: Duration) -> Duration {
    timeout.saturating_sub(Duration::from_secs(1)).max(timeout / 2)
}

use crate::control::{answer_object, Command, Door, Issued, Verb};
use serde_json::Value;

/// The socket's door: a request line read as the one command every door
/// reads into ([`crate::control`]), and the line a command is passed on as.
impl Issued {
    /// A supervisor socket's request line read as a command: its door
    /// (`door`, default the socket itself) and actor (`actor`, default
    /// `control`) with it.
    pub fn from_request(req: &Request) -> Result<Issued, String> {
        let command = Command::from_request(req)?;
        Ok(Issued {
            door: req.door.as_deref().and_then(Door::parse).unwrap_or(Door::SupervisorSocket),
            actor: req.actor.clone().filter(|a| !a.is_empty() && a.len() <= 128).unwrap_or_else(|| "control".into()),
            task: req.task.clone(),
            command,
        })
    }

    /// The supervisor socket's request line for this command (what a server
    /// passes on); `None` for a verb the socket does not take.
    pub fn to_request(&self) -> Option<Request> {
        let verb = self.command.verb();
        if !Verb::SUPERVISOR.contains(&verb) {
            return None;
        }
        let mut r = Request {
            verb: verb.as_str().into(),
            task: self.task.clone(),
            actor: Some(self.actor.clone()),
            door: Some(self.door.as_str().into()),
            ..Default::default()
        };
        match &self.command {
            Command::Steer { text, interrupt, turn } => {
                r.msg = Some(text.clone());
                r.interrupt = Some(*interrupt);
                r.turn = *turn;
            }
            Command::Answer { answer } => r.answer = serde_json::to_value(answer).ok(),
            _ => {}
        }
        Some(r)
    }
}

impl Command {
    /// The supervisor socket's request line read as a command (its `msg`,
    /// `interrupt`, `turn` and `answer` fields, as `spec/SUPERVISOR.md` says).
    pub fn from_request(req: &Request) -> Result<Command, String> {
        let Some(verb) = Verb::parse(&req.verb).filter(|v| Verb::SUPERVISOR.contains(v)) else {
            return Err(format!("unknown verb {:?} ({})", req.verb, Verb::list(&Verb::SUPERVISOR)));
        };
        let c = match verb {
            Verb::Steer => Command::Steer {
                text: req.msg.clone().unwrap_or_default(),
                interrupt: req.interrupt == Some(true),
                turn: req.turn,
            },
            Verb::Answer => {
                let Some(Value::Object(a)) = req.answer.clone() else {
                    return Err("answer needs an answer object".into());
                };
                let mut answer = answer_object(a).map_err(|e| format!("answer: {e}"))?;
                if answer.by.is_none() {
                    answer.by = req.actor.clone();
                }
                Command::Answer { answer }
            }
            v => Command::plain(v).expect("a verb without a body"),
        };
        c.check().map_err(|e| format!("{verb}: {e}"))?;
        Ok(c)
    }
}
