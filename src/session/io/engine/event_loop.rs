//! The session's one loop: the thread that owns a live [`Session`] and its
//! IO, and the only one that computes or applies a step. Everything that
//! may change the session arrives on its event channel ([`Event`]): the
//! agent's lines, session input lines, callers' commands (each with a reply
//! channel), the end of either input, and the time (each expiry). For each
//! it computes the step, numbers its output lines, publishes the session's
//! [`Status`] (before the lines are written, so a reader that sees a line
//! sees the state its step left), applies the step in the order the
//! session asks (output lines written, lines queued for the agent's one
//! writer, the agent's input closed), replies to the caller, and only then
//! journals the step's input records. So the output and the
//! agent's input follow the order the session decided, whoever sent what,
//! and no caller computes a step, writes to the agent or the output, or
//! waits for file IO or a lock shared with another process (the journal's):
//! that IO is the loop's own. Callers read the published status, a copy
//! taken under a lock held only to copy it, and wait for its changes.

use super::super::events::{now_ms, Event, JournalTo, Output, Taken, EXIT_GRACE};
use super::super::proc::{self, Signaller};
use super::super::record::InputRecord;
use super::super::tap::Changes;
use super::super::writer::{Full, Writer};
use crate::control::Door;
use crate::session::core::input::{AckLine, Keyed, LineKeys, OpenRequest, Refusal, StatusLine};
use crate::session::core::{Agent, Input, Phase, Refused, Session, Step};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a session is doing, as its loop published it after its last step
/// (and its exit, once the agent is reaped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub phase: Phase,
    /// The running turn's number, else the last one's (0: none yet).
    pub turn: u64,
    /// Turns that ended: the turn `turn` is over once this reaches it.
    pub turns_ended: u64,
    /// Open requests, oldest first: runwire's interrupt id, the agent's id,
    /// and the agent process (generation) that raised it.
    pub open: Vec<OpenRequest>,
    /// The session id the agent announced (resumable).
    pub session_id: Option<String>,
    /// The agent process's number among its runner's (1 for the first; a
    /// process started again under the same thread or task counts on).
    pub generation: u64,
    /// Stops that stopped something so far ([`Session::stops`]).
    pub stops: u64,
    /// Output lines the session produced, numbered by the loop in the order
    /// it decided them (published with the state, before they are written):
    /// a reader that took as many has seen everything this status reflects.
    pub produced: u64,
    /// Session inputs applied so far (input lines and callers' commands,
    /// refused ones included).
    pub applied: u64,
    /// The agent's exit code once it is over.
    pub exit: Option<i64>,
    /// The change count this status was read at ([`Shared::wait`]).
    pub changes: u64,
}

impl Status {
    /// Held between turns: no turn runs or is owed, nothing is asked, and
    /// the agent is alive.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle && self.open.is_empty() && self.exit.is_none()
    }

    /// Every turn begun has ended (none was cut by the agent's end).
    pub fn between_turns(&self) -> bool {
        self.turns_ended >= self.turn && self.open.is_empty()
    }

    /// A reader that took `taken` output lines has seen everything and
    /// the session is not mid-turn: no turn runs or is owed.
    pub fn settled(&self, taken: u64) -> bool {
        self.produced == taken && self.phase != Phase::Turn
    }
}

/// What the loop shares with its callers: the status it publishes and a
/// change counter to wait on. Its lock is held only to copy a status in or
/// out, never across IO.
#[derive(Default)]
pub struct Shared {
    status: Mutex<Status>,
    changes: Arc<Changes>,
    /// The agent outstayed its closed input and was signalled for it: its
    /// SIGTERM or SIGKILL is the end that was asked for ([`Shared::exit_as`]).
    stopped_for_outstaying: AtomicBool,
}

impl Shared {
    /// Over the change counter of the session's output (its tap), so one
    /// wait wakes for a line or a status.
    pub fn new(changes: Arc<Changes>) -> Arc<Shared> {
        Arc::new(Shared { changes, ..Shared::default() })
    }

    /// The status as last published.
    pub fn status(&self) -> Status {
        let changes = self.changes.now();
        Status { changes, ..lock(&self.status).clone() }
    }

