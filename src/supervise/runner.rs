//! A task's step as a process: started, signalled and reaped by
//! `session::proc`, its output read off its stdout pipe and copied into its
//! log by the supervisor (the log stays the durable truth: the same bytes
//! the wrapper wrote, each line's arrival time in the log's sidecar,
//! `crate::util::arrival`). An interactive turn is driven as an engine client:
//! the same pipe carries `runwire-session`'s typed lines (`runwire.session_status`,
//! `runwire.idle`, `runwire.ack`, `runwire.request`, `runwire.answer`,
//! `spec/SESSION-INPUT.md`), read with the crate's one line reader
//! ([`crate::util::lines::Lines`]) as they arrive and handed to the supervisor's
//! loop as [`Seen`] values. Nothing re-reads the log for state.
//!
//! Each step has two threads of its own: one copies and reads the output,
//! one waits for the process; both only send [`Report`]s to the loop, which
//! owns every decision (no state is shared but the channel).

use super::awaiting::{Awaiting, ACK_WAIT};
use super::socket;
use super::waves::Phase;
use crate::control::Reply;
use crate::pipeline::events::{Data, InputAnswer, InputRequest};
use crate::pipeline::normalize::{Adapter, Normalizer};
use crate::session::input::{AckLine, StatusLine};
use crate::session::proc::{self, Proc, Signaller, Spec};
use crate::util::lines::{Flow, Lines};
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What the loop waits for.
pub enum Ev {
    /// A control request from the socket.
    Control(socket::Msg),
    /// A report of a task's step (its session's lines, its end).
    Task(Event),
}

/// What a turn's session said, in the order it said it.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// The agent's session to resume ([`Normalizer::resume_session`]), when it changes.
    Session(String),
    Request(InputRequest),
    Answer(InputAnswer),
    /// The session's reply to one input line.
    Ack(AckLine),
    /// The session is idle with this many input lines applied and no
    /// request open: its `runwire.session_status` with phase `idle`, or its
    /// `runwire.idle` line.
    Idle(u64),
    /// A status line with the session not idle (a turn runs, a request waits).
    Busy,
    /// The detail of the wrapper's status line (the last one counts).
    Detail(Option<String>),
}

/// What a step's threads tell the loop.
#[derive(Debug)]
pub enum Report {
    /// Boxed: a request or an answer is large, the other reports small.
    Seen(Box<Seen>),
    /// The log could not be written (the first error): it is incomplete.
    Lost(String),
    /// The process is over with this exit code, its output read (or let go
    /// after the drain grace).
    Exited(i64),
}

/// A report of step `step` of task `task`.
#[derive(Debug)]
pub struct Event {
    pub task: String,
    pub step: u64,
    pub report: Report,
}

/// A turn's output read line by line, through the same normalizer as
/// `normalize-events` and the server, so that the session and the status
/// line are understood in one place: the session to resume is
/// [`Normalizer::resume_session`], the detail is the `exit` event's.
pub struct Reader {
    norm: Normalizer,
    session: Option<String>,
}

impl Reader {
    pub fn new(adapter: Adapter) -> Reader {
        // Event times are not used: a fixed clock spares a syscall per line.
        let opts =
            crate::pipeline::normalize::Options { clock: crate::util::time::Clock::Fixed(0), ..Default::default() };
        Reader { norm: Normalizer::new(adapter, opts), session: None }
    }

    /// One line of the turn's output (a cut-off last line included: the
    /// normalizer reports what it cannot read as an error event and goes on).
    pub fn line(&mut self, line: &[u8], out: &mut Vec<Seen>) {
        // The session's status after each step (spec/SESSION-INPUT.md); a
        // wrapper's closing status line is not one (the normalizer's).
        if let Some(s) = StatusLine::parse(line) {
            out.push(if s.phase == "idle" && s.open.is_empty() { Seen::Idle(s.applied) } else { Seen::Busy });
            return;
        }
        // The session's own word (no event: the normalizer skips these lines).
        if let Some(n) = crate::pipeline::normalize::idle_inputs(line) {
            out.push(Seen::Idle(n));
            return;
        }
        if let Some(a) = AckLine::parse(line) {
            out.push(Seen::Ack(a));
            return;
        }
        for ev in self.norm.push(line) {
            match ev.data {
                Data::Exit(x) => out.push(Seen::Detail(x.detail)),
                Data::InputRequest(r) => out.push(Seen::Request(r)),
                Data::InputAnswer(a) => out.push(Seen::Answer(a)),
                _ => {}
            }
        }
        if let Some(s) = self.norm.resume_session().filter(|s| self.session.as_deref() != Some(*s)) {
            self.session = Some(s.to_string());
            out.push(Seen::Session(s.to_string()));
        }
    }
}

