//! The control verbs (`spec/SUPERVISOR.md`, "Control protocol"), carried
//! out by the supervisor's loop: each request is read and checked as every
//! door's command (`crate::control`), then applied to the task's state
//! machine or written into its running session as a session input line,
//! whose acknowledgement (`runwire.ack`, read off the session's output by
//! [`super::runner`]) is the reply.

use super::awaiting::{Asked, Awaiting};
use super::runner::{Kill, Running};
use super::socket::Request;
use super::state::Sup;
use super::waves::Phase;
use crate::control::{Command, Door, Issued, Reply, Verb};
use crate::runs::journal::is_terminal;
use std::io::Write;
use std::sync::mpsc;
use std::time::Instant;

/// Writes one session input line into a running interactive turn.
fn write_input(r: &mut Running, input: &crate::session::Input) -> Result<u64, String> {
    let Some(w) = r.input.as_mut() else { return Err("its session input is closed".into()) };
    let mut line = input.to_line().into_bytes();
    line.push(b'\n');
    if let Err(e) = w.write_all(&line).and_then(|()| w.flush()) {
        r.input = None;
        return Err(format!("its session input could not be written: {e}"));
    }
    r.written += 1;
    Ok(r.written)
}

/// Writes `input` into a running interactive turn; the request is
/// answered with the session's acknowledgement of it ([`acked`]).
fn ask(
    r: &mut Running,
    input: &crate::session::Input,
    what: Asked,
    who: (&str, Door),
    reply: &mpsc::Sender<Reply>,
) -> Result<(), String> {
    let line = write_input(r, input)?;
    let (actor, door, reply, since) = (who.0.to_string(), who.1, Some(reply.clone()), Instant::now());
    r.awaiting.push(Awaiting { line, what, actor, door, reply, since });
    Ok(())
}

impl Sup {
    /// Starts stopping a task; `reply` is answered when its group is gone.
    pub(super) fn begin_kill(&mut self, id: &str, actor: &str, reply: Option<&mpsc::Sender<Reply>>) -> Option<Reply> {
        if let Some(r) = self.running.get_mut(id) {
            r.terminate();
            let k = r.kill.get_or_insert_with(|| Kill { actor: actor.to_string(), detail: None, replies: vec![] });
            if let Some(tx) = reply {
                k.replies.push(tx.clone());
            }
            return None;
        }
        match self.waves.kill_idle(id, actor) {
            Err(s) => Some(Reply::ok(format!("task {id} is already {s}"), Some(s))),
            Ok(e) => {
                let detail = match &e {
                    crate::supervise::waves::Effect::State { detail, .. } => detail.clone().unwrap_or_default(),
                    _ => String::new(),
                };
                self.apply(vec![e]);
                Some(Reply::ok(detail, Some("halted".into())))
            }
        }
    }

    pub(super) fn handle(&mut self, req: Request, reply: &mpsc::Sender<Reply>) -> Option<Reply> {
        // One parse, one validation (`crate::control`); an answer names its
        // request by runwire's id: the task's agent processes each number
        // their own requests.
        let issued = match Issued::from_request(&req).and_then(|i| i.command.check_bound().map(|()| i)) {
            Ok(i) => i,
            Err(why) => return Some(Reply::bad(why)),
        };
        let Issued { door, actor, command, .. } = issued;
        let verb = command.verb();
        let task = match (verb.needs_task(), req.task.as_deref()) {
            (true, None) => return Some(Reply::bad(format!("{verb} needs a task"))),
            (true, Some(t)) => match self.waves.slot(t) {
                Some(_) => Some(t.to_string()),
                None => return Some(Reply::no_task(t)),
            },
            (false, _) => None,
        };
        let who = (actor.as_str(), door);
        match (command, task) {
            (Command::Kill, Some(t)) => self.begin_kill(&t, &actor, Some(reply)),
            (Command::Steer { text, interrupt, turn }, Some(t)) => self.steer(&t, who, text, interrupt, turn, reply),
            (Command::Stop, Some(t)) => self.stop(&t, who, reply),
            (Command::Answer { answer }, Some(t)) => self.answer(&t, who, answer, reply),
            (Command::Pause, _) => {
                let was = std::mem::replace(&mut self.waves.held, true);
                if !was {
                    self.rec.command_rec(&actor, door, "paused", None);
                }
                Some(Reply::ok(if was { "already paused" } else { "paused" }, Some("paused".into())))
            }
            (Command::Resume, _) => {
                let was = std::mem::replace(&mut self.waves.held, false);
                if was {
                    self.rec.command_rec(&actor, door, "resumed", None);
                }
                Some(Reply::ok(if was { "resumed" } else { "not paused" }, Some("running".into())))
            }
            (Command::Status, _) => {
                let v = self.waves.states();
                let held = if self.waves.held { "paused" } else { "running" };
                Some(Reply::ok(serde_json::to_string(&v).unwrap_or_default(), Some(held.into())))
            }
            (c, _) => Some(Reply::refuse(
                format!("unknown verb {:?} ({})", c.verb().as_str(), Verb::list(&Verb::SUPERVISOR)),
                None,
            )),
        }
    }

