//! The run layer: where a run's lines come from, and how they are stopped.
//!
//! A run's source is either an agent wrapper (the contract in the
//! `runwire.status` docs: `--prompt`, `--resume`, raw JSON lines, one final
//! status line) started in its own process group with stdin closed, or a
//! recorded log replayed at a steady pace. Either way the lines arrive on a
//! channel, so the stream thread can wait for a line, a keep-alive tick or a
//! shutdown with one `recv_timeout`.
//!
//! Stopping an agent signals its whole process group: SIGTERM, then SIGKILL
//! after [`KILL_GRACE`], and everything is reaped. The server is a child
//! subreaper (Linux), so the grandchildren a killed wrapper leaves behind are
//! reparented to it and reaped here too, instead of lingering as zombies
//! under an init that may not reap.

use super::Source;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// Longest line taken from an agent; the rest of a longer line is dropped
/// (the truncated line then fails to parse and becomes an `error` event).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Lines buffered between the reader and the stream.
const CHANNEL: usize = 256;

/// Process groups of agents started and not yet stopped and reaped.
static LIVE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<i32>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Last resort at exit: SIGKILL every agent group whose stream did not stop
/// it in time (e.g. a stream stuck writing to a client that reads nothing).
pub fn kill_remaining() {
    for pgid in live().drain(..) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux only;
/// elsewhere a no-op).
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// A started run: its lines, and the means to stop it.
pub struct Lines {
    pub rx: Receiver<Vec<u8>>,
    child: Option<Child>,
    stop: Arc<AtomicBool>,
    rc: Option<i64>,
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
            Ok(Lines { rx, child: None, stop, rc: None })
        }
        Source::Agent { cmd: Err(why) } => Err(why.clone()),
        Source::Agent { cmd: Ok(path) } => {
            let mut child = spawn(path, prompt, resume)?;
            let Some(stdout) = child.stdout.take() else {
                let mut l = Lines { rx, child: Some(child), stop, rc: None };
                l.stop();
                return Err("the agent's stdout could not be captured".into());
            };
            let spawned =
                std::thread::Builder::new().name("agent stdout".into()).spawn(move || read_lines(stdout, &tx));
            let mut lines = Lines { rx, child: Some(child), stop, rc: None };
            if let Err(e) = spawned {
                lines.stop();
                return Err(format!("cannot read the agent's output: {e}"));
            }
            Ok(lines)
        }
    }
}

fn spawn(path: &Path, prompt: &str, resume: Option<&str>) -> Result<Child, String> {
    let mut cmd = Command::new(path);
    cmd.arg("--prompt").arg(prompt);
    if let Some(s) = resume {
        cmd.arg("--resume").arg(s);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).process_group(0);
    let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", path.display()))?;
    live().push(child.id() as i32);
    Ok(child)
}

fn replay(log: &[u8], delay: Duration, tx: &SyncSender<Vec<u8>>, stop: &AtomicBool) {
    let mut lines = log.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() && line.is_empty() {
            break;
        }
        if stop.load(Ordering::Relaxed) || tx.send(line.to_vec()).is_err() {
            return;
        }
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }
}

fn read_lines(r: impl Read, tx: &SyncSender<Vec<u8>>) {
    let mut r = BufReader::with_capacity(64 * 1024, r);
    let mut line = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if buf.is_empty() {
            if !line.is_empty() {
                let _ = tx.send(line);
            }
            return;
        }
        let (chunk, used, end) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        r.consume(used);
        if end && tx.send(std::mem::take(&mut line)).is_err() {
            return;
        }
    }
}

impl Lines {
    /// True when the lines come from an agent process.
    pub fn is_agent(&self) -> bool {
        self.child.is_some() || self.rc.is_some()
    }

    /// Stops the run now: the replay, or the agent's process group (SIGTERM,
    /// [`KILL_GRACE`], SIGKILL, reaped). Returns the agent's exit code.
    pub fn stop(&mut self) -> Option<i64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(mut child) = self.child.take() {
            self.rc = Some(stop_group(&mut child));
        }
        self.rc
    }

    /// After the agent's output ended: waits for it to exit (stopping it if
    /// it lingers past the grace) and cleans up what it left in its group.
    pub fn wait(&mut self) -> Option<i64> {
        if let Some(child) = self.child.as_mut() {
            let deadline = Instant::now() + KILL_GRACE;
            while Instant::now() < deadline {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
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

/// `128 + signal` for a killed process, as shells report it.
pub fn exit_code(s: ExitStatus) -> i64 {
    match s.code() {
        Some(c) => i64::from(c),
        None => 128 + i64::from(s.signal().unwrap_or(0)),
    }
}

fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Reaps the group's members that are our children (orphans we adopted as
/// subreaper). Only called once the leader itself is reaped.
fn reap_group(pgid: i32) {
    while let Ok(st) = waitpid(Pid::from_raw(-pgid), Some(WaitPidFlag::WNOHANG)) {
        if st == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Stops a child started in its own process group the way a run's agent is
/// stopped (TERM, [`KILL_GRACE`], KILL, reaped); its exit code.
pub fn stop_child(child: &mut Child) -> i64 {
    stop_group(child)
}

fn stop_group(child: &mut Child) -> i64 {
    let pgid = child.id() as i32;
    let mut status = child.try_wait().ok().flatten();
    if status.is_some() {
        reap_group(pgid);
    }
    if status.is_none() || group_alive(pgid) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
        let deadline = Instant::now() + KILL_GRACE;
        while Instant::now() < deadline {
            if status.is_none() {
                status = child.try_wait().ok().flatten();
            }
            if status.is_some() {
                reap_group(pgid);
                if !group_alive(pgid) {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if status.is_none() || group_alive(pgid) {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
    let status = match status {
        Some(s) => Some(s),
        None => child.wait().ok(),
    };
    let end = Instant::now() + Duration::from_secs(1);
    while group_alive(pgid) && Instant::now() < end {
        reap_group(pgid);
        std::thread::sleep(Duration::from_millis(5));
    }
    live().retain(|&p| p != pgid);
    status.map(exit_code).unwrap_or(-1)
}
