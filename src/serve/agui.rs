//! `POST /agui`: one AG-UI run, streamed as Server-Sent Events.
//!
//! The body is a `RunAgentInput`; the prompt is the latest user message's
//! text. Each line of the run's source goes through the library stages
//! exactly as in `normalize-events | agui-translate --thread-id T --run-id R
//! | sse-encode`, and each frame is written as one HTTP chunk the moment it
//! exists.
//!
//! The [`Book`] remembers, per `threadId`, the agent's last session (a later
//! run on the thread resumes it) and whether a run is active (one at a time),
//! and, per `runId`, the request body and the finished stream, so that
//! re-posting the same request replays the same bytes without running the
//! agent again. Retention is bounded: [`MAX_RUNS`] finished runs,
//! [`MAX_RUN_BYTES`] of SSE per run, [`MAX_RETAINED`] in all, oldest evicted
//! first; [`MAX_THREADS`] threads.

use super::http::{client_gone, respond_error, Close, Request};
use super::run::{self, Lines};
use super::stream::Stream;
use super::Shared;
use crate::agui::{AguiEvent, TranslateOptions, Translator};
use crate::events::{Data, Event, Exit, Seq};
use crate::normalize::{Normalizer, Options};
use crate::runs::record::Recorder;
use crate::time::Clock;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Finished runs kept for idempotent replay.
pub const MAX_RUNS: usize = 64;
/// SSE bytes kept per run; a longer run cannot be replayed (409).
pub const MAX_RUN_BYTES: usize = 4 * 1024 * 1024;
/// SSE and request bytes kept across all finished runs.
pub const MAX_RETAINED: usize = 64 * 1024 * 1024;
/// Threads remembered (idle ones evicted oldest first).
pub use super::interactive::MAX_THREADS;
/// Longest prompt: it travels as one argument (Linux caps one at 128 KiB).
pub const MAX_PROMPT: usize = 96 * 1024;
/// Longest `threadId` / `runId`.
pub const MAX_ID: usize = 256;

/// How often the stream looks at its client, the shutdown flag and the clock.
const TICK: Duration = Duration::from_millis(100);

/// What a request asks for, once validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInput {
    pub thread_id: String,
    pub run_id: String,
    /// Empty only when `resume` is not (a run that answers interrupts).
    pub prompt: String,
    /// `RunAgentInput.resume`: answers to the interrupts of the thread.
    pub resume: Vec<super::interrupts::ResumeEntry>,
}

