//! The thin IO around a [`Session`]: runs the agent with its input open,
//! feeds the session the agent's lines, the session input and the time, and
//! applies each [`Step`] (output lines written and flushed, lines written to
//! the agent, input records journaled, the agent's input closed).
//!
//! Everything arrives on one channel of [`Event`]s: the agent's stdout (a
//! reader thread), raw input lines (from [`read_input`] / [`read_fifo`]
//! threads), and parsed inputs with a reply channel for the outcome. So the
//! loop ([`drive`]) waits for the next event or the next expiry with one
//! `recv_timeout`. The session and its IO are a [`Core`], which an
//! in-process caller (the server) also commands and queries from its own
//! threads: `runwire-session` and `runwire-serve` run the same IO code.

use super::proc::{self, Proc, Spec};
use super::writer::{Full, Writer};
use super::{Agent, Input, Refused, Session, Step};
use crate::lines::{read_capped, Capped, Rest};
use crate::session::input::{OpenRequest, StatusLine};
use crate::session::record::InputRecord;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Longest agent line taken whole; a longer one is skimmed as it streams
/// ([`crate::lines`]): its structure and short fields kept, long strings cut.
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
    /// The session input ended.
    InputEof,
    /// A parsed input from an in-process caller; the outcome goes back on
    /// the sender: `Ok(replayed)` or why it was refused.
    Input(Input, Option<Sender<Result<bool, Refused>>>),
}

/// Where input records go when the session runs under a runner.
#[derive(Debug, Clone)]
pub struct JournalTo {
    pub path: PathBuf,
    pub task: String,
    pub actor: String,
    /// Mints a raised request's approval links, journaled with it (`runwire-serve --public-url`).
    pub links: Option<Linker>,
}

/// Mints the approval links of a raised request (none for a request a link cannot answer).
#[derive(Clone)]
pub struct Linker(pub std::sync::Arc<MintLinks>);

/// What a [`Linker`] calls: the links of one raised request.
pub type MintLinks = dyn Fn(&crate::events::InputRequest) -> Vec<String> + Send + Sync;

impl std::fmt::Debug for Linker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Linker")
    }
}

/// Driver settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The first message, written right after the opening lines.
    pub first: Option<String>,
    pub journal: Option<JournalTo>,
    /// Write a `runwire.status` line after each step that changed the
    /// session's status (`runwire-session`: for the runner that drives it).
    pub status_lines: bool,
    /// The agent process's number among its runner's (its requests are
    /// this generation's); 0 is read as 1.
    pub generation: u64,
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The agent's exit code (128 + signal when killed by one).
    pub rc: i64,
    /// Input lines refused or unreadable (each reported).
    pub refused: u64,
    /// The session id the agent announced.
    pub session_id: Option<String>,
    /// Why the session failed although the agent may have exited 0: it
    /// refused a request the session cannot go on without.
    pub failure: Option<String>,
}

