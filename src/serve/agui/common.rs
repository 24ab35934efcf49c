//! What both modes of `POST /agui` share: the [`Book`](super::book::Book) of threads and
//! finished runs (admission, idempotent replay, bounded retention) and the
//! response `Body` a run streams into (each frame sent at once and kept
//! for replay).
//!
//! The [`Book`](super::book::Book) remembers, per `threadId`, the agent's last session (a later
//! batch run on the thread resumes it) and whether a run is active (one at a
//! time), and, per `runId`, the request body and the finished stream, so that
//! re-posting the same request replays the same bytes without running the
//! agent again (the same run asked with other bytes, a client reconnecting
//! with the messages it was streamed, is answered from its record). Retention is bounded: [`MAX_RUNS`](super::book::MAX_RUNS) finished runs,
//! [`MAX_RUN_BYTES`] of SSE per run, [`MAX_RETAINED`](super::book::MAX_RETAINED) in all, oldest evicted
//! first; [`MAX_THREADS`](super::book::MAX_THREADS) threads.

use super::book::{RunInput, MAX_RUN_BYTES};
// Kept at their old paths for the handlers (the book is their home).
pub use super::book::digest;
pub(super) use super::book::Outcome;
use crate::serve::http::Request;
use crate::serve::stream::Stream;
use std::io;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Starts the durable record of a run (`runs::record`) and records this
/// server as its owner (`$HARNESS_HOME/sock/<runId>.owner.json`, written
/// under the journal's claim before its first record, removed when its end
/// is journaled), so another server that finds the run recorded and not
/// ended knows it live, and a server that starts after a crash finds the
/// runs it left unfinished ([`crate::supervise::socket::recover`]).
/// [`crate::runs::record::is_taken`] when the runId is recorded, or being recorded, already.
pub fn start_record(
    shared: &crate::serve::state::Shared,
    agui_run_id: &str,
    prompt: &str,
    request: &str,
) -> io::Result<crate::runs::record::Recorder> {
    let home = &shared.cfg.harness_home;
    let adapter = shared.cfg.adapter.name();
    crate::runs::record::Recorder::start_owned(home, agui_run_id, adapter, prompt, request, |run_id| {
        match crate::supervise::socket::own(home, run_id) {
            Ok(p) => Some(p),
            Err(e) => {
                crate::util::cli::report(
                    crate::serve::options::BIN,
                    format!(
                        "record {run_id}: cannot record this server as its owner: {e} (a crash would leave its status)"
                    ),
                );
                None
            }
        }
    })
}

/// The durable record of a run, when the server records runs
/// ([`start_record`]): [`NotRecorded::Taken`] when another server records
/// its runId, [`NotRecorded::Failed`] when it cannot be recorded (a full
/// disk: said on stderr, `what` first). Either way the run is not run
/// here: a run this server runs is recorded, so a retried runId never runs
/// its agent twice.
pub fn record(
    shared: &crate::serve::state::Shared,
    agui_run_id: &str,
    prompt: &str,
    request: &str,
    what: impl FnOnce() -> String,
) -> Result<Option<crate::runs::record::Recorder>, NotRecorded> {
    if !shared.cfg.record {
        return Ok(None);
    }
    match start_record(shared, agui_run_id, prompt, request) {
        Ok(r) => Ok(Some(r)),
        Err(e) if crate::runs::record::is_taken(&e) => Err(NotRecorded::Taken(Taken(e.to_string()))),
        Err(e) => {
            let m = format!("{}: {e}", what());
            crate::util::cli::report(crate::serve::options::BIN, &m);
            Err(NotRecorded::Failed(m))
        }
    }
}

/// Why a run was not started here (nothing of it was run or recorded).
#[derive(Debug)]
pub enum NotRecorded {
    /// Another server records its runId.
    Taken(Taken),
    /// This server cannot record it (why). The route answers it with
    /// `RUN_ERROR` [`NOT_RECORDED`]; the runId stays free, so the same
    /// request runs once the server can write its record.
    Failed(String),
}

/// The `RUN_ERROR` code of a run this server could not record.
pub const NOT_RECORDED: &str = "not_recorded";

