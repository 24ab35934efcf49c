//! The session engine as a handle: one live agent session that a runner
//! (the server, per thread) holds and commands from any thread. It starts
//! the agent as `runwire-session` does ([`super::launch`], [`driver::start`]),
//! drives it on a thread of its own, and answers each command with what the
//! session did ([`driver::Taken`], its [`super::Ack`]) without ever waiting
//! for the agent: writes go through the session's one writer, and a command
//! that would overflow it is refused ([`Refused::NotReading`]). Its output
//! goes to a [`tap`] that one reader follows with its own cursor, and its
//! [`Status`] (phase, current turn, open requests, session id, exit) can be
//! read at any time and watched ([`Engine::wait`]): the one source of what
//! the session is doing, which runners show instead of keeping their own.
//! A recorded session's journal follows it too: `idle` while it is held
//! between turns, `resumed` when a turn runs again.

use super::driver::{self, JournalTo};
use super::launch::{launch, on_path, AgentKind, LaunchOptions};
use super::proc::{Proc, Spec};
use super::tap::{self, Changes, Feed, Sink};
use super::{Agent, Input, Phase, Refused, Session};
use crate::runs::journal::{self, Record};
use crate::runs::record::{Recorder, ACTOR};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

type Core = driver::Core<Box<dyn Agent + Send>, Sink>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running agent under a [`Session`], driven by the library's session
/// loop on a thread of its own.
pub struct Engine {
    core: Arc<Core>,
    child: Mutex<Proc>,
    changes: Arc<Changes>,
    /// The agent's exit code, once reaped.
    exit: OnceLock<i64>,
}

/// What a session is doing, at one instant ([`Engine::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub phase: Phase,
    /// The running turn's number, else the last one's (0: none yet).
    pub turn: u64,
    /// Turns that ended: the turn `turn` is over once this reaches it.
    pub turns_ended: u64,
    /// Open request ids, oldest first.
    pub open: Vec<String>,
    /// The session id the agent announced (resumable).
    pub session_id: Option<String>,
    /// Stops that stopped something so far ([`Session::stops`]).
    pub stops: u64,
    /// Output lines the session produced: a reader that took as many has
    /// seen everything this status reflects.
    pub produced: u64,
    /// The agent's exit code once it is over.
    pub exit: Option<i64>,
    /// The change count this status was read at ([`Engine::wait`]).
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

impl Engine {
    /// Starts `kind` with `o`; its output is recorded to `rec` (when set)
    /// and followed through the returned [`Feed`]. `bin` names the program
    /// in reports. `Err` says why nothing runs.
    pub fn start(
        kind: AgentKind,
        o: &LaunchOptions,
        opts: super::Options,
        journal: Option<JournalTo>,
        rec: Arc<Mutex<Option<Recorder>>>,
        bin: &'static str,
    ) -> Result<(Engine, Feed), String> {
        let launch = launch(kind, o)?;
        let program = on_path(std::ffi::OsStr::new(&launch.argv[0]));
        let mut spec = Spec::new(&program);
        for a in &launch.argv[1..] {
            spec.arg(a);
        }
        let (mut sink, feed) = tap::open(rec.clone(), bin);
        let changes = sink.changes();
        // The journal follows the session: `idle` while held between turns.
        let core_of: Arc<OnceLock<Weak<Core>>> = Arc::default();
        let seen = core_of.clone();
        let mut marked = None;
        sink.on_step(Box::new(move || {
            let Some(core) = seen.get().and_then(Weak::upgrade) else { return };
            let now = core.query(|s, _| match s.phase() {
                Phase::Idle if s.turn() > 0 && s.is_idle() => Some(true),
                Phase::Turn => Some(false),
                _ => None,
            });
            if let Some(idle) = now {
                mark(&rec, idle, &mut marked, bin);
            }
        }));
        let report = Box::new(move |m: String| crate::cli::report(bin, m));
        // The opening lines go first, then the loop runs on its own thread
        // (the sink never fails: it ends with the agent's output).
        let dopts = driver::Options { first: None, journal, ..driver::Options::default() };
        let (core, child) =
            driver::start(Session::new(launch.agent, opts), &spec, sink, &dopts, report).map_err(|e| e.to_string())?;
        let _ = core_of.set(Arc::downgrade(&core));
        Ok((Engine { core, child: Mutex::new(child), changes, exit: OnceLock::new() }, feed))
    }