/// Reads a `RunAgentInput` leniently (unknown keys ignored, optional ones
/// may be absent or `null`) and names the first problem found.
pub fn parse_input(body: &[u8]) -> Result<RunInput, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not valid JSON: {e}"))?;
    let Value::Object(o) = &v else {
        return Err("the body must be a JSON object (an AG-UI RunAgentInput)".into());
    };
    let id = |k: &str| -> Result<String, String> {
        match o.get(k) {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID && !s.chars().any(char::is_control) => {
                Ok(s.clone())
            }
            Some(Value::String(_)) => {
                Err(format!("{k}: must be a non-empty string of at most {MAX_ID} bytes without control characters"))
            }
            Some(Value::Null) | None => Err(format!("{k}: missing (a string is required)")),
            Some(_) => Err(format!("{k}: must be a string")),
        }
    };
    let thread_id = id("threadId")?;
    let run_id = id("runId")?;
    for k in ["tools", "context", "resume"] {
        if !matches!(o.get(k), None | Some(Value::Null) | Some(Value::Array(_))) {
            return Err(format!("{k}: must be an array"));
        }
    }
    for k in ["parentRunId", "protocolVersion"] {
        if !matches!(o.get(k), None | Some(Value::Null) | Some(Value::String(_))) {
            return Err(format!("{k}: must be a string"));
        }
    }
    let resume: Vec<super::interrupts::ResumeEntry> = match o.get("resume") {
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, e) in a.iter().enumerate() {
                let entry: super::interrupts::ResumeEntry = serde_json::from_value(e.clone()).map_err(|err| {
                    format!("resume[{i}]: {err} (expected {{interruptId: string, status: \"resolved\"|\"cancelled\", payload?}})")
                })?;
                if entry.interrupt_id.is_empty() || entry.interrupt_id.len() > MAX_ID {
                    return Err(format!("resume[{i}].interruptId: must be 1 to {MAX_ID} bytes"));
                }
                out.push(entry);
            }
            out
        }
        _ => Vec::new(),
    };
    let messages = match o.get("messages") {
        Some(Value::Array(a)) => a,
        Some(Value::Null) | None => return Err("messages: missing (an array is required)".into()),
        Some(_) => return Err("messages: must be an array".into()),
    };
    let mut latest_user = None;
    for (i, m) in messages.iter().enumerate() {
        match m.get("role") {
            Some(Value::String(r)) if m.is_object() => {
                if r == "user" {
                    latest_user = Some((i, m));
                }
            }
            _ => return Err(format!("messages[{i}]: must be an object with a string role")),
        }
    }
    let Some((i, user)) = latest_user else {
        if !resume.is_empty() {
            return Ok(RunInput { thread_id, run_id, prompt: String::new(), resume });
        }
        return Err("messages: no user message (the prompt is the latest user message's text)".into());
    };
    let prompt = match user.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                match (p.get("type"), p.get("text")) {
                    (Some(Value::String(t)), Some(Value::String(text))) if t == "text" => texts.push(text.as_str()),
                    (Some(Value::String(t)), _) if t == "text" => {
                        return Err(format!("messages[{i}].content[{j}].text: must be a string"))
                    }
                    (Some(Value::String(_)), _) => {}
                    _ => return Err(format!("messages[{i}].content[{j}]: must be an object with a string type")),
                }
            }
            texts.join("\n")
        }
        Some(Value::Null) | None => return Err(format!("messages[{i}].content: missing")),
        Some(_) => return Err(format!("messages[{i}].content: must be a string or an array of content parts")),
    };
    if prompt.trim().is_empty() && !resume.is_empty() {
        return Ok(RunInput { thread_id, run_id, prompt: String::new(), resume });
    }
    if prompt.trim().is_empty() {
        return Err(format!("messages[{i}].content: the latest user message has no text"));
    }
    if prompt.contains('\0') {
        return Err(format!("messages[{i}].content: contains a NUL character"));
    }
    if prompt.len() > MAX_PROMPT {
        return Err(format!("messages[{i}].content: longer than {MAX_PROMPT} bytes"));
    }
    Ok(RunInput { thread_id, run_id, prompt, resume })
}

#[derive(Debug, Default)]
struct ThreadEntry {
    session: Option<String>,
    busy: bool,
}

#[derive(Debug)]
enum Outcome {
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
    Start { resume: Option<String> },
    Replay(Arc<Vec<u8>>),
    Reject(u16, String),
}

