//! The one writer of an agent's input: a thread per session that owns the
//! agent's stdin and writes what the session queues, so no caller ever
//! blocks in `write()` to an agent that stopped reading (a deaf agent, or
//! one stopped with SIGSTOP mid-turn), and no lock is held across that IO.
//!
//! The queue is bounded: a command from a person (a message, a steer, an
//! answer, a stop) is refused at once when what it adds would overflow the
//! bytes still waiting for the agent to read them ([`WRITE_QUEUE`]); the
//! session's own writes (automatic replies, expiries) are taken up to a
//! hard bound ([`HARD_QUEUE`]), past which the agent is taken as not
//! reading at all and nothing more is queued for it (it is killed or
//! exits; nothing waits on it).

use std::collections::VecDeque;
use std::io::Write;
use std::process::ChildStdin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Bytes a command may find waiting unread (queued, or in a `write()` the
/// agent does not take) and still be queued behind them: past this the
/// agent is not reading its input and the command is refused. The pipe's
/// own buffer (64 KiB on Linux) comes before it.
pub const WRITE_QUEUE: usize = 64 * 1024;

/// Bytes the session's own writes may bring the queue to; past this the
/// agent's input is abandoned (nothing more is queued).
pub const HARD_QUEUE: usize = 4 * 1024 * 1024;

/// Written to the pipe at once at most, so the count of unwritten bytes moves
/// while a slow agent reads.
const CHUNK: usize = 16 * 1024;

#[derive(Default)]
struct State {
    queue: VecDeque<Vec<u8>>,
    /// Bytes queued or in the `write()` under way, not yet taken by the pipe.
    unwritten: usize,
    /// Close the agent's input once the queue is written.
    close: bool,
    /// Nothing more is written: the input is closed, broke, or was abandoned.
    gone: bool,
    /// The thread has dropped the agent's stdin.
    closed: bool,
}

/// The agent's input, written by a thread of its own (which holds a handle
/// while it runs: close it with [`Writer::close_after_queue`] or
/// [`Writer::close_now`]).
pub struct Writer {
    st: Mutex<State>,
    cv: Condvar,
}

/// Why bytes were not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The agent has not read what it was sent: `waiting` bytes wait.
    NotReading { waiting: usize },
    /// The agent's input is closed (it exited, or the session ended).
    Closed,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Writer {
    /// Starts the writing thread over `stdin`; `None` (no input, or the
    /// thread could not start) gives a writer that takes nothing.
    pub fn start(stdin: Option<ChildStdin>) -> Arc<Writer> {
        let w = Arc::new(Writer { st: Mutex::new(State::default()), cv: Condvar::new() });
        let Some(stdin) = stdin else {
            lock(&w.st).gone = true;
            lock(&w.st).closed = true;
            return w;
        };
        let w2 = w.clone();
        let started = std::thread::Builder::new().name("agent stdin".into()).spawn(move || w2.run(stdin));
        if started.is_err() {
            let mut st = lock(&w.st);
            st.gone = true;
            st.closed = true;
        }
        w
    }

    fn run(&self, mut stdin: ChildStdin) {
        loop {
            let piece = {
                let mut st = lock(&self.st);
                loop {
                    if st.gone {
                        st.queue.clear();
                        st.unwritten = 0;
                        break None;
                    }
                    if let Some(p) = st.queue.pop_front() {
                        break Some(p);
                    }
                    if st.close {
                        st.gone = true;
                        break None;
                    }
                    st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            let Some(piece) = piece else { break };
            // Written outside the lock: it may block as long as the agent does not read.
            for chunk in piece.chunks(CHUNK) {
                if let Err(_e) = stdin.write_all(chunk) {
                    // The agent stopped reading for good (it exited): its output says why.
                    let mut st = lock(&self.st);
                    st.gone = true;
                    st.queue.clear();
                    st.unwritten = 0;
                    break;
                }
                let mut st = lock(&self.st);
                st.unwritten = st.unwritten.saturating_sub(chunk.len());
            }
        }
        drop(stdin);
        lock(&self.st).closed = true;
        self.cv.notify_all();
    }

    /// Bytes waiting for the agent to read them.
    pub fn waiting(&self) -> usize {
        lock(&self.st).unwritten
    }

    /// Whether a command of about `bytes` would overflow the queue: the
    /// agent has not read what is waiting, and this would bring it past
    /// [`WRITE_QUEUE`]. (Nothing waiting: any one command is taken.)
    pub fn check(&self, bytes: usize) -> Result<(), Full> {
        let st = lock(&self.st);
        if st.gone || st.close {
            return Err(Full::Closed);
        }
        if st.unwritten > 0 && st.unwritten + bytes > WRITE_QUEUE {
            return Err(Full::NotReading { waiting: st.unwritten });
        }
        Ok(())
    }

    /// Queues lines (each gets its newline) as one piece. The session's own
    /// writes: taken up to [`HARD_QUEUE`]; past it the input is abandoned.
    pub fn push(&self, lines: &[Vec<u8>]) -> Result<(), Full> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            buf.extend_from_slice(l);
            buf.push(b'\n');
        }
        let mut st = lock(&self.st);
        if st.gone || st.close {
            return Err(Full::Closed);
        }
        if st.unwritten + buf.len() > HARD_QUEUE && st.unwritten > 0 {
            // The agent has not read megabytes: it never will. Nothing more is
            // kept for it; its process is stopped by whoever ends it.
            let waiting = st.unwritten;
            st.gone = true;
            st.queue.clear();
            drop(st);
            self.cv.notify_all();
            return Err(Full::NotReading { waiting });
        }
        st.unwritten += buf.len();
        st.queue.push_back(buf);
        drop(st);
        self.cv.notify_all();
        Ok(())
    }

    /// Closes the agent's input once what is queued is written.
    pub fn close_after_queue(&self) {
        lock(&self.st).close = true;
        self.cv.notify_all();
    }

    /// Closes the agent's input now: what is queued is dropped. (A
    /// `write()` the agent blocks ends when its process does.)
    pub fn close_now(&self) {
        let mut st = lock(&self.st);
        st.gone = true;
        st.queue.clear();
        st.unwritten = 0;
        drop(st);
        self.cv.notify_all();
    }

    /// Waits up to `d` for the input to be closed (the queue written first).
    pub fn wait_closed(&self, d: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + d;
        let mut st = lock(&self.st);
        while !st.closed {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.cv.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// A process that never reads its input: the writer takes a command,
    /// then refuses the next at once instead of blocking, and closing it
    /// never waits for the agent.
    #[test]
    fn a_deaf_agent_never_blocks_the_caller() {
        let mut child = Command::new("sleep").arg("30").stdin(Stdio::piped()).spawn().unwrap();
        let w = Writer::start(child.stdin.take());
        let big = vec![b'x'; 60 * 1024];
        let t = Instant::now();
        // The pipe takes the first; the second waits in the writer.
        assert_eq!(w.check(big.len()), Ok(()));
        w.push(std::slice::from_ref(&big)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(w.check(big.len()), Ok(()));
        w.push(std::slice::from_ref(&big)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(matches!(w.check(big.len()), Err(Full::NotReading { waiting }) if waiting > 0), "{:?}", w.check(1));
        assert!(t.elapsed() < Duration::from_secs(1));
        w.close_now();
        assert_eq!(w.check(1), Err(Full::Closed));
        let _ = child.kill();
        let _ = child.wait();
        // The blocked write ends with the process: the input is closed.
        assert!(w.wait_closed(Duration::from_secs(5)));
    }

    /// A reading agent gets every line, in order, and the input is closed
    /// after the queue.
    #[test]
    fn lines_are_written_in_order_then_closed() {
        let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let w = Writer::start(child.stdin.take());
        for i in 0..100 {
            w.push(&[format!("l{i}").into_bytes()]).unwrap();
        }
        w.close_after_queue();
        let out = child.wait_with_output().unwrap();
        let want: String = (0..100).map(|i| format!("l{i}\n")).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
        assert!(w.wait_closed(Duration::from_secs(5)));
    }
}