    /// Waits until the status may have changed since the one read at
    /// `seen` changes ([`Status::changes`]), or `timeout` is over.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        self.changes.wait(seen, timeout);
    }

    /// The agent was reaped with `rc`: the exit is published (once).
    pub fn exited(&self, rc: i64) -> i64 {
        let rc = self.exit_as(rc);
        let rc = *lock(&self.status).exit.get_or_insert(rc);
        self.changes.bump();
        rc
    }

    /// The agent's exit code as the session's outcome: an agent that did
    /// not exit when its input closed and was stopped for it (ACP agents)
    /// ended as asked, so its SIGTERM or SIGKILL counts as 0.
    pub fn exit_as(&self, rc: i64) -> i64 {
        if self.stopped_for_outstaying.load(Ordering::SeqCst) && (rc == 128 + 15 || rc == 128 + 9) {
            0
        } else {
            rc
        }
    }

    fn publish(&self, mut s: Status) {
        {
            let mut st = lock(&self.status);
            s.exit = st.exit;
            *st = s;
        }
        self.changes.bump();
    }
}

/// How far ending an agent that does not exit when its input closes has
/// gone (issue 26 case 5: ACP agents keep running, and keep their stdout
/// open, after their stdin closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Its input is closed; it has [`EXIT_GRACE`] to exit on its own.
    Closed,
    /// SIGTERM sent; SIGKILL after the kill grace.
    Terminated,
    /// SIGKILL sent.
    Killed,
}

/// Called by the loop after each step with the status it published (the
/// server journals a recorded session's `idle` and `resumed` with it).
pub type Observer = Box<dyn FnMut(&Status) + Send>;

/// A live session and its IO, owned by the thread that runs [`Loop::drive`].
pub struct Loop<A: Agent, O: Output> {
    session: Session<A>,
    out: Option<O>,
    /// Output lines written so far: the last one's number.
    produced: u64,
    /// The agent's input: queued here in the order decided, written by its
    /// one thread, so no step ever waits for the agent to read.
    stdin: Arc<Writer>,
    journal: Option<JournalTo>,
    report: Box<dyn FnMut(String) + Send>,
    /// The agent's process, to end one that outstays its closed input.
    signaller: Option<Signaller>,
    /// When the agent's input was closed (epoch ms), and what it has been
    /// sent since for not exiting.
    closed: Option<(i64, Ending)>,
    /// The status line last written, when the session writes them.
    status_lines: Option<Option<StatusLine>>,
    generation: u64,
    shared: Arc<Shared>,
    observer: Option<Observer>,
    /// Input lines refused or unreadable (each reported).
    refused: u64,
    /// Input records of the event's steps, journaled once the event's
    /// caller has its reply ([`Loop::settle`]).
    journal_queue: Vec<InputRecord>,
    /// The input lines' idempotency keys.
    keys: LineKeys,
    /// The first input record the journal could not take (a full disk),
    /// and how many it could not ([`Loop::journal_lost`]).
    journal_lost: Option<(String, u64)>,
}

impl<A: Agent, O: Output> Drop for Loop<A, O> {
    fn drop(&mut self) {
        // The writer's thread holds its own handle: the input closes once
        // what is queued is written (or the agent is gone).
        self.stdin.close_after_queue();
    }
}

impl<A: Agent, O: Output> Loop<A, O> {
    /// `stdin`: the agent's input (its writer); `report` gets problems worth
    /// a line on stderr (refused input, journal failures).
    pub fn new(
        session: Session<A>,
        out: O,
        stdin: Arc<Writer>,
        journal: Option<JournalTo>,
        report: Box<dyn FnMut(String) + Send>,
        shared: Arc<Shared>,
    ) -> Loop<A, O> {
        Loop {
            session,
            out: Some(out),
            produced: 0,
            stdin,
            journal,
            report,
            signaller: None,
            closed: None,
            status_lines: None,
            generation: 1,
            shared,
            observer: None,
            refused: 0,
            journal_queue: Vec::new(),
            keys: LineKeys::default(),
            journal_lost: None,
        }
    }