    /// `steer`: into an open interactive session as a `steer` line (the
    /// session applies the steer rules and says what it did: the reply is
    /// its acknowledgement, `None` here until it comes), else queued for
    /// the turn boundary (`--resume`).
    fn steer(
        &mut self,
        id: &str,
        who: (&str, Door),
        msg: String,
        interrupt: bool,
        turn: Option<u64>,
        reply: &mpsc::Sender<Reply>,
    ) -> Option<Reply> {
        let (actor, door) = who;
        let def = self.waves.def(id);
        let state = self.waves.state(id).map(str::to_string);
        let running = self.running.get_mut(id);
        // A batch codex task is a review seat; an interactive one is a
        // session like any other.
        if (def.adapter == "codex" && !self.opts.interactive)
            || running.as_ref().is_some_and(|r| r.phase == Phase::Review)
        {
            return Some(Reply::refuse(format!("task {id} is a review seat (codex): it is not steered"), state));
        }
        if let Some(s) = state.as_deref().filter(|s| is_terminal(s)) {
            return Some(Reply::terminal_task(id, s));
        }
        // A kill in flight ends the task halted: a steer queued for its next
        // turn would never apply (it was taken, "queued", and dropped).
        if running.as_ref().is_some_and(|r| r.kill.is_some()) {
            return Some(Reply::refuse(format!("task {id} is being killed: nothing was queued"), state));
        }
        let n = msg.len();
        // An interactive turn whose session is open takes the message: one
        // `steer` line, no kill, no resume.
        if let Some(r) = running.filter(|r| r.live()) {
            use crate::session::{Input, SteerInput};
            // Paused, nothing new starts: a message to an idle session
            // (stopped, or between its turns) would start a turn.
            if self.waves.held && r.idle.is_some_and(|n| n >= r.written) {
                return Some(Reply::refuse(
                    format!(
                        "the run is paused: a steer to task {id}'s idle session would start a turn; resume the run first (nothing was sent)"
                    ),
                    state,
                ));
            }
            let steer = SteerInput { text: msg.clone(), interrupt, turn, by: Some(actor.to_string()) };
            if ask(r, &Input::Steer(steer), Asked::Steer(n), who, reply).is_ok() {
                return None;
            }
            // The session is going away: fall back to the turn boundary.
        }
        // A steer at the turn boundary resumes the agent's session: it needs
        // its id (a live steer above does not: the session is open).
        if self.waves.slot(id).is_none_or(|s| s.session.is_none()) {
            return Some(Reply::refuse(format!("task {id} has no session id yet: nothing to resume"), state));
        }
        let what = format!("task {id}: {n} bytes{}", if interrupt { ", interrupt" } else { "" });
        // Its text into the journal first: a steer this supervisor says it
        // took outlives it (a restart queues it again), or is refused.
        if let Err(e) = self.rec.steer_queued(actor, Some(door), id, &msg, what) {
            return Some(Reply::refuse(
                format!(
                    "task {id}: the steer could not be journaled ({}: {e}): nothing was queued",
                    self.rec.files.journal().display()
                ),
                state,
            ));
        }
        let mut detail = format!("queued for task {id} ({n} bytes): applied at its next turn boundary (--resume)");
        let taken = self.waves.queue_steer(id, msg);
        if interrupt {
            if let Some(r) = self.running.get_mut(id).filter(|r| r.phase == Phase::Turn && r.kill.is_none()) {
                r.for_steer = true;
                r.terminate();
                detail.push_str("; the current turn is being stopped");
            }
        }
        // Between steps with nothing pending: applied at once.
        if let Some(e) = taken {
            self.apply(vec![e]);
        }
        Some(Reply::ok(detail, state))
    }