impl Book {
    /// Decides on a request and, when it starts a run, marks its thread busy.
    pub fn admit(&mut self, input: &RunInput, body: &[u8]) -> Admit {
        if let Some(r) = self.runs.get(&input.run_id) {
            if r.body != body {
                return Admit::Reject(
                    409,
                    format!("runId {:?} was already used with a different request; use a new runId", input.run_id),
                );
            }
            return match &r.outcome {
                Outcome::Done(bytes) => Admit::Replay(bytes.clone()),
                Outcome::Running => Admit::Reject(409, format!("run {:?} is still streaming", input.run_id)),
                Outcome::NotRetained => Admit::Reject(
                    409,
                    format!("run {:?} finished but its stream was too long to keep for replay", input.run_id),
                ),
                Outcome::Cancelled => Admit::Reject(
                    409,
                    format!("run {:?} was cancelled when its client disconnected; use a new runId", input.run_id),
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
        self.runs.insert(input.run_id.clone(), RunEntry { body: body.to_vec(), outcome: Outcome::Running });
        Admit::Start { resume }
    }

    /// Frees a thread whose run has sent its terminal event (its last chunk
    /// is about to go out): a client that resumes at once is not refused as
    /// busy. [`Book::finish`] records the run's outcome after.
    pub(crate) fn release(&mut self, thread_id: &str) {
        if let Some(t) = self.threads.get_mut(thread_id) {
            t.busy = false;
        }
    }

    /// Records a run's end and frees its thread.
    fn finish(&mut self, input: &RunInput, session: Option<String>, outcome: Outcome) {
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

/// The response body of a run: the HTTP layer's [`Stream`], each frame
/// sent at once (drained) and also kept for replay.
pub(crate) struct Body<'a> {
    out: Stream<'a>,
    kept: Vec<u8>,
    over: bool,
}

impl<'a> Body<'a> {
    pub(crate) fn start(
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
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.out.check()
    }

    pub(crate) fn idle_for(&self) -> Duration {
        self.out.idle_for()
    }

    pub(crate) fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
        self.out.push(data);
        self.out.drain()
    }

    pub(crate) fn frame(&mut self, frame: &[u8]) -> io::Result<()> {
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

    pub(crate) fn end(&mut self) -> io::Result<()> {
        self.out.end()
    }
}

/// The route: validates, admits, then streams (or replays) the run.
pub fn post(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    body: &[u8],
    cors: &[(&'static str, String)],
) -> Close {
    let input = match parse_input(body) {
        Ok(i) => i,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Close::Linger;
        }
    };
    let admit = shared.book.lock().unwrap_or_else(|e| e.into_inner()).admit(&input, body);
    match admit {
        Admit::Reject(code, m) => {
            respond_error(stream, code, cors, &m);
            Close::Linger
        }
        Admit::Replay(bytes) => {
            let _ = Body::start(stream, req, cors, shared.cfg.write_timeout).and_then(|mut b| {
                b.write_chunk(&bytes)?;
                b.end()
            });
            Close::Now
        }
        Admit::Start { resume } => {
            let mut guard = Admitted { shared, input: &input, done: false };
            let (session, outcome) = if shared.cfg.interactive {
                let f = interactive_run(shared, stream, req, cors, &input);
                (None, f.0)
            } else {
                if input.prompt.is_empty() {
                    // Batch runs raise no interrupts: there is nothing to resume.
                    let _ = Body::start(stream, req, cors, shared.cfg.write_timeout).and_then(|mut b| {
                        let mut tr = Translator::new(TranslateOptions {
                            thread_id: Some(input.thread_id.clone()),
                            run_id: Some(input.run_id.clone()),
                        });
                        let msg = "resume: this server runs agents in batch mode and raised no interrupts (start it with --interactive)";
                        for e in tr.end_with_error(msg.into(), "no_interrupts", None) {
                            b.frame(e.to_frame().as_bytes())?;
                        }
                        b.end()
                    });
                    guard.done = true;
                    shared.book.lock().unwrap_or_else(|e| e.into_inner()).finish(&input, None, Outcome::Cancelled);
                    return Close::Now;
                }
                stream_run(shared, stream, req, cors, &input, resume.as_deref())
            };
            guard.done = true;
            shared.book.lock().unwrap_or_else(|e| e.into_inner()).finish(&input, session, outcome);
            Close::Now
        }
    }
}

/// An interactive run (`--interactive`): the body is started here, the
/// session streamed into it by [`super::interactive::run`].
fn interactive_run(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
) -> Finished {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1)));
    let Ok(peek) = stream.try_clone() else { return Finished::cancelled() };
    let Ok(mut body) = Body::start(stream, req, cors, shared.cfg.write_timeout) else {
        return Finished::cancelled();
    };
    let request = super::interactive::RunRequest {
        thread_id: &input.thread_id,
        run_id: &input.run_id,
        prompt: &input.prompt,
        resume: &input.resume,
    };
    let streamed = super::interactive::run(shared, &mut body, &peek, &request);
    // The run is over once its terminal event is out: the thread takes the
    // next run (a resume sent the moment RUN_FINISHED arrives) from now.
    shared.book.lock().unwrap_or_else(|e| e.into_inner()).release(&input.thread_id);
    Finished::from_body(body, if streamed { Ok(()) } else { Err(()) })
}

impl super::interactive::Frames for Body<'_> {
    fn frame(&mut self, frame: &[u8]) -> io::Result<()> {
        Body::frame(self, frame)
    }
    fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
        Body::write_chunk(self, data)
    }
    fn check(&mut self) -> io::Result<()> {
        Body::check(self)
    }
    fn idle_for(&self) -> Duration {
        Body::idle_for(self)
    }
}

/// How an interactive run ended, for the book (its outcome).
pub struct Finished(Outcome);

