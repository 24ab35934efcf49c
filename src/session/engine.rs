//! The session engine as a handle: one live agent session that a runner
//! (the server, per thread) holds and commands from any thread. It starts
//! the agent as `runwire-session` does ([`super::launch`], [`driver::start`]),
//! drives it on a thread of its own, and answers each command with what the
//! session did ([`driver::Taken`], its [`super::Ack`]) without ever waiting
//! for the agent: writes go through the session's one writer, and a command
//! that would overflow it is refused ([`Refused::NotReading`]). Its output
//! goes to a [`tap`] that one reader follows with its own cursor.

use super::driver::{self, JournalTo};
use super::launch::{launch, on_path, AgentKind, LaunchOptions};
use super::proc::{Proc, Spec};
use super::tap::{self, Feed, Sink};
use super::{Agent, Input, Refused, Session};
use crate::runs::record::Recorder;
use std::sync::{Arc, Mutex, MutexGuard};

type Core = driver::Core<Box<dyn Agent + Send>, Sink>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running agent under a [`Session`], driven by the library's session
/// loop on a thread of its own.
pub struct Engine {
    core: Arc<Core>,
    child: Mutex<Proc>,
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
        let (sink, feed) = tap::open(rec, bin);
        let report = Box::new(move |m: String| crate::cli::report(bin, m));
        // The opening lines go first, then the loop runs on its own thread
        // (the sink never fails: it ends with the agent's output).
        let dopts = driver::Options { first: None, journal };
        let (core, child) =
            driver::start(Session::new(launch.agent, opts), &spec, sink, &dopts, report).map_err(|e| e.to_string())?;
        Ok((Engine { core, child: Mutex::new(child) }, feed))
    }

    /// A command, with what the session did with it; `Err` says why it was
    /// not taken (nothing was written).
    pub fn command(&self, input: Input) -> Result<driver::Taken, Refused> {
        match self.core.command(input) {
            Ok(r) => r,
            // Only the output can fail, and a tap never does.
            Err(e) => Err(Refused::Invalid(e.to_string())),
        }
    }

    /// True when a reader that took `taken` output lines has taken all the
    /// session produced and the session is not mid-turn: no turn runs, and
    /// none is owed (a codex steer codex may yet refuse, which then starts
    /// the next turn). A run that saw its turn end ends only then.
    pub fn settled(&self, taken: u64) -> bool {
        self.core.query(|s, produced| produced == taken && s.phase() != super::Phase::Turn)
    }

    /// Open request ids, oldest first (requests past their time are expired first).
    pub fn open(&self) -> Vec<String> {
        let _ = self.core.tick();
        self.core.query(|s, _| s.pending().map(|r| r.id.clone()).collect())
    }

    /// Stops that stopped something so far ([`Session::stops`]).
    pub fn stops(&self) -> u64 {
        self.core.query(|s, _| s.stops())
    }

    /// Bytes written to the agent that it has not read yet.
    pub fn unread_input(&self) -> usize {
        self.core.unread_input()
    }

    /// The agent's exit code once it is over.
    pub fn exit_code(&self) -> Option<i64> {
        lock(&self.child).try_wait().map(|rc| self.core.exit_code(rc))
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
        Some(self.core.exit_code(rc))
    }
}
