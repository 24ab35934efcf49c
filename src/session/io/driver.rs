//! The thin IO around a [`Session`]: runs the agent with its input open,
//! and feeds the session's one loop ([`Loop`]) the agent's lines, the
//! session input and callers' commands.
//!
//! Everything arrives on one channel of [`Event`]s: the agent's stdout (a
//! reader thread), raw input lines (from [`read_input`] / [`read_fifo`]
//! threads), and callers' commands with a reply channel for the outcome.
//! So the loop waits for the next event or the next expiry with one
//! `recv_timeout`, and is the only thread that steps the session or writes
//! its output and its agent's input. `runwire-session` runs the loop on its
//! main thread ([`run`]); `runwire-serve` on a thread per session
//! ([`start`]), which callers command through the session's handle
//! (`super::engine::Engine`): both run the same IO code.

use super::engine::event_loop::{Loop, Observer, Shared};
use super::events::EXIT_GRACE;
pub use super::events::{
    AgentLine, Event, JournalTo, Linker, MintLinks, Output, Taken, AGENT_LINES_BYTES, MAX_AGENT_LINE,
};
use super::proc::{self, Proc, Spec};
use super::writer::Writer;
use crate::session::core::{Agent, Session};
use crate::util::lines::{read_capped, Capped, Rest};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

/// Driver settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The first message, written right after the opening lines.
    pub first: Option<String>,
    pub journal: Option<JournalTo>,
    /// Write a `runwire.session_status` line after each step that changed the
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
    /// Input records the journal could not take: the first failure, and
    /// how many (a full disk; each was reported).
    pub journal_lost: Option<(String, u64)>,
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
        // A line over the cap is skimmed, not cut: its ids and short fields
        // survive (a 5 MB tool result still closes its call), in bounded memory.
        let mut lines = crate::util::lines::Lines::new(MAX_AGENT_LINE);
        while let Ok(true) = crate::util::lines::read_line(&mut r, &mut lines, &mut buf) {
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
        if let Ok(failed) = pump(&mut r, &mut n, &tx) {
            let _ = tx.send(Event::InputEof(failed.map(|e| e.to_string())));
        }
    })?;
    Ok(())
}

/// An operator's stop signal (SIGTERM, SIGINT, SIGHUP) ends a standalone
/// `runwire-session` as an `end` input does: a typed command to its loop
/// (open requests closed as cancelled, recorded `by` the signal, `signal
/// SIGTERM`; the agent told, its input closed, and the agent let exit).
/// Returns the number of the first signal taken (0 until one is), for the
/// caller's exit code (128 + it). A second signal exits at once with 128 +
/// its number, the agent then stopped by its parent-death signal.
///
/// Not under a runner that says a signal means it died (`runwire-session
/// --supervised`): there the reaper's parent-death signal is no one's
/// answer, and the session must not answer its dead runner's requests.
/// Call before any other thread starts: the signals are blocked in the
/// threads started after (the agent's process gets a clean mask, `proc`).
pub fn end_on_signals(tx: Sender<Event>) -> io::Result<Arc<std::sync::atomic::AtomicI32>> {
    use nix::sys::signal::{SigSet, Signal};
    use std::sync::atomic::{AtomicI32, Ordering};
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().map_err(io::Error::from)?;
    let taken = Arc::new(AtomicI32::new(0));
    let first = taken.clone();
    std::thread::Builder::new().name("session signals".into()).spawn(move || {
        while let Ok(sig) = mask.wait() {
            let (reply, _) = std::sync::mpsc::channel();
            let end = crate::session::core::Input::End(crate::session::core::input::Who {
                by: Some(format!("signal {}", sig.as_str())),
            });
            // Said before the loop can end on it: the exit code names it.
            if first.swap(sig as i32, Ordering::SeqCst) != 0 || tx.send(Event::Command(end, reply)).is_err() {
                std::process::exit(128 + sig as i32);
            }
        }
    })?;
    Ok(taken)
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
            match pump(&mut BufReader::new(f), &mut n, &tx) {
                Err(()) => return,
                Ok(Some(e)) => {
                    let _ = tx.send(Event::InputEof(Some(e.to_string())));
                    return;
                }
                Ok(None) => {}
            }
        }
        let _ = tx.send(Event::InputEof(None));
    })?;
    Ok(())
}

/// `Err` when the session is gone (nobody receives); else the read error
/// that ended the input early, if one did.
fn pump(r: &mut impl BufRead, n: &mut u64, tx: &Sender<Event>) -> Result<Option<io::Error>, ()> {
    let mut buf = Vec::new();
    // A line over the input's cap is cut past it (the rest skipped), so that
    // parsing it reports it as too long.
    let cap = crate::session::core::input::MAX_LINE + 2;
    loop {
        match read_capped(r, &mut buf, cap, Rest::Skip) {
            Ok(Capped::End) => return Ok(None),
            Err(e) => return Ok(Some(e)),
            Ok(_) => {}
        }
        *n += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        tx.send(Event::Line(std::mem::take(&mut buf), *n)).map_err(|_| ())?;
    }
}