/// A step to start.
pub(super) struct Launch {
    pub task: String,
    /// The supervisor's number for it: reports of an older step are ignored.
    pub step: u64,
    pub spec: Spec,
    /// Where its output goes (appended), opened.
    pub out: std::fs::File,
    pub log: PathBuf,
    /// Each line's arrival time into the log's sidecar.
    pub times: bool,
    /// A turn's output is read for the session's word (its normalizer).
    pub reader: Option<Adapter>,
}

/// A started step's handles.
pub(super) struct Started {
    pub(super) signaller: Signaller,
    pub(super) pid: i32,
    pub(super) pgid: i32,
    /// An interactive turn's session input (the wrapper's stdin).
    pub(super) input: Option<std::process::ChildStdin>,
}

/// Starts `l`: its process (with a reaper between us and it, which stops
/// its whole tree when it is killed, when it exits, and when we die, even
/// by SIGKILL), the thread copying and reading its output, and the one
/// waiting for its end.
pub(super) fn launch_step(l: Launch, events: &mpsc::Sender<Ev>) -> Result<Started, String> {
    let out = l.out;
    let mut child = Proc::spawn(&l.spec).map_err(|e| e.to_string())?;
    let Some(stdout) = child.stdout.take() else {
        child.stop();
        return Err("the wrapper's stdout could not be captured".into());
    };
    let started =
        Started { signaller: child.signaller(), pid: child.pid(), pgid: child.pgid(), input: child.stdin.take() };
    let (task, step) = (l.task.clone(), l.step);
    let tx = events.clone();
    let send = move |report: Report| {
        let _ = tx.send(Ev::Task(Event { task: task.clone(), step, report }));
    };
    let abandon = Arc::new(AtomicBool::new(false));
    let copier = {
        let (send, abandon, log) = (send.clone(), abandon.clone(), l.log.clone());
        let reader = l.reader.map(Reader::new);
        std::thread::Builder::new()
            .name("task output".into())
            .spawn(move || copy(stdout, out, &log, l.times, reader, &abandon, &send))
            .map_err(|e| format!("cannot start the output thread: {e}"))?
    };
    std::thread::Builder::new()
        .name("task wait".into())
        .spawn(move || {
            // Blocking: the loop signals it through its Signaller meanwhile.
            let rc = child.wait();
            // The reaper has stopped what the wrapper left; what it wrote
            // gets the drain grace to reach the log, then is let go (a
            // straggler holding the pipe).
            let until = Instant::now() + proc::DRAIN_GRACE;
            while !copier.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if copier.is_finished() {
                let _ = copier.join();
            } else {
                abandon.store(true, Ordering::Relaxed);
            }
            send(Report::Exited(rc));
        })
        .map_err(|e| format!("cannot start the wait thread: {e}"))?;
    Ok(started)
}

/// Copies the output into the log, reading a turn's lines on the way: each
/// complete line's [`Seen`]s are sent before its bytes reach the log, so a
/// client that read a request in the log and answers it is never ahead of
/// the loop's knowledge of it.
fn copy(
    src: impl std::io::Read,
    out: std::fs::File,
    path: &Path,
    times: bool,
    mut reader: Option<Reader>,
    abandon: &AtomicBool,
    send: &impl Fn(Report),
) {
    let mut out = Some(out);
    let mut at = match times.then(|| crate::util::arrival::Writer::append(path)) {
        Some(Ok(w)) => Some(w),
        Some(Err(e)) => {
            crate::util::cli::report(super::waves::ACTOR, format!("arrival times: {e}; this turn's lines have none"));
            None
        }
        None => None,
    };
    let mut lines = Lines::new(crate::util::lines::MAX_LINE);
    let mut seen = Vec::new();
    let mut read = |lines: &mut Lines, piece: &[u8], last: bool| {
        let Some(r) = reader.as_mut() else { return };
        let mut each = |l: crate::util::lines::Line<'_>| {
            r.line(l.kept(), &mut seen);
            Flow::Continue
        };
        if last {
            lines.finish(&mut each);
        } else {
            lines.push(piece, &mut each);
        }
        for s in seen.drain(..) {
            send(Report::Seen(Box::new(s)));
        }
    };
    proc::read_pieces(src, crate::util::time::Clock::from_env(), |piece, end| {
        if abandon.load(Ordering::Relaxed) {
            return false;
        }
        read(&mut lines, piece, false);
        // Keep draining after a failure, so the wrapper never blocks on a
        // full pipe; what it writes is lost and said so.
        let Some(f) = out.as_mut() else { return true };
        if let (Some(ms), Some(w)) = (end, at.as_mut()) {
            if let Err(e) = w.line(ms) {
                crate::util::cli::report(
                    super::waves::ACTOR,
                    format!("arrival times: {e}; the rest of this turn has none"),
                );
                at = None;
            }
        }
        if let Err(e) = f.write_all(piece) {
            send(Report::Lost(format!("{}: {e}", path.display())));
            out = None;
        }
        true
    });
    // A last line without its newline is read too: nothing will finish it now.
    if !abandon.load(Ordering::Relaxed) {
        read(&mut lines, b"", true);
    }
}