impl Finished {
    pub(crate) fn cancelled() -> Finished {
        Finished(Outcome::Cancelled)
    }

    /// Ends the body and keeps its bytes for replay, as a batch run does.
    pub(crate) fn from_body(mut body: Body, streamed: Result<(), ()>) -> Finished {
        Finished(match streamed.ok().and_then(|_| body.end().ok()) {
            Some(()) if body.over => Outcome::NotRetained,
            Some(()) => Outcome::Done(Arc::new(std::mem::take(&mut body.kept))),
            None => Outcome::Cancelled,
        })
    }
}

/// Frees the run's thread even if streaming panicked (the connection's
/// `catch_unwind` then closes it), so a thread is never stuck busy.
struct Admitted<'a> {
    shared: &'a Shared,
    input: &'a RunInput,
    done: bool,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.book.lock().unwrap_or_else(|e| e.into_inner()).finish(self.input, None, Outcome::Cancelled);
        }
    }
}

/// The three stages, driven exactly as the pipeline binaries drive them.
struct Stages {
    norm: Normalizer,
    tr: Translator,
    clock: Clock,
    /// The run's durable record (`runs::record`), when recording works.
    rec: Option<Recorder>,
    /// Why the record stopped mid-run (a write failed: a full disk); the
    /// run is then journaled `failed` with this reason.
    rec_failed: Option<String>,
    /// The rc of the exit event the stream carried, if any.
    exit_rc: Option<i64>,
}

impl Stages {
    fn new(shared: &Shared, input: &RunInput) -> Stages {
        let clock = Clock::from_env();
        Stages {
            norm: Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock }),
            tr: Translator::new(TranslateOptions {
                thread_id: Some(input.thread_id.clone()),
                run_id: Some(input.run_id.clone()),
            }),
            clock,
            rec: recorder(shared, input),
            rec_failed: None,
            exit_rc: None,
        }
    }

    /// Journals the run's end from how it went: `stopped` when the client
    /// left (or the source could not be read) before the agent finished.
    fn record_end(&mut self, stopped: bool) {
        let Some(rec) = self.rec.take() else { return };
        let (state, rc) = match (stopped, self.exit_rc) {
            // The record is incomplete, whatever the agent did.
            _ if self.rec_failed.is_some() => ("failed", self.exit_rc),
            (true, rc) => ("halted", rc),
            // A source that ended without any exit event (a replayed log,
            // a wrapper that exited 0 silently) finished normally.
            (_, Some(0) | None) => ("committed", self.exit_rc),
            (_, rc) => ("failed", rc),
        };
        let detail = self.rec_failed.take().map(|e| format!("the run's log could not be written: {e}"));
        // A journal on the same full disk may fail once and take the next
        // try (space freed by a cleaner, a smaller write): a few tries.
        let mut tries = 0;
        let mut result = rec.finish(state, rc, detail.clone());
        while result.is_err() && tries < 3 {
            tries += 1;
            std::thread::sleep(std::time::Duration::from_millis(100 << tries));
            result = rec.finish(state, rc, detail.clone());
        }
        if let Err(e) = result {
            crate::cli::report(super::BIN, format!("record {}: {e}", rec.run_id));
        }
    }

    fn frames(&mut self, events: Vec<AguiEvent>, body: &mut Body) -> io::Result<()> {
        for e in events {
            body.frame(e.to_frame().as_bytes())?;
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], at_ms: Option<i64>, body: &mut Body) -> io::Result<()> {
        if let (Some(rec), None) = (&mut self.rec, &self.rec_failed) {
            if let Err(e) = rec.line(line, at_ms) {
                crate::cli::report(super::BIN, format!("record {}: {e}; the run will be journaled failed", rec.run_id));
                self.rec_failed = Some(e.to_string());
            }
        }
        for ev in self.norm.push_at(line, at_ms) {
            if let Data::Exit(x) = &ev.data {
                self.exit_rc = Some(x.rc);
            }
            let out = self.tr.push(&ev);
            self.frames(out, body)?;
        }
        Ok(())
    }

    /// An `exit` event the source did not write itself (spawn failure, a
    /// wrapper that died without its status line, a stop), sent through the
    /// same translator.
    fn synthetic_exit(&mut self, rc: i64, detail: String, body: &mut Body) -> io::Result<()> {
        if self.tr.is_terminated() {
            return Ok(());
        }
        let ev = Event {
            run: None,
            task: None,
            session: self.norm.session().map(str::to_string),
            seq: Seq { line: self.norm.lines() + 1, sub: 0 },
            ts_ms: self.clock.now_ms().max(self.norm.last_ts().unwrap_or(i64::MIN)),
            data: Data::Exit(Exit { rc, ok: rc == 0, detail: Some(detail) }),
        };
        self.exit_rc = Some(rc);
        let out = self.tr.push(&ev);
        self.frames(out, body)
    }

    fn finish(&mut self, body: &mut Body) -> io::Result<()> {
        for ev in self.norm.finish() {
            let out = self.tr.push(&ev);
            self.frames(out, body)?;
        }
        let out = self.tr.finish();
        self.frames(out, body)
    }
}

