//! `POST /agui` in batch mode (the default): one agent process a run.
//!
//! The run's prompt goes to the agent wrapper (`--prompt`, and `--resume`
//! with the session the thread's last run confirmed; see [`crate::serve::run`]),
//! or a recorded log is replayed. Each line goes through the library stages
//! exactly as in `normalize-events | agui-translate --thread-id T --run-id R
//! | sse-encode`, and each frame is written as one HTTP chunk the moment it
//! exists. The run is recorded ([`crate::runs::record`]) and journaled when
//! it ends. Batch runs raise no interrupts: a `resume` without a message is
//! answered with `RUN_ERROR no_interrupts`.
//!
//! Imports only [`super`] and [`super::common`], never the interactive mode.

use super::book::RunInput;
use super::common::{Body, Messages, NotRecorded, Outcome};
use crate::pipeline::events::{Data, Event, Exit, Seq};
use crate::pipeline::normalize::{Normalizer, Options};
use crate::pipeline::translate::{AguiEvent, TranslateOptions, Translator};
use crate::runs::record::Recorder;
use crate::serve::http::{client_gone, Request};
use crate::serve::run::{self, Lines};
use crate::serve::{options::BIN, state::Shared};
use crate::util::time::Clock;
use std::io;
use std::net::TcpStream;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// The journal's detail of a batch run stopped because its client left:
/// a retried request replays its record, and ends with this, not as an
/// agent that failed ([`super::replay`]).
pub(super) const STOPPED: &str = "stopped before the agent finished: its client left";

/// How often the stream looks at its client, the shutdown flag and the clock.
const TICK: Duration = Duration::from_millis(100);

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
    /// The thread's messages: recorded, and snapshotted after RUN_STARTED.
    msgs: Messages,
}

impl Stages {
    /// The run's stages, its record claimed first ([`NotRecorded`]: another
    /// server's, or none can be made; nothing is written, not even the
    /// thread's messages).
    fn new(shared: &Shared, input: &RunInput) -> Result<Stages, NotRecorded> {
        let clock = Clock::from_env();
        let digest = super::common::digest(input);
        let rec = super::common::record(shared, &input.run_id, &input.prompt, &digest, || {
            format!("cannot record run {:?} under {}", input.run_id, shared.cfg.harness_home.display())
        })?;
        Ok(Stages {
            norm: Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock }),
            tr: Translator::new(TranslateOptions {
                thread_id: Some(input.thread_id.clone()),
                run_id: Some(input.run_id.clone()),
            }),
            clock,
            rec,
            rec_failed: None,
            exit_rc: None,
            // A batch run's input always reaches its agent (a process of its own).
            msgs: {
                let mut m = Messages::start(shared, input);
                m.sent();
                m
            },
        })
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
        let detail = match self.rec_failed.take() {
            Some(e) => Some(format!("the run's log could not be written: {e}")),
            // Said, so that a retry of the request (answered from this
            // record) does not read as the agent's own failure.
            None if stopped => Some(STOPPED.to_string()),
            None => None,
        };
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
            crate::util::cli::report(BIN, format!("record {}: {e}", rec.run_id));
        }
    }

    fn frames(&mut self, events: Vec<AguiEvent>, body: &mut Body) -> io::Result<()> {
        self.msgs.emit(events, body)
    }

    fn line(&mut self, line: &[u8], at_ms: Option<i64>, body: &mut Body) -> io::Result<()> {
        if let (Some(rec), None) = (&mut self.rec, &self.rec_failed) {
            if let Err(e) = rec.line(line, at_ms) {
                crate::util::cli::report(BIN, format!("record {}: {e}; the run will be journaled failed", rec.run_id));
                self.rec_failed = Some(e.to_string());
            }
        }
        for ev in self.norm.push_capped_at(line, at_ms) {
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

/// The run of an admitted request (`resume`: the session of the thread's
/// last run): streams it and returns the session a later run of the thread
/// may resume, and how it ended, for the book; [`NotRecorded`], with
/// nothing sent, when it was not run (another server records its runId, or
/// this one cannot record it).
pub(super) fn run(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    resume: Option<&str>,
) -> Result<(Option<String>, Outcome), NotRecorded> {
    if input.prompt.is_empty() {
        // Batch runs raise no interrupts: there is nothing to resume.
        let msg =
            "resume: this server runs agents in batch mode and raised no interrupts (start it with --interactive)";
        super::common::refuse(shared, stream, req, cors, input, msg, "no_interrupts");
        return Ok((None, Outcome::Cancelled));
    }
    let mut stages = Stages::new(shared, input)?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1)));
    let peek = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return Ok((None, Outcome::Cancelled)),
    };
    let Ok(mut body) = Body::start(stream, req, cors, shared.cfg.write_timeout) else {
        return Ok((None, Outcome::Cancelled));
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
    Ok((session, body.finish(result)))
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