/// Runs `cmd` as the session's agent until it exits, its loop on this
/// thread. `tx`/`rx` are the event channel (start input readers on `tx`
/// before or after); `out` gets the session's output; `report` gets
/// problems worth a line on stderr (refused input, journal failures). `Err`
/// only when the output failed (a closed pipe included): the agent is
/// stopped then.
pub fn run<A: Agent, O: Output>(
    session: Session<A>,
    spec: &Spec,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
) -> io::Result<Outcome> {
    let shared = Shared::new(Arc::default());
    let (mut lp, mut child) = begin(session, spec, tx, out, opts, report, shared.clone())?;
    let r = lp.drive(&rx);
    lp.close_agent_input();
    let refused = match r {
        Ok(n) => n,
        Err(e) => {
            child.stop();
            return Err(e);
        }
    };
    // Its output is over: it exits now, or is stopped.
    let rc = shared.exited(child.wait_timeout(EXIT_GRACE).unwrap_or_else(|| child.stop()));
    // The last status line says how it ended; then the output closes.
    lp.finish(rc)?;
    let s = lp.session();
    let (session_id, failure) = (s.session_id().map(str::to_string), s.failure().map(str::to_string));
    Ok(Outcome { rc, refused, session_id, failure, journal_lost: lp.journal_lost().cloned() })
}

/// Starts the agent and its session's loop: the agent's lines go to `tx`,
/// the opening lines (and `opts.first`) are written. The one start of a
/// session, for [`run`] (which then drives it on its thread) and [`start`]
/// (on a thread of its own).
#[allow(clippy::type_complexity)]
fn begin<A: Agent, O: Output>(
    session: Session<A>,
    spec: &Spec,
    tx: Sender<Event>,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
    shared: Arc<Shared>,
) -> io::Result<(Loop<A, O>, Proc)> {
    let mut child = spawn(spec)?;
    let Some(stdout) = child.stdout.take() else {
        child.stop();
        return Err(io::Error::other("the agent's stdout could not be captured"));
    };
    let stdin = Writer::start(child.stdin.take());
    if let Err(e) = read_agent(stdout, tx) {
        child.stop();
        return Err(io::Error::other(format!("cannot read the agent's output: {e}")));
    }
    let mut lp = Loop::new(session, out, stdin, opts.journal.clone(), report, shared)
        .with_status_lines(opts.status_lines)
        .with_generation(opts.generation);
    lp.watch(child.signaller());
    if let Err(e) = lp.open(opts.first.as_deref()) {
        child.stop();
        return Err(e);
    }
    Ok((lp, child))
}

/// A session started for an in-process caller (the server): its loop runs
/// on a thread of its own until the agent's output ends; the caller holds
/// the rest.
pub struct Started {
    /// The loop's event channel: commands go here.
    pub tx: Sender<Event>,
    /// The status the loop publishes.
    pub shared: Arc<Shared>,
    /// The agent's input, to read how much it has not read yet.
    pub stdin: Arc<Writer>,
    /// The agent's process, for its caller to reap and stop.
    pub child: Proc,
}

/// [`run`] for an in-process caller (the server): the session's loop runs
/// on a thread of its own, which owns the session and its IO; the caller
/// commands it through [`Started::tx`] and reads [`Started::shared`].
pub fn start<A, O>(
    session: Session<A>,
    spec: &Spec,
    out: O,
    opts: &Options,
    report: Box<dyn FnMut(String) + Send>,
    shared: Arc<Shared>,
    observer: Option<Observer>,
) -> io::Result<Started>
where
    A: Agent + Send + 'static,
    O: Output + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let (lp, mut child) = begin(session, spec, tx.clone(), out, opts, report, shared.clone())?;
    let mut lp = lp.with_observer(observer);
    let stdin = lp.writer();
    let spawned = std::thread::Builder::new().name("session".into()).spawn(move || {
        // An output that fails ends the loop; the caller sees the output close.
        let _ = lp.drive(&rx);
        // Dropping it ends the output (a reader of a channel sees the end).
        drop(lp);
    });
    if let Err(e) = spawned {
        child.stop();
        return Err(io::Error::other(format!("cannot run the session: {e}")));
    }
    Ok(Started { tx, shared, stdin, child })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::core::Input;

    /// Session input lines: blank ones are counted and skipped, a CR LF
    /// ending is stripped, and a line over the input cap is cut past it (the
    /// rest skipped) so that parsing it says it is too long; the next line
    /// is read as usual.
    #[test]
    fn input_lines_are_bounded_and_an_over_long_one_is_reported_by_the_parser() {
        let max = crate::session::core::input::MAX_LINE;
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
        assert!(matches!(got.last(), Some(Event::InputEof(None))));
        let Some(Event::Line(long, _)) = got.get(1) else { panic!("no second line") };
        assert!(Input::parse(long).unwrap_err().contains("longer than"));
        assert!(matches!(Input::parse(b"{\"type\":\"end\"}"), Ok(Input::End(_))));
    }

    /// A read error ends the input with why (the session reports it), the
    /// lines before it delivered: it was taken for a plain end, unsaid.
    #[test]
    fn a_read_error_ends_the_input_with_why() {
        struct Failing(Option<&'static [u8]>);
        impl std::io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                match self.0.take() {
                    Some(b) => {
                        buf[..b.len()].copy_from_slice(b);
                        Ok(b.len())
                    }
                    None => Err(std::io::Error::other("device gone")),
                }
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        read_input(Failing(Some(b"{\"type\":\"end\"}\n")), tx).unwrap();
        let got: Vec<Event> = rx.iter().collect();
        assert!(matches!(got.first(), Some(Event::Line(_, 1))), "{got:?}");
        assert!(matches!(got.last(), Some(Event::InputEof(Some(why))) if why.contains("device gone")), "{got:?}");
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
}
