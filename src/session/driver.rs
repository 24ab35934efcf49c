//! The thin IO around a [`Session`]: runs the agent with its input open,
//! feeds the session the agent's lines, the session input and the time, and
//! applies each [`Step`] (output lines written and flushed, lines written to
//! the agent, input records journaled, the agent's input closed).
//!
//! Everything arrives on one channel of [`Event`]s: the agent's stdout (a
//! reader thread), raw input lines (from [`read_input`] / [`read_fifo`]
//! threads), and parsed inputs from an in-process caller (the server, the
//! supervisor) with a reply channel for the outcome. So the loop waits for
//! the next event or the next expiry with one `recv_timeout`.

use super::proc::{self, Proc, Spec};
use super::{Agent, Input, Refused, Session, Step};
use crate::session::record::InputRecord;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

/// Longest agent line taken whole; the rest of a longer line is dropped
/// (the cut line then fails to parse downstream and is reported there).
pub const MAX_AGENT_LINE: usize = 16 * 1024 * 1024;

/// What the session loop waits for.
#[derive(Debug)]
pub enum Event {
    /// One line of the agent's stdout (without its newline).
    Agent(Vec<u8>),
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
}

/// Driver settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The first message, written right after the opening lines.
    pub first: Option<String>,
    pub journal: Option<JournalTo>,
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
}

/// Starts the agent with its input open (a pipe), through the one place
/// that starts agent processes ([`proc`]): its own process group, a per-run
/// reaper, stopped when this process dies.
pub fn spawn(spec: &Spec) -> io::Result<Proc> {
    let mut spec = spec.clone();
    spec.stdin = proc::Input::Piped;
    Proc::spawn(&spec)
}

/// Reads the agent's stdout into `tx`, line by line, then [`Event::AgentEof`].
pub fn read_agent(stdout: impl Read + Send + 'static, tx: Sender<Event>) -> io::Result<()> {
    std::thread::Builder::new().name("agent stdout".into()).spawn(move || {
        let mut r = BufReader::with_capacity(64 * 1024, stdout);
        let mut buf = Vec::new();
        while let Ok(true) = read_bounded(&mut r, &mut buf, MAX_AGENT_LINE) {
            if tx.send(Event::Agent(std::mem::take(&mut buf))).is_err() {
                return;
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
    while let Ok(true) = read_bounded(r, &mut buf, super::input::MAX_LINE + 2) {
        *n += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        tx.send(Event::Line(std::mem::take(&mut buf), *n)).map_err(|_| ())?;
    }
    Ok(())
}

/// Reads one line of at most `max` bytes into `buf` (without its line
/// ending; the rest of a longer line is skipped). False at the end.
pub fn read_bounded(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    buf.clear();
    let n = loop {
        match r.take(max as u64).read_until(b'\n', buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    if n == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(true);
    }
    // Cut at `max` (or the end of input): skip to the next line.
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(true);
        }
        match memchr::memchr(b'\n', chunk) {
            Some(i) => {
                r.consume(i + 1);
                return Ok(true);
            }
            None => {
                let len = chunk.len();
                r.consume(len);
            }
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The running session's IO.
struct Io<'a, W: Write> {
    out: &'a mut W,
    stdin: Option<ChildStdin>,
    journal: Option<&'a JournalTo>,
    report: &'a mut dyn FnMut(String),
}

impl<W: Write> Io<'_, W> {
    fn apply(&mut self, s: Step) -> io::Result<()> {
        for l in &s.output {
            self.out.write_all(l)?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()?;
        if let Some(stdin) = self.stdin.as_mut() {
            let mut buf = Vec::new();
            for l in &s.to_agent {
                buf.extend_from_slice(l);
                buf.push(b'\n');
            }
            if !buf.is_empty() {
                if let Err(e) = stdin.write_all(&buf).and_then(|()| stdin.flush()) {
                    // The agent stopped reading (it exited): its output says why.
                    (self.report)(format!("agent input: {e}"));
                    self.stdin = None;
                }
            }
        }
        if let Some(j) = self.journal {
            let now = now_ms();
            let recs = s.requested.iter().map(|r| InputRecord::requested(&j.actor, &j.task, r, now));
            let recs = recs.chain(s.answered.iter().map(|a| InputRecord::answered(&j.actor, &j.task, a, now)));
            for r in recs {
                if let Err(e) = r.append(&j.path) {
                    (self.report)(format!("{}: {e}", j.path.display()));
                }
            }
        }
        if s.close_agent_input {
            self.stdin = None;
        }
        Ok(())
    }
}

/// Runs `cmd` as the session's agent until it exits. `tx`/`rx` are the
/// event channel (start input readers on `tx` before or after); `out` gets
/// the session's output; `report` gets problems worth a line on stderr
/// (refused input, journal failures). `Err` only when the output failed
/// (a closed pipe included): the agent is stopped then.
pub fn run<A: Agent, W: Write>(
    session: &mut Session<A>,
    spec: &Spec,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    out: &mut W,
    opts: &Options,
    report: &mut dyn FnMut(String),
) -> io::Result<Outcome> {
    let mut child = spawn(spec)?;
    let stdout = child.stdout.take().ok_or_else(|| io::Error::other("the agent's stdout could not be captured"))?;
    let stdin = child.stdin.take();
    if let Err(e) = read_agent(stdout, tx) {
        child.stop();
        return Err(e);
    }
    let mut refused = 0;
    let mut io = Io { out, stdin, journal: opts.journal.as_ref(), report };
    let r = (|| -> io::Result<()> {
        io.apply(session.open(opts.first.as_deref()))?;
        loop {
            let wait = session.deadline().map(|d| Duration::from_millis((d - now_ms()).max(0) as u64));
            let ev = match wait {
                Some(w) => rx.recv_timeout(w),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let now = now_ms();
            match ev {
                Ok(Event::Agent(line)) => io.apply(session.agent_line(&line, now))?,
                Ok(Event::AgentEof) | Err(RecvTimeoutError::Disconnected) => {
                    io.apply(session.agent_exited(now))?;
                    return Ok(());
                }
                Ok(Event::Line(line, n)) => match Input::parse(&line) {
                    Ok(i) => match session.input(i, now) {
                        Ok(s) => io.apply(s)?,
                        Err(why) => {
                            refused += 1;
                            (io.report)(format!("input:{n}: refused: {why}"));
                        }
                    },
                    Err(why) => {
                        refused += 1;
                        (io.report)(format!("input:{n}: {why}"));
                    }
                },
                Ok(Event::Input(i, reply)) => {
                    let r = session.input(i, now);
                    let answer = match r {
                        Ok(s) => {
                            let replayed = s.replayed;
                            io.apply(s)?;
                            Ok(replayed)
                        }
                        Err(why) => Err(why),
                    };
                    if let Some(reply) = reply {
                        let _ = reply.send(answer);
                    }
                }
                Ok(Event::InputEof) => io.apply(session.input_closed(now))?,
                Err(RecvTimeoutError::Timeout) => io.apply(session.tick(now))?,
            }
        }
    })();
    io.stdin = None;
    if let Err(e) = r {
        child.stop();
        return Err(e);
    }
    // Its output is closed: it exits now, or is stopped.
    let rc = child.wait_timeout(EXIT_GRACE).unwrap_or_else(|| child.stop());
    Ok(Outcome { rc, refused, session_id: session.session_id().map(str::to_string) })
}

/// How long an agent that closed its output gets to exit before it is stopped.
const EXIT_GRACE: Duration = Duration::from_secs(5);
