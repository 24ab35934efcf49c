//! A run this server (or an earlier one on the same `$HARNESS_HOME`)
//! recorded, streamed again from its record: the same request posted again
//! (spec/LAYOUT.md, "Runs recorded by runwire-serve"). The task's log goes
//! through the library stages as a live run's lines do; a run still live
//! in this server is followed (its log, then its new lines) until its end
//! is journaled. A run whose log ends without the agent's own end (a crash,
//! a stop) ends with the journaled state's reason as `RUN_ERROR`.
//!
//! Imports only [`super`] and [`super::common`], never a mode.

use super::book::RunInput;
use super::common::{Body, Messages};
use crate::pipeline::events::{Data, Event, Exit, Seq};
use crate::pipeline::normalize::{Normalizer, Options};
use crate::pipeline::translate::{TranslateOptions, Translator};
use crate::runs::record::{self, Recorded};
use crate::serve::http::{client_gone, Request};
use crate::serve::state::Shared;
use crate::util::time::Clock;
use std::io::{self, Read};
use std::net::TcpStream;
use std::time::Duration;

/// How often a followed run's log is read again.
const TICK: Duration = Duration::from_millis(100);

/// Streams `rec` as the response to `input` (the same request it was
/// recorded for); `follow`: the run is live in this server.
pub(super) fn stream(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    rec: Recorded,
    follow: bool,
) {
    let Ok(peek) = stream.try_clone() else { return };
    let Ok(mut body) = Body::start(stream, req, cors, shared.cfg.write_timeout) else { return };
    let r = pump(shared, &mut body, &peek, input, rec, follow).and_then(|_| body.end());
    drop(r);
}

fn pump(
    shared: &Shared,
    body: &mut Body,
    peek: &TcpStream,
    input: &RunInput,
    mut rec: Recorded,
    follow: bool,
) -> io::Result<()> {
    let clock = Clock::from_env();
    let mut norm = Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock });
    let mut tr = Translator::new(TranslateOptions {
        thread_id: Some(input.thread_id.clone()),
        run_id: Some(input.run_id.clone()),
    });
    // A run still live is joined: what it streamed so far comes as the
    // thread's snapshot once the log is read to its end, then live.
    let mut msgs = if follow && shared.cfg.record { Messages::catch_up(shared, input) } else { Messages::off() };
    let mut log = std::fs::File::open(rec.files.log(record::TASK)).ok();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match log.as_mut() {
            Some(f) => f.read(&mut buf)?,
            None => 0,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            for ev in norm.push_capped_at(&line[..line.len() - 1], None) {
                let out = tr.push(&ev);
                msgs.emit(out, body)?;
            }
            if tr.is_terminated() {
                break 'read;
            }
        }
        if n > 0 {
            continue;
        }
        // Caught up with the log as it stands: the rest is live.
        msgs.go_live(body)?;
        // At the log's end: done unless the run is live and not ended.
        if !follow || rec.ended || shared.is_shutting_down() {
            break;
        }
        if client_gone(peek) {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the client left"));
        }
        body.check()?;
        std::thread::sleep(TICK);
        if log.is_none() {
            log = std::fs::File::open(rec.files.log(record::TASK)).ok();
        }
        match record::recorded(&shared.cfg.harness_home, &input.run_id) {
            Some(now) => rec = now,
            None => break,
        }
    }
    if !pending.is_empty() && !tr.is_terminated() {
        for ev in norm.push_capped_at(&pending, None) {
            let out = tr.push(&ev);
            msgs.emit(out, body)?;
        }
    }
    // A run whose client left: stopped, not failed (the agent gave no exit code).
    let stopped = rec.state.as_deref() == Some("halted")
        && rec.rc.is_none()
        && rec.detail.as_deref() == Some(super::batch::STOPPED);
    // The agent's own end is not in the log: the journal says how it ended.
    if !stopped && !tr.is_terminated() && matches!(rec.state.as_deref(), Some("failed" | "halted")) {
        let state = rec.state.as_deref().unwrap_or("failed");
        let rc = rec.rc.unwrap_or(1);
        let detail = rec.detail.clone().unwrap_or_else(|| format!("the run was journaled {state}"));
        let ev = Event {
            run: None,
            task: None,
            session: norm.session().map(str::to_string),
            seq: Seq { line: norm.lines() + 1, sub: 0 },
            ts_ms: norm.last_ts().unwrap_or_else(|| clock.now_ms()),
            data: Data::Exit(Exit { rc, ok: rc == 0, detail: Some(detail) }),
        };
        let out = tr.push(&ev);
        msgs.emit(out, body)?;
    }
    for ev in norm.finish() {
        let out = tr.push(&ev);
        msgs.emit(out, body)?;
    }
    let out = if stopped {
        tr.end_with_error(format!("the run was {}", super::batch::STOPPED), "run_stopped", norm.last_ts())
    } else {
        tr.finish()
    };
    msgs.emit(out, body)
}
