//! `POST /agui`: one AG-UI run, streamed as Server-Sent Events.
//!
//! The body is a `RunAgentInput`; the prompt is the latest user message's
//! text (or, for a run that answers interrupts, its `resume`). This module
//! is the route's entry: it validates the request ([`parse_input`]),
//! admits it in the book of threads and runs (one run a thread at a time;
//! a re-posted request replays the same bytes; see [`common`]), answers
//! what it refuses, and hands an admitted run to its mode:
//!
//! - [`batch`] (the default): one agent process a run, its lines through
//!   the library stages exactly as the pipeline binaries drive them;
//! - [`interactive`] (`--interactive`): one live agent session per thread,
//!   held between runs, with its task routes ([`interactive::control_post`]).
//!
//! Import rule: `batch` and `interactive` (with `interactive/threads.rs`
//! and `interactive/routes.rs`) do not import each other; what both use
//! (the request, [`MAX_THREADS`]) is here or in [`common`] (the book and
//! the response body). A test holds it (neither names the other's path:
//! `grep -n 'interactive::' src/serve/agui/batch.rs` and
//! `grep -rn 'batch::' src/serve/agui/interactive*` find nothing). The
//! router reaches this folder through its entry ([`post`],
//! [`capabilities`]); the task routes (`serve::supervisor`) reach
//! [`interactive::control_post`].

use super::http::{respond_error, Close, Request};
use super::interrupts::ResumeEntry;
use super::state::Shared;
use serde_json::{json, Value};
use std::net::TcpStream;

pub mod batch;
pub mod book;
pub mod common;
pub mod history;
pub mod interactive;
pub mod replay;

use book::Outcome;
pub use book::{Admit, Book, RunInput, MAX_RETAINED, MAX_RUNS, MAX_RUN_BYTES, MAX_THREADS};
use common::Body;

/// Longest prompt: it travels as one argument (Linux caps one at 128 KiB).
pub const MAX_PROMPT: usize = 96 * 1024;
/// Longest `threadId` / `runId`.
pub const MAX_ID: usize = 256;

/// Reads a `RunAgentInput` leniently (unknown keys ignored, optional ones
/// may be absent or `null`) and names the first problem found.
pub fn parse_input(body: &[u8]) -> Result<RunInput, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not valid JSON: {e}"))?;
    // A key given twice (two `approved` in a resume payload) reads one way and acts another.
    crate::util::lenient::unique_keys(body).map_err(|e| format!("the body: {e}"))?;
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
    let resume: Vec<ResumeEntry> = match o.get("resume") {
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, e) in a.iter().enumerate() {
                let entry: ResumeEntry = serde_json::from_value(e.clone()).map_err(|err| {
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
            return Ok(RunInput { thread_id, run_id, prompt: String::new(), resume, messages: messages.clone() });
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
        return Ok(RunInput { thread_id, run_id, prompt: String::new(), resume, messages: messages.clone() });
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
    Ok(RunInput { thread_id, run_id, prompt, resume, messages: messages.clone() })
}

/// The route: validates, admits, then streams (or replays) the run in its mode.
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
    // A runId recorded before (by an earlier server on this home, or by
    // this one and forgotten since) is never recorded again: replayed from
    // its record for the same request, refused for another.
    let known = shared.book.lock().unwrap_or_else(|e| e.into_inner()).knows(&input.run_id);
    if !known && shared.cfg.record {
        if let Some(rec) = crate::runs::record::recorded(&shared.cfg.harness_home, &input.run_id) {
            return from_record(shared, stream, req, cors, &input, rec, false);
        }
    }
    let admit = shared.book.lock().unwrap_or_else(|e| e.into_inner()).admit(&input, body);
    match admit {
        Admit::Recorded(m, live) => {
            match crate::runs::record::recorded(&shared.cfg.harness_home, &input.run_id).filter(|_| shared.cfg.record) {
                Some(rec) => from_record(shared, stream, req, cors, &input, rec, live),
                None => {
                    respond_error(stream, 409, cors, &m);
                    Close::Linger
                }
            }
        }
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
            let ran = if shared.cfg.interactive {
                interactive::run(shared, stream, req, cors, &input).map(|outcome| (None, outcome))
            } else {
                batch::run(shared, stream, req, cors, &input, resume.as_deref())
            };
            guard.done = true;
            let mut book = shared.book.lock().unwrap_or_else(|e| e.into_inner());
            match ran {
                Ok((session, outcome)) => {
                    book.finish(&input, session, outcome);
                    Close::Now
                }
                // Another server's run: not this one's to remember.
                Err(common::NotRecorded::Taken(taken)) => {
                    book.withdraw(&input);
                    drop(book);
                    from_another(shared, stream, req, cors, &input, taken)
                }
                // Not run: the same request runs once a record can be made.
                Err(common::NotRecorded::Failed(why)) => {
                    book.withdraw(&input);
                    drop(book);
                    let m = format!("{why}: the agent was not started (a run is run only once it is recorded)");
                    common::refuse(shared, stream, req, cors, &input, &m, common::NOT_RECORDED);
                    Close::Now
                }
            }
        }
    }
}

/// A run whose record another server claimed first (nothing of it was run,
/// written or sent here): answered from that record as any recorded run
/// is; a claim not journaled yet is 409, as a live one is.
fn from_another(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    taken: common::Taken,
) -> Close {
    if let Some(rec) = crate::runs::record::recorded(&shared.cfg.harness_home, &input.run_id) {
        return from_record(shared, stream, req, cors, input, rec, false);
    }
    let m = format!("runId {:?}: {}: retry once it has ended to get its replay", input.run_id, taken.0);
    respond_error(stream, 409, cors, &m);
    Close::Linger
}