    /// The session's status now (requests past their time are expired
    /// first). Never waits for the agent.
    pub fn status(&self) -> Status {
        let _ = self.core.tick();
        let changes = self.changes.now();
        let exit = self.exit_code();
        self.core.query(|s, produced| Status {
            phase: s.phase(),
            turn: s.turn(),
            turns_ended: s.turns_ended(),
            open: s.pending().map(|r| r.id.clone()).collect(),
            session_id: s.session_id().map(str::to_string),
            stops: s.stops(),
            produced,
            exit,
            changes,
        })
    }

    /// Waits until the status may have changed since the one read at
    /// `seen` changes ([`Status::changes`]), or `timeout` is over.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        self.changes.wait(seen, timeout);
    }

    /// A command, with what the session did with it; `Err` says why it was
    /// not taken (nothing was written).
    pub fn command(&self, input: Input) -> Result<driver::Taken, Refused> {
        let r = self.core.command(input);
        self.changes.bump();
        match r {
            Ok(r) => r,
            // Only the output can fail, and a tap never does.
            Err(e) => Err(Refused::Invalid(e.to_string())),
        }
    }

    /// Bytes written to the agent that it has not read yet.
    pub fn unread_input(&self) -> usize {
        self.core.unread_input()
    }

    /// The agent's exit code once it is over.
    pub fn exit_code(&self) -> Option<i64> {
        if let Some(rc) = self.exit.get() {
            return Some(*rc);
        }
        // Being stopped by another thread: not over yet, as far as one can tell.
        let rc = self.child.try_lock().ok()?.try_wait()?;
        Some(*self.exit.get_or_init(|| self.core.exit_code(rc)))
    }

    /// The agent is being ended: its input closes once what is queued for
    /// it is written (an `end`'s cancels and interrupt).
    pub fn end_input(&self) {
        self.core.close_agent_input_after_queue();
    }

    /// Asks the agent's process group to stop (SIGTERM and SIGCONT) without
    /// waiting: to signal many at once before [`kill`](Engine::kill)ing each.
    pub fn terminate(&self) {
        lock(&self.child).terminate();
    }

    /// Stops the agent's process group (TERM and CONT, grace, KILL) and reaps it.
    pub fn kill(&self) -> Option<i64> {
        let rc = lock(&self.child).stop();
        self.core.close_agent_input();
        let rc = *self.exit.get_or_init(|| self.core.exit_code(rc));
        self.changes.bump();
        Some(rc)
    }
}

/// Journals a recorded session's move between held (`idle`) and working
/// (`resumed`), once per move (`marked`: the last one journaled).
fn mark(rec: &Mutex<Option<Recorder>>, idle: bool, marked: &mut Option<bool>, bin: &'static str) {
    // A record starts running: nothing to say until it is first held.
    if *marked == Some(idle) || (marked.is_none() && !idle) {
        return;
    }
    let rec = lock(rec);
    let Some(r) = rec.as_ref() else { return };
    // Held: a turn has ended, and the record says what the task has cost so far.
    let rec_ = if idle { r.with_totals(Record::run(ACTOR, "idle")) } else { Record::run(ACTOR, "resumed") };
    match journal::append(&r.journal(), &rec_) {
        Ok(()) => *marked = Some(idle),
        Err(e) => crate::cli::report(bin, format!("record {}: {e}", r.run_id)),
    }
}
