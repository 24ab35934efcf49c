//! The session engine as a handle: one live agent session that a runner
//! (the server, per thread) holds and commands from any thread. It starts
//! the agent as `runwire-session` does ([`super::launch`], [`driver::start`]),
//! and the session's one loop ([`event_loop`]) runs on a thread of
//! its own: it alone computes and applies each step, writes the output and
//! queues the agent's input. A caller sends a command with a reply channel
//! ([`Engine::command`]) and gets what the session did ([`driver::Taken`],
//! its [`crate::session::core::Ack`]) once the step is applied; the command never waits
//! for the agent (one that would overflow its input is refused,
//! [`Refused::NotReading`]) nor under a lock another caller needs. Its
//! output goes to a [`tap`] that one reader follows with its own cursor,
//! and its [`Status`] (phase, current turn, open requests, session id,
//! output lines, exit), published by the loop after each step, can be read
//! at any time and watched ([`Engine::wait`]): the one source of what the
//! session is doing, which runners show instead of keeping their own. A
//! recorded session's journal follows it too: `idle` while it is held
//! between turns, `resumed` when a turn runs again (journaled by the loop).
//!
//! The agent's process is reaped by a thread of its own, which publishes
//! its exit; stopping it ([`Engine::kill`]) signals it and waits for that
//! exit without holding any lock.

use self::event_loop::{Shared, Status as LoopStatus};
use super::driver::{self, Event, JournalTo, Started};
use super::launch::{launch, on_path, AgentKind, LaunchOptions};
use super::proc::{Signaller, Spec, KILL_GRACE, SUPERVISED_ENV};
use super::tap::{self, Feed};
use super::writer::Writer;
use crate::runs::journal::{self, Record};
use crate::runs::record::{Recorder, ACTOR};
use crate::session::core::{Input, Phase, Refused, Session};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod event_loop;

pub use event_loop::Status;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running agent under a [`Session`], driven by the session's loop on a
/// thread of its own. Cloneable: every clone commands the same loop.
#[derive(Clone)]
pub struct Engine {
    tx: Sender<Event>,
    shared: Arc<Shared>,
    stdin: Arc<Writer>,
    signaller: Signaller,
    /// Stops the agent when the last handle is dropped without a kill.
    _last: Arc<StopOnDrop>,
}

/// An agent's exit code, read without holding its session.
#[derive(Clone)]
pub struct ExitWatch(Arc<Shared>);

impl ExitWatch {
    /// The exit code, once the agent is reaped; waits at most `limit` for
    /// it (`Duration::MAX`: until it is).
    pub fn exit_within(&self, limit: Duration) -> Option<i64> {
        let until = Instant::now().checked_add(limit);
        loop {
            let s = self.0.status();
            if s.exit.is_some() {
                return s.exit;
            }
            let left = until.map_or(Duration::from_secs(3600), |u| u.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return None;
            }
            self.0.wait(s.changes, left);
        }
    }
}

/// The agent of a session nobody holds any more is stopped: SIGTERM now,
/// SIGKILL after the kill grace (from a thread of its own: a drop never waits).
struct StopOnDrop {
    signaller: Signaller,
    shared: Arc<Shared>,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if self.shared.status().exit.is_some() {
            return;
        }
        self.signaller.terminate();
        let (sig, shared) = (self.signaller.clone(), self.shared.clone());
        let _ = std::thread::Builder::new().name("session stop".into()).spawn(move || {
            let seen = shared.status().changes;
            shared.wait(seen, KILL_GRACE);
            if shared.status().exit.is_none() {
                sig.kill();
            }
        });
    }
}