/// The pid of the live server, not this one, that records run `run_id`:
/// its owner record (`sock/<runId>.owner.json`) names a process that is
/// still that process (pid, start time, boot id). `None` when the owner is
/// this server, is gone (a crash: its run is the next server's to end), or
/// left no record.
fn recording_elsewhere(home: &std::path::Path, run_id: &str) -> Option<i32> {
    let o = crate::supervise::socket::Owner::read(home, run_id)?;
    let me = std::process::id() as i32;
    (o.supervisor.pid != me && o.supervisor.mismatch().is_none()).then_some(o.supervisor.pid)
}

/// A request for a runId already recorded: its stream from the record when
/// the request is the same (`follow`: the run is live here), else 409; 409
/// too while another server that is alive records it and it has not ended.
fn from_record(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
    rec: crate::runs::record::Recorded,
    follow: bool,
) -> Close {
    let digest = common::digest(input);
    let refused = match rec.request.as_deref() {
        Some(d) if d == digest => None,
        Some(_) => Some(format!(
            "runId {:?} is already recorded (run {}) for a different request; a recorded run is never recorded again: use a new runId",
            input.run_id, rec.run_id
        )),
        None => Some(format!(
            "runId {:?} is already recorded (run {}) by an older version that kept no request digest, so this request cannot be told the same: use a new runId",
            input.run_id, rec.run_id
        )),
    };
    if let Some(m) = refused {
        respond_error(stream, 409, cors, &m);
        return Close::Linger;
    }
    // Live at another server: its record ends only there, and a replay now
    // would end where its log stands, as if the run had stopped.
    if !rec.ended && !follow {
        if let Some(pid) = recording_elsewhere(&shared.cfg.harness_home, &rec.run_id) {
            let m = format!(
                "run {} (runId {:?}) is being recorded by another server (pid {pid}): retry once it has ended to get its replay",
                rec.run_id, input.run_id
            );
            respond_error(stream, 409, cors, &m);
            return Close::Linger;
        }
    }
    replay::stream(shared, stream, req, cors, input, rec, follow);
    Close::Now
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

/// The server's AG-UI `AgentCapabilities` (`GET /agui/capabilities`, and
/// `capabilities` in `/api/info`).
pub fn capabilities(shared: &Shared) -> Value {
    if shared.cfg.mode == super::options::Mode::Hub {
        // A hub runs no agent: each thread runs on the node it names, and
        // the hub carries that node's interrupts and subagents both ways.
        // No agent `type` (the nodes' agents may differ) and no
        // `approveWithEdits` (claude's alone); interrupts are claimed, as a
        // client that hid them would miss an interactive node's.
        return json!({
            "identity": {
                "name": super::options::BIN,
                "description": "a runwire hub: each thread runs on the cluster node it names (forwardedProps.node); what the agent can do is that node's",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "transport": {"streaming": true},
            "humanInTheLoop": {"supported": true, "approvals": true, "interrupts": true},
            "multiAgent": {"supported": true, "delegation": true},
        });
    }
    let hitl = if shared.cfg.interactive {
        // Only claude runs a call with edited input; codex and ACP run it as asked.
        let edits = shared.cfg.adapter == crate::pipeline::normalize::Adapter::Claude;
        json!({"supported": true, "approvals": true, "interventions": true, "interrupts": true, "approveWithEdits": edits})
    } else {
        json!({"supported": false})
    };
    // AG-UI subagents (SUBAGENT_* events, subagentRunId) where the agent's
    // stream marks them (spec/adapters.md, Subagents): claude always, codex
    // and cursor in their interactive protocols (app-server threads, ACP
    // cursor/task) only. Which subagents an agent has is its own config:
    // no `subagents` list.
    let subagents = shared.cfg.adapter == crate::pipeline::normalize::Adapter::Claude || shared.cfg.interactive;
    json!({
        "identity": {"name": super::options::BIN, "type": shared.cfg.adapter.name(), "version": env!("CARGO_PKG_VERSION")},
        "transport": {"streaming": true},
        "humanInTheLoop": hitl,
        "multiAgent": {"supported": subagents, "delegation": subagents},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The import rule of the module's doc: batch and interactive do not
    /// name each other (a `use` or a path).
    #[test]
    fn batch_and_interactive_do_not_import_each_other() {
        let code = |src: &str| src.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        assert!(!code(include_str!("batch.rs")).contains("interactive::"));
        for src in [
            include_str!("interactive.rs"),
            include_str!("interactive/threads.rs"),
            include_str!("interactive/routes.rs"),
        ] {
            assert!(!code(src).contains("batch::"));
        }
    }

    fn body(s: &str) -> Result<RunInput, String> {
        parse_input(s.as_bytes())
    }

    #[test]
    fn input_is_read_leniently() {
        let i = body(r#"{"threadId":"t","runId":"r","state":null,"tools":[],"context":[],"forwardedProps":{},"extra":1,
            "messages":[{"id":"1","role":"user","content":"first"},{"id":"2","role":"assistant","content":"ok"},
            {"id":"3","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}"#)
        .unwrap();
        assert_eq!((i.thread_id.as_str(), i.run_id.as_str(), i.prompt.as_str()), ("t", "r", "a\nb"));
        assert!(i.resume.is_empty());
        assert_eq!(i.messages.len(), 3);
        assert_eq!(i.messages[1]["id"], "2");
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
}
