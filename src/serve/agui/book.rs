//! The book of AG-UI threads and runs (what makes a request the same run,
//! its replay, the bounds) and what a run request asks for ([`RunInput`]).
//! A leaf of `agui/`: the server's state holds the book, the handlers use it.

use crate::serve::interrupts::ResumeEntry;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Threads remembered at once (idle ones forgotten oldest first), in the
/// book of runs and by the interactive sessions.
pub const MAX_THREADS: usize = 1024;
/// What a request asks for, once validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInput {
    pub thread_id: String,
    pub run_id: String,
    /// Empty only when `resume` is not (a run that answers interrupts).
    pub prompt: String,
    /// `RunAgentInput.resume`: answers to the interrupts of the thread.
    pub resume: Vec<ResumeEntry>,
    /// `RunAgentInput.messages`, as sent (what the client holds of the
    /// thread: recorded, and compared with the thread for its snapshot).
    pub messages: Vec<Value>,
}

/// Finished runs kept for idempotent replay.
pub const MAX_RUNS: usize = 64;
/// SSE bytes kept per run; a longer run cannot be replayed (409).
pub const MAX_RUN_BYTES: usize = 4 * 1024 * 1024;
/// SSE and request bytes kept across all finished runs.
pub const MAX_RETAINED: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
struct ThreadEntry {
    session: Option<String>,
    busy: bool,
}

#[derive(Debug)]
pub(super) enum Outcome {
    Running,
    Done(Arc<Vec<u8>>),
    /// Finished, but its stream was longer than [`MAX_RUN_BYTES`].
    NotRetained,
    /// Its client left and the agent was stopped.
    Cancelled,
}

#[derive(Debug)]
struct RunEntry {
    body: Vec<u8>,
    /// What makes a request the same run ([`digest`]).
    digest: String,
    outcome: Outcome,
}

impl RunEntry {
    fn size(&self) -> usize {
        self.body.len() + if let Outcome::Done(b) = &self.outcome { b.len() } else { 0 }
    }
}

/// Threads and runs; see the module doc.
#[derive(Debug, Default)]
pub struct Book {
    threads: HashMap<String, ThreadEntry>,
    thread_order: VecDeque<String>,
    runs: HashMap<String, RunEntry>,
    /// Finished runs, oldest first.
    finished: VecDeque<String>,
    retained: usize,
}

/// What to do with a request.
#[derive(Debug)]
pub enum Admit {
    Start {
        resume: Option<String>,
    },
    Replay(Arc<Vec<u8>>),
    /// The same request as a run this server knows that is still live,
    /// or whose stream it did not keep: streamed from its record when
    /// there is one, else refused (409) with this reason. `live`: the run
    /// is still streaming here, so its record is followed to its end; a
    /// finished one is streamed as far as its record goes (an interactive
    /// run's record is its thread's session, which goes on after the run).
    Recorded(String, bool),
    Reject(u16, String),
}

impl Book {
    /// Decides on a request and, when it starts a run, marks its thread busy.
    pub fn admit(&mut self, input: &RunInput, body: &[u8]) -> Admit {
        if let Some(r) = self.runs.get(&input.run_id) {
            if r.body != body && r.digest == digest(input) {
                // The same run asked by a client that holds more of it (a
                // reconnect: the messages it was streamed so far): its
                // record answers, with the snapshot of what it lacks.
                let live = matches!(r.outcome, Outcome::Running);
                return Admit::Recorded(format!("run {:?} was asked again with other messages", input.run_id), live);
            }
            if r.body != body {
                return Admit::Reject(
                    409,
                    format!("runId {:?} was already used with a different request; use a new runId", input.run_id),
                );
            }
            return match &r.outcome {
                Outcome::Done(bytes) => Admit::Replay(bytes.clone()),
                Outcome::Running => Admit::Recorded(format!("run {:?} is still streaming", input.run_id), true),
                Outcome::NotRetained => Admit::Recorded(
                    format!("run {:?} finished but its stream was too long to keep for replay", input.run_id),
                    false,
                ),
                Outcome::Cancelled => Admit::Recorded(
                    format!("run {:?} was cancelled when its client disconnected; use a new runId", input.run_id),
                    false,
                ),
            };
        }
        if self.threads.get(&input.thread_id).is_some_and(|t| t.busy) {
            return Admit::Reject(409, format!("thread {:?} already has an active run", input.thread_id));
        }
        if !self.threads.contains_key(&input.thread_id) {
            if self.threads.len() >= MAX_THREADS {
                if let Some(i) = self.thread_order.iter().position(|t| self.threads.get(t).is_some_and(|e| !e.busy)) {
                    if let Some(old) = self.thread_order.remove(i) {
                        self.threads.remove(&old);
                    }
                }
            }
            self.thread_order.push_back(input.thread_id.clone());
        }
        let t = self.threads.entry(input.thread_id.clone()).or_default();
        t.busy = true;
        let resume = t.session.clone();
        self.runs.insert(
            input.run_id.clone(),
            RunEntry { body: body.to_vec(), digest: digest(input), outcome: Outcome::Running },
        );
        Admit::Start { resume }
    }