/// Answers a run that ends before it starts: `RUN_STARTED`, then
/// `RUN_ERROR` with `message` and `code`, as one response.
pub(super) fn refuse(
    shared: &crate::serve::state::Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    message: &str,
    code: &'static str,
) {
    use crate::pipeline::translate::{TranslateOptions, Translator};
    let _ = Body::start(stream, req, cors, shared.cfg.write_timeout).and_then(|mut b| {
        let mut tr = Translator::new(TranslateOptions {
            thread_id: Some(input.thread_id.clone()),
            run_id: Some(input.run_id.clone()),
        });
        for e in tr.end_with_error(message.into(), code, None) {
            b.frame(e.to_frame().as_bytes())?;
        }
        b.end()
    });
}

/// A run not started here: its runId is recorded, or being recorded, by
/// another server on the same `$HARNESS_HOME` (the record's claim,
/// `runs::record`, said so ([`crate::runs::record::is_taken`]), with this reason). Nothing of it
/// was written or sent: the request is answered from that record.
#[derive(Debug)]
pub struct Taken(pub String);

/// The thread's messages as a run sees them (`runs::thread`): the run's
/// input recorded as the client sent it, the agent's messages recorded as
/// its events make them, and the `MESSAGES_SNAPSHOT`s right after
/// `RUN_STARTED` that leave a client which holds less than the thread
/// (one that opens it from elsewhere) with the whole thread
/// ([`crate::runs::thread::snapshots`]). Every frame of a run goes out
/// through [`Messages::emit`]. Inert for a server that records nothing.
pub(super) struct Messages {
    thread: crate::runs::thread::Thread,
    writer: Option<crate::runs::thread::Writer>,
    /// The input's message ids: what the client holds.
    held: Vec<String>,
    /// Snapshots to send once `RUN_STARTED` is out.
    pending: Vec<Vec<serde_json::Value>>,
    /// The input's messages the thread did not have, in this run's view of
    /// the thread but written to its file only once the input reached the
    /// agent ([`Messages::sent`]): a message refused because an interrupt
    /// is open (`runwire.input_not_sent`) is not thread history, and every
    /// later snapshot would have shown it as if the agent had seen it.
    unsent: Vec<serde_json::Value>,
    /// Catching up (a retried run that joins a live one): events are
    /// applied, not sent, until [`Messages::go_live`]; `RUN_STARTED` kept.
    catching_up: bool,
    started: Option<crate::pipeline::translate::AguiEvent>,
    /// For reports.
    thread_id: String,
    /// Messages and tool calls opened and not yet closed (their openers),
    /// sent again after a catch-up's snapshot: the client has them closed.
    open: Vec<crate::pipeline::translate::AguiEvent>,
    on: bool,
}

impl Messages {
    fn held(input: &RunInput) -> Vec<String> {
        input.messages.iter().filter_map(|m| m.get("id")?.as_str().map(str::to_string)).collect()
    }

    /// A new run: takes the input's messages the thread does not have (in
    /// the input's order, after the thread's; recorded by [`Messages::sent`])
    /// and plans the snapshots.
    pub(super) fn start(shared: &crate::serve::state::Shared, input: &RunInput) -> Messages {
        use crate::runs::thread;
        if !shared.cfg.record {
            return Messages::off();
        }
        let file = thread::path(&shared.cfg.harness_home, &input.thread_id);
        let mut t = thread::Thread::from_lines(thread::read(&file), None);
        let writer = match thread::Writer::open(&file, &input.run_id) {
            Ok(w) => Some(w),
            Err(e) => {
                crate::util::cli::report(
                    crate::serve::options::BIN,
                    format!("thread {:?}: cannot record its messages in {}: {e}", input.thread_id, file.display()),
                );
                None
            }
        };
        let mut unsent = Vec::new();
        for m in input.messages.iter().filter_map(thread::input_message) {
            if m.get("id").and_then(|v| v.as_str()).is_some_and(|id| t.has(id)) {
                continue;
            }
            unsent.push(m.clone());
            t.put(m);
        }
        let held = Self::held(input);
        let pending = thread::snapshots(&t.messages(), &held);
        Messages {
            thread: t,
            writer,
            held,
            pending,
            unsent,
            catching_up: false,
            started: None,
            open: Vec::new(),
            on: true,
            thread_id: input.thread_id.clone(),
        }
    }