    /// Writes a status line after each step that changed the session's
    /// status; its open requests are process `generation`'s.
    pub fn with_status_lines(mut self, on: bool) -> Self {
        self.status_lines = on.then_some(None);
        self
    }

    /// The agent process's number among its runner's (0 is read as 1).
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation.max(1);
        self
    }

    /// Called after each step with the published status.
    pub fn with_observer(mut self, o: Option<Observer>) -> Self {
        self.observer = o;
        self
    }

    /// The agent's process: once its input is closed, an agent that has
    /// not exited within `EXIT_GRACE` (5 s) gets SIGTERM, then SIGKILL after
    /// the kill grace, whatever it does with its stdout.
    pub fn watch(&mut self, s: Signaller) {
        self.signaller = Some(s);
    }

    /// Reads the session.
    pub fn session(&self) -> &Session<A> {
        &self.session
    }

    /// Why the journal lacks input records of this session (the first
    /// failure, and how many records), if it does.
    pub fn journal_lost(&self) -> Option<&(String, u64)> {
        self.journal_lost.as_ref()
    }

    /// The agent's input writer (to read how much it has not read yet).
    pub fn writer(&self) -> Arc<Writer> {
        self.stdin.clone()
    }

    /// Output lines written so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// The status as it is now (not yet published).
    fn status_now(&self) -> Status {
        let s = &self.session;
        let generation = self.generation;
        Status {
            phase: s.phase(),
            turn: s.turn(),
            turns_ended: s.turns_ended(),
            open: s
                .pending()
                .map(|r| OpenRequest { interrupt_id: r.interrupt_id.clone(), id: r.id.clone(), generation })
                .collect(),
            session_id: s.session_id().map(str::to_string),
            generation,
            stops: s.stops(),
            produced: self.produced,
            applied: s.inputs(),
            exit: None,
            changes: 0,
        }
    }

    /// Ends a step's lines: the idle line when the step made the session
    /// idle, then the status line when the status changed, numbered where
    /// it lands.
    fn seal(&mut self, out: &mut Vec<Vec<u8>>, exit: Option<i64>) {
        out.extend(self.session.idle_line());
        let Some(last) = &self.status_lines else { return };
        let st = self.status_now();
        let line = StatusLine::new(st.phase, st.turn, st.turns_ended, st.open, st.session_id, st.applied, exit);
        if last.as_ref().is_some_and(|l| l.same_as(&line)) {
            return;
        }
        let mut line = line;
        line.seq = self.produced + out.len() as u64 + 1;
        out.push(line.to_line());
        self.status_lines = Some(Some(line));
    }

    /// One step of the session, sealed, applied and published.
    pub fn step(&mut self, f: impl FnOnce(&mut Session<A>) -> Step) -> io::Result<Step> {
        let mut s = f(&mut self.session);
        self.seal(&mut s.output, None);
        self.produced += s.output.len() as u64;
        self.publish();
        self.apply(&s)?;
        Ok(s)
    }

    /// One session input: requests past their time are expired first, so a
    /// late answer is refused as expired. `bounded` (a caller's command):
    /// refused at once ([`Refused::NotReading`]) when the agent has not read
    /// what it was sent and this would overflow its input's queue; a session
    /// input line never is (the person feeding it paces it). `Ok(Err(_))`:
    /// refused, nothing written.
    pub fn take(&mut self, input: Input, bounded: bool) -> io::Result<Result<Taken, Refused>> {
        if bounded {
            if let Err(Full::NotReading { waiting }) = self.stdin.check(input.size()) {
                return Ok(Err(Refused::NotReading { waiting }));
            }
        }
        let now = now_ms();
        let mut expired = self.session.tick(now);
        let mid_turn = self.session.phase() == Phase::Turn;
        let mut r = self.session.input(input, now);
        // What expired goes first; the idle and status lines are said after
        // the input's own lines (a refused input was taken too).
        self.produced += expired.output.len() as u64;
        match r.as_mut() {
            Ok(st) => {
                self.seal(&mut st.output, None);
                self.produced += st.output.len() as u64;
            }
            Err(_) => {
                let mut lines = Vec::new();
                self.seal(&mut lines, None);
                self.produced += lines.len() as u64;
                expired.output.extend(lines);
            }
        }
        self.publish();
        self.apply(&expired)?;
        if let Ok(s) = &r {
            self.apply(s)?;
        }
        Ok(r.map(|s| Taken { replayed: s.replayed, mid_turn, ack: s.ack }))
    }

    /// The process runs: the opening lines, then `first` as the first
    /// message. Before anything else is written to the agent.
    pub fn open(&mut self, first: Option<&str>) -> io::Result<()> {
        self.step(|s| s.open(first))?;
        self.settle();
        Ok(())
    }

    /// The agent's exit: the last status line says it (when the session
    /// writes them), then the output closes.
    pub fn finish(&mut self, rc: i64) -> io::Result<()> {
        let mut out = Vec::new();
        self.seal(&mut out, Some(rc));
        self.produced += out.len() as u64;
        let r = self.apply(&Step { output: out, ..Step::default() });
        self.settle();
        self.out = None;
        r
    }

    /// Closes the agent's input now, dropping what is queued (the agent
    /// is being stopped). Never waits for the agent.
    pub fn close_agent_input(&mut self) {
        self.stdin.close_now();
        self.mark_closed();
    }

    fn mark_closed(&mut self) {
        self.closed.get_or_insert((now_ms(), Ending::Closed));
    }

    fn report(&mut self, m: String) {
        (self.report)(m)
    }

    /// The status after the step, published before its lines are written
    /// (with them counted in `produced`): a reader that sees a line sees
    /// the state the step left, and one that took `produced` lines has
    /// seen everything it reflects.
    fn publish(&mut self) {
        self.shared.publish(self.status_now());
    }

    /// After an event's steps are applied and its caller has its reply:
    /// the input records journaled (the journal's lock is shared with
    /// other processes: only this thread waits for it, and never while a
    /// caller waits for its reply), then the observer told the status.
    fn settle(&mut self) {
        for r in std::mem::take(&mut self.journal_queue) {
            let Some(j) = &self.journal else { break };
            if let Err(e) = r.append(j.run.as_ref(), &j.path) {
                let m = format!("{}: {e}", j.path.display());
                match self.journal_lost.as_mut() {
                    Some((_, n)) => *n += 1,
                    None => self.journal_lost = Some((e.to_string(), 1)),
                }
                self.report(m);
            }
        }
        if self.observer.is_some() {
            let st = self.status_now();
            if let Some(o) = self.observer.as_mut() {
                o(&st);
            }
        }
    }

    fn apply(&mut self, s: &Step) -> io::Result<()> {
        if !s.output.is_empty() {
            if let Some(o) = self.out.as_mut() {
                for l in &s.output {
                    o.line(l)?;
                }
                o.end_step()?;
            }
        }
        if let Err(Full::NotReading { waiting }) = self.stdin.push(&s.to_agent) {
            self.report(format!(
                "agent input: the agent has not read {waiting} bytes written to it; nothing more is written to it"
            ));
        }
        if s.close_agent_input {
            self.stdin.close_after_queue();
            self.mark_closed();
        }
        if let Some(j) = self.journal.clone() {
            let now = now_ms();
            let recs = s.requested.iter().map(|r| {
                let mut rec = InputRecord::requested(&j.actor, &j.task, r, now);
                rec.links = j.links.as_ref().map(|l| (l.0)(r)).filter(|l| !l.is_empty());
                rec
            });
            let recs = recs.chain(s.answered.iter().map(|a| InputRecord::answered(&j.actor, &j.task, a, now)));
            self.journal_queue.extend(recs);
        }
        Ok(())
    }

    /// When the loop must next act on an agent that outstays its closed
    /// input (epoch ms), if it must.
    fn ending_deadline(&self) -> Option<i64> {
        self.signaller.as_ref()?;
        let grace = EXIT_GRACE.as_millis() as i64;
        match self.closed {
            Some((t, Ending::Closed)) => Some(t + grace),
            Some((t, Ending::Terminated)) => Some(t + grace + proc::KILL_GRACE.as_millis() as i64),
            _ => None,
        }
    }

    /// Ends an agent that outstays its closed input, by the deadline.
    fn enforce_end(&mut self, now: i64) {
        if self.ending_deadline().is_none_or(|d| d > now) {
            return;
        }
        let Some(sig) = self.signaller.clone() else { return };
        let next = match self.closed.map(|(_, e)| e) {
            Some(Ending::Closed) => {
                self.report(format!(
                    "the agent did not exit within {} s of its input closing: stopping it",
                    EXIT_GRACE.as_secs()
                ));
                self.shared.stopped_for_outstaying.store(true, Ordering::SeqCst);
                sig.terminate();
                Ending::Terminated
            }
            Some(Ending::Terminated) => {
                sig.kill();
                Ending::Killed
            }
            _ => return,
        };
        if let Some((_, e)) = self.closed.as_mut() {
            *e = next;
        }
    }

    /// The loop, once the session is [open](Loop::open): takes every event
    /// of `rx` (the agent's lines, input lines, callers' commands, the end
    /// of either) and the time (each expiry), one at a time, until the
    /// agent's output ends. Returns the input lines refused or unreadable
    /// (each reported). `Err` only when the output failed (a closed pipe
    /// included). The output stays open ([`Loop::finish`] closes it).
    pub fn drive(&mut self, rx: &Receiver<Event>) -> io::Result<u64> {
        loop {
            let deadline = match (self.session.deadline(), self.ending_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let ev = match deadline {
                Some(d) => rx.recv_timeout(Duration::from_millis((d - now_ms()).max(0) as u64)),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let ended = self.event(ev)?;
            self.settle();
            if ended {
                return Ok(self.refused);
            }
        }
    }

    /// One event; `true` once the agent's output is over.
    fn event(&mut self, ev: Result<Event, RecvTimeoutError>) -> io::Result<bool> {
        match ev {
            Ok(Event::Agent(line)) => {
                self.step(|s| s.agent_line(&line, now_ms()))?;
            }
            Ok(Event::AgentEof) | Err(RecvTimeoutError::Disconnected) => {
                self.step(|s| s.agent_exited(now_ms()))?;
                return Ok(true);
            }
            Ok(Event::Line(line, n)) => self.line(&line, n)?,
            Ok(Event::Command(i, reply)) => {
                let r = self.take(i, true);
                let answer = match &r {
                    Ok(a) => a.clone(),
                    Err(e) => Err(Refused::Invalid(e.to_string())),
                };
                // After the step is applied and published: the caller
                // that reads the status next sees what its command did.
                let _ = reply.send(answer);
                r.map(drop)?;
            }
            Ok(Event::CloseInput { now: true }) => self.close_agent_input(),
            Ok(Event::CloseInput { now: false }) => {
                self.stdin.close_after_queue();
                self.mark_closed();
            }
            Ok(Event::InputEof(failed)) => {
                if let Some(why) = failed {
                    self.report(format!("input: {why}: read as the input's end"));
                }
                self.step(|s| s.input_closed(now_ms()))?;
            }
            Err(RecvTimeoutError::Timeout) => {
                self.step(|s| s.tick(now_ms()))?;
                self.enforce_end(now_ms());
            }
        }
        Ok(false)
    }

    /// One session input line, then its reply line (`runwire.ack`). A keyed
    /// line seen before is not applied: its key's reply ([`LineKeys`]).
    fn line(&mut self, line: &[u8], n: u64) -> io::Result<()> {
        let parsed = Input::parse_keyed(line).map(|(mut i, key)| {
            // An answer on a line came through the session's own door (its journal's `door`).
            match &mut i {
                Input::Answer(a) => a.door = Some(Door::SessionInput),
                Input::Answers(all) => all.iter_mut().for_each(|a| a.door = Some(Door::SessionInput)),
                _ => {}
            }
            let seen = key.as_deref().and_then(|k| self.keys.before(k, &i));
            (i, key, seen)
        });
        let (ack, why) = match parsed {
            Ok((_, _, Some(k))) => {
                // Counted as applied (the writer counts its lines), nothing done.
                self.step(|s| {
                    s.unreadable();
                    Step::default()
                })?;
                let why = match &k {
                    Keyed::Refused(why) => Some(format!("refused: {why}")),
                    Keyed::Replay(_) => None,
                };
                (AckLine::keyed(n, k), why)
            }
            Ok((i, key, None)) => {
                let (what, why) = match self.take(i, false)? {
                    Ok(t) => (Ok(t.ack), None),
                    Err(why) => (Err(Refusal::from(&why)), Some(format!("refused: {why}"))),
                };
                if let Some(key) = key {
                    self.keys.after(&key, &what);
                }
                (AckLine::new(n, what), why)
            }
            Err(why) => {
                self.step(|s| {
                    s.unreadable();
                    Step::default()
                })?;
                (AckLine::new(n, Err(Refusal::invalid(why.clone()))), Some(why))
            }
        };
        // The line's input records are journaled before its reply (nobody
        // waits on the loop for a line: its writer reads the reply).
        self.settle();
        // The reply to the line's writer, after the line's own lines.
        let ack = ack.to_line();
        self.step(|_| Step { output: vec![ack], ..Step::default() })?;
        if let Some(why) = why {
            self.refused += 1;
            self.report(format!("input:{n}: {why}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::core::codex::{Codex, CodexOptions};
    use crate::session::core::input::MessageInput;

    fn msg(text: &str) -> Input {
        Input::Message(MessageInput { text: text.into(), by: None })
    }

    /// What a caller learns from the core is the session's own view at the
    /// moment it took the input, and the output count matches the state.
    #[test]
    fn a_message_says_whether_it_joined_a_turn_and_output_is_counted_with_the_state() {
        let session = Session::new(Codex::new(CodexOptions::default()), crate::session::core::Options::default());
        let shared = Shared::new(Arc::default());
        let mut core =
            Loop::new(session, Vec::<u8>::new(), Writer::start(None), None, Box::new(|_| {}), shared.clone());
        core.open(Some("go")).unwrap();
        for l in [
            r#"{"id":1,"result":{}}"#,
            r#"{"id":2,"result":{"thread":{"id":"th"}}}"#,
            r#"{"id":3,"result":{"turn":{"id":"t1"}}}"#,
            r#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"t1"}}}"#,
        ] {
            core.step(|s| s.agent_line(l.as_bytes(), now_ms())).unwrap();
        }
        assert_eq!(
            core.take(msg("steer"), false).unwrap(),
            Ok(Taken {
                replayed: false,
                mid_turn: true,
                ack: crate::session::core::Ack::Joined { may_start_next: true }
            })
        );
        let done = r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"completed"}}}"#;
        core.step(|s| s.agent_line(done.as_bytes(), now_ms())).unwrap();
        // The steer is still unanswered: codex may refuse it, the session owes a turn.
        assert_eq!(shared.status().phase, Phase::Turn);
        core.step(|s| s.agent_line(br#"{"id":4,"result":{"turnId":"t1"}}"#, now_ms())).unwrap();
        assert_eq!(shared.status().phase, Phase::Idle);
        // The turn had ended: this message starts one.
        assert_eq!(
            core.take(msg("next"), false).unwrap(),
            Ok(Taken { replayed: false, mid_turn: false, ack: crate::session::core::Ack::Started })
        );
        let printed = core.out.as_ref().map(|o| o.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count());
        assert_eq!(shared.status().produced, printed.unwrap() as u64);
        assert_eq!(shared.status().produced, 7, "the agent's six lines, forwarded, and one idle line");
        // Idle once the steer was answered, with the one input line applied; not before.
        let out = core.out.as_ref().map(|o| String::from_utf8_lossy(o).into_owned()).unwrap();
        let idle: Vec<&str> = out.lines().filter(|l| l.contains("runwire.idle")).collect();
        assert_eq!(idle, [r#"{"type":"runwire.idle","inputs":1}"#]);
        assert!(
            out.ends_with("{\"id\":4,\"result\":{\"turnId\":\"t1\"}}\n{\"type\":\"runwire.idle\",\"inputs\":1}\n"),
            "{out}"
        );
    }
}