    /// Whether this server admitted a run with this runId (and still remembers it).
    pub fn knows(&self, run_id: &str) -> bool {
        self.runs.contains_key(run_id)
    }

    /// Frees a thread whose run has sent its terminal event (its last chunk
    /// is about to go out): a client that resumes at once is not refused as
    /// busy. [`Book::finish`] records the run's outcome after.
    pub(super) fn release(&mut self, thread_id: &str) {
        if let Some(t) = self.threads.get_mut(thread_id) {
            t.busy = false;
        }
    }

    /// Forgets a run admitted and not run here (another server records its
    /// runId), and frees its thread.
    pub(super) fn withdraw(&mut self, input: &RunInput) {
        if let Some(t) = self.threads.get_mut(&input.thread_id) {
            t.busy = false;
        }
        self.runs.remove(&input.run_id);
    }

    /// Records a run's end and frees its thread.
    pub(super) fn finish(&mut self, input: &RunInput, session: Option<String>, outcome: Outcome) {
        if let Some(t) = self.threads.get_mut(&input.thread_id) {
            t.busy = false;
            if session.is_some() {
                t.session = session;
            }
        }
        if let Some(r) = self.runs.get_mut(&input.run_id) {
            r.outcome = outcome;
            self.retained += r.size();
            self.finished.push_back(input.run_id.clone());
        }
        while self.finished.len() > MAX_RUNS || self.retained > MAX_RETAINED {
            let Some(old) = self.finished.pop_front() else { break };
            if let Some(r) = self.runs.remove(&old) {
                self.retained = self.retained.saturating_sub(r.size());
            }
        }
    }
}

/// What makes two requests the same run, durably (see
/// [`crate::runs::record::request_digest`]).
pub fn digest(input: &RunInput) -> String {
    let resume: Vec<serde_json::Value> =
        input.resume.iter().map(|e| serde_json::json!([e.interrupt_id, e.status, e.payload])).collect();
    crate::runs::record::request_digest(&input.thread_id, &input.run_id, &input.prompt, &resume.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn book_enforces_one_run_per_thread_and_idempotency() {
        let mut book = Book::default();
        let i = RunInput {
            thread_id: "t".into(),
            run_id: "r1".into(),
            prompt: "p".into(),
            resume: vec![],
            messages: vec![],
        };
        assert!(matches!(book.admit(&i, b"A"), Admit::Start { resume: None }));
        let i2 = RunInput { run_id: "r2".into(), ..i.clone() };
        assert!(matches!(book.admit(&i2, b"B"), Admit::Reject(409, _)));
        assert!(matches!(book.admit(&i, b"A"), Admit::Recorded(..)));
        book.finish(&i, Some("s1".into()), Outcome::Done(Arc::new(b"x".to_vec())));
        assert!(matches!(book.admit(&i, b"A"), Admit::Replay(b) if b.as_slice() == b"x"));
        // Other bytes of the same run (more messages): its record answers.
        assert!(matches!(book.admit(&i, b"A2"), Admit::Recorded(..)));
        let other = RunInput { prompt: "q".into(), ..i.clone() };
        assert!(matches!(book.admit(&other, b"A3"), Admit::Reject(409, _)));
        assert!(matches!(book.admit(&i2, b"B"), Admit::Start { resume: Some(s) } if s == "s1"));
    }

    #[test]
    fn retention_is_bounded() {
        let mut book = Book::default();
        for n in 0..MAX_RUNS + 10 {
            let i = RunInput {
                thread_id: "t".into(),
                run_id: format!("r{n}"),
                prompt: "p".into(),
                resume: vec![],
                messages: vec![],
            };
            assert!(matches!(book.admit(&i, b"A"), Admit::Start { .. }));
            book.finish(&i, None, Outcome::Done(Arc::new(vec![0; 10])));
        }
        assert_eq!(book.runs.len(), MAX_RUNS);
        assert!(!book.runs.contains_key("r0"));
    }
}