    /// The run's input reached the agent: its new messages become the
    /// thread's history (written before anything the agent makes of them).
    pub(super) fn sent(&mut self) {
        for m in std::mem::take(&mut self.unsent) {
            if let Some(w) = &mut self.writer {
                if let Err(e) = w.append(&m, true) {
                    crate::util::cli::report(crate::serve::options::BIN, format!("thread {:?}: {e}", self.thread_id));
                    self.writer = None;
                }
            }
        }
    }

    /// A retried run joining one that is live: its events so far are
    /// applied to the thread as it was before them (nothing recorded: the
    /// live run records), then [`Messages::go_live`] sends `RUN_STARTED`,
    /// the snapshot of what the client lacks and the openers of what is
    /// still streaming.
    pub(super) fn catch_up(shared: &crate::serve::state::Shared, input: &RunInput) -> Messages {
        use crate::runs::thread;
        let file = thread::path(&shared.cfg.harness_home, &input.thread_id);
        let t = thread::Thread::from_lines(thread::read(&file), Some(&input.run_id));
        Messages {
            thread: t,
            writer: None,
            held: Self::held(input),
            pending: Vec::new(),
            unsent: Vec::new(),
            catching_up: true,
            started: None,
            open: Vec::new(),
            on: true,
            thread_id: input.thread_id.clone(),
        }
    }

    pub(super) fn off() -> Messages {
        Messages {
            thread: Default::default(),
            writer: None,
            held: Vec::new(),
            pending: Vec::new(),
            unsent: Vec::new(),
            catching_up: false,
            started: None,
            open: Vec::new(),
            on: false,
            thread_id: String::new(),
        }
    }

    /// Sends (or, catching up, applies) a run's events, recording the
    /// messages they make.
    pub(super) fn emit(
        &mut self,
        events: Vec<crate::pipeline::translate::AguiEvent>,
        body: &mut Body,
    ) -> io::Result<()> {
        use crate::pipeline::translate::AguiEvent as E;
        for e in events {
            if !self.on {
                body.frame(e.to_frame().as_bytes())?;
                continue;
            }
            if !self.catching_up && matches!(e, E::TextMessageContent { .. } | E::ToolCallArgs { .. }) {
                // Sent, then applied: a message the run stops in is kept
                // as its client was sent it ([`Messages::keep_open`]).
                body.frame(e.to_frame().as_bytes())?;
                self.thread.apply(&e);
                continue;
            }
            if let Some(m) = self.thread.apply(&e) {
                if let Some(w) = &mut self.writer {
                    if let Err(err) = w.append(&m, false) {
                        crate::util::cli::report(crate::serve::options::BIN, format!("thread messages: {err}"));
                        self.writer = None;
                    }
                }
            }
            let close = |o: &E| match (&e, o) {
                (E::TextMessageEnd { message_id: a, .. }, E::TextMessageStart { message_id: b, .. })
                | (E::ReasoningEnd { message_id: a, .. }, E::ReasoningStart { message_id: b, .. })
                | (E::ReasoningMessageEnd { message_id: a, .. }, E::ReasoningMessageStart { message_id: b, .. })
                | (E::ToolCallEnd { tool_call_id: a, .. }, E::ToolCallStart { tool_call_id: b, .. }) => a == b,
                _ => false,
            };
            self.open.retain(|o| !close(o));
            if matches!(
                e,
                E::TextMessageStart { .. }
                    | E::ReasoningStart { .. }
                    | E::ReasoningMessageStart { .. }
                    | E::ToolCallStart { .. }
            ) {
                self.open.push(e.clone());
            }
            if self.catching_up {
                if matches!(e, E::RunStarted { .. }) {
                    self.started = Some(e);
                    continue;
                }
                if !e.is_terminal() {
                    continue;
                }
                // The run ended before the catch-up did.
                self.open.clear();
                self.go_live(body)?;
            }
            let started = matches!(e, E::RunStarted { .. });
            body.frame(e.to_frame().as_bytes())?;
            if started {
                self.send_pending(body)?;
            }
        }
        Ok(())
    }