fn stream_run(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    resume: Option<&str>,
) -> (Option<String>, Outcome) {
    let mut stages = Stages::new(shared, input);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1)));
    let peek = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return (None, Outcome::Cancelled),
    };
    let Ok(mut body) = Body::start(stream, req, cors, shared.cfg.write_timeout) else {
        return (None, Outcome::Cancelled);
    };
    let cfg = &shared.cfg;
    let result = match run::start(&cfg.source, cfg.replay_delay, &input.prompt, resume) {
        Err(why) => stages.synthetic_exit(127, why, &mut body).and_then(|_| stages.finish(&mut body)),
        Ok(mut lines) => {
            let r = pump(shared, &mut lines, &mut stages, &mut body, &peek);
            if r.is_err() {
                lines.stop();
            }
            r
        }
    };
    // What a later run of the thread may --resume: only a session the agent confirmed.
    let session = stages.norm.resume_session().map(str::to_string);
    // Journaled before the last chunk goes out, so a client that has seen
    // the run end and then lists runs finds it ended. The agent's work is
    // done by now: a client gone at the very last chunk does not undo it.
    stages.record_end(result.is_err());
    let outcome = match result.and_then(|_| body.end()) {
        Ok(()) if body.over => Outcome::NotRetained,
        Ok(()) => Outcome::Done(Arc::new(std::mem::take(&mut body.kept))),
        Err(_) => Outcome::Cancelled,
    };
    (session, outcome)
}

/// Starts the run's durable record; a failure is reported and the run goes
/// on unrecorded.
fn recorder(shared: &Shared, input: &RunInput) -> Option<Recorder> {
    if !shared.cfg.record {
        return None;
    }
    match Recorder::start(&shared.cfg.harness_home, &input.run_id, shared.cfg.adapter.name(), &input.prompt) {
        Ok(r) => Some(r),
        Err(e) => {
            crate::cli::report(
                super::BIN,
                format!("cannot record run {:?} under {}: {e}", input.run_id, shared.cfg.harness_home.display()),
            );
            None
        }
    }
}