/// Starts the agent with its input open (a pipe), through the one place
/// that starts agent processes ([`proc`]): its own process group, a per-run
/// reaper, stopped when this process dies.
pub fn spawn(spec: &Spec) -> io::Result<Proc> {
    let mut spec = spec.clone();
    spec.stdin = proc::Input::Piped;
    Proc::spawn(&spec)
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
    fn admit(bytes: Vec<u8>) -> AgentLine {
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

/// Reads the agent's stdout into `tx`, line by line, then [`Event::AgentEof`].
pub fn read_agent(stdout: impl Read + Send + 'static, tx: Sender<Event>) -> io::Result<()> {
    std::thread::Builder::new().name("agent stdout".into()).spawn(move || {
        let mut r = BufReader::with_capacity(64 * 1024, stdout);
        let mut buf = Vec::new();
        // A line over the cap is skimmed, not cut: its ids and short fields
        // survive (a 5 MB tool result still closes its call), in bounded memory.
        let mut lines = crate::lines::Lines::new(MAX_AGENT_LINE);
        while let Ok(true) = crate::lines::read_line(&mut r, &mut lines, &mut buf) {
            // The line's own allocation, not `buf`'s (which may have grown for a long one).
            let line = AgentLine::admit(buf.as_slice().to_vec());
            if tx.send(Event::Agent(line)).is_err() {
                return;
            }
            if buf.capacity() > 1024 * 1024 {
                buf = Vec::new();
            }
        }
        let _ = tx.send(Event::AgentEof);
    })?;
    Ok(())
}

/// Reads session input lines from `input` (stdin, a file) into `tx`, then
/// [`Event::InputEof`].
pub fn read_input(input: impl Read + Send + 'static, tx: Sender<Event>) -> io::Result<()> {
    std::thread::Builder::new().name("session input".into()).spawn(move || {
        let mut n = 0;
        let mut r = BufReader::new(input);
        let _ = pump(&mut r, &mut n, &tx);
        let _ = tx.send(Event::InputEof);
    })?;
    Ok(())
}

/// Reads session input from a FIFO into `tx`, reopening it whenever its
/// writer closes it, so each `echo … >FIFO` is one more input. The input
/// never ends this way: `{"type":"end"}` ends the session.
pub fn read_fifo(path: &Path, tx: Sender<Event>) -> io::Result<()> {
    // Fail now, not in the thread, when the FIFO cannot be opened for reading at all.
    std::fs::metadata(path)?;
    let path = path.to_path_buf();
    std::thread::Builder::new().name("session fifo".into()).spawn(move || {
        let mut n = 0;
        loop {
            // Opening for reading blocks until a writer comes.
            let f = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(_) => break,
            };
            if pump(&mut BufReader::new(f), &mut n, &tx).is_err() {
                return;
            }
        }
        let _ = tx.send(Event::InputEof);
    })?;
    Ok(())
}

/// `Err` when the session is gone (nobody receives).
fn pump(r: &mut impl BufRead, n: &mut u64, tx: &Sender<Event>) -> Result<(), ()> {
    let mut buf = Vec::new();
    // A line over the input's cap is cut past it (the rest skipped), so that
    // parsing it reports it as too long.
    let cap = super::input::MAX_LINE + 2;
    while read_capped(r, &mut buf, cap, Rest::Skip).is_ok_and(|c| c != Capped::End) {
        *n += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        tx.send(Event::Line(std::mem::take(&mut buf), *n)).map_err(|_| ())?;
    }
    Ok(())
}

fn now_ms() -> i64 {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    pub ack: super::Ack,
}

/// A running session and its IO, shared by the loop that feeds it the
/// agent's lines, the input and the time ([`drive`]) and by in-process
/// callers (the server) that command and query it from their own threads.
/// Each step is computed under the session's lock and applied after it
/// (never under it: applying may wait for a slow reader of the output), in
/// the order the session asks: output, agent input, journal, closing the
/// agent's input. The output and the agent's input have locks of their
/// own, so a step that writes only to the agent never waits for the output.
pub struct Core<A: Agent, O: Output> {
    session: Mutex<Session<A>>,
    /// Output lines the session produced, counted under the session lock:
    /// a reader that took as many has seen the state [`Core::query`] shows.
    produced: AtomicU64,
    out: Mutex<Option<O>>,
    /// The agent's input: queued here, written by its own thread, so no
    /// step ever waits for the agent to read.
    stdin: Arc<Writer>,
    journal: Option<JournalTo>,
    report: Mutex<Box<dyn FnMut(String) + Send>>,
    /// The agent's process, to end one that outstays its closed input.
    signaller: Mutex<Option<proc::Signaller>>,
    /// When the agent's input was closed (epoch ms), and what the agent
    /// has been sent since for not exiting: [`Ending`].
    closed: Mutex<Option<(i64, Ending)>>,
    /// The status line last written (taken under the session's lock), when
    /// the session writes them ([`Options::status_lines`]).
    status: Option<Mutex<Option<StatusLine>>>,
    generation: u64,
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

impl<A: Agent, O: Output> Drop for Core<A, O> {
    fn drop(&mut self) {
        // The writer's thread holds its own handle: the input closes once
        // what is queued is written (or the agent is gone).
        self.stdin.close_after_queue();
    }
}

impl<A: Agent, O: Output> Core<A, O> {
    /// `stdin`: the agent's input; `report` gets problems worth a line on
    /// stderr (refused input, journal failures).
    pub fn new(
        session: Session<A>,
        out: O,
        stdin: Option<ChildStdin>,
        journal: Option<JournalTo>,
        report: Box<dyn FnMut(String) + Send>,
    ) -> Core<A, O> {
        Core {
            session: Mutex::new(session),
            produced: AtomicU64::new(0),
            out: Mutex::new(Some(out)),
            stdin: Writer::start(stdin),
            journal,
            report: Mutex::new(report),
            signaller: Mutex::new(None),
            closed: Mutex::new(None),
            status: None,
            generation: 1,
        }
    }

    /// Writes a status line after each step that changed the session's
    /// status, its requests numbered with `generation`.
    pub fn with_status_lines(mut self, generation: u64) -> Self {
        self.status = Some(Mutex::new(None));
        self.generation = generation.max(1);
        self
    }

    /// Ends a step's lines, under the session's lock: the idle line when the
    /// step made the session idle, then the status line when it changed,
    /// numbered where it lands; the lines are counted as produced.
    fn seal(&self, s: &mut Session<A>, out: &mut Vec<Vec<u8>>, exit: Option<i64>) {
        out.extend(s.idle_line());
        if let Some(last) = &self.status {
            let open = s
                .pending()
                .map(|r| OpenRequest {
                    interrupt_id: r.interrupt_id.clone(),
                    id: r.id.clone(),
                    generation: self.generation,
                })
                .collect();
            let now = StatusLine::new(
                s.phase(),
                s.turn(),
                s.turns_ended(),
                open,
                s.session_id().map(str::to_string),
                s.inputs(),
                exit,
            );
            let mut last = lock(last);
            if !last.as_ref().is_some_and(|l| l.same_as(&now)) {
                let seq = self.produced.load(Ordering::SeqCst) + out.len() as u64 + 1;
                let mut now = now;
                now.seq = seq;
                out.push(now.to_line());
                *last = Some(now);
            }
        }
        self.produced.fetch_add(out.len() as u64, Ordering::SeqCst);
    }

    /// The agent's process: once its input is closed, an agent that has
    /// not exited within `EXIT_GRACE` (5 s) gets SIGTERM, then SIGKILL after
    /// the kill grace, whatever it does with its stdout (the loop does it).
    pub fn watch(&self, s: proc::Signaller) {
        *lock(&self.signaller) = Some(s);
    }

    /// The agent's exit code as the session's outcome: an agent that did
    /// not exit when its input closed and was stopped for it (ACP agents)
    /// ended as asked, so its SIGTERM or SIGKILL counts as 0.
    pub fn exit_code(&self, rc: i64) -> i64 {
        let stopped = matches!(*lock(&self.closed), Some((_, Ending::Terminated | Ending::Killed)));
        if stopped && (rc == 128 + 15 || rc == 128 + 9) {
            0
        } else {
            rc
        }
    }

    /// Notes that the agent's input is closed (the first time counts).
    fn mark_closed(&self) {
        lock(&self.closed).get_or_insert((now_ms(), Ending::Closed));
    }

    /// When the loop must next act on an agent that outstays its closed
    /// input (epoch ms), if it must.
    fn ending_deadline(&self) -> Option<i64> {
        lock(&self.signaller).as_ref()?;
        let grace = EXIT_GRACE.as_millis() as i64;
        match *lock(&self.closed) {
            Some((t, Ending::Closed)) => Some(t + grace),
            Some((t, Ending::Terminated)) => Some(t + grace + proc::KILL_GRACE.as_millis() as i64),
            _ => None,
        }
    }

    /// Ends an agent that outstays its closed input, by the
    /// [`ending_deadline`](Core::ending_deadline).
    fn enforce_end(&self, now: i64) {
        if self.ending_deadline().is_none_or(|d| d > now) {
            return;
        }
        let Some(sig) = lock(&self.signaller).clone() else { return };
        let stage = lock(&self.closed).map(|(_, e)| e);
        let next = match stage {
            Some(Ending::Closed) => {
                self.report(format!(
                    "the agent did not exit within {} s of its input closing: stopping it",
                    EXIT_GRACE.as_secs()
                ));
                sig.terminate();
                Ending::Terminated
            }
            Some(Ending::Terminated) => {
                sig.kill();
                Ending::Killed
            }
            _ => return,
        };
        if let Some((_, e)) = lock(&self.closed).as_mut() {
            *e = next;
        }
    }

    fn report(&self, m: String) {
        (lock(&self.report))(m)
    }

    /// Reads the session, with the number of output lines it has produced
    /// (the same instant).
    pub fn query<R>(&self, f: impl FnOnce(&Session<A>, u64) -> R) -> R {
        let s = lock(&self.session);
        f(&s, self.produced.load(Ordering::SeqCst))
    }

    /// One step of the session, counted, then applied.
    fn step(&self, f: impl FnOnce(&mut Session<A>) -> Step) -> io::Result<Step> {
        let s = {
            let mut session = lock(&self.session);
            let mut s = f(&mut session);
            self.seal(&mut session, &mut s.output, None);
            s
        };
        self.apply(&s)?;
        Ok(s)
    }

    /// One session input line (the loop's): never refused for want of
    /// room, the person feeding the session's input paces it. Requests
    /// past their time are expired first, so a late answer is refused as
    /// expired. `Ok(Err(_))`: refused, nothing written.
    pub fn input(&self, input: Input) -> io::Result<Result<Taken, Refused>> {
        self.take(input, false)
    }

    /// An in-process caller's command (the server's routes): as
    /// [`input`](Core::input), but refused at once
    /// ([`Refused::NotReading`]) when the agent has not read what it was
    /// sent and this would overflow its input's queue, so the caller never
    /// waits for the agent.
    pub fn command(&self, input: Input) -> io::Result<Result<Taken, Refused>> {
        self.take(input, true)
    }

    fn take(&self, input: Input, bounded: bool) -> io::Result<Result<Taken, Refused>> {
        let now = now_ms();
        let (expired, r, mid_turn) = {
            let mut s = lock(&self.session);
            if bounded {
                if let Err(Full::NotReading { waiting }) = self.stdin.check(input.size()) {
                    return Ok(Err(Refused::NotReading { waiting }));
                }
            }
            let mut expired = s.tick(now);
            let mid_turn = s.phase() == super::Phase::Turn;
            let mut r = s.input(input, now);
            // What expired goes first; the idle and status lines are said
            // after the input's own lines (a refused input was taken too).
            self.produced.fetch_add(expired.output.len() as u64, Ordering::SeqCst);
            match r.as_mut() {
                Ok(st) => self.seal(&mut s, &mut st.output, None),
                Err(_) => {
                    let mut lines = Vec::new();
                    self.seal(&mut s, &mut lines, None);
                    expired.output.extend(lines);
                }
            }
            (expired, r, mid_turn)
        };
        self.apply(&expired)?;
        match r {
            Ok(s) => {
                self.apply(&s)?;
                Ok(Ok(Taken { replayed: s.replayed, mid_turn, ack: s.ack }))
            }
            Err(why) => Ok(Err(why)),
        }
    }

    /// The agent's exit: the last status line says it (when the session
    /// writes them).
    fn step_with_exit(&self, rc: i64) -> io::Result<()> {
        let s = {
            let mut session = lock(&self.session);
            let mut s = Step::default();
            self.seal(&mut session, &mut s.output, Some(rc));
            s
        };
        self.apply(&s)
    }

    /// A session input line that could not be read as an input: counted as
    /// taken (the session's idle line says so).
    pub fn unreadable(&self) -> io::Result<()> {
        self.step(|s| {
            s.unreadable();
            Step::default()
        })
        .map(drop)
    }

    /// The process runs: the opening lines, then `first` as the first
    /// message. Before anything else is written to the agent.
    pub fn open(&self, first: Option<&str>) -> io::Result<()> {
        self.step(|s| s.open(first)).map(drop)
    }

    /// Expires what is past its time now (the loop does it at each deadline).
    pub fn tick(&self) -> io::Result<()> {
        self.step(|s| s.tick(now_ms())).map(drop)
    }

    /// Closes the agent's input now, dropping what is queued (the agent
    /// is being stopped). Never waits for the agent.
    pub fn close_agent_input(&self) {
        self.stdin.close_now();
        self.mark_closed();
    }

    /// Whether the agent's input has room for `input` now (as
    /// [`command`](Core::command) would check it).
    pub fn check_room(&self, input: &Input) -> Result<(), Full> {
        match self.stdin.check(input.size()) {
            Err(Full::Closed) => Ok(()),
            other => other,
        }
    }

    /// Closes the agent's input once what is queued for it is written
    /// (the session is being ended: its last lines still go).
    pub fn close_agent_input_after_queue(&self) {
        self.stdin.close_after_queue();
        self.mark_closed();
    }

    /// Bytes written to the agent that it has not read yet.
    pub fn unread_input(&self) -> usize {
        self.stdin.waiting()
    }

    fn apply(&self, s: &Step) -> io::Result<()> {
        if !s.output.is_empty() {
            let mut out = lock(&self.out);
            if let Some(o) = out.as_mut() {
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
        if let Some(j) = &self.journal {
            let now = now_ms();
            let recs = s.requested.iter().map(|r| {
                let mut rec = InputRecord::requested(&j.actor, &j.task, r, now);
                rec.links = j.links.as_ref().map(|l| (l.0)(r)).filter(|l| !l.is_empty());
                rec
            });
            let recs = recs.chain(s.answered.iter().map(|a| InputRecord::answered(&j.actor, &j.task, a, now)));
            for r in recs {
                if let Err(e) = r.append(&j.path) {
                    self.report(format!("{}: {e}", j.path.display()));
                }
            }
        }
        Ok(())
    }
}

/// The session's loop, once it is [open](Core::open): feeds it every event
/// of `rx` (the agent's lines, input lines and inputs, the end of either)
/// and the time (each expiry), until the agent's output ends; the output is
/// then closed (dropped). Returns the input lines refused or unreadable
/// (each reported). `Err` only when the output failed (a closed pipe
/// included).
pub fn drive<A: Agent, O: Output>(core: &Core<A, O>, rx: Receiver<Event>) -> io::Result<u64> {
    let r = drive_until_eof(core, rx);
    // Dropping it ends the output (a reader of a channel sees the end).
    lock(&core.out).take();
    r
}

fn drive_until_eof<A: Agent, O: Output>(core: &Core<A, O>, rx: Receiver<Event>) -> io::Result<u64> {
    let mut refused = 0;
    loop {
        let deadline = core.query(|s, _| s.deadline());
        let deadline = match (deadline, core.ending_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ev = match deadline {
            Some(d) => rx.recv_timeout(Duration::from_millis((d - now_ms()).max(0) as u64)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match ev {
            Ok(Event::Agent(line)) => {
                core.step(|s| s.agent_line(&line, now_ms()))?;
            }
            Ok(Event::AgentEof) | Err(RecvTimeoutError::Disconnected) => {
                core.step(|s| s.agent_exited(now_ms()))?;
                return Ok(refused);
            }
            Ok(Event::Line(line, n)) => {
                let (what, why) = match Input::parse(&line) {
                    Ok(i) => match core.input(i)? {
                        Ok(t) => (Ok(t.ack), None),
                        Err(why) => (Err(why.to_string()), Some(format!("refused: {why}"))),
                    },
                    Err(why) => {
                        core.unreadable()?;
                        (Err(why.clone()), Some(why))
                    }
                };
                // The reply to the line's writer, after the line's own lines.
                let ack = super::input::AckLine::new(n, what).to_line();
                core.step(|_| Step { output: vec![ack], ..Step::default() })?;
                if let Some(why) = why {
                    refused += 1;
                    core.report(format!("input:{n}: {why}"));
                }
            }
            Ok(Event::Input(i, reply)) => {
                let answer = core.command(i)?;
                if let Some(reply) = reply {
                    let _ = reply.send(answer.map(|t| t.replayed));
                }
            }
            Ok(Event::InputEof) => {
                core.step(|s| s.input_closed(now_ms()))?;
            }
            Err(RecvTimeoutError::Timeout) => {
                core.tick()?;
                core.enforce_end(now_ms());
            }
        }
    }
}

/// Runs `cmd` as the session's agent until it exits. `tx`/`rx` are the
/// event channel (start input readers on `tx` before or after); `out` gets
/// the session's output; `report` gets problems worth a line on stderr
/// (refused input, journal failures). `Err` only when the output failed
/// (a closed pipe included): the agent is stopped then.
pub fn run<A: Agent, O: Output>(
    session: Session<A>,
    spec: &Spec,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
) -> io::Result<Outcome> {
    let (core, mut child) = begin(session, spec, tx, out, opts, report)?;
    let r = drive_until_eof(&core, rx);
    core.close_agent_input();
    let refused = match r {
        Ok(n) => n,
        Err(e) => {
            lock(&core.out).take();
            child.stop();
            return Err(e);
        }
    };
    // Its output is over: it exits now, or is stopped.
    let rc = core.exit_code(child.wait_timeout(EXIT_GRACE).unwrap_or_else(|| child.stop()));
    // The last status line says how it ended; then the output closes.
    let last = core.step_with_exit(rc);
    lock(&core.out).take();
    last?;
    let (session_id, failure) =
        core.query(|s, _| (s.session_id().map(str::to_string), s.failure().map(str::to_string)));
    Ok(Outcome { rc, refused, session_id, failure })
}

/// Starts the agent and its session: the agent's lines go to `tx`, the
/// opening lines (and `opts.first`) are written. The one start of a
/// session, for [`run`] (which then drives it here) and [`start`] (on a
/// thread of its own).
fn begin<A: Agent, O: Output>(
    session: Session<A>,
    spec: &Spec,
    tx: Sender<Event>,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
) -> io::Result<(Core<A, O>, Proc)> {
    let mut child = spawn(spec)?;
    let Some(stdout) = child.stdout.take() else {
        child.stop();
        return Err(io::Error::other("the agent's stdout could not be captured"));
    };
    let stdin = child.stdin.take();
    if let Err(e) = read_agent(stdout, tx) {
        child.stop();
        return Err(io::Error::other(format!("cannot read the agent's output: {e}")));
    }
    let mut core = Core::new(session, out, stdin, opts.journal.clone(), report);
    if opts.status_lines {
        core = core.with_status_lines(opts.generation);
    }
    core.watch(child.signaller());
    if let Err(e) = core.open(opts.first.as_deref()) {
        child.stop();
        return Err(e);
    }
    Ok((core, child))
}

/// [`run`] for an in-process caller (the server): the session is driven on
/// a thread of its own until the agent's output ends, and the caller
/// commands and queries the returned [`Core`] and stops the process.
pub fn start<A, O>(
    session: Session<A>,
    spec: &Spec,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
) -> io::Result<(std::sync::Arc<Core<A, O>>, Proc)>
where
    A: Agent + Send + 'static,
    O: Output + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let (core, mut child) = begin(session, spec, tx, out, opts, report)?;
    let core = std::sync::Arc::new(core);
    let looped = core.clone();
    let spawned = std::thread::Builder::new().name("session".into()).spawn(move || {
        // An output that fails ends the loop; the caller sees the output close.
        let _ = drive(&looped, rx);
    });
    if let Err(e) = spawned {
        child.stop();
        return Err(io::Error::other(format!("cannot run the session: {e}")));
    }
    Ok((core, child))
}

/// How long an agent that closed its output gets to exit before it is stopped.
const EXIT_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    /// Session input lines: blank ones are counted and skipped, a CR LF
    /// ending is stripped, and a line over the input cap is cut past it (the
    /// rest skipped) so that parsing it says it is too long; the next line
    /// is read as usual.
    #[test]
    fn input_lines_are_bounded_and_an_over_long_one_is_reported_by_the_parser() {
        let max = super::super::input::MAX_LINE;
        let mut input = b"{\"type\":\"end\"}\r\n  \n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 3 * max));
        input.extend_from_slice(b"\nlast");
        let (tx, rx) = std::sync::mpsc::channel();
        read_input(std::io::Cursor::new(input), tx).unwrap();
        let got: Vec<Event> = rx.iter().collect();
        let lines: Vec<(usize, u64)> = got
            .iter()
            .filter_map(|e| match e {
                Event::Line(l, n) => Some((l.len(), *n)),
                _ => None,
            })
            .collect();
        assert_eq!(lines, [(14, 1), (max + 2, 3), (4, 4)]);
        assert!(matches!(got.last(), Some(Event::InputEof)));
        let Some(Event::Line(long, _)) = got.get(1) else { panic!("no second line") };
        assert!(Input::parse(long).unwrap_err().contains("longer than"));
        assert!(matches!(Input::parse(b"{\"type\":\"end\"}"), Ok(Input::End(_))));
    }

    /// An agent line over the cap keeps what the session and the viewers
    /// need: a 17 MB tool result still names its call (issue 24 case 6).
    #[test]
    fn an_over_cap_agent_line_is_skimmed_not_lost() {
        let big = "x".repeat(MAX_AGENT_LINE + 1024 * 1024);
        let line = format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_big","content":"{big}"}}]}}}}"#
        );
        let input = format!("{line}\n{{\"type\":\"result\"}}\n").into_bytes();
        let (tx, rx) = std::sync::mpsc::channel();
        read_agent(std::io::Cursor::new(input), tx).unwrap();
        let Ok(Event::Agent(first)) = rx.recv() else { panic!("a line") };
        let v: serde_json::Value = serde_json::from_slice(&first).expect("the skimmed line is JSON");
        assert_eq!(v["message"]["content"][0]["tool_use_id"], "toolu_big");
        assert!(first.len() < 2 * 1024 * 1024, "the long string was cut: {} bytes", first.len());
        let Ok(Event::Agent(second)) = rx.recv() else { panic!("the next line") };
        assert_eq!(&second[..], br#"{"type":"result"}"#);
    }
    use crate::session::codex::{Codex, CodexOptions};
    use crate::session::input::MessageInput;

    fn msg(text: &str) -> Input {
        Input::Message(MessageInput { text: text.into(), by: None })
    }

    /// What a caller learns from the core is the session's own view at the
    /// moment it took the input, and the output count matches the state.
    #[test]
    fn a_message_says_whether_it_joined_a_turn_and_output_is_counted_with_the_state() {
        let session = Session::new(Codex::new(CodexOptions::default()), super::super::Options::default());
        let core = Core::new(session, Vec::<u8>::new(), None, None, Box::new(|_| {}));
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
            core.input(msg("steer")).unwrap(),
            Ok(Taken { replayed: false, mid_turn: true, ack: crate::session::Ack::Joined { may_start_next: true } })
        );
        let done = r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"completed"}}}"#;
        core.step(|s| s.agent_line(done.as_bytes(), now_ms())).unwrap();
        // The steer is still unanswered: codex may refuse it, the session owes a turn.
        assert!(core.query(|s, _| s.phase() == super::super::Phase::Turn));
        core.step(|s| s.agent_line(br#"{"id":4,"result":{"turnId":"t1"}}"#, now_ms())).unwrap();
        assert!(core.query(|s, _| s.phase() == super::super::Phase::Idle));
        // The turn had ended: this message starts one.
        assert_eq!(
            core.input(msg("next")).unwrap(),
            Ok(Taken { replayed: false, mid_turn: false, ack: crate::session::Ack::Started })
        );
        let printed = lock(&core.out).as_ref().map(|o| o.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count());
        assert_eq!(core.query(|_, produced| produced), printed.unwrap() as u64);
        assert_eq!(core.query(|_, produced| produced), 7, "the agent's six lines, forwarded, and one idle line");
        // Idle once the steer was answered, with the one input line applied; not before.
        let out = lock(&core.out).as_ref().map(|o| String::from_utf8_lossy(o).into_owned()).unwrap();
        let idle: Vec<&str> = out.lines().filter(|l| l.contains("runwire.idle")).collect();
        assert_eq!(idle, [r#"{"type":"runwire.idle","inputs":1}"#]);
        assert!(
            out.ends_with("{\"id\":4,\"result\":{\"turnId\":\"t1\"}}\n{\"type\":\"runwire.idle\",\"inputs\":1}\n"),
            "{out}"
        );
    }
}
