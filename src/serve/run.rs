//! The run layer: where a run's lines come from, and how they are stopped.
//!
//! A run's source is either an agent wrapper (the contract in the
//! `runwire.status` docs: `--prompt`, `--resume`, raw JSON lines, one final
//! status line) started through [`crate::session::proc`] (its own process
//! group, stdin closed, a per-run reaper that leaves no descendant behind),
//! or a recorded log replayed at a steady pace. Either way the lines arrive
//! on a channel, each with its arrival time, so the stream thread can wait
//! for a line, a keep-alive tick or a shutdown with one `recv_timeout`.
//!
//! The run ends when the wrapper's output ends, or once the wrapper is
//! reaped and its output drained for [`DRAIN_GRACE`] (a grandchild holding
//! the pipe does not hold the run).

use crate::session::proc::{self, Proc, Spec};
use crate::util::lines::Flow;
use crate::util::time::Clock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use proc::{kill_remaining, DRAIN_GRACE, KILL_GRACE};

/// Longest line taken whole from an agent (and recorded so). A longer line
/// is skimmed as it streams past, as everywhere in the crate
/// ([`crate::util::lines`]): a JSON object keeps its structure and short
/// fields (long strings cut, so a big tool result still closes its call);
/// anything else is cut to its head, which then fails to parse and becomes
/// an `error` event. A line taken whole is normalized through the
/// pipeline's line cap ([`crate::util::lines::MAX_LINE`], 4 MiB), as its
/// record is read back: the same events live and replayed.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Lines buffered between the reader and the stream.
const CHANNEL: usize = 256;

/// One line of the run's source and the time it arrived (epoch ms, for the
/// `ts` rule and the recorder's arrival-time sidecar; `None` when
/// `SOURCE_DATE_EPOCH` pins time, see `crate::util::arrival::clock`).
pub struct Line {
    pub bytes: Vec<u8>,
    pub at_ms: Option<i64>,
}

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    proc::become_subreaper();
}

/// A started run: its lines, and the means to stop it.
pub struct Lines {
    pub rx: Receiver<Line>,
    child: Option<Proc>,
    stop: Arc<AtomicBool>,
    rc: Option<i64>,
    /// When the agent was seen reaped while its output was still open.
    exited_at: Option<Instant>,
}

/// Where each run's lines come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A recorded log, replayed line by line.
    Replay { log: Arc<[u8]> },
    /// The agent's wrapper, or why none could be found (every run then fails
    /// with a `RUN_ERROR`, as a missing engine would).
    Agent { cmd: Result<PathBuf, String> },
}

/// Starts a run: replays the log, or starts the wrapper with
/// `--prompt PROMPT [--resume SESSION]`. `Err` says why nothing started.
pub fn start(source: &Source, delay: Duration, prompt: &str, resume: Option<&str>) -> Result<Lines, String> {
    let (tx, rx) = sync_channel(CHANNEL);
    let stop = Arc::new(AtomicBool::new(false));
    match source {
        Source::Replay { log } => {
            let log = log.clone();
            let stop2 = stop.clone();
            std::thread::Builder::new()
                .name("replay".into())
                .spawn(move || replay(&log, delay, &tx, &stop2))
                .map_err(|e| format!("cannot start the replay: {e}"))?;
            Ok(Lines { rx, child: None, stop, rc: None, exited_at: None })
        }
        Source::Agent { cmd: Err(why) } => Err(why.clone()),
        Source::Agent { cmd: Ok(path) } => {
            let mut child = spawn(path, prompt, resume)?;
            let Some(stdout) = child.stdout.take() else {
                child.stop();
                return Err("the agent's stdout could not be captured".into());
            };
            let spawned =
                std::thread::Builder::new().name("agent stdout".into()).spawn(move || read_lines(stdout, &tx));
            let mut lines = Lines { rx, child: Some(child), stop, rc: None, exited_at: None };
            if let Err(e) = spawned {
                lines.stop();
                return Err(format!("cannot read the agent's output: {e}"));
            }
            Ok(lines)
        }
    }
}

fn spawn(path: &Path, prompt: &str, resume: Option<&str>) -> Result<Proc, String> {
    // The wrapper's place is checked again right before each run.
    crate::session::wrappers::recheck(path)?;
    let mut spec = Spec::new(path);
    // A server started inside a supervised step is not supervised: its
    // agents (and any session they start) are an operator's, as the
    // interactive engine's are (spec/SUPERVISOR.md).
    spec.env_remove(crate::session::io::proc::SUPERVISED_ENV);
    spec.arg("--prompt").arg(prompt);
    if let Some(s) = resume {
        spec.arg("--resume").arg(s);
    }
    Proc::spawn(&spec).map_err(|e| e.to_string())
}