/// Moves lines from the source to the client until the source ends, the
/// client leaves (`Err`) or the server shuts down.
fn pump(shared: &Shared, lines: &mut Lines, stages: &mut Stages, body: &mut Body, peek: &TcpStream) -> io::Result<()> {
    let gone = || io::Error::new(io::ErrorKind::ConnectionAborted, "the client left");
    let mut last_check = Instant::now();
    let mut stopped: Option<(Option<i64>, Instant)> = None;
    loop {
        match lines.rx.recv_timeout(TICK) {
            Ok(line) => {
                stages.line(&line.bytes, line.at_ms, body)?;
                if stages.tr.is_terminated() && stopped.is_none() {
                    // The status line (or a fatal error) ended the run: the
                    // translator would ignore anything more, and an agent
                    // that keeps its output open must not hold the stream.
                    break;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                if body.idle_for() >= shared.cfg.keepalive {
                    body.write_chunk(b": keep-alive\n\n")?;
                }
            }
        }
        if last_check.elapsed() >= TICK {
            last_check = Instant::now();
            if client_gone(peek) {
                return Err(gone());
            }
            // A client that stopped reading is dropped even while the agent is quiet.
            body.check()?;
            if stopped.is_none() && lines.drained() {
                // The wrapper is reaped and what it wrote has had its grace:
                // whatever still holds the pipe does not hold the run.
                break;
            }
        }
        if stopped.is_none() && shared.is_shutting_down() {
            stopped = Some((lines.stop(), Instant::now()));
        }
        if let Some((_, at)) = stopped {
            // What the stopped agent still had in the pipe is delivered,
            // but a straggler holding the pipe open cannot keep us here.
            if at.elapsed() > Duration::from_secs(1) {
                break;
            }
        }
    }
    if let Some((rc, _)) = stopped {
        let rc = rc.unwrap_or(143);
        return stages
            .synthetic_exit(rc, "stopped: the server is shutting down".into(), body)
            .and_then(|_| stages.finish(body));
    }
    let rc = lines.wait();
    if let Some(rc) = rc.filter(|&rc| rc != 0) {
        stages.synthetic_exit(rc, "the agent exited without a status line".into(), body)?;
    }
    stages.finish(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(s: &str) -> Result<RunInput, String> {
        parse_input(s.as_bytes())
    }

    #[test]
    fn input_is_read_leniently() {
        let i = body(r#"{"threadId":"t","runId":"r","state":null,"tools":[],"context":[],"forwardedProps":{},"extra":1,
            "messages":[{"id":"1","role":"user","content":"first"},{"id":"2","role":"assistant","content":"ok"},
            {"id":"3","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}"#)
        .unwrap();
        assert_eq!(i, RunInput { thread_id: "t".into(), run_id: "r".into(), prompt: "a\nb".into(), resume: vec![] });
    }

    #[test]
    fn bad_input_names_the_problem() {
        for (b, needle) in [
            ("[]", "JSON object"),
            ("{", "not valid JSON"),
            (r#"{"runId":"r","messages":[]}"#, "threadId"),
            (r#"{"threadId":"t","messages":[]}"#, "runId"),
            (r#"{"threadId":"t","runId":"r"}"#, "messages"),
            (r#"{"threadId":"t","runId":"r","messages":[]}"#, "no user message"),
            (r#"{"threadId":"t","runId":"r","messages":[{"role":"user","content":5}]}"#, "messages[0].content"),
            (r#"{"threadId":"t","runId":"r","messages":[{"role":"user","content":" "}]}"#, "no text"),
            (r#"{"threadId":"t","runId":"r","messages":["x"]}"#, "messages[0]"),
            (r#"{"threadId":"t","runId":"r","tools":{},"messages":[]}"#, "tools"),
            (r#"{"threadId":1,"runId":"r","messages":[]}"#, "threadId"),
        ] {
            let e = body(b).unwrap_err();
            assert!(e.contains(needle), "{b}: {e}");
        }
    }

    #[test]
    fn book_enforces_one_run_per_thread_and_idempotency() {
        let mut book = Book::default();
        let i = RunInput { thread_id: "t".into(), run_id: "r1".into(), prompt: "p".into(), resume: vec![] };
        assert!(matches!(book.admit(&i, b"A"), Admit::Start { resume: None }));
        let i2 = RunInput { run_id: "r2".into(), ..i.clone() };
        assert!(matches!(book.admit(&i2, b"B"), Admit::Reject(409, _)));
        assert!(matches!(book.admit(&i, b"A"), Admit::Reject(409, _)));
        book.finish(&i, Some("s1".into()), Outcome::Done(Arc::new(b"x".to_vec())));
        assert!(matches!(book.admit(&i, b"A"), Admit::Replay(b) if b.as_slice() == b"x"));
        assert!(matches!(book.admit(&i, b"A2"), Admit::Reject(409, _)));
        assert!(matches!(book.admit(&i2, b"B"), Admit::Start { resume: Some(s) } if s == "s1"));
    }

    #[test]
    fn retention_is_bounded() {
        let mut book = Book::default();
        for n in 0..MAX_RUNS + 10 {
            let i = RunInput { thread_id: "t".into(), run_id: format!("r{n}"), prompt: "p".into(), resume: vec![] };
            assert!(matches!(book.admit(&i, b"A"), Admit::Start { .. }));
            book.finish(&i, None, Outcome::Done(Arc::new(vec![0; 10])));
        }
        assert_eq!(book.runs.len(), MAX_RUNS);
        assert!(!book.runs.contains_key("r0"));
    }
}