/// A step running, as the loop holds it.
pub struct Running {
    /// Its number (`Launch::step`).
    pub step: u64,
    pub phase: Phase,
    pub(super) signaller: Signaller,
    /// Since when it is being stopped (SIGTERM sent): SIGKILL after the grace.
    pub(super) stopping: Option<Instant>,
    pub(super) killed: bool,
    /// An interactive turn's session input, while open.
    pub input: Option<std::process::ChildStdin>,
    /// Session input lines written so far. Once the session says it is idle
    /// with as many applied, nothing more will happen in it: the input is
    /// closed (the session ends).
    pub written: u64,
    /// The session's last word: idle with this many input lines applied
    /// (`None` while it says it is busy, or before it said anything).
    pub(super) idle: Option<u64>,
    /// Its requests still open, by the agent's id (its input is not closed
    /// while one waits).
    pub(super) pending: BTreeSet<String>,
    /// The detail of the turn's status line.
    pub(super) detail: Option<String>,
    /// Stopped with `stop`: the session stays open, idle, for a steer.
    pub hold: bool,
    /// The turn is being stopped to apply an interrupting steer.
    pub for_steer: bool,
    pub kill: Option<Kill>,
    /// Control requests whose line was written to the session and whose
    /// reply is the session's acknowledgement of it (its `runwire.ack`).
    pub awaiting: Vec<Awaiting>,
    /// The first error writing its log.
    pub(super) lost: Option<String>,
}

/// A kill under way.
pub struct Kill {
    pub actor: String,
    /// Why, when it was not a person's request (the task log cannot be written).
    pub detail: Option<String>,
    pub replies: Vec<mpsc::Sender<Reply>>,
}

impl Running {
    /// SIGTERM to its process group (once); SIGKILL follows after the grace.
    pub fn terminate(&mut self) {
        if self.stopping.is_none() {
            self.stopping = Some(Instant::now());
            self.signaller.terminate();
        }
    }

    /// SIGKILL once the grace since [`Running::terminate`] is over.
    pub fn escalate(&mut self, grace: Duration) {
        if !self.killed && self.stopping.is_some_and(|t| t.elapsed() >= grace) {
            self.killed = true;
            self.signaller.kill();
        }
    }

    /// When its timers are due: the kill's escalation, acknowledgement waits.
    pub fn timers(&self, grace: Duration) -> impl Iterator<Item = Instant> + '_ {
        let kill = self.stopping.filter(|_| !self.killed).map(|t| t + grace);
        let acks = self.awaiting.iter().filter(|w| w.reply.is_some()).map(|w| w.since + ACK_WAIT);
        kill.into_iter().chain(acks)
    }

    /// An interactive turn whose session is open and not going away.
    pub fn live(&self) -> bool {
        self.input.is_some() && self.kill.is_none() && !self.for_steer
    }
}

/// How a task's log is normalized: its adapter's, the ACP normalizer
/// (cursor's) for `acp`.
pub(super) fn turn_adapter(name: &str) -> Option<Adapter> {
    if name == "acp" {
        Some(Adapter::Cursor)
    } else {
        crate::runs::view::adapter(name)
    }
}