fn replay(log: &[u8], delay: Duration, tx: &SyncSender<Line>, stop: &AtomicBool) {
    let mut lines = log.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() && line.is_empty() {
            break;
        }
        // A replayed line arrives when the replay hands it over.
        let at_ms = crate::util::arrival::clock().map(|c| c.now_ms());
        if stop.load(Ordering::Relaxed) || tx.send(Line { bytes: line.to_vec(), at_ms }).is_err() {
            return;
        }
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }
}

/// The agent's output as lines ([`crate::util::lines`], capped at [`MAX_LINE`]),
/// each stamped with the time the read that ended it returned.
fn read_lines(r: impl std::io::Read, tx: &SyncSender<Line>) {
    let times = crate::util::arrival::clock();
    let clock = times.unwrap_or(Clock::Wall);
    let mut lines = crate::util::lines::Lines::new(MAX_LINE);
    let send = |l: crate::util::lines::Line<'_>, at: i64| match tx
        .send(Line { bytes: l.kept().to_vec(), at_ms: times.map(|_| at) })
    {
        Ok(()) => Flow::Continue,
        Err(_) => Flow::Stop,
    };
    // A piece holds at most one LF, at its end, and `end` is when it was read.
    proc::read_pieces(r, clock, |piece, end| {
        lines.push(piece, |l| send(l, end.unwrap_or_default())).1 == Flow::Continue
    });
    lines.finish(|l| send(l, clock.now_ms()));
}

impl Lines {
    /// True when the lines come from an agent process.
    pub fn is_agent(&self) -> bool {
        self.child.is_some() || self.rc.is_some()
    }

    /// Stops the run now: the replay, or the agent's whole process tree
    /// (SIGTERM, [`KILL_GRACE`], SIGKILL, reaped). Returns the agent's exit code.
    pub fn stop(&mut self) -> Option<i64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(mut child) = self.child.take() {
            self.rc = Some(child.stop());
        }
        self.rc
    }

    /// For a stream waiting on its lines: true once the agent is reaped and
    /// its output has been drained for [`DRAIN_GRACE`], so the run is over
    /// even though something still holds the pipe open.
    pub fn drained(&mut self) -> bool {
        if self.exited_at.is_none() {
            if let Some(rc) = self.child.as_mut().and_then(Proc::try_wait) {
                self.rc = Some(rc);
                self.exited_at = Some(Instant::now());
            }
        }
        self.exited_at.is_some_and(|t| t.elapsed() >= DRAIN_GRACE)
    }

    /// After the agent's output ended: waits for it to exit (stopping it if
    /// it lingers past the grace) and cleans up what it left behind.
    pub fn wait(&mut self) -> Option<i64> {
        if let Some(child) = self.child.as_mut() {
            if let Some(rc) = child.wait_timeout(KILL_GRACE) {
                self.rc = Some(rc);
            }
        }
        self.stop()
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent's lines as the stream gets them: whole (a CR LF ending
    /// stripped), the last one without its LF, and one over [`MAX_LINE`]
    /// skimmed: its call's id kept, its long string cut.
    #[test]
    fn agent_lines_are_read_whole_or_skimmed_past_the_cap() {
        let big = format!(r#"{{"type":"user","id":"toolu_big","text":"{}"}}"#, "w".repeat(MAX_LINE + 10));
        let input = format!("a\r\n{big}\n\nlast");
        let (tx, rx) = sync_channel(CHANNEL);
        let reader = std::thread::spawn(move || read_lines(std::io::Cursor::new(input.into_bytes()), &tx));
        let got: Vec<Vec<u8>> = rx.iter().map(|l| l.bytes).collect();
        reader.join().unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!((&got[0][..], &got[2][..], &got[3][..]), (&b"a"[..], &b""[..], &b"last"[..]));
        let v: serde_json::Value = serde_json::from_slice(&got[1]).unwrap();
        assert_eq!(v["id"], "toolu_big");
        assert!(v[crate::util::lines::CUT_KEY].is_array(), "skimmed: {}", &v.to_string()[..200]);
        assert!(got[1].len() < 1 << 20);
    }
}