    /// `stop`: interrupts an interactive task's running turn and keeps its
    /// session open (idle) for a steer, as a `stop` line (the session
    /// cancels open requests and interrupts the turn, or says nothing ran);
    /// `kill` still ends it. A batch turn cannot be interrupted without
    /// being killed: refused, saying so.
    fn stop(&mut self, id: &str, who: (&str, Door), reply: &mpsc::Sender<Reply>) -> Option<Reply> {
        let actor = who.0;
        let state = self.waves.state(id).map(str::to_string);
        let Some(r) = self.running.get_mut(id).filter(|r| r.phase == Phase::Turn && r.kill.is_none()) else {
            return Some(Reply::refuse(format!("task {id} has no running turn to stop"), state));
        };
        if r.input.is_none() {
            let why = if self.opts.interactive {
                "its session is ending"
            } else {
                "it is a batch turn (stdin closed): it cannot be interrupted without being killed; use kill, or steer with interrupt"
            };
            return Some(Reply::refuse(format!("task {id}: {why}"), state));
        }
        use crate::session::input::Who;
        use crate::session::Input;
        // Held open for a steer, whatever the session says it stopped.
        r.hold = true;
        match ask(r, &Input::Stop(Who { by: Some(actor.to_string()) }), Asked::Stop, who, reply) {
            Ok(()) => None,
            Err(e) => Some(Reply::refuse(format!("task {id}: {e}"), state)),
        }
    }

    /// `answer`: passes a person's answer to a request the task's session
    /// raised, as an `answer` line: the session checks it (pending, replay
    /// or conflict, what the agent's protocol can say) and says what it did.
    /// The request is named by runwire's interrupt id ([`Command::check_bound`]):
    /// one of an earlier agent process of the task (a steer at the turn
    /// boundary starts another, which numbers its requests again; so does a
    /// restart of the supervisor, whose memory of them the journal gives
    /// back) is never written to the current one: an identical replay of
    /// its answer is acknowledged with nothing sent, anything else refused.
    fn answer(
        &mut self,
        id: &str,
        who: (&str, Door),
        mut a: crate::session::AnswerInput,
        reply: &mpsc::Sender<Reply>,
    ) -> Option<Reply> {
        use crate::session::Input;
        let state = self.waves.state(id).map(str::to_string);
        if a.by.is_none() {
            a.by = Some(who.0.to_string());
        }
        let ints = self.interrupts.entry(id.to_string()).or_default();
        let generation = ints.generation;
        let Some(b) = ints.find(&a.id) else {
            return Some(Reply::refuse(
                format!(
                    "task {id}: interrupt {:?} was not raised by this task's agent (another task's or run's, or one this supervisor no longer remembers): nothing was sent",
                    a.id
                ),
                state,
            ));
        };
        let live = self.running.get_mut(id).filter(|r| r.input.is_some() && r.kill.is_none() && r.phase == Phase::Turn);
        let Some(r) = live.filter(|_| b.generation == generation) else {
            // Its agent process is gone: nothing can reach it any more.
            let whose = if b.restored {
                "belongs to an agent process of an earlier supervisor of this run"
            } else if b.generation < generation {
                "belongs to an earlier agent process"
            } else {
                "belongs to an agent process that has ended"
            };
            let iid = &a.id;
            // The journal keeps an answer's decision, not all of it (scope, an edited input).
            let same = |prev: &crate::pipeline::events::InputAnswer| {
                if b.restored {
                    prev.decision == a.decision.into()
                } else {
                    crate::session::same_answer(prev, &a)
                }
            };
            return Some(match &b.answer {
                Some(prev) if a.decision == crate::session::input::Decision::Cancelled || same(prev) => {
                    let d = prev.decision.as_str();
                    let m = format!("task {id}: interrupt {iid:?} {whose}, which took the same answer ({d}): acknowledged, nothing sent");
                    Reply::answered(false, m, state)
                }
                Some(prev) => Reply::refuse(
                    format!(
                        "task {id}: interrupt {iid:?} {whose} and was decided ({}); a different answer is refused and nothing was sent",
                        prev.decision.as_str()
                    ),
                    state,
                ),
                None => Reply::refuse(
                    format!("task {id}: interrupt {iid:?} {whose}, which ended before it was answered: nothing was sent"),
                    state,
                ),
            });
        };
        let rid = a.id.clone();
        // The session resolves runwire's id itself (and refuses one it did not mint).
        match ask(r, &Input::Answer(a), Asked::Answer(rid), who, reply) {
            Ok(()) => None,
            Err(e) => Some(Reply::refuse(format!("task {id}: {e}"), state)),
        }
    }
}