impl Engine {
    /// Starts `kind` with `o`; its output is recorded to `rec` (when set)
    /// and followed through the returned [`Feed`]. `generation`: the agent
    /// process's number among its runner's (the server counts a thread's
    /// processes), on its [`Status`] and its open requests. `bin` names the
    /// program in reports. `Err` says why nothing runs.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        kind: AgentKind,
        o: &LaunchOptions,
        opts: crate::session::core::Options,
        generation: u64,
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
        // The server's agents are nobody's supervised session (a server
        // started inside a supervised step has the flag).
        spec.env_remove(SUPERVISED_ENV);
        let (sink, feed) = tap::open(rec.clone(), bin);
        let shared = Shared::new(sink.changes());
        // The journal follows the session: `idle` while held between turns.
        let mut marked = None;
        let observer = Box::new(move |s: &LoopStatus| {
            let now = match s.phase {
                Phase::Idle if s.turn > 0 && s.open.is_empty() => Some(true),
                Phase::Turn => Some(false),
                _ => None,
            };
            if let Some(idle) = now {
                mark(&rec, idle, &mut marked, bin);
            }
        });
        let report = Box::new(move |m: String| crate::util::cli::report(bin, m));
        let dopts = driver::Options { first: None, journal, generation, ..driver::Options::default() };
        let session = Session::new(launch.agent, opts);
        let Started { tx, shared, stdin, child } =
            driver::start(session, &spec, sink, &dopts, report, shared, Some(observer)).map_err(|e| e.to_string())?;
        let signaller = child.signaller();
        reap(child, shared.clone())?;
        let last = Arc::new(StopOnDrop { signaller: signaller.clone(), shared: shared.clone() });
        Ok((Engine { tx, shared, stdin, signaller, _last: last }, feed))
    }

    /// The session's status, as its loop last published it. Never waits
    /// for the agent or the loop.
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// Waits until the status may have changed since the one read at
    /// `seen` changes ([`Status::changes`]), or `timeout` is over.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        self.shared.wait(seen, timeout);
    }

    /// A command, with what the session did with it, once its loop has
    /// applied it; `Err` says why it was not taken (nothing was written).
    /// Waits only for the loop's turn at it, never for the agent.
    pub fn command(&self, input: Input) -> Result<driver::Taken, Refused> {
        let (reply, answer) = std::sync::mpsc::channel();
        if self.tx.send(Event::Command(input, reply)).is_err() {
            return Err(Refused::Ended);
        }
        // The loop ended before it took the command: the agent's output is over.
        answer.recv().unwrap_or(Err(Refused::Ended))
    }

    /// Bytes written to the agent that it has not read yet.
    pub fn unread_input(&self) -> usize {
        self.stdin.waiting()
    }

    /// The agent's exit code once it is over.
    pub fn exit_code(&self) -> Option<i64> {
        self.shared.status().exit
    }

    /// Its exit, for a reader that must not hold the session (a handle
    /// keeps the agent alive; the last one dropped stops it).
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch(self.shared.clone())
    }

    /// The agent is being ended: its input closes once what is queued for
    /// it is written (an `end`'s cancels and interrupt).
    pub fn end_input(&self) {
        let _ = self.tx.send(Event::CloseInput { now: false });
    }

    /// Asks the agent's process group to stop (SIGTERM and SIGCONT) without
    /// waiting: to signal many at once before [`kill`](Engine::kill)ing each.
    pub fn terminate(&self) {
        self.signaller.terminate();
    }

    /// Stops the agent's process group (TERM and CONT, the kill grace, KILL)
    /// and waits until it is reaped; holds no lock while it waits.
    pub fn kill(&self) -> Option<i64> {
        if let Some(rc) = self.exit_code() {
            return Some(rc);
        }
        self.signaller.terminate();
        let rc = self.wait_exit(KILL_GRACE).or_else(|| {
            self.signaller.kill();
            self.wait_exit(Duration::from_secs(1))
        });
        let rc = rc.or_else(|| {
            // A reaper that does not answer: kill what can be seen of the tree.
            self.signaller.kill_tree();
            self.wait_exit(Duration::MAX)
        });
        let _ = self.tx.send(Event::CloseInput { now: true });
        rc
    }

    /// The exit once published, waiting up to `d` for it.
    fn wait_exit(&self, d: Duration) -> Option<i64> {
        self.exit_watch().exit_within(d)
    }
}

/// Reaps the agent on a thread of its own, which publishes its exit: nobody
/// holds the process, so stopping it never waits under a lock.
fn reap(mut child: super::proc::Proc, shared: Arc<Shared>) -> Result<(), String> {
    let signaller = child.signaller();
    std::thread::Builder::new()
        .name("session reaper".into())
        .spawn(move || {
            let rc = child.wait();
            shared.exited(rc);
        })
        .map(drop)
        .map_err(|e| {
            signaller.kill();
            format!("cannot reap the agent: {e}")
        })
}

/// Journals a recorded session's move between held (`idle`) and working
/// (`resumed`), once per move (`marked`: the last one journaled). The loop
/// calls it: the journal's lock, shared with other processes, is its own wait.
fn mark(rec: &Mutex<Option<Recorder>>, idle: bool, marked: &mut Option<bool>, bin: &'static str) {
    // A record starts running: nothing to say until it is first held.
    if *marked == Some(idle) || (marked.is_none() && !idle) {
        return;
    }
    let (path, rec_, run) = {
        let rec = lock(rec);
        let Some(r) = rec.as_ref() else { return };
        // Held: a turn has ended, and the record says what the task has cost so far.
        let rec_ = if idle { r.with_totals(Record::run(ACTOR, "idle")) } else { Record::run(ACTOR, "resumed") };
        (r.journal(), rec_, r.run().clone())
    };
    match journal::append(&run, &path, &rec_) {
        Ok(()) => *marked = Some(idle),
        Err(e) => crate::util::cli::report(bin, format!("record {}: {e}", run.id)),
    }
}
