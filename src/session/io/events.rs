//! What the session's loop and its drivers share: the events the loop waits
//! for ([`Event`], with the agent's lines counted in flight, [`AgentLine`]),
//! where its output goes ([`Output`]), what a command did ([`Taken`]), where
//! input records go ([`JournalTo`]), and the bounds and clock they agree
//! on. A leaf of `io/`: the loop (`engine::event_loop`), the driver and the
//! tap build on it; `driver` re-exports it at its old paths.

use crate::session::core::{Input, Refused};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::Duration;

/// Longest agent line taken whole (and recorded so); a longer one is skimmed
/// as it streams ([`crate::util::lines`]): its structure and short fields
/// kept, long strings cut. A server normalizes a line through the
/// pipeline's line cap ([`crate::util::lines::MAX_LINE`]) all the same.
pub const MAX_AGENT_LINE: usize = 16 * 1024 * 1024;

/// What the session loop waits for.
#[derive(Debug)]
pub enum Event {
    /// One line of the agent's stdout (without its newline).
    Agent(AgentLine),
    /// The agent closed its stdout.
    AgentEof,
    /// One raw line of session input and its 1-based number.
    Line(Vec<u8>, u64),
    /// The session input ended: at its end, or (`Some`, why) at a read
    /// error, which the session reports before it goes on as at an end.
    InputEof(Option<String>),
    /// A caller's command; what the session did with it goes back on the
    /// sender once the step is applied ([`Taken`], or why it was refused).
    Command(Input, Sender<Result<Taken, Refused>>),
    /// Close the agent's input: `now` dropping what is queued for it (it
    /// is being stopped), else once what is queued is written (it is being
    /// ended: an `end`'s last lines still go).
    CloseInput { now: bool },
}

/// Where input records go when the session runs under a runner.
#[derive(Debug, Clone)]
pub struct JournalTo {
    pub path: PathBuf,
    /// The registered run whose journal it is (its mark is held while
    /// writing, `runs::marks`); `None` for a journal no run names.
    pub run: Option<crate::runs::marks::Run>,
    pub task: String,
    pub actor: String,
    /// Mints a raised request's approval links, journaled with it (`runwire-serve --public-url`).
    pub links: Option<Linker>,
}

/// Mints the approval links of a raised request (none for a request a link cannot answer).
#[derive(Clone)]
pub struct Linker(pub std::sync::Arc<MintLinks>);

/// What a [`Linker`] calls: the links of one raised request.
pub type MintLinks = dyn Fn(&crate::pipeline::events::InputRequest) -> Vec<String> + Send + Sync;

impl std::fmt::Debug for Linker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Linker")
    }
}

/// Bytes of agent lines read and not yet taken by their session's loop, in
/// all the sessions of this process together, at most (one line alone may
/// pass it). Past it the readers wait, so agents that print faster than
/// their sessions take it wait in `write()`, not in this process's memory.
pub const AGENT_LINES_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of agent lines in flight (read, not yet dropped by a loop).
static IN_FLIGHT: Mutex<usize> = Mutex::new(0);
static IN_FLIGHT_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// One agent line, counted in [`AGENT_LINES_BYTES`] until it is dropped.
#[derive(Debug)]
pub struct AgentLine(Vec<u8>);

impl AgentLine {
    /// Waits until the bound has room for `bytes` (or nothing is in flight).
    pub(super) fn admit(bytes: Vec<u8>) -> AgentLine {
        let len = bytes.len();
        let mut n = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        while *n != 0 && *n + len > AGENT_LINES_BYTES {
            n = IN_FLIGHT_FREED.wait(n).unwrap_or_else(|e| e.into_inner());
        }
        *n += len;
        AgentLine(bytes)
    }
}

impl std::ops::Deref for AgentLine {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for AgentLine {
    fn drop(&mut self) {
        let mut n = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(self.0.len());
        drop(n);
        IN_FLIGHT_FREED.notify_all();
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Where the session's output lines go (each without its newline).
pub trait Output {
    fn line(&mut self, line: &[u8]) -> io::Result<()>;
    /// After each step's lines (a byte stream flushes).
    fn end_step(&mut self) -> io::Result<()>;
}

/// A byte stream (stdout, a file) takes the lines newline-terminated.
impl<W: Write> Output for W {
    fn line(&mut self, line: &[u8]) -> io::Result<()> {
        self.write_all(line)?;
        self.write_all(b"\n")
    }

    fn end_step(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// What a session input did, for an in-process caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// It repeated an answer already given: nothing was sent again.
    pub replayed: bool,
    /// A turn was running when the session took it (decided with the
    /// input, under the session's lock): a message then joins that turn
    /// (or, over ACP, cancels it and prompts again), else it starts one.
    pub mid_turn: bool,
    /// What the input did, as the session saw it.
    pub ack: crate::session::core::Ack,
}

/// How long an agent that closed its output gets to exit before it is stopped.
pub(crate) const EXIT_GRACE: Duration = Duration::from_secs(5);