    /// Records the messages and tool calls still open as they stand: a run
    /// that ends before their END (its client left, a write failed, the
    /// run failed without closing them) keeps the text and arguments its
    /// client was sent, so the thread's later snapshots show them. Once
    /// per run, when it is dropped.
    fn keep_open(&mut self) {
        use crate::pipeline::translate::AguiEvent as E;
        if self.catching_up {
            return;
        }
        let Some(w) = &mut self.writer else { return };
        let mut kept: Vec<&serde_json::Value> = Vec::new();
        for o in &self.open {
            let m = match o {
                E::TextMessageStart { message_id, .. } => self.thread.get(message_id),
                E::ToolCallStart { tool_call_id, .. } => self.thread.holder(tool_call_id),
                _ => None,
            };
            // A message holding two open calls is written once.
            if let Some(m) = m.filter(|m| !kept.iter().any(|k| std::ptr::eq(*k, *m))) {
                kept.push(m);
            }
        }
        for m in kept {
            if let Err(e) = w.append(m, false) {
                crate::util::cli::report(crate::serve::options::BIN, format!("thread {:?}: {e}", self.thread_id));
                return;
            }
        }
        self.open.clear();
    }

    fn send_pending(&mut self, body: &mut Body) -> io::Result<()> {
        for s in std::mem::take(&mut self.pending) {
            let v = serde_json::json!({"type": "MESSAGES_SNAPSHOT", "messages": s});
            body.frame(crate::pipeline::encode::frame(None, None, &v.to_string()).as_bytes())?;
        }
        Ok(())
    }

    /// Ends a catch-up: `RUN_STARTED` (now, or as soon as it is made),
    /// the snapshots that give the client the thread as it stands, then
    /// the openers of the messages and calls still streaming.
    pub(super) fn go_live(&mut self, body: &mut Body) -> io::Result<()> {
        if !self.catching_up {
            return Ok(());
        }
        self.catching_up = false;
        self.pending = crate::runs::thread::snapshots(&self.thread.messages(), &self.held);
        if self.pending.is_empty() && self.started.is_some() {
            // It holds every message by id, but those the run was
            // streaming only in part (a reconnect): the thread as it is now.
            self.pending = vec![self.thread.messages().into_iter().cloned().collect()];
        }
        if let Some(e) = self.started.take() {
            body.frame(e.to_frame().as_bytes())?;
            self.send_pending(body)?;
        }
        for o in self.open.clone() {
            body.frame(o.to_frame().as_bytes())?;
        }
        Ok(())
    }
}

impl Drop for Messages {
    fn drop(&mut self) {
        self.keep_open();
    }
}

/// The response body of a run: the HTTP layer's [`Stream`], each frame
/// sent at once (drained) and also kept for replay.
pub(super) struct Body<'a> {
    out: Stream<'a>,
    kept: Vec<u8>,
    over: bool,
}

impl<'a> Body<'a> {
    pub(super) fn start(
        stream: &'a mut TcpStream,
        req: &Request,
        cors: &[(&'static str, String)],
        write_timeout: Duration,
    ) -> io::Result<Body<'a>> {
        // Each write is drained before the next, so the queue holds one frame.
        let out = Stream::start(stream, req, cors, usize::MAX, write_timeout)?;
        Ok(Body { out, kept: Vec::new(), over: false })
    }

    /// `Err` when bytes wait for the client and it took none for the write timeout.
    pub(super) fn check(&mut self) -> io::Result<()> {
        self.out.check()
    }

    pub(super) fn idle_for(&self) -> Duration {
        self.out.idle_for()
    }

    pub(super) fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
        self.out.push(data);
        self.out.drain()
    }

    pub(super) fn frame(&mut self, frame: &[u8]) -> io::Result<()> {
        if !self.over {
            if self.kept.len() + frame.len() > MAX_RUN_BYTES {
                self.over = true;
                self.kept = Vec::new();
            } else {
                self.kept.extend_from_slice(frame);
            }
        }
        self.write_chunk(frame)
    }

    pub(super) fn end(&mut self) -> io::Result<()> {
        self.out.end()
    }

    /// Ends the body after a run that `streamed` to its end, and tells the
    /// book how it went: its bytes kept for replay, too long to keep, or
    /// cancelled (the client left).
    pub(super) fn finish(mut self, streamed: io::Result<()>) -> Outcome {
        match streamed.and_then(|_| self.end()) {
            Ok(()) if self.over => Outcome::NotRetained,
            Ok(()) => Outcome::Done(Arc::new(std::mem::take(&mut self.kept))),
            Err(_) => Outcome::Cancelled,
        }
    }
}