/// `runwire-session` for `acp` tasks, as the wrappers find it:
/// `$RUNWIRE_SESSION_BIN`, else the one beside this program, else `PATH`.
pub fn find_session() -> Result<PathBuf, String> {
    let name = std::ffi::OsString::from("runwire-session");
    let given = std::env::var_os("RUNWIRE_SESSION_BIN").filter(|v| !v.is_empty());
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join(&name))).filter(|p| p.is_file());
    let p = match (given, beside) {
        (Some(g), _) => crate::session::launch::on_path(&g),
        (None, Some(b)) => b,
        (None, None) => crate::session::launch::on_path(&name),
    };
    match std::fs::metadata(&p) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(p),
        _ => Err(format!(
            "{}: runwire-session not found (adapter acp runs under it): set RUNWIRE_SESSION_BIN or put it on PATH",
            p.display()
        )),
    }
}

/// The default wrapper search ([`crate::session::wrappers::find`]), or `dir`.
pub fn find_wrapper(dir: Option<&Path>, ad: Adapter) -> Result<PathBuf, String> {
    match dir {
        Some(d) => {
            let p = d.join(format!("{}.sh", ad.name()));
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{}: no such wrapper", p.display()))
            }
        }
        None => crate::session::wrappers::find(ad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(adapter: Adapter, lines: &[&str]) -> Vec<Seen> {
        let mut r = Reader::new(adapter);
        let mut out = Vec::new();
        for l in lines {
            r.line(l.as_bytes(), &mut out);
        }
        out
    }

    #[test]
    fn the_sessions_typed_lines_are_read_and_the_wrappers_status_is_the_normalizers() {
        let out = seen(
            Adapter::Codex,
            &[
                r#"{"type":"runwire.session_status","seq":3,"phase":"turn","turn":1,"turns_ended":0,"open":[],"session_id":null,"applied":1,"exit":null}"#,
                r#"{"type":"runwire.session_status","seq":4,"phase":"idle","turn":1,"turns_ended":1,"open":[{"interrupt_id":"rw-1","id":"0","generation":1}],"session_id":"t","applied":2,"exit":null}"#,
                r#"{"type":"runwire.session_status","seq":5,"phase":"idle","turn":1,"turns_ended":1,"open":[],"session_id":"t","applied":2,"exit":null}"#,
                r#"{"type":"runwire.idle","inputs":3}"#,
                r#"{"type":"runwire.ack","line":3,"ack":"stopped","detail":"d"}"#,
                r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":null,"detail":"engine exited 1"}"#,
            ],
        );
        assert_eq!(out[..4], [Seen::Busy, Seen::Busy, Seen::Idle(2), Seen::Idle(3)]);
        assert!(matches!(&out[4], Seen::Ack(a) if a.line == 3 && a.ack.as_deref() == Some("stopped")), "{out:?}");
        assert_eq!(out[5..], [Seen::Detail(Some("engine exited 1".into()))]);
    }

    #[test]
    fn requests_answers_and_the_session_come_through_the_normalizer() {
        let req: InputRequest = serde_json::from_value(serde_json::json!({
            "interrupt_id": "rw-9", "id": "0", "kind": "tool_approval", "tool": "Bash"
        }))
        .unwrap();
        let req = crate::session::record::request_line(&req);
        let out = seen(
            Adapter::Codex,
            &[r#"{"type":"thread.started","thread_id":"th-1"}"#, std::str::from_utf8(&req).unwrap()],
        );
        assert_eq!(out[0], Seen::Session("th-1".into()), "{out:?}");
        assert!(matches!(&out[1], Seen::Request(r) if r.interrupt_id.as_deref() == Some("rw-9")), "{out:?}");
    }

    /// The copier writes the bytes as they came (a last line without its
    /// newline included) and reads the session's lines on the way, the cut
    /// last one too.
    #[test]
    fn the_copier_keeps_the_bytes_and_reads_every_line() {
        let dir = std::env::temp_dir().join(format!("rw-sup-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("p.a.log");
        std::fs::write(&log, "earlier turn\n").unwrap();
        let out = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let input = concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"th-2\"}\r\n",
            "not json\n",
            r#"{"type":"runwire.session_status","seq":3,"phase":"idle","turn":1,"turns_ended":1,"open":[],"session_id":"th-2","applied":0,"exit":null}"#,
        );
        let got = std::sync::Mutex::new(Vec::new());
        let send = |r: Report| got.lock().unwrap().push(r);
        copy(input.as_bytes(), out, &log, false, Some(Reader::new(Adapter::Codex)), &AtomicBool::new(false), &send);
        assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("earlier turn\n{input}"));
        let seen: Vec<Seen> = got
            .into_inner()
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                Report::Seen(s) => Some(*s),
                _ => None,
            })
            .collect();
        assert_eq!(seen, [Seen::Session("th-2".into()), Seen::Idle(0)]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
